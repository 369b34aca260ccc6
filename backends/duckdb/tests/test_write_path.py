"""The write path's bookkeeping (``DuckDBStore._apply``): the ``has_vec`` and type of every
patched or deleted record are read once per batch, taken from the batch's own adds, or from
the rows queries by id read (kept as every committed write changes them), and each patch and
delete moves that view along. The vector count, the stale snapshot rows and the errors must be what the statements
one at a time gave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import Conflict, NotFound
from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

DIM = 4


def _store(tmp_path: Path, h: Any, name: str, n: int = 60) -> DuckDBStore:
    store = h.open_store(tmp_path / name, auto_index=False, vector_index_min_rows=10, fts_min_rows=10)
    rng = np.random.default_rng(7)
    store.write(WriteBatch(add=[h.new(f"r{i:03d}", rng.normal(size=DIM), content=f"note {i}") for i in range(n)]))
    store.write(WriteBatch(add=[h.new("plain", None, content="no vector")]))
    store.build_indexes()
    return store


def _vectors_in_sql(store: DuckDBStore) -> int:
    row = store._conn().execute("SELECT count(*) FROM am_records WHERE has_vec").fetchone()
    assert row is not None
    return int(row[0])


def _stale(store: DuckDBStore) -> list[tuple[str, int]]:
    return store._conn().execute("SELECT rid, clock FROM am_stale ORDER BY clock").fetchall()


def _batch(h: Any) -> WriteBatch:
    return WriteBatch(
        add=[h.new("fresh", np.ones(DIM), content="fresh")],
        patch=[
            RecordPatch("r003", vector=None),  # had one: stale, one vector fewer
            RecordPatch("r004", content="new words"),  # had one: stale, count unchanged
            RecordPatch("plain", vector=np.ones(DIM, dtype=np.float32)),  # had none: one more
            RecordPatch("fresh", vector=None),  # added in this batch with a vector
            RecordPatch("r004", vector=None),  # patched twice: its first patch left the vector
        ],
        delete=["r005", "r003"],  # r003 has lost its vector in this batch: no vector to count
    )


@pytest.mark.parametrize("read_first", [False, True])
def test_a_batch_counts_vectors_and_stale_rows_like_the_statements_one_by_one(tmp_path: Path, h: Any, read_first: bool) -> None:
    """The same batch with and without a query by id of its records just before it (whose
    ``has_vec`` the write then takes instead of reading it): the same stale rows and vector
    count, and the count is the table's."""
    store = _store(tmp_path, h, "m.db")
    try:
        before = store._n_vectors
        if read_first:
            ids = ("r003", "r004", "plain", "r005")
            assert {r.record_id for r in store.query(RecordFilter(record_ids=ids))} == set(ids)
            assert set(store._id_rows) == set(ids)
        store.write(_batch(h))
        clock = store._clock
        # one vector added with "fresh" and taken away again; r003 and r004 lose theirs, plain
        # gains one, r005 is deleted with its vector
        assert store._n_vectors == before - 2 == _vectors_in_sql(store)
        assert sorted(rid for rid, _ in _stale(store)) == ["fresh", "r003", "r004", "r004", "r005"]
        assert _stale(store)[-1] == ("r005", clock - 1)  # the last delete, r003's, had no vector left
        hits = [x.record.record_id for x in store.vector_search(np.ones(DIM, np.float32), RecordFilter(), 100)]
        assert "plain" in hits and not {"r003", "r004", "r005", "fresh"} & set(hits)
    finally:
        store.close()


def test_a_row_read_by_id_follows_the_writes_after_it(tmp_path: Path, h: Any) -> None:
    """A row a query by id read follows the writes after it: a second patch taking the vector
    away finds none to take (the count drops once)."""
    store = _store(tmp_path, h, "m.db")
    try:
        before = store._n_vectors
        store.query(RecordFilter(record_ids=("r010",)))
        store.write(WriteBatch(patch=[RecordPatch("r010", vector=None)]))
        store.write(WriteBatch(patch=[RecordPatch("r010", vector=None)]))
        assert store._n_vectors == before - 1 == _vectors_in_sql(store)
        assert [rid for rid, _ in _stale(store)] == ["r010"]  # the second patch had no vector
    finally:
        store.close()


