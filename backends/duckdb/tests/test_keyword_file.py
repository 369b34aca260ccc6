"""The BM25 snapshot's postings are kept beside the database, so a reopened store's first keyword
search reads them instead of rebuilding them from the fts tables; a file of another snapshot, a
torn or foreign one, is never used (the search rebuilds and answers the same)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

V = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
WORDS = ["invoice", "reconciliation", "maya", "workflow", "step", "fails", "export", "csv", "ünïcode"]
QUERIES = ["invoice workflow", "maya csv", "ünïcode fails", "export"]
SCOPES = [RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(user_id="u2", thread_id="t1"),
          RecordFilter(user_id="u1", metadata_filter={"n": 3})]


def _hits(store: DuckDBStore) -> list[list[tuple[str, float]]]:
    return [[(h.record.record_id, round(float(h.score or 0), 9)) for h in store.keyword_search(q, f, 10)]
            for q in QUERIES for f in SCOPES]


def _fill(store: DuckDBStore, h: Any, n: int = 40, start: int = 0) -> None:
    store.write(WriteBatch(add=[
        h.new(f"d{i:03d}", V, " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(1 + i % 5)),
              user_id="u1" if i % 2 else "u2", thread_id=f"t{i % 3}", metadata={"n": i % 4})
        for i in range(start, start + n)
    ]))


def test_reopen_reads_the_saved_postings_and_answers_the_same(db_path: Path, h: Any, rebuilds: list[str]) -> None:
    store = h.open_store(db_path, auto_index=False)
    _fill(store, h)
    assert store.build_indexes()["fts"]
    want = _hits(store)
    file = store.keyword_index_file
    store.close()
    assert file is not None and file.exists()
    rebuilds.clear()
    again = h.open_store(db_path, auto_index=False)
    try:
        assert _hits(again) == want
        assert rebuilds == [], "the first keyword search after a reopen rebuilt the postings"
        # writes after the reopen: the delta and stale rows are merged with the loaded postings
        again.write(WriteBatch(patch=[RecordPatch("d001", content="maya maya csv")], delete=["d002"]))
        _fill(again, h, n=5, start=100)
        fresh = _hits(again)
        assert "d002" not in {rid for hits in fresh for rid, _ in hits}
        assert rebuilds == []
    finally:
        again.close()
    # the same writes on a store that never saved postings answer alike
    shutil.copy(db_path, db_path.with_name("copy.db"))
    file.unlink()
    other = h.open_store(db_path, auto_index=False)
    try:
        assert _hits(other) == fresh
        assert rebuilds, "without the file the postings are rebuilt"
        assert file.exists(), "a rebuild saves the postings for the next open"
    finally:
        other.close()


@pytest.mark.parametrize("damage", ["garbage", "truncated", "other snapshot"])
def test_a_file_of_another_snapshot_or_torn_is_not_used(db_path: Path, h: Any, rebuilds: list[str], damage: str) -> None:
    store = h.open_store(db_path, auto_index=False)
    _fill(store, h)
    store.build_indexes()
    file = store.keyword_index_file
    assert file is not None
    old = file.read_bytes()
    _fill(store, h, n=10, start=50)
    store.write(WriteBatch(delete=["d003"]))
    store.build_indexes()
    want = _hits(store)
    store.close()
    if damage == "garbage":
        file.write_bytes(b"not an npz file")
    elif damage == "truncated":
        file.write_bytes(file.read_bytes()[: len(file.read_bytes()) // 2])
    else:
        file.write_bytes(old)  # the first snapshot's postings: d003 in them, d05x not
    rebuilds.clear()
    again = h.open_store(db_path, auto_index=False)
    try:
        assert _hits(again) == want
        assert rebuilds, "a damaged or foreign file must not be used"
    finally:
        again.close()


def test_read_only_open_uses_the_file_and_never_writes_it(db_path: Path, h: Any, rebuilds: list[str]) -> None:
    store = h.open_store(db_path, auto_index=False)
    _fill(store, h)
    store.build_indexes()
    want = _hits(store)
    store.close()
    file = store.keyword_index_file
    assert file is not None
    stamp = file.stat().st_mtime_ns
    rebuilds.clear()
    ro = h.open_store(db_path, read_only=True)
    try:
        assert _hits(ro) == want and rebuilds == []
    finally:
        ro.close()
    file.unlink()
    ro = h.open_store(db_path, read_only=True)
    try:
        assert _hits(ro) == want and rebuilds
    finally:
        ro.close()
    assert not file.exists(), "a read-only store wrote beside the database"
    assert stamp > 0


def test_a_file_from_another_copy_of_the_database_is_not_used(tmp_path: Path, h: Any, rebuilds: list[str]) -> None:
    """Two copies of one database that went on apart can hold snapshots of the same name: the
    file names its snapshot's watermark and rows too, so one copy never reads the other's."""
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    store = h.open_store(a, auto_index=False)
    _fill(store, h)
    store.build_indexes()
    store.close()
    shutil.copy(a, b)
    for path, extra in ((a, 10), (b, 3)):
        s = h.open_store(path, auto_index=False)
        _fill(s, h, n=extra, start=200)
        s.build_indexes()
        s.close()
    sa, sb = DuckDBStore(a), DuckDBStore(b)
    assert sa.keyword_index_file is not None and sb.keyword_index_file is not None
    shutil.copy(sa.keyword_index_file, sb.keyword_index_file)  # a's postings beside b
    rebuilds.clear()
    again = h.open_store(b, auto_index=False)
    try:
        assert again.info().extra["fts_index"]["rows"] == 43
        assert {rid for hits in _hits(again) for rid, _ in hits} <= {f"d{i:03d}" for i in (*range(40), *range(200, 203))}
        assert rebuilds, "another copy's postings were used"
    finally:
        again.close()
