"""A thread's rows of some types are read through the (thread, type, seq) index, which stores
written before it existed get on open: the card's memories of a long thread are found without
walking every message of it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import make_record

from agentmemory.records import MEMORY_TYPES, RecordType
from agentmemory.spi import NewRecord, Order, RecordFilter, WriteBatch

DIM = 8


def fill(store: HnswlibStore) -> None:
    rng = np.random.default_rng(0)
    records = [make_record(f"m{i}", thread="t", type=RecordType.MESSAGE) for i in range(300)]
    records.insert(150, make_record("fact-1", thread="t", type=RecordType.FACT))
    records.append(make_record("pref-1", thread="t", type=RecordType.PREFERENCE))
    records.append(make_record("other", thread="t2", type=RecordType.FACT))
    store.write(WriteBatch(add=[NewRecord(r, rng.standard_normal(DIM).astype(np.float32)) for r in records]))


def plan(directory: Path, flt_sql: str) -> str:
    with sqlite3.connect(directory / "records.sqlite3") as con:
        return " ".join(str(row[-1]) for row in con.execute("EXPLAIN QUERY PLAN " + flt_sql))


def test_thread_and_types_read_through_the_index_made_on_open(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "s")
    store.open(dimension=DIM)
    fill(store)
    memories = RecordFilter(record_types=frozenset(MEMORY_TYPES), thread_id="t")
    expected = [r.record_id for r in store.query(memories, order=Order.SEQ_DESC, limit=20)]
    assert expected == ["pref-1", "fact-1"]
    store.close()
    with sqlite3.connect(tmp_path / "s" / "records.sqlite3") as con:  # a store from before the index
        con.execute("DROP INDEX records_thread_type")
    store = HnswlibStore(tmp_path / "s")
    store.open(dimension=DIM)
    try:
        assert [r.record_id for r in store.query(memories, order=Order.SEQ_DESC, limit=20)] == expected
        assert [r.record_id for r in store.query(memories, order=Order.SEQ_ASC)] == expected[::-1]
        messages = store.query(RecordFilter(record_types=frozenset({RecordType.MESSAGE}), thread_id="t"), order=Order.SEQ_DESC, limit=3)
        assert [r.record_id for r in messages] == ["m299", "m298", "m297"]
    finally:
        store.close()
    sql = "SELECT record_id FROM records INDEXED BY records_thread_type WHERE thread_id = 't' AND record_type IN ('fact', 'preference')"
    assert "records_thread_type" in plan(tmp_path / "s", sql)  # the index is back