def test_errors_come_in_the_reference_order_and_leave_nothing(tmp_path: Path, h: Any) -> None:
    """A duplicate add is reported before a missing patch or delete target (adds come first),
    a missing target is NotFound, and a failed batch changes nothing (its literals insert
    rolled back; a later batch of the same rows lands)."""
    store = _store(tmp_path, h, "m.db")
    try:
        rows = store.count(RecordFilter())
        with pytest.raises(Conflict, match="'r001'"):
            store.write(WriteBatch(add=[h.new("new1", None), h.new("r001", None)], patch=[RecordPatch("missing", content="x")]))
        with pytest.raises(NotFound):
            store.write(WriteBatch(add=[h.new("new1", None)], patch=[RecordPatch("missing", content="x")]))
        with pytest.raises(NotFound):
            store.write(WriteBatch(add=[h.new("new1", None)], delete=["r002", "r002"]))
        assert store.count(RecordFilter()) == rows
        assert store.query(RecordFilter(record_ids=("new1", "r002")))[0].record_id == "r002"
        store.write(WriteBatch(add=[h.new("new1", None)], delete=["r002"]))
        assert store.count(RecordFilter()) == rows
    finally:
        store.close()


def test_small_and_large_adds_store_the_same_rows(tmp_path: Path, h: Any) -> None:
    """A few records are inserted as SQL literals, many through Arrow: the stored rows (text,
    times, metadata, unit vectors bit for bit, missing vectors) are the same either way."""
    from datetime import datetime, timedelta, timezone

    def adds(prefix: str, n: int) -> list[Any]:
        rng = np.random.default_rng(1)
        stamp = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone(timedelta(hours=2)))
        return [
            h.new(f"{prefix}{i}", None if i % 3 == 0 else rng.normal(size=DIM), content=f"it's {i}; 'quoted'",
                  timestamp=stamp, metadata={"k": i, "s": "é"}, expires_at=stamp + timedelta(days=i) if i % 2 else None,
                  user_id=None if i % 2 else "u", index_text=None if i % 4 else f"terms {i}")
            for i in range(n)
        ]

    store = h.open_store(tmp_path / "m.db", auto_index=False)
    try:
        store.write(WriteBatch(add=adds("a", 6)))  # literals
        store.write(WriteBatch(add=adds("b", 40)))  # Arrow
        cols = "rtype, content, user_id, agent_id, thread_id, role, ts, created, expires, expires_us, status, metadata, has_vec, vec, index_text"
        con = store._conn()
        for i in range(6):
            small = con.execute(f"SELECT {cols} FROM am_records WHERE rid = 'a{i}'").fetchone()
            large = con.execute(f"SELECT {cols} FROM am_records WHERE rid = 'b{i}'").fetchone()
            assert small == large
        vectors = store.read_vectors([f"a{i}" for i in range(6)] + [f"b{i}" for i in range(6)])
        for i in range(6):
            if i % 3:
                assert vectors[f"a{i}"].tobytes() == vectors[f"b{i}"].tobytes()
            else:
                assert f"a{i}" not in vectors and f"b{i}" not in vectors
    finally:
        store.close()


def _scope_rows(scope: Any) -> dict[str, tuple[Any, ...]]:
    """A kept scope's rows by id: record columns, ver, expiry and the vector's bytes."""
    return {
        rid: (scope.row(rid), int(scope.vers[i]), int(scope.expires_us[i]), scope.matrix[i].tobytes())
        for i, rid in enumerate(scope.rids)
    }


def test_a_write_that_only_adds_records_of_a_kept_scope_extends_it(tmp_path: Path, h: Any) -> None:
    """A turn that extracts a memory: the user's memory scope, read by a search before, is
    kept with the new memory appended (what a fresh read returns, row for row), not read
    again; other users' memories and records without a vector stay out; a later write that
    patches a memory drops the scope."""
    from datetime import datetime, timedelta, timezone

    from agentmemory.records import RecordType

    store = h.open_store(tmp_path / "m.db", auto_index=False)
    rng = np.random.default_rng(3)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    try:
        store.write(WriteBatch(add=[
            *(h.new(f"m{i}", rng.normal(size=DIM), content=f"memory {i} tea", user_id="u1") for i in range(5)),
            *(h.new(f"o{i}", rng.normal(size=DIM), content=f"other {i} tea", user_id="u2") for i in range(3)),
            h.new("thread", None, record_type=RecordType.THREAD, user_id="u1"),
        ]))
        flt = RecordFilter(user_id="u1", record_types=frozenset({RecordType.MEMORY}), alive_at=t0)
        query = np.ones(DIM, dtype=np.float32)
        store.vector_search(query, flt, 3)
        (where,) = store._scopes
        store.write(WriteBatch(
            add=[
                h.new("m-new", rng.normal(size=DIM), content="memory new tea", user_id="u1", expires_at=t0 + timedelta(days=1),
                      metadata={"k": "v"}),
                h.new("m-novec", None, content="memory without a vector", user_id="u1"),
                h.new("o-new", rng.normal(size=DIM), content="other new tea", user_id="u2"),
                h.new("msg", rng.normal(size=DIM), record_type=RecordType.MESSAGE, user_id="u1", thread_id="thread"),
            ],
            patch=[RecordPatch("thread", metadata={"state": 1})],
        ))
        kept = store._scopes[where]
        assert set(kept.rids) == {"m0", "m1", "m2", "m3", "m4", "m-new"}
        hits = [(x.record, x.score) for x in store.vector_search(query, flt, 10)]
        keyword = [(x.record, x.score) for x in store.keyword_search("tea", flt, 10)]
        assert store._scopes[where] is kept  # answered from it, not read again
        store._scopes.clear()
        assert [(x.record, x.score) for x in store.vector_search(query, flt, 10)] == hits
        assert [(x.record, x.score) for x in store.keyword_search("tea", flt, 10)] == keyword
        assert _scope_rows(store._scopes[where]) == _scope_rows(kept)
        assert "m-new" in [r.record_id for r, _ in hits]
        store.write(WriteBatch(add=[h.new("m-6", rng.normal(size=DIM), user_id="u1")], patch=[RecordPatch("m0", content="x")]))
        assert where not in store._scopes  # a memory patched: read again at the next search
        store.vector_search(query, flt, 3)
        assert "m-6" in store._scopes[where].rids
    finally:
        store.close()


