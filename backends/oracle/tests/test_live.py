"""Checks of issue #20 that only a real Oracle Database 23ai can make, and issue #16's Oracle leg
(a local store moved to Oracle and back; proven between the local backends, offline, by the core's
``tests/test_transfer.py``) — only when one is given.

Set ``AGENTMEMORY_ORACLE_DSN`` (plus ``AGENTMEMORY_ORACLE_USER``, ``AGENTMEMORY_ORACLE_PASSWORD``),
as for ``test_conformance.py``; see ``backends/oracle/README.md``. Each test makes its own memory
store and drops it afterwards. Without a DSN the module is skipped LOUDLY (reason in ``pytest
-ra`` and a warning). The offline tests prove the same points up to the driver; these prove that
the server agrees.
"""

from __future__ import annotations

import os
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oracledb
import pytest

DSN = os.environ.get("AGENTMEMORY_ORACLE_DSN", "").strip()
SKIP_REASON = (
    "ORACLE LIVE CHECKS NOT RUN: AGENTMEMORY_ORACLE_DSN is not set. Set AGENTMEMORY_ORACLE_DSN, "
    "AGENTMEMORY_ORACLE_USER and AGENTMEMORY_ORACLE_PASSWORD to run them against Oracle Database "
    "23ai (see backends/oracle/README.md)."
)
if not DSN:
    warnings.warn(SKIP_REASON, UserWarning, stacklevel=1)
    pytest.skip(SKIP_REASON, allow_module_level=True)

import numpy as np  # noqa: E402
from agentmemory_conformance.catalogue import NASTY_METADATA  # noqa: E402
from agentmemory_conformance.support import E1, E2, T0, assert_same, rec  # noqa: E402
from agentmemory_oracle import OracleStore  # noqa: E402
from agentmemory_oracle.names import StoreNames  # noqa: E402

from agentmemory import AgentMemory, HashingEmbedder  # noqa: E402
from agentmemory.records import Link, LinkType  # noqa: E402
from agentmemory.reference_store import InMemoryStore  # noqa: E402
from agentmemory.spi import NewRecord, Order, RecordFilter, RecordPatch, WriteBatch  # noqa: E402
from agentmemory.transfer import export_records, import_records, migrate, read_dump, write_dump  # noqa: E402

USER = os.environ.get("AGENTMEMORY_ORACLE_USER") or None
PASSWORD = os.environ.get("AGENTMEMORY_ORACLE_PASSWORD") or None
RUN = f"live-{os.getpid()}-{time.time_ns()}"
NUMBERS: dict[str, Any] = {
    "one-as-float": 1.0,
    "tiny": 1e-300,
    "huge": 1e308,
    "above-2**53": 2**53 + 1,
    "past-number-range": 10**126,
    "in-a-list": [1.0, 1, 1e-300, True, None],
}
METADATA = {**NASTY_METADATA, **NUMBERS}


def make_store(**options: Any) -> OracleStore:
    """A store of its own (a fresh table prefix unless ``memory_store_id`` is given)."""
    if "memory_store_id" not in options:
        options["memory_store_key"] = f"{RUN}:{uuid.uuid4()}"
    return OracleStore(user=USER, password=PASSWORD, dsn=DSN, pool_min=0, pool_max=2, **options)


@pytest.fixture
def store() -> Iterator[OracleStore]:
    s = make_store()
    s.open(dimension=4)
    try:
        yield s
    finally:
        s.close()
        s.drop()


def execute(statement: str) -> list[Any]:
    """Run one statement on a connection of its own (rows for a query, [] otherwise)."""
    with oracledb.connect(user=USER, password=PASSWORD, dsn=DSN) as conn, conn.cursor() as cursor:
        cursor.execute(statement)
        return list(cursor.fetchall()) if cursor.description else []


def both(batch: WriteBatch, store: OracleStore, ref: InMemoryStore) -> None:
    ref.write(batch)
    store.write(batch)


