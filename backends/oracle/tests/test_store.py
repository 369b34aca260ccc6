"""``OracleStore`` glue over fake python-oracledb objects: construction, URIs, the plugin, pools,
transactions (commit/rollback), bind typing (JSON, VECTOR, TIMESTAMP, never numpy), LOBs fetched
as values, sync and native-async drivers. The fakes check every bind name against the SQL text;
what they cannot check is Oracle itself (see README: run the conformance suite on a server)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import numpy as np
import oracledb
import pytest
from agentmemory_oracle import ddl
from agentmemory_oracle.names import StoreNames
from agentmemory_oracle.store import OracleStore
from oracledb.errors import _Error

from agentmemory.errors import BackendError, BackendUnavailable, Conflict, InvalidArgument, TransientBackendError
from agentmemory.records import RecordType
from agentmemory.spi import Capability, NewRecord, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

NAMES = StoreNames.for_store("t_store")


def driver_error(code: str) -> oracledb.Error:
    return oracledb.DatabaseError(_Error(message=f"{code}: scripted failure"))


def _row(h: Any, rid: str, *extra: Any) -> tuple[Any, ...]:
    from agentmemory_oracle import sql as q

    row = q.record_row(h.rec(rid, type=RecordType.FACT, user="u", metadata={"k": [1, "a"]}), 5)
    return tuple(row[c] for c in q.RECORD_COLUMNS) + extra


@pytest.fixture
def server(h: Any) -> Any:
    return h.Server()


@pytest.fixture
def store(server: Any, h: Any) -> OracleStore:
    s = OracleStore(pool=h.FakePool(server), memory_store_id="t_store")
    s.open(dimension=4)
    return s


# ---- lifecycle -----------------------------------------------------------------------------------------
def test_open_reads_schema_and_declares_capabilities(store: OracleStore, server: Any) -> None:
    assert store.is_open and store.dimension == 4
    assert store.capabilities() == {
        Capability.PERSISTENCE,
        Capability.CONCURRENT_WRITERS,
        Capability.KEYWORD_SEARCH,
        Capability.APPROXIMATE_SEARCH,
        Capability.READ_VECTORS,
    }
    info = store.info()
    assert info.name == "oracle" and info.extra["memory_store_id"] == "T_STORE"
    assert info.extra["server_version"] == "23.6.0.24.10" and info.extra["schema_version"] == ddl.SCHEMA_VERSION
    assert server.commits == 1 and server.rollbacks == 0
    assert not any(sql.startswith("CREATE") for _, sql, _ in server.log)


def test_missing_indexes_reduce_capabilities(h: Any) -> None:
    server = h.Server(("FROM user_indexes", []))
    store = OracleStore(pool=h.FakePool(server), memory_store_id="t_store")
    store.open(dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    assert Capability.KEYWORD_SEARCH not in store.capabilities()
    assert Capability.APPROXIMATE_SEARCH not in store.capabilities()


def test_old_server_and_nls_warning(h: Any) -> None:
    server = h.Server()
    old = h.FakePool(server)
    old.acquire = lambda: type("Old", (h.FakeConnection,), {"version": "19.3.0.0.0"})(server)
    with pytest.raises(BackendUnavailable, match="23ai"):
        OracleStore(pool=old, memory_store_id="t_store").open(dimension=4)
    linguistic = h.Server(("nls_session_parameters", [("NLS_COMP", "LINGUISTIC"), ("NLS_SORT", "BINARY_CI")]))
    with pytest.warns(RuntimeWarning, match="NLS"):
        OracleStore(pool=h.FakePool(linguistic), memory_store_id="t_store").open(dimension=4)


@pytest.mark.parametrize(
    ("version", "opens"),
    [
        ("23.3.0.23.9", False),  # the 23c Free developer release: no VECTOR type
        ("23.2.0.0.0", False),
        ("21.3.0.0.0", False),
        ("23.4.0.24.5", True),
        ("23.9.0.25.7", True),
        ("23.26.0.0.0", True),
        ("26.1.0.0.0", True),
        ("", True),  # unknown: not blocked (the DDL would fail on its own)
    ],
)
def test_server_release_is_checked_at_open(h: Any, version: str, opens: bool) -> None:
    """Issue #20, item 6: VECTOR needs 23.4+, so an older release fails at open naming it."""
    server = h.Server()
    pool = h.FakePool(server)
    pool.acquire = lambda: type("Versioned", (h.FakeConnection,), {"version": version})(server)
    store = OracleStore(pool=pool, memory_store_id="t_store")
    if opens:
        store.open(dimension=4)
        assert store.is_open
        return
    with pytest.raises(BackendUnavailable, match=r"release 23\.4 or later") as info:
        store.open(dimension=4)
    assert version in str(info.value) and "COMPATIBLE" in str(info.value)
    assert not any(sql.startswith(("CREATE", "SELECT schema_version")) for _, sql, _ in server.log)