def _meta_counters(store: DuckDBStore) -> tuple[int, int]:
    rows = dict(store._conn().execute("SELECT key, value FROM am_meta WHERE key IN ('seq', 'ver')").fetchall())
    return int(rows["seq"]), int(rows["ver"])


def test_the_counters_are_written_by_deletes_and_read_back_from_the_rows(tmp_path: Path, h: Any) -> None:
    """Batches that add and patch leave ``seq``/``ver`` in the rows they write (am_meta keeps
    the last deleting batch's values); a reopen takes the largest, so a new record never gets
    a ``seq`` again, not even after the newest records were deleted; an index build takes the
    same clock as its watermark."""
    path = tmp_path / "m.db"
    store = h.open_store(path, auto_index=False, vector_index_min_rows=5, fts_min_rows=5)
    rng = np.random.default_rng(5)
    store.write(WriteBatch(add=[h.new(f"r{i}", rng.normal(size=DIM), content=f"note {i}") for i in range(10)]))
    store.write(WriteBatch(patch=[RecordPatch("r3", content="changed")]))
    assert _meta_counters(store) == (0, 0)  # written by no batch yet
    seq, clock = store._seq, store._clock
    assert (seq, clock) == (10, 11)
    store.build_indexes()
    assert store._vidx is not None and store._vidx.watermark == clock
    store.close()
    store = h.open_store(path, auto_index=False)
    try:
        assert (store._seq, store._clock) == (seq, clock)
        store.write(WriteBatch(delete=["r9", "r8"]))  # the newest: their seq are the largest
        assert _meta_counters(store) == (10, 13) == (store._seq, store._clock)
    finally:
        store.close()
    store = h.open_store(path, auto_index=False)
    try:
        assert (store._seq, store._clock) == (10, 13)
        (added,) = store.write(WriteBatch(add=[h.new("r10", None)]))
        assert added.seq == 11  # not 9: a deleted record's seq is never handed out again
    finally:
        store.close()


def test_a_version_3_file_opens_with_its_counters(tmp_path: Path, h: Any) -> None:
    """A file written before the counters moved to the rows (version 3: am_meta exact) is
    migrated on open and goes on from its counters, also when they are past every row."""
    from agentmemory_duckdb import _schema

    path = tmp_path / "m.db"
    store = h.open_store(path, auto_index=False)
    store.write(WriteBatch(add=[h.new(f"r{i}", None) for i in range(3)]))
    store.close()
    import duckdb

    con = duckdb.connect(str(path))
    con.execute("UPDATE am_meta SET value = '3' WHERE key = 'schema_version'")
    con.execute("DELETE FROM am_migrations WHERE version > 3")
    con.execute("UPDATE am_meta SET value = CASE key WHEN 'seq' THEN '40' ELSE '50' END WHERE key IN ('seq', 'ver')")
    con.close()
    store = h.open_store(path, auto_index=False)
    try:
        assert store.info().extra["schema_version"] == _schema.SCHEMA_VERSION == 4
        assert (store._seq, store._clock) == (40, 50)
        (added,) = store.write(WriteBatch(add=[h.new("r3", None)]))
        assert added.seq == 41
    finally:
        store.close()