def test_metadata_round_trips_and_filters_exactly(store: OracleStore) -> None:
    """Item 1: the nasty catalogue plus NUMBER-breaking numbers, written, patched and linked,
    read back exactly as the reference keeps them, and every key filters."""
    ref = InMemoryStore()
    ref.open(dimension=4)
    both(WriteBatch(add=[NewRecord(rec("r", metadata=METADATA), E1), NewRecord(rec("o"), E2)]), store, ref)
    lnk = Link(link_id="l", source_id="r", target_id="o", link_type=LinkType.SUPPORTS, created_at=T0,
               metadata=METADATA)
    both(WriteBatch(add_links=[lnk]), store, ref)
    assert_same(store.query(RecordFilter()), ref.query(RecordFilter()), seq=False, what="records")
    assert_same(store.links(link_ids=["l"]), ref.links(link_ids=["l"]), what="links")
    for key, value in METADATA.items():
        flt = RecordFilter(metadata_filter={key: value})
        assert [r.record_id for r in store.query(flt)] == [r.record_id for r in ref.query(flt)], key
    both(WriteBatch(patch=[RecordPatch("o", metadata=NUMBERS)]), store, ref)
    assert_same(store.query(RecordFilter(record_ids=("o",))), ref.query(RecordFilter(record_ids=("o",))), seq=False)


def test_failed_text_index_is_dropped_and_rebuilt_at_open() -> None:
    """Item 2: a FAILED Oracle Text index (here: built with a lexer preference that does not
    exist) blocks writes with ORA-29861; opening the store drops it with FORCE and rebuilds it."""
    first = make_store(text_index=False)
    first.open(dimension=4)
    first.close()
    names = StoreNames.for_store(first.memory_store_id)
    try:
        with pytest.raises(oracledb.DatabaseError):
            execute(
                f"CREATE INDEX {names.text_index} ON {names.chunk} (chunk_text) INDEXTYPE IS CTXSYS.CONTEXT "
                "PARAMETERS ('LEXER AM_NO_SUCH_LEXER_PREFERENCE')"
            )
        state = execute(f"SELECT status, domidx_opstatus FROM user_indexes WHERE index_name = '{names.text_index}'")
        if not state:
            pytest.skip("this server removed the failed Oracle Text index by itself: nothing to repair")
        store = make_store(memory_store_id=names.store_id)
        with pytest.warns(RuntimeWarning, match="dropped it"):
            store.open(dimension=4)
        try:
            assert "text_index" in store.info().extra["features"]
            store.write(WriteBatch(add=[NewRecord(rec("k", content="quokka sighting"), E1)]))
            store.settle()
            assert [h.record.record_id for h in store.keyword_search("quokka", RecordFilter(), 3)] == ["k"]
        finally:
            store.close()
    finally:
        first.drop()


def test_server_errors_map_to_typed_errors() -> None:
    """Item 3: codes as a real server and python-oracledb report them: an SQL bug (ORA-00904)
    is a BackendError, not BackendUnavailable; a call timeout (DPY-4024) is transient."""
    from agentmemory_oracle import sql as q
    from agentmemory_oracle.errors import ora_code_of
    from agentmemory_oracle.store import drive_sync

    from agentmemory.errors import BackendError, TransientBackendError

    def one(stmt: q.Statement) -> Any:
        return (yield stmt)

    with oracledb.connect(user=USER, password=PASSWORD, dsn=DSN) as conn:
        with pytest.raises(BackendError) as info:
            drive_sync(conn, one(q.Fetch("SELECT no_such_column FROM dual")))
        assert type(info.value) is BackendError and ora_code_of(info.value) == "ORA-00904"
        conn.call_timeout = 200
        with pytest.raises(TransientBackendError) as slow:
            drive_sync(conn, one(q.Execute("BEGIN DBMS_SESSION.SLEEP(3); END;")))
        assert ora_code_of(slow.value) == "DPY-4024"


def test_long_keyword_queries_and_long_tokens(store: OracleStore) -> None:
    """Item 4: a query of hundreds of terms stays a VARCHAR2 bind CONTAINS accepts, and tokens
    longer than 64 bytes (up to Oracle Text's 255, and past it) still find their record."""
    long_token = "z" * 120
    longer_token = "q" * 300
    store.write(WriteBatch(add=[
        NewRecord(rec("long", content=f"marker {long_token}"), E1),
        NewRecord(rec("longer", content=f"other {longer_token}"), E2),
    ]))
    store.settle()
    many = " ".join(f"term{i:03d}" + "x" * 60 for i in range(300))
    assert store.keyword_search(many, RecordFilter(), 5) == []
    hits = store.keyword_search(f"{many} {long_token}", RecordFilter(), 5)  # accepted, whatever fits
    assert {h.record.record_id for h in hits} <= {"long"}
    assert [h.record.record_id for h in store.keyword_search(long_token, RecordFilter(), 5)] == ["long"]
    assert [h.record.record_id for h in store.keyword_search(longer_token, RecordFilter(), 5)] == ["longer"]