def test_connection_failures_are_typed(h: Any) -> None:
    down = h.FakePool(h.Server(), fail=driver_error("DPY-6005"))
    with pytest.raises(BackendUnavailable):
        OracleStore(pool=down).open(dimension=4)
    flaky = h.FakePool(h.Server(), fail=driver_error("DPY-4011"))
    with pytest.raises(TransientBackendError):
        OracleStore(pool=flaky).open(dimension=4)


def test_closed_store_refuses_work_and_user_pool_stays_open(store: OracleStore) -> None:
    pool = store._pool
    store.close()
    assert not pool.closed  # the caller's pool is the caller's to close
    with pytest.raises(BackendUnavailable):
        store.query(RecordFilter())


def test_drop_uses_the_pool_without_opening(h: Any) -> None:
    server = h.Server(("FROM user_objects", [(NAMES.record, "TABLE"), (NAMES.seq, "SEQUENCE")]))
    dropped = OracleStore(pool=h.FakePool(server), memory_store_id="t_store").drop()
    assert dropped == [NAMES.record, NAMES.seq]
    assert [sql for _, sql, _ in server.log if sql.startswith("DROP")] == [
        "DROP TABLE T_STORE_RECORD CASCADE CONSTRAINTS PURGE",
        "DROP SEQUENCE T_STORE_RECORD_SEQ",
    ]


# ---- transactions and bind types -------------------------------------------------------------------------
def test_write_commits_once_with_typed_binds(store: OracleStore, server: Any, h: Any) -> None:
    server.commits = 0
    batch = WriteBatch(
        add=[NewRecord(h.rec("a", metadata={"tags": ["x"]}), h.vec(1, 2)), NewRecord(h.rec("b"), None)],
        patch=[RecordPatch("a", metadata={"n": 1}, vector=np.asarray([0, 1, 0, 0], dtype=np.float64))],
    )
    added = store.write(batch)
    assert [(r.record_id, r.seq) for r in added] == [("a", 1), ("b", 2)]
    assert server.commits == 1 and server.rollbacks == 0
    sent = [sql.split()[0] for kind, sql, _ in server.log if kind == "executemany"]
    assert sent == ["INSERT", "INSERT", "UPDATE", "UPDATE", "MERGE"]


def test_failed_write_rolls_back_and_maps_the_error(store: OracleStore, server: Any, h: Any) -> None:
    server.rules.append(("INSERT INTO T_STORE_RECORD ", driver_error("ORA-00001")))
    server.commits = 0
    with pytest.raises(Conflict, match="ORA-00001"):
        store.write(WriteBatch(add=[NewRecord(h.rec("a"), None)]))
    assert server.commits == 0 and server.rollbacks == 1
    assert store._pool.out == 0  # the connection went back to the pool


