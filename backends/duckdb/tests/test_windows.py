"""A scope's newest rows kept in process (``agentmemory_duckdb._windows``): after every kind of
write (adds, a turn's one-commit batch, patches of every field, deletes, bulk and large adds, a
purge, a failed batch, a reopen) and at any query time, a query answered from a window returns
what the SQL over ``am_records`` returns; a scope's window never shows another scope's rows;
ids found missing are found once added."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore
from agentmemory_duckdb._sql import compile_filter, decode_record, qualified_columns
from agentmemory_duckdb._windows import MAX_WINDOWS, MIN_DEPTH, key_of

from agentmemory.bulk import RecordColumns
from agentmemory.errors import Conflict, NotFound
from agentmemory.records import MEMORY_TYPES, MESSAGE_TYPES, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, Order, RecordFilter, RecordPatch, WriteBatch

DIM = 4
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
VALID = frozenset({RecordStatus.VALID})

SCOPES = {
    "a-messages": RecordFilter(record_types=MESSAGE_TYPES, thread_id="a"),
    "a-memories": RecordFilter(record_types=MEMORY_TYPES, thread_id="a", statuses=VALID),
    "b-messages": RecordFilter(record_types=MESSAGE_TYPES, thread_id="b"),
    "u1-all": RecordFilter(user_id="u1"),
    "u1-no-agent-memories": RecordFilter(record_types=MEMORY_TYPES, user_id="u1", agent_id=None),
}
"""The scopes every check reads (each one's window is loaded by its first newest-first query)."""


def _sql(store: DuckDBStore, flt: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
    """The query as the SQL path answers it (no window involved)."""
    where, params = compile_filter(flt, udf=store._udf)
    sql = f"SELECT {qualified_columns('r')} FROM am_records r WHERE {where} ORDER BY r.seq {'DESC' if order is Order.SEQ_DESC else 'ASC'}"
    if limit is not None:
        sql += f" LIMIT {limit}"
    if offset:
        sql += f" OFFSET {offset}"
    return [decode_record(row) for row in store._conn().execute(sql, params).fetchall()]


def _queries(store: DuckDBStore, flt: RecordFilter) -> list[tuple[RecordFilter, Order, int | None, int]]:
    """Windows of ``flt``'s scope as the card, a turn and other readers ask for them, at times
    before, between and after the records' expiry."""
    top = store._seq
    out: list[tuple[RecordFilter, Order, int | None, int]] = []
    for at in (None, T0, T0 + timedelta(days=2), T0 + timedelta(days=30)):
        timed = replace(flt, alive_at=at)
        out += [
            (timed, Order.SEQ_DESC, 20, 0),
            (timed, Order.SEQ_DESC, 3, 2),
            (timed, Order.SEQ_DESC, 1, 0),
            (replace(timed, min_seq=top - 6), Order.SEQ_ASC, None, 0),
            (replace(timed, min_seq=top - 6), Order.SEQ_DESC, 4, 1),
            (replace(timed, max_seq=top - 3), Order.SEQ_DESC, 4, 0),
            (timed, Order.SEQ_ASC, 3, 0),
            (timed, Order.SEQ_DESC, 60, 0),
        ]
    return out


def _check(store: DuckDBStore) -> None:
    """Every query of every scope equals the SQL's answer (and is asked twice: the second is
    answered from the window the first may have read)."""
    for name, flt in SCOPES.items():
        for query in _queries(store, flt):
            want = _sql(store, *query)
            assert store.query(query[0], order=query[1], limit=query[2], offset=query[3]) == want, (name, query)
            assert store.query(query[0], order=query[1], limit=query[2], offset=query[3]) == want, (name, query)


def _record(rid: str, h: Any, *, kind: RecordType = RecordType.MESSAGE, thread: str | None = "a", user: str = "u1",
            agent: str | None = None, expires: datetime | None = None, status: RecordStatus = RecordStatus.VALID) -> Any:
    return h.new(rid, np.ones(DIM), content=f"text of {rid}", record_type=kind, thread_id=thread, user_id=user,
                 agent_id=agent, expires_at=expires, status=status, timestamp=T0, metadata={"n": rid})


def _seeded(tmp_path: Path, h: Any) -> DuckDBStore:
    store = h.open_store(tmp_path / "w.db", auto_index=False)
    adds = [_record("m-early", h, kind=RecordType.MEMORY, status=RecordStatus.INVALID)]
    for i in range(12):
        adds.append(_record(f"a{i}", h, expires=T0 + timedelta(days=1) if i % 4 == 1 else None))
        adds.append(_record(f"b{i}", h, thread="b", user="u1" if i % 2 else "u2"))
        if i % 3 == 0:
            adds.append(_record(f"m{i}", h, kind=RecordType.FACT, agent="ag" if i == 6 else None))
    store.write(WriteBatch(add=adds))
    store.write(WriteBatch(add=[_record("m-old", h, kind=RecordType.MEMORY, status=RecordStatus.INVALID)]))
    return store


def _windows_of(store: DuckDBStore) -> dict[str, Any]:
    kept = store._windows._kept
    return {name: kept.get(key_of(flt)) for name, flt in SCOPES.items()}  # type: ignore[arg-type]


def test_windows_follow_every_kind_of_write(tmp_path: Path, h: Any) -> None:
    """Each write kind, then every query of every scope against the SQL: single adds, a turn's
    batch (messages, a memory, a patch of the thread record), patches of every field, deletes,
    a large add and a bulk add, a purge of expired records."""
    store = _seeded(tmp_path, h)
    try:
        _check(store)
        before = _windows_of(store)
        assert all(before.values())
        store.write(WriteBatch(add=[_record("a-new", h)]))  # one add: put in front of a's and u1's
        assert _windows_of(store) == before  # followed, not dropped
        _check(store)
        store.write(WriteBatch(  # a turn: its messages, an extracted memory, the thread's state
            add=[_record("a-t1", h), _record("a-t2", h, expires=T0 + timedelta(days=3)), _record("m-t", h, kind=RecordType.MEMORY)],
            patch=[RecordPatch("a0", metadata={"state": 1})],
        ))
        assert _windows_of(store) == before
        _check(store)
        store.write(WriteBatch(patch=[
            RecordPatch("a-t1", content="changed words"),  # in the windows: patched in place
            RecordPatch("a-new", index_text="terms", timestamp=T0 + timedelta(hours=1), expires_at=T0 + timedelta(days=1)),
            RecordPatch("a-t2", expires_at=None, vector=None),
            RecordPatch("m-t", status=RecordStatus.INVALID),  # leaves the memory windows of valid ones
            RecordPatch("b11", metadata={"k": [1, "é"]}),
        ]))
        _check(store)
        store.query(RecordFilter(record_ids=("m-early",)))  # read by id: its row is kept
        # both enter the valid-only scopes, each in its place by seq (m-early below the held facts)
        store.write(WriteBatch(patch=[RecordPatch("m-old", status=RecordStatus.VALID), RecordPatch("m-early", status=RecordStatus.VALID)]))
        assert _windows_of(store)["a-memories"] is before["a-memories"]  # its row is known by id: put in its place
        _check(store)
        del store._id_rows["m-t"]
        store.write(WriteBatch(patch=[RecordPatch("m-t", status=RecordStatus.VALID)]))  # its row not at hand
        assert _windows_of(store)["a-memories"] is None and _windows_of(store)["a-messages"] is before["a-messages"]
        _check(store)
        store.write(WriteBatch(delete=["a-t1", "a11", "m9", "b0"]))
        _check(store)
        store.write(WriteBatch(add=[_record(f"a-many{i}", h) for i in range(12)]))  # through Arrow: windows dropped
        assert not any(_windows_of(store).values())
        _check(store)
        store.bulk_add(RecordColumns(
            record_id=["a-bulk1", "b-bulk1", "m-bulk1"], content=["x", "y", "z"],
            record_type=[RecordType.MESSAGE, RecordType.MESSAGE, RecordType.PREFERENCE], timestamp=T0,
            user_id="u1", thread_id=["a", "b", "a"], expires_at=[None, T0 + timedelta(days=1), None],
        ))
        _check(store)
        expired = store.query(RecordFilter(expired_at=T0 + timedelta(days=2)))
        assert expired
        store.write(WriteBatch(delete=[r.record_id for r in expired]))  # retention's purge
        _check(store)
    finally:
        store.close()


def test_a_window_cut_at_its_depth_answers_deeper_queries_from_the_table(tmp_path: Path, h: Any) -> None:
    """Adds one by one push a window's oldest rows out (it keeps its depth): a query reaching
    below what it holds reads the table, and a turn's read of its newest messages since a seq
    is answered from it only while that seq is within it."""
    store = _seeded(tmp_path, h)
    try:
        _check(store)
        window = _windows_of(store)["a-messages"]
        for i in range(MIN_DEPTH + 5):
            store.write(WriteBatch(add=[_record(f"a-step{i}", h)]))
        assert _windows_of(store)["a-messages"] is window and len(window.entries) == window.depth and window.floor > 0
        _check(store)
        flt = SCOPES["a-messages"]
        for query in [(flt, Order.SEQ_DESC, 10, MIN_DEPTH - 5), (flt, Order.SEQ_ASC, None, 0),
                      (replace(flt, min_seq=window.floor - 1), Order.SEQ_ASC, None, 0),
                      (replace(flt, min_seq=window.floor), Order.SEQ_ASC, None, 0)]:
            assert store.query(query[0], order=query[1], limit=query[2], offset=query[3]) == _sql(store, *query)
    finally:
        store.close()


@pytest.mark.parametrize("failure", ["duplicate", "missing"])
def test_a_failed_batch_leaves_every_window_as_it_was(tmp_path: Path, h: Any, failure: str) -> None:
    """A batch that fails (a duplicate id, a missing patch target) is rolled back, and no window
    (nor an id found missing) takes in any of its adds, patches or deletes."""
    store = _seeded(tmp_path, h)
    try:
        _check(store)
        assert store.query(RecordFilter(record_ids=("a-lost",))) == []
        snapshot = {name: [e.row for e in w.entries] for name, w in _windows_of(store).items()}
        batch = WriteBatch(
            add=[_record("a-lost", h), _record("a0" if failure == "duplicate" else "a-lost2", h)],
            patch=[RecordPatch("a1", content="lost"), *([RecordPatch("missing", content="x")] if failure == "missing" else [])],
            delete=["a2"],
        )
        with pytest.raises(Conflict if failure == "duplicate" else NotFound):
            store.write(batch)
        assert {name: [e.row for e in w.entries] for name, w in _windows_of(store).items()} == snapshot
        assert store.query(RecordFilter(record_ids=("a-lost",))) == []
        _check(store)
        store.write(WriteBatch(add=[_record("a-lost", h)]))
        assert [r.record_id for r in store.query(RecordFilter(record_ids=("a-lost",)))] == ["a-lost"]
        _check(store)
    finally:
        store.close()


def test_a_reopened_store_reads_what_the_windows_answered(tmp_path: Path, h: Any) -> None:
    """The answers given from windows kept across writes are what a fresh store on the same
    file gives (its windows read from the table)."""
    store = _seeded(tmp_path, h)
    queries = [q for flt in SCOPES.values() for q in _queries(store, flt)]
    try:
        _check(store)
        store.write(WriteBatch(add=[_record("a-x", h), _record("m-x", h, kind=RecordType.GUIDELINE)]))
        store.write(WriteBatch(patch=[RecordPatch("a-x", content="later")], delete=["a3"]))
        answers = [store.query(q[0], order=q[1], limit=q[2], offset=q[3]) for q in queries]
        assert all(_windows_of(store).values())
    finally:
        store.close()
    fresh = h.open_store(tmp_path / "w.db", auto_index=False)
    try:
        assert not fresh._windows
        assert [fresh.query(q[0], order=q[1], limit=q[2], offset=q[3]) for q in queries] == answers
    finally:
        fresh.close()


def test_a_window_holds_only_its_own_scope(tmp_path: Path, h: Any) -> None:
    """Scopes are kept apart by their exact filter: a thread's window never shows another
    thread's, user's or agent's rows, nor types or statuses outside its filter, whatever is
    written after it was read."""
    store = _seeded(tmp_path, h)
    try:
        _check(store)
        store.write(WriteBatch(add=[
            _record("c-1", h, thread="c"), _record("b-u3", h, thread="b", user="u3"),
            _record("a-agent", h, agent="ag"), _record("a-fact-agent", h, kind=RecordType.FACT, agent="ag"),
            _record("a-none", h, thread=None), _record("a-invalid", h, kind=RecordType.FACT, status=RecordStatus.INVALID),
        ]))
        _check(store)
        for name, window in _windows_of(store).items():
            flt = SCOPES[name]
            for entry in window.entries:
                record = entry.decoded()
                assert flt.thread_id is ANY or record.thread_id == flt.thread_id
                assert flt.user_id is ANY or record.user_id == flt.user_id
                assert flt.agent_id is ANY or record.agent_id == flt.agent_id
                assert flt.record_types is None or record.record_type in flt.record_types
                assert flt.statuses is None or record.status in flt.statuses
        assert key_of(RecordFilter(record_types=MESSAGE_TYPES)) is None  # no scope named: no window
        assert key_of(RecordFilter(thread_id="a", metadata_filter={"n": "a1"})) is None
    finally:
        store.close()


def test_windows_are_bounded(tmp_path: Path, h: Any) -> None:
    """At most ``MAX_WINDOWS`` scopes are kept, the least recently read dropped first, each at
    most its depth."""
    store = h.open_store(tmp_path / "w.db", auto_index=False)
    try:
        store.write(WriteBatch(add=[_record(f"t{i}-{j}", h, thread=f"t{i}") for i in range(MAX_WINDOWS + 6) for j in range(3)]))
        for i in range(MAX_WINDOWS + 6):
            flt = RecordFilter(thread_id=f"t{i}")
            assert store.query(flt, order=Order.SEQ_DESC, limit=2) == _sql(store, flt, Order.SEQ_DESC, 2, 0)
            store.query(RecordFilter(thread_id="t0"), order=Order.SEQ_DESC, limit=2)  # kept in use
        kept = store._windows._kept
        assert len(kept) == MAX_WINDOWS
        assert key_of(RecordFilter(thread_id="t0")) in kept and key_of(RecordFilter(thread_id="t1")) not in kept
        assert all(len(w.entries) <= w.depth for w in kept.values())
    finally:
        store.close()


def test_ids_found_missing_are_found_once_added(tmp_path: Path, h: Any) -> None:
    """A query by id remembers the ids it found no row for (a thread's summary the card asks for
    at every call); an add of one (as literals, through Arrow, by ``bulk_add``) makes it found."""
    store = _seeded(tmp_path, h)
    ids = ("x-lit", "x-arrow", "x-bulk", "a0")
    try:
        assert [r.record_id for r in store.query(RecordFilter(record_ids=ids))] == ["a0"]
        assert {"x-lit", "x-arrow", "x-bulk"} <= store._absent_ids
        store.write(WriteBatch(add=[_record("x-lit", h)]))
        store.write(WriteBatch(add=[_record("x-arrow", h), *(_record(f"x-pad{i}", h) for i in range(10))]))
        store.bulk_add(RecordColumns(record_id=["x-bulk"], content=["z"], record_type=RecordType.FACT, timestamp=T0))
        want = _sql(store, RecordFilter(record_ids=ids), Order.SEQ_ASC, None, 0)
        assert [r.record_id for r in want] == ["a0", "x-lit", "x-arrow", "x-bulk"]
        assert store.query(RecordFilter(record_ids=ids)) == want
    finally:
        store.close()