def test_rows_kept_for_queries_by_id_follow_every_write(tmp_path: Path, h: Any) -> None:
    """Queries by id answer from the rows they read before, brought along by each committed
    patch (every column a patch can set) and delete, and never by a batch that failed: the
    same records, in the same order and window, as a fresh read from the table."""
    from datetime import datetime, timedelta, timezone

    from agentmemory.records import RecordStatus

    store = _store(tmp_path, h, "m.db", n=8)
    t0 = datetime(2026, 2, 3, 4, 5, 6, 789, tzinfo=timezone(timedelta(hours=-3)))
    ids = ("r001", "r002", "r003", "r004", "plain")

    def both(flt: RecordFilter, **window: Any) -> tuple[list[Any], list[Any]]:
        kept = store.query(flt, **window)
        saved, store._id_rows = store._id_rows, {}
        try:
            fresh = store.query(flt, **window)
        finally:
            store._id_rows = saved
        return kept, fresh

    try:
        store._id_rows.clear()  # the rows _store inserted as literals are kept too
        store.query(RecordFilter(record_ids=ids))
        assert set(store._id_rows) == set(ids)
        store.write(WriteBatch(patch=[
            RecordPatch("r001", content="new words"),  # index_text reset
            RecordPatch("r002", index_text="terms", metadata={"a": [1, 2.5, "é"]}, status=RecordStatus.INVALID),
            RecordPatch("r003", timestamp=t0, expires_at=t0 + timedelta(days=2), vector=None),
            RecordPatch("plain", vector=np.ones(DIM, dtype=np.float32), expires_at=None),
        ], delete=["r004"]))
        with pytest.raises(NotFound):  # rolled back: the kept rows stay as committed
            store.write(WriteBatch(patch=[RecordPatch("r001", content="lost")], delete=["missing"]))
        fresh_rows = store._conn().execute(
            f"SELECT {', '.join('r.' + c.strip() for c in store_columns())}, r.has_vec FROM am_records r "
            "WHERE r.rid IN ('r001', 'r002', 'r003', 'plain')"
        ).fetchall()
        assert {row[0]: row for row in fresh_rows} == {rid: row for rid, row in store._id_rows.items() if rid != "r004"}
        assert "r004" not in store._id_rows
        for flt, window in [
            (RecordFilter(record_ids=ids), {}),
            (RecordFilter(record_ids=ids, statuses=frozenset({RecordStatus.VALID})), {"limit": 2}),
            (RecordFilter(record_ids=ids, alive_at=t0 + timedelta(days=3)), {}),
            (RecordFilter(record_ids=ids), {"offset": 1, "limit": 2}),
        ]:
            kept, fresh = both(flt, **window)
            assert kept == fresh
        assert [r.record_id for r in store.query(RecordFilter(record_ids=ids))] == ["r001", "r002", "r003", "plain"]
    finally:
        store.close()


def test_rows_a_write_inserts_as_literals_are_kept_as_a_read_by_id_returns_them(tmp_path: Path, h: Any) -> None:
    """A few added records (inserted as literals) are kept for queries by id as the table holds
    them, a patch or delete of the same batch applied after, and a failed batch keeps nothing."""
    from datetime import datetime, timedelta, timezone

    store = _store(tmp_path, h, "m.db", n=8)
    t0 = datetime(2026, 2, 3, 4, 5, 6, 789, tzinfo=timezone(timedelta(hours=-3)))
    try:
        store._id_rows.clear()
        store.write(WriteBatch(
            add=[
                h.new("a1", np.ones(DIM), content="first", metadata={"k": [1, 2.5, "é"]}),
                h.new("a2", None, content="second", timestamp=t0, expires_at=t0 + timedelta(days=2)),
                h.new("a3", np.ones(DIM), content="third"),
                h.new("a4", np.ones(DIM), content="fourth"),
            ],
            patch=[RecordPatch("a3", content="patched", vector=None)],
            delete=["a4"],
        ))
        assert set(store._id_rows) == {"a1", "a2", "a3"}
        with pytest.raises(NotFound):  # rolled back: nothing of it kept
            store.write(WriteBatch(add=[h.new("lost", None)], delete=["missing"]))
        assert "lost" not in store._id_rows
        fresh_rows = store._conn().execute(
            f"SELECT {', '.join('r.' + c.strip() for c in store_columns())}, r.has_vec FROM am_records r "
            "WHERE r.rid IN ('a1', 'a2', 'a3')"
        ).fetchall()
        assert {row[0]: row for row in fresh_rows} == store._id_rows
        kept = store.query(RecordFilter(record_ids=("a1", "a2", "a3", "a4")))
        store._id_rows.clear()
        assert kept == store.query(RecordFilter(record_ids=("a1", "a2", "a3", "a4")))
    finally:
        store.close()


def store_columns() -> list[str]:
    from agentmemory_duckdb._sql import RECORD_COLUMNS

    return RECORD_COLUMNS.split(",")
