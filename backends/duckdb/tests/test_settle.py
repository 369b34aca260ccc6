"""Snapshot index builds across reopen (and, with the SPI hook, ``index_thresholds`` and
``settle``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from agentmemory_duckdb import DuckDBStore

from agentmemory.spi import RecordFilter, WriteBatch

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