def test_driver_type_errors_become_backend_errors(store: OracleStore, server: Any, h: Any) -> None:
    def refuse(sql: str, binds: Any) -> Any:
        raise TypeError("expecting a number")

    server.rules.append(("SELECT COUNT(*) FROM T_STORE_RECORD r", refuse))
    with pytest.raises(BackendError, match="rejected a statement"):
        store.count(RecordFilter())


def test_reads_map_rows(store: OracleStore, server: Any, h: Any) -> None:
    server.rules.extend(
        [
            ("ORDER BY r.seq", [_row(h, "a")]),
            ("SELECT COUNT(*) FROM T_STORE_RECORD r", [(3,)]),
            ("SELECT COUNT(*) FROM (SELECT 1", [(2,)]),
            ("VECTOR_DISTANCE", [_row(h, "a", 0.25)]),
            ("CONTAINS", [_row(h, "a", 55)]),
        ]
    )
    [got] = store.query(RecordFilter(user_id="u", metadata_filter={"k": {"$array_contains": "a"}}), limit=3)
    assert got.record_id == "a" and got.metadata == {"k": [1, "a"]} and got.timestamp.tzinfo is not None
    assert store.count(RecordFilter()) == 3
    [hit] = store.vector_search(h.vec(1), RecordFilter(), 3)
    assert hit.distance == 0.25 and hit.record.record_id == "a"
    [kw] = store.keyword_search("hello", RecordFilter(), 3)
    assert kw.score == 55.0
    assert server.commits == 1  # reads never commit (only the open did)


def test_single_connection_mode(h: Any) -> None:
    server = h.Server()
    conn = h.FakeConnection(server)
    store = OracleStore(connection=conn, memory_store_id="t_store")
    store.open(dimension=4)
    store.write(WriteBatch(add=[NewRecord(h.rec("a"), None)]))
    assert server.commits == 2


# ---- SPI 1.1: index_text ---------------------------------------------------------------------------------
def _sent(server: Any, fragment: str) -> list[list[dict[str, Any]]]:
    """The bind rows of every array DML whose SQL contains ``fragment``, in order."""
    return [list(rows) for kind, sql, rows in server.log if kind == "executemany" and fragment in sql]


def test_declares_spi_1_1(store: OracleStore) -> None:
    from agentmemory.spi import SPEC_VERSION

    assert OracleStore.spec_version == SPEC_VERSION == "1.1"


def test_index_text_is_written_and_chunks_index_it(store: OracleStore, server: Any, h: Any) -> None:
    """``write`` and ``bulk_add`` store ``index_text`` beside the content, and ``chunk_text``
    holds the analysed terms of the index text (not of the content) when it is set."""
    from agentmemory_oracle import sql as q

    from agentmemory.bulk import RecordColumns

    hiked = h.rec("m1", content="Yes, twice!").model_copy(update={"index_text": "user: did you hike to the lake?"})
    store.write(WriteBatch(add=[NewRecord(hiked, h.vec(1)), NewRecord(h.rec("m2", content="The lake froze."), h.vec(0, 1))]))
    [records] = _sent(server, "INSERT INTO T_STORE_RECORD (")
    assert [(r["content"], r["index_text"]) for r in records] == [
        ("Yes, twice!", "user: did you hike to the lake?"),
        ("The lake froze.", None),
    ]
    [chunks] = _sent(server, "INSERT INTO T_STORE_RECORD_CHUNK (")
    assert [c["chunk_text"] for c in chunks] == ["user hike lake", "lake froze"]
    assert "twice" not in chunks[0]["chunk_text"]
    assert chunks[0]["chunk_text"] == q.analysed_text(hiked.indexed_text)

    server.log.clear()
    store.bulk_add(RecordColumns(
        record_id=["b1", "b2"], content=["Pottery class.", "Sunday."], record_type="memory", timestamp=h.T0,
        index_text=["7 May: pottery class on Sunday", None], vectors=np.stack([h.vec(1), h.vec(0, 1)]),
    ))
    [records] = _sent(server, "INSERT INTO T_STORE_RECORD (")
    assert [r["index_text"] for r in records] == ["7 May: pottery class on Sunday", None]
    [chunks] = _sent(server, "INSERT INTO T_STORE_RECORD_CHUNK (")
    assert [c["chunk_text"] for c in chunks] == ["7 may potteri class sunday", "sunday"]


