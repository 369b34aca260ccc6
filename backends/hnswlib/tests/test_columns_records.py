"""Search hits are built from the in-memory columns, not read from SQLite: after every kind of
write, a checkpoint and a reopen (from the snapshot, from an older snapshot without the record
fields, from the records), a vector search returns each record exactly as SQLite holds it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore, _sql
from hnswlib_testutil import T0, make_record

from agentmemory.records import Record, RecordStatus, RecordType
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

DIM = 4
ALL = RecordFilter()
PLUS2 = timezone(timedelta(hours=2))


def _vec(i: int) -> np.ndarray:
    return np.array([1.0, 0.1 * i, 0.01 * i * i, 0.5], np.float32)


def _records() -> list[Record]:
    """Records that differ in every field a column row carries."""
    return [
        make_record("m1", content="apple pie", metadata={"k": 1}),
        make_record("m2", user=None, agent="bot", content="pear tart",
                    expires=datetime(2099, 1, 1, tzinfo=PLUS2)),
        make_record("c1", thread="t1", type=RecordType.MESSAGE, content="hello there"),
        Record(record_id="c2", record_type=RecordType.MESSAGE, content="a reply", user_id="u",
               thread_id="t1", role="assistant", timestamp=datetime(2025, 3, 1, 9, 30, tzinfo=PLUS2),
               created_at=T0, metadata={"nested": {"x": [1, 2]}}),
    ]


def _sqlite_rows(store: HnswlibStore) -> dict[str, tuple[object, ...]]:
    with store._reading() as con:
        rows = con.execute(
            f"SELECT {_sql.RECORD_COLUMNS} FROM records WHERE record_id IN (SELECT record_id FROM vectors)"
        ).fetchall()
    return {row[0]: tuple(row) for row in rows}


def _check(store: HnswlibStore) -> None:
    """Every column row equals its SQLite row, and a vector search (nothing cached) returns
    each record equal to SQLite's, field for field."""
    cols = store._cols
    assert cols is not None
    rows = _sqlite_rows(store)
    assert dict(zip(cols.rids, cols.rows(list(range(cols.n))))) == rows
    store._records.clear()
    hits = store.vector_search(_vec(0), ALL, 50)
    assert {h.record.record_id for h in hits} == set(rows)
    for hit in hits:
        want = _sql.row_to_record(rows[hit.record.record_id])
        assert hit.record == want
        assert hit.record.timestamp.utcoffset() == want.timestamp.utcoffset()


@pytest.fixture()
def store(tmp_path: Path):
    s = HnswlibStore(tmp_path / "m")
    s.open(dimension=DIM)
    s.write(WriteBatch(add=[NewRecord(rec, _vec(i)) for i, rec in enumerate(_records())]))
    yield s
    if s.is_open:
        s.close()


def test_rows_after_inserts(store: HnswlibStore) -> None:
    _check(store)


@pytest.mark.parametrize(
    "patch",
    [
        RecordPatch(record_id="m1", content="apple crumble"),
        RecordPatch(record_id="m1", metadata={"k": 2, "new": "yes"}),
        RecordPatch(record_id="c2", status=RecordStatus.INVALID),
        RecordPatch(record_id="c2", timestamp=datetime(2026, 1, 1, tzinfo=PLUS2)),
        RecordPatch(record_id="m2", expires_at=None),
        RecordPatch(record_id="m1", expires_at=datetime(2098, 5, 5, 5, 5, 5, 5, tzinfo=PLUS2)),
        RecordPatch(record_id="c1", content="hello again", vector=_vec(7)),
    ],
    ids=["content", "metadata", "status", "timestamp", "expiry-cleared", "expiry-set", "content+vector"],
)
def test_search_right_after_a_patch_returns_the_patched_record(store: HnswlibStore, patch: RecordPatch) -> None:
    store.vector_search(_vec(0), ALL, 50)  # cached before the write: the write must drop it
    store.write(WriteBatch(patch=[patch]))
    hit = next(h for h in store.vector_search(_vec(0), ALL, 50) if h.record.record_id == patch.record_id)
    fresh = store.query(RecordFilter(record_ids=(patch.record_id,)))[0]
    assert hit.record == fresh
    _check(store)


def test_delete_and_readd_with_other_fields(store: HnswlibStore) -> None:
    store.write(WriteBatch(delete=["m1", "c1"]))
    _check(store)
    store.write(WriteBatch(add=[NewRecord(make_record("m1", user="v", thread="t9", content="new m1"), _vec(3))]))
    hit = next(h for h in store.vector_search(_vec(0), ALL, 50) if h.record.record_id == "m1")
    assert (hit.record.content, hit.record.user_id, hit.record.thread_id) == ("new m1", "v", "t9")
    _check(store)


def test_checkpoint_cluster_and_reopen_from_the_snapshot(store: HnswlibStore, tmp_path: Path) -> None:
    store.write(WriteBatch(delete=["m2"]))
    store.checkpoint()
    _check(store)
    store.close()
    again = HnswlibStore(tmp_path / "m")
    again.open(dimension=DIM, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    try:
        assert again.last_reconcile.source == "snapshot"
        _check(again)
    finally:
        again.close()


def test_an_older_snapshot_without_record_fields_opens_from_the_records(store: HnswlibStore, tmp_path: Path) -> None:
    store.checkpoint()
    store.close()
    directory = tmp_path / "m"
    manifest = json.loads((directory / "hnsw.manifest.json").read_text())
    path = directory / manifest["files"]["columns"]
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files
                  if name not in ("content", "role", "timestamp", "created_at", "expires_at")}
    with open(path, "wb") as fh:
        np.savez(fh, allow_pickle=False, **arrays)
    again = HnswlibStore(directory)
    again.open(dimension=DIM, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    try:
        assert again.last_reconcile.source == "records"
        assert again.last_reconcile.rebuilt is False  # the snapshot's index was still used
        _check(again)
    finally:
        again.close()