def test_large_k_never_reaches_the_hnsw_index_unbounded() -> None:
    """Item 5: with every search sent to the HNSW index (``exact_search_threshold=0``), a k up to
    the cap asks FETCH APPROX for at most 1,000 neighbours and a larger k is ranked exactly; both
    answer without ORA-51966 and agree with the exact ranking."""
    import numpy as np

    store = make_store(exact_search_threshold=0)
    store.open(dimension=4)
    try:
        rng = np.random.default_rng(7)
        vectors = rng.normal(size=(60, 4)).astype(np.float32)
        store.write(WriteBatch(add=[NewRecord(rec(f"r{i:02d}"), v) for i, v in enumerate(vectors)]))
        expected = sorted(
            (float(1 - v @ E1 / np.linalg.norm(v)), f"r{i:02d}") for i, v in enumerate(vectors.astype(np.float64))
        )
        for k in (500, 1000, 5000):
            hits = store.vector_search(E1, RecordFilter(), k)
            assert {h.record.record_id for h in hits} == {rid for _, rid in expected}, k
    finally:
        store.close()
        store.drop()


def test_server_version_is_read_as_a_release(store: OracleStore) -> None:
    """Item 6: the version python-oracledb reports for this server parses as (major, release
    update), so the 23.4 check at open really ran (an unreadable version is let through)."""
    from agentmemory_oracle.store import MIN_SERVER_RELEASE, server_release

    version = store.info().extra["server_version"]
    release = server_release(str(version))
    assert release is not None and release >= MIN_SERVER_RELEASE, version


CFG = {"extract_memories": False, "enable_context_summary": False}


def test_local_store_moves_to_oracle_and_back(tmp_path: Path) -> None:
    oracle = OracleStore(user=USER, password=PASSWORD, dsn=DSN, pool_min=0, pool_max=2,
                         memory_store_key=f"migrate-{uuid.uuid4()}")
    with AgentMemory(f"duckdb://{tmp_path / 'dev.duckdb'}", embedder=HashingEmbedder(), memory_extraction_config=CFG) as dev:
        thread = dev.create_thread("t1", user_id="maya", agent_id="ops", metadata={"big": 2**53 + 1})
        thread.add_messages([{"role": "user", "content": f"the ledger enrichment step fails, try {i}"} for i in range(30)])
        old = dev.add_memory("prefers cron", user_id="maya", memory_type="preference", metadata=NASTY_METADATA)
        new = dev.add_memory("prefers LangGraph now", user_id="maya", memory_type="preference", ttl_days=30)
        dev.link_records(new, old, "supersedes")
        prod = AgentMemory(oracle, embedder=HashingEmbedder(), memory_extraction_config=CFG)
        try:
            report = migrate(dev, prod, batch_size=7)
            assert report.vectors == "kept" and report.links_written == 1
            records = dev.store.query(RecordFilter(), order=Order.SEQ_ASC)
            assert_same(prod.store.query(RecordFilter(), order=Order.SEQ_ASC), records, seq=False, what="records")
            assert_same(prod.store.links(), dev.store.links(), what="links")
            ids = [r.record_id for r in records]
            got, want = prod.store.read_vectors(ids), dev.store.read_vectors(ids)
            assert sorted(got) == sorted(want) and all(np.allclose(got[k], want[k], atol=1e-6) for k in want)
            assert prod.search("which step fails?", user_id="maya", strategy="vector")[0].record.record_id == \
                dev.search("which step fails?", user_id="maya", strategy="vector")[0].record.record_id
            again = migrate(dev, prod)
            assert again.records_written == 0 and again.records_unchanged == len(records)
            dump = tmp_path / "prod.jsonl.gz"
            write_dump(export_records(prod), dump)
            with AgentMemory("memory://", embedder=HashingEmbedder(), memory_extraction_config=CFG) as back:
                import_records(back, read_dump(dump))
                assert_same(back.store.query(RecordFilter(), order=Order.SEQ_ASC), records, seq=False, what="round trip")
        finally:
            prod.close()
            oracle.drop()