def test_index_text_is_read_back_by_every_read(store: OracleStore, server: Any, h: Any) -> None:
    from agentmemory_oracle import sql as q

    def with_index(rid: str, index: str | None, *extra: Any) -> tuple[Any, ...]:
        row = _row(h, rid, *extra)
        at = q.RECORD_COLUMNS.index("index_text")
        return (*row[:at], index, *row[at + 1 :])

    server.rules.extend(
        [
            ("ORDER BY r.seq", [with_index("a", "what is indexed"), with_index("b", None)]),
            ("SELECT COUNT(*) FROM (SELECT 1", [(2,)]),
            ("VECTOR_DISTANCE", [with_index("a", "what is indexed", 0.25)]),
            ("CONTAINS", [with_index("a", "what is indexed", 55)]),
        ]
    )
    got = store.query(RecordFilter())
    assert [(r.record_id, r.index_text) for r in got] == [("a", "what is indexed"), ("b", None)]
    assert got[0].indexed_text == "what is indexed" and got[1].indexed_text == got[1].content
    [hit] = store.vector_search(h.vec(1), RecordFilter(), 3)
    assert hit.record.index_text == "what is indexed"
    [kw] = store.keyword_search("indexed", RecordFilter(), 3)
    assert kw.record.index_text == "what is indexed" and kw.record.content == "content of a"
    assert all("r.index_text" in sql for _, sql, _ in server.log if "ORDER BY r.seq" in sql or "CONTAINS" in sql)


def test_patches_set_or_reset_index_text_and_reindex(store: OracleStore, server: Any, h: Any) -> None:
    """A content patch without ``index_text`` stores NULL and indexes the new content; an
    ``index_text`` patch indexes it; resetting it alone indexes the content the record holds."""
    server.rules.append(("r.index_text FROM T_STORE_RECORD r", [("m3", "The lake was frozen.", None)]))
    store.write(WriteBatch(patch=[
        RecordPatch("m1", content="Only to the river."),
        RecordPatch("m2", index_text="the glacier froze over"),
        RecordPatch("m3", index_text=None),
    ]))
    updates = _sent(server, "UPDATE T_STORE_RECORD SET")
    assert [(r.get("content"), r["index_text"]) for rows in updates for r in rows] == [
        ("Only to the river.", None),
        (None, "the glacier froze over"),
        (None, None),
    ]
    sets = [sql for kind, sql, _ in server.log if sql.startswith("UPDATE T_STORE_RECORD SET")]
    assert sets[0].startswith("UPDATE T_STORE_RECORD SET content = :content, index_text = :index_text ")
    assert sets[1].startswith("UPDATE T_STORE_RECORD SET index_text = :index_text ")
    chunk_texts = [r["chunk_text"] for rows in _sent(server, "UPDATE T_STORE_RECORD_CHUNK SET") for r in rows]
    assert chunk_texts == ["river", "glacier froze", "lake frozen"]
    # only the reset without new content read the stored content, after its UPDATE
    reads = [i for i, (_, sql, _) in enumerate(server.log) if "r.index_text FROM T_STORE_RECORD r" in sql]
    assert len(reads) == 1
    assert server.log[reads[0] - 1][1].startswith("UPDATE T_STORE_RECORD SET index_text")


