"""``index_thresholds`` and ``settle`` (the SPI hook of the conformance suite's index tier): the
snapshot indexes exist after ``settle`` exactly when the store is past their thresholds, DuckDB
really holds an HNSW index and an fts index then, the planner's index path uses them, and
changes made after a build are folded in by the next ``settle``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
from agentmemory_duckdb import DuckDBStore

from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

DIM = 4


def _fill(store: DuckDBStore, h: Any, start: int, n: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed + start)
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    words = ["apple", "banana", "cherry", "invoice", "travel"]
    store.write(WriteBatch(add=[
        h.new(f"r{start + i:05d}", vectors[i], content=f"{words[i % 5]} {words[(i * 3) % 5]} note {i}", user_id=f"u{i % 3}")
        for i in range(n)
    ]))
    return vectors


def _objects(store: DuckDBStore) -> tuple[list[str], list[str]]:
    """(HNSW index definitions, fts schemas) present in the file."""
    con = store._conn()
    hnsw = [sql for (sql,) in con.execute("SELECT sql FROM duckdb_indexes() WHERE sql ILIKE '%USING HNSW%'").fetchall()]
    fts = [name for (name,) in con.execute("SELECT schema_name FROM duckdb_schemas() WHERE schema_name LIKE 'fts_main_am_fts_%'").fetchall()]
    return hnsw, fts


def test_thresholds_are_the_options(tmp_path: Path) -> None:
    assert DuckDBStore(tmp_path / "a.db").index_thresholds() == {"vector": 20_000, "keyword": 1_000}
    store = DuckDBStore(tmp_path / "b.db", vector_index_min_rows="300", fts_min_rows=50)
    assert store.index_thresholds() == {"vector": 300, "keyword": 50}
    assert DuckDBStore(tmp_path / "c.db", vector_index=False).index_thresholds() == {"keyword": 1_000}


def test_settle_builds_only_past_the_thresholds_and_the_indexes_exist(tmp_path: Path, h: Any) -> None:
    """Below both thresholds ``settle`` builds nothing (``build_indexes`` would); past the
    keyword one the fts index exists; past both the HNSW index exists too, a vector query
    goes through it (EXPLAIN shows ``HNSW_INDEX_SCAN``; the planner reports ``index``)."""
    store = h.open_store(tmp_path / "m.db", auto_index=False, vector_index_min_rows=300, fts_min_rows=100,
                         planner="index", exact_max_rows=0)
    try:
        _fill(store, h, 0, 60)
        assert store.settle() == {"vector": False, "keyword": False}
        assert _objects(store) == ([], [])
        _fill(store, h, 60, 90)
        assert store.settle() == {"vector": False, "keyword": True}
        hnsw, fts = _objects(store)
        assert hnsw == [] and len(fts) == 1
        vectors = _fill(store, h, 150, 200)
        assert store.settle() == {"vector": True, "keyword": True}
        hnsw, fts = _objects(store)
        assert len(hnsw) == 1 and len(fts) == 1
        table = store.info().extra["vector_index"]
        assert table == {"rows": 350, "watermark": 350}
        snapshot = store._vidx.table  # type: ignore[union-attr]
        plan = store._conn().execute(
            f"EXPLAIN SELECT rid, array_cosine_distance(vec, '[1, 0, 0, 0]'::FLOAT[{DIM}]) AS d FROM {snapshot} ORDER BY d LIMIT 10"
        ).fetchall()
        assert "HNSW_INDEX_SCAN" in "\n".join(str(cell) for row in plan for cell in row)
        hits = store.vector_search(vectors[5], RecordFilter(), 5)
        assert hits[0].record.record_id == "r00155"
        assert store.last_plan is not None and store.last_plan.strategy == "index" and not store.last_plan.fallback
        hits = store.keyword_search("invoice", RecordFilter(user_id="u1"), 5)
        assert hits and all(x.record.user_id == "u1" for x in hits)
    finally:
        store.close()


def test_settle_folds_in_changes_and_is_idempotent(tmp_path: Path, h: Any) -> None:
    """A change after the build makes ``settle`` rebuild (new snapshot tables, watermark past the
    change, nothing stale); with nothing changed ``settle`` keeps the same snapshots."""
    store = h.open_store(tmp_path / "m.db", auto_index=False, vector_index_min_rows=100, fts_min_rows=100)
    try:
        _fill(store, h, 0, 150)
        assert store.settle() == {"vector": True, "keyword": True}
        first = (store._vidx, store._fts)
        assert store.settle() == {"vector": True, "keyword": True}
        assert (store._vidx, store._fts) == first
        store.write(WriteBatch(patch=[RecordPatch("r00003", content="zebra")], delete=["r00004"]))
        assert store.settle() == {"vector": True, "keyword": True}
        assert store._vidx is not None and store._fts is not None
        assert store._vidx.table != first[0].table and store._fts.table != first[1].table  # type: ignore[union-attr]
        # the watermark is the write clock the copy reflects: the trailing delete (152) included
        assert store._vidx.rows == 149 and store._vidx.watermark == store._fts.watermark == 152
        assert [x.record.record_id for x in store.keyword_search("zebra", RecordFilter(), 3)] == ["r00003"]
        assert "r00004" not in [x.record.record_id for x in store.vector_search(np.ones(DIM, np.float32), RecordFilter(), 200)]
        assert store._conn().execute("SELECT count(*) FROM am_stale").fetchone() == (0,)
    finally:
        store.close()


def test_reopen_after_a_trailing_delete_needs_no_rebuild(tmp_path: Path, h: Any) -> None:
    """Regression: with the watermark taken as the largest ``ver`` copied, the ``am_stale``
    entry of a delete made just before a build stayed above it for good, so every open counted
    a change (queries kept looking up stale ids and scanning the delta) and every
    ``build_indexes`` (or ``settle``) rebuilt both indexes."""
    path = tmp_path / "m.db"
    store = h.open_store(path, auto_index=False)
    _fill(store, h, 0, 50)
    store.build_indexes()
    store.write(WriteBatch(delete=["r00003"]))
    assert store.build_indexes() == {"vector": True, "fts": True}
    built = (store._vidx, store._fts)
    assert store._conn().execute("SELECT count(*) FROM am_stale").fetchone() == (0,)
    store.close()
    for _ in range(2):
        store = h.open_store(path, auto_index=False)
        try:
            assert (store._vec_changes, store._doc_changes) == (0, 0)
            assert store.build_indexes() == {"vector": False, "fts": False}
            assert (store._vidx, store._fts) == built
            assert "r00003" not in [x.record.record_id for x in store.keyword_search("note", RecordFilter(), 100)]
        finally:
            store.close()


def test_settle_waits_for_the_background_builder_and_async_twin(tmp_path: Path, h: Any) -> None:
    store = h.open_store(tmp_path / "m.db", vector_index_min_rows=100, fts_min_rows=100)
    try:
        _fill(store, h, 0, 150)  # due: the background builder starts
        assert asyncio.run(store.asettle()) == {"vector": True, "keyword": True}
        assert store._builder is None or not store._builder.is_alive()
        hnsw, fts = _objects(store)
        assert len(hnsw) == 1 and len(fts) == 1
    finally:
        store.close()


def test_read_only_store_reports_without_building(tmp_path: Path, h: Any) -> None:
    path = tmp_path / "m.db"
    store = h.open_store(path, auto_index=False, vector_index_min_rows=100, fts_min_rows=10)
    _fill(store, h, 0, 50)
    assert store.settle() == {"vector": False, "keyword": True}
    store.close()
    reader = DuckDBStore(path, read_only=True, vector_index_min_rows=10, fts_min_rows=10)
    reader.open(dimension=DIM)
    try:
        assert reader.settle() == {"vector": False, "keyword": True}
    finally:
        reader.close()


def test_deferring_indexes_holds_background_builds_until_the_block_ends(tmp_path: Path, h: Any) -> None:
    """An import writes inside ``deferring_indexes``: past both thresholds no background build
    starts (no index is rebuilt again and again as the store grows); after the block the next
    write starts the due builds (not the block's end: a closing process would wait for them),
    and searches answer the same throughout."""
    store = h.open_store(tmp_path / "d.db", vector_index_min_rows=300, fts_min_rows=100)
    try:
        with store.deferring_indexes():
            for start in range(0, 600, 100):
                _fill(store, h, start, 100)
                assert store._builder is None, "no background build while deferred"
            assert _objects(store) == ([], [])
        assert store._builder is None and _objects(store) == ([], [])
        _fill(store, h, 600, 1)
        before = [x.record.record_id for x in store.keyword_search("apple invoice", RecordFilter(), 10)]
        assert store.wait_for_indexes(timeout=120)
        hnsw, fts = _objects(store)
        assert len(hnsw) == 1 and len(fts) == 1, "the held-back builds ran after the block"
        assert [x.record.record_id for x in store.keyword_search("apple invoice", RecordFilter(), 10)] == before
    finally:
        store.close()


def test_closing_inside_deferring_indexes_does_not_hold_builds_after_reopen(tmp_path: Path, h: Any) -> None:
    """A block that closes the store (a migration's process) still ends its hold: the store
    reopened afterwards starts the due background builds again at its first search (the hold
    was left at 1 once)."""
    path = tmp_path / "d.db"
    store = h.open_store(path, vector_index_min_rows=300, fts_min_rows=100)
    try:
        with store.deferring_indexes():
            _fill(store, h, 0, 400)
            assert store._builder is None, "no background build while deferred"
            store.close()
        assert store._deferred == 0
        store.open(dimension=DIM)
        assert store._builder is None, "open alone starts no build"
        store.vector_search(np.ones(DIM, dtype=np.float32), RecordFilter(), 5)
        assert store.wait_for_indexes(timeout=120)
        hnsw, fts = _objects(store)
        assert len(hnsw) == 1 and len(fts) == 1, "the reopened store built the held-back indexes"
    finally:
        store.close()