def test_vector_patch_creates_its_chunk_from_the_index_text(store: OracleStore, server: Any, h: Any) -> None:
    server.rules.extend([
        ("r.index_text FROM T_STORE_RECORD r", [("a", "Yes, twice!", "did you hike?")]),
        ("SELECT r.record_id FROM T_STORE_RECORD r", [("a",)]),
    ])
    store.write(WriteBatch(patch=[RecordPatch("a", vector=h.vec(1))]))
    [merge] = _sent(server, "MERGE INTO T_STORE_RECORD_CHUNK")
    assert merge[0]["chunk_text"] == "hike"
    server.log.clear()
    store.write(WriteBatch(patch=[RecordPatch("a", content="Yes.", index_text="hiked twice", vector=h.vec(1))]))
    [merge] = _sent(server, "MERGE INTO T_STORE_RECORD_CHUNK")
    assert merge[0]["chunk_text"] == "hike twice"
    assert not any("r.index_text FROM T_STORE_RECORD r" in sql for _, sql, _ in server.log)  # the patch told


def test_version_3_store_is_migrated_on_open(h: Any) -> None:
    """A schema-3 store (no ``index_text``) gets the column under ``create_if_necessary`` and
    its version row says 4; its chunks are left alone (NULL index text = the content they
    already index). ``require_existing`` refuses it, naming the upgrade."""
    from agentmemory.analysis import Analyzer

    english = Analyzer.for_language("english")
    rules = (
        ("SELECT schema_version", [(3, 4)]),
        ("SELECT analyzer_language", [("english", english.fingerprint)]),
    )
    server = h.Server(*rules)
    store = OracleStore(pool=h.FakePool(server), memory_store_id="t_store")
    store.open(dimension=4)
    sent = [sql for _, sql, _ in server.log]
    alter = sent.index("ALTER TABLE T_STORE_RECORD ADD (index_text CLOB)")
    bump = next(i for i, sql in enumerate(sent) if sql.startswith("UPDATE T_STORE_STORE_META SET schema_version"))
    assert alter < bump and server.log[bump][2]["version"] == 4 == store.info().extra["schema_version"]
    assert [sql for sql in sent if sql.startswith("ALTER")] == [sent[alter]]  # only the 3 -> 4 step
    assert not any("chunk_text = :chunk_text" in sql for sql in sent)  # no chunk rewritten
    assert server.commits == 1

    refused = h.Server(*rules)
    with pytest.raises(BackendUnavailable, match="schema version 3 and needs an upgrade to 4"):
        OracleStore(pool=h.FakePool(refused), memory_store_id="t_store").open(
            dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING
        )
    assert not any(sql.startswith("ALTER") for _, sql, _ in refused.log)


# ---- async -------------------------------------------------------------------------------------------------
def test_native_async_path(h: Any) -> None:
    server = h.Server(("ORDER BY r.seq", [_row(h, "a")]))
    apool = h.FakeAsyncPool(server)
    store = OracleStore(pool=h.FakePool(server), async_pool=apool, memory_store_id="t_store")
    store.open(dimension=4)

    async def work() -> None:
        added = await store.awrite(WriteBatch(add=[NewRecord(h.rec("z"), h.vec(1))]))
        assert added[0].seq == 1
        rows = await store.aquery(RecordFilter())
        assert [r.record_id for r in rows] == ["a"]
        with pytest.raises(Conflict):
            server.rules.insert(0, ("INSERT INTO T_STORE_RECORD ", driver_error("ORA-00001")))
            await store.awrite(WriteBatch(add=[NewRecord(h.rec("y"), None)]))

    before = server.commits
    asyncio.run(work())
    assert server.commits == before + 1 and server.rollbacks == 1 and apool.acquired == 0


def test_owned_pools_native_async_and_closed_with_the_store(h: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = h.Server(("ORDER BY r.seq", [_row(h, "a")]))
    made: dict[str, Any] = {}

    def create_pool(**kw: Any) -> Any:
        assert kw["user"] == "am" and kw["dsn"] == "db:1521/svc" and kw["min"] == 1
        made["sync"] = h.FakePool(server)
        return made["sync"]

    def create_pool_async(**kw: Any) -> Any:
        assert kw["password"] == "pw" and kw["min"] == 0
        made.setdefault("async", []).append(h.FakeAsyncPool(server))
        return made["async"][-1]

    monkeypatch.setattr(oracledb, "create_pool", create_pool)
    monkeypatch.setattr(oracledb, "create_pool_async", create_pool_async)
    store = OracleStore.from_uri("oracle://am:pw@db/svc?memory_store_id=t_store")
    store.open(dimension=4)
    loop = asyncio.new_event_loop()
    try:
        for _ in range(2):  # one async pool per loop, reused
            assert [r.record_id for r in loop.run_until_complete(store.aquery(RecordFilter()))] == ["a"]
        assert len(made["async"]) == 1 and made["async"][0].acquired == 0
        store.close()
        assert made["sync"].closed and made["async"][0].closed
    finally:
        loop.close()


def test_async_falls_back_to_threads_for_a_callers_sync_pool(store: OracleStore, server: Any, h: Any) -> None:
    server.rules.append(("ORDER BY r.seq", [_row(h, "a")]))
    rows = asyncio.run(store.aquery(RecordFilter()))
    assert [r.record_id for r in rows] == ["a"]


# ---- settle (the index tier's hook) ------------------------------------------------------------------------
def test_settle_syncs_the_text_index_and_declares_thresholds(store: OracleStore, server: Any, h: Any) -> None:
    """``settle`` runs ``CTX_DDL.SYNC_INDEX`` on the store's Oracle Text index (bound, not
    inlined) and commits; the HNSW index needs no statement. Sync and native async alike."""
    assert store.index_thresholds() == {"vector": 1001, "keyword": 1}
    before = len(server.log), server.commits
    assert store.settle() == {"vector": True, "keyword": True}
    sent = server.log[before[0]:]
    assert [(sql, binds) for _, sql, binds in sent] == [("BEGIN CTX_DDL.SYNC_INDEX(:idx); END;", {"idx": NAMES.text_index})]
    assert server.commits == before[1] + 1
    apool = h.FakeAsyncPool(server)
    native = OracleStore(pool=h.FakePool(server), async_pool=apool, memory_store_id="t_store", exact_search_threshold=0)
    native.open(dimension=4)
    assert native.index_thresholds() == {"vector": 1, "keyword": 1}
    mark = len(server.log)
    assert asyncio.run(native.asettle()) == {"vector": True, "keyword": True}
    assert [sql for _, sql, _ in server.log[mark:]] == ["BEGIN CTX_DDL.SYNC_INDEX(:idx); END;"]
    assert apool.acquired == 0


def test_settle_without_optional_indexes_sends_nothing(h: Any) -> None:
    server = h.Server(("FROM user_indexes", []))
    store = OracleStore(pool=h.FakePool(server), memory_store_id="t_store")
    store.open(dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    assert store.index_thresholds() == {}
    mark = len(server.log)
    assert store.settle() == {}
    assert server.log[mark:] == []


# ---- construction, URIs, plugin -------------------------------------------------------------------------
def test_constructor_validation(h: Any) -> None:
    with pytest.raises(InvalidArgument) as info:
        OracleStore()
    assert info.value.argument == "dsn"
    pool = h.FakePool(h.Server())
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, connection=h.FakeConnection(h.Server()))
    with pytest.raises(InvalidArgument):
        OracleStore(pool=object())
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, async_pool=object())
    with pytest.raises(InvalidArgument) as info:
        OracleStore(pool=pool, memory_store_id="bad-id")
    assert info.value.argument == "memory_store_id"
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, exact_search_threshold="many")
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, text_index="maybe")
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, target_accuracy=0)
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, pool_min=3, pool_max=2)


def test_string_options_are_coerced(h: Any) -> None:
    store = OracleStore(
        pool=h.FakePool(h.Server()), exact_search_threshold="5", text_index="false", target_accuracy="90"
    )
    assert store._exact_threshold == 5 and store._index_options.text_index is False
    assert Capability.KEYWORD_SEARCH not in store.capabilities()


@pytest.mark.parametrize(
    ("uri", "user", "password", "dsn", "store_id"),
    [
        ("oracle://am:secret@db.example:1522/FREEPDB1", "am", "secret", "db.example:1522/FREEPDB1", "AGENTMEMORY"),
        (
            "oracle://am:p%40ss%3Aw%2Frd@localhost/FREEPDB1?memory_store_id=T_CARD",
            "am",
            "p@ss:w/rd",
            "localhost:1521/FREEPDB1",
            "T_CARD",
        ),
        ("oracle://am:x@[::1]:1521/svc", "am", "x", "[::1]:1521/svc", "AGENTMEMORY"),
        ("oracle://am:x@ignored/?dsn=mytnsalias", "am", "x", "mytnsalias", "AGENTMEMORY"),
    ],
)
def test_from_uri(uri: str, user: str, password: str, dsn: str, store_id: str) -> None:
    store = OracleStore.from_uri(uri)
    assert (store._user, store._password, store._dsn, store.memory_store_id) == (user, password, dsn, store_id)
    assert not store.is_open  # building never connects


def test_memory_store_key_derives_a_valid_stable_id(h: Any) -> None:
    pool = h.FakePool(h.Server())
    a = OracleStore(pool=pool, memory_store_key="/tmp/pytest-7/test_x0/store")
    b = OracleStore(pool=pool, memory_store_key="/tmp/pytest-7/test_x0/store")
    c = OracleStore(pool=pool, memory_store_key="/tmp/pytest-7/test_x1/store")
    assert a.memory_store_id == b.memory_store_id != c.memory_store_id
    assert len(a.memory_store_id) == 16 and a.memory_store_id.startswith("K")
    with pytest.raises(InvalidArgument):
        OracleStore(pool=pool, memory_store_id="x", memory_store_key="y")
    uri = OracleStore.from_uri("oracle://u:p@h/s?memory_store_key=/tmp/pytest-7/test_x0/store")
    assert uri.memory_store_id == a.memory_store_id


@pytest.mark.parametrize(
    "uri", ["duckdb:///x", "oracle://", "oracle://u:p@h/s?bogus=1", "oracle://u:p@h/s?memory_store_id=1x"]
)
def test_bad_uris(uri: str) -> None:
    with pytest.raises(InvalidArgument):
        OracleStore.from_uri(uri)


def test_registered_through_the_entry_point() -> None:
    from agentmemory.plugins import PluginManager
    from agentmemory.registry import resolve_store

    pm = PluginManager()
    assert "oracle" in pm.names("backends")
    reg = pm.get("backends", "oracle")
    assert reg.target == "agentmemory_oracle.store:OracleStore" or reg.load() is OracleStore
    assert "agentmemory-oracle" in reg.details["install_hint"]
    store = resolve_store("oracle://am:pw@localhost:1521/FREEPDB1?memory_store_id=demo", pm)
    assert isinstance(store, OracleStore) and store.memory_store_id == "DEMO"


def test_plugin_module_is_import_light() -> None:
    import subprocess
    import sys

    code = "import sys, agentmemory_oracle.plugin; print('oracledb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_open_warnings_surface(h: Any) -> None:
    present = [(NAMES.meta, "TABLE"), *((s.name, "X") for s in ddl.schema_steps(NAMES, 4) if not s.optional)]
    server = h.Server(
        ("FROM user_objects", present),
        ("CREATE VECTOR INDEX", driver_error("ORA-51962")),
        ("FROM user_indexes", []),
    )
    store = OracleStore(pool=h.FakePool(server), memory_store_id="t_store")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.open(dimension=4)
    assert any("vector_index is not available" in str(w.message) for w in caught)
    assert store.open_warnings and Capability.APPROXIMATE_SEARCH not in store.capabilities()
