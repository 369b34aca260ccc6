"""Snapshots hold no copy of the vectors: opening reads them from SQLite's ``vectors`` rows by
label. Older generations that list a ``vectors.npy`` still open from it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

DIM = 16


def _results(store: HnswlibStore, queries: np.ndarray) -> list[list[tuple[str, float]]]:
    out = []
    for q in queries:
        for flt in (RecordFilter(), RecordFilter(user_id="u1")):
            out.append([(h.record.record_id, h.distance) for h in store.vector_search(q, flt, 10)])
    return out


def _columns_state(store: HnswlibStore) -> dict[str, np.ndarray]:
    cols = store._cols
    assert cols is not None
    order = np.argsort(cols.labels[: cols.n])
    return {"labels": cols.labels[: cols.n][order], "vectors": cols.vectors[: cols.n][order]}


def _kill(store: HnswlibStore) -> None:
    """Drop the store as a crash would: no final snapshot."""
    store._release()


def test_snapshot_files_hold_no_vectors(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=DIM)
    add_all(store, [make_record(f"a{i}") for i in range(50)], clustered(50, DIM))
    store.close()
    manifest = json.loads((tmp_path / "db" / "hnsw.manifest.json").read_text())
    assert set(manifest["files"]) == {"index", "labels", "columns"}
    assert not list((tmp_path / "db").glob("*vectors*"))


def test_open_after_changes_past_the_snapshot_reads_the_right_vectors(tmp_path: Path) -> None:
    path = tmp_path / "db"
    vectors = clustered(460, DIM, seed=3)
    store = HnswlibStore(path, checkpoint_min=10**6, checkpoint_ratio=10.0, exact_threshold=0)
    store.open(dimension=DIM)
    add_all(store, [make_record(f"a{i}", user=f"u{i % 3}") for i in range(300)], vectors[:300])
    store.checkpoint()
    # after the snapshot: deletes, new vectors for old records, vectors dropped, new records
    store.write(WriteBatch(
        delete=[f"a{i}" for i in range(0, 300, 7)],
        patch=[RecordPatch(f"a{i}", vector=vectors[400 + i]) for i in range(1, 60, 5)]
        + [RecordPatch("a2", vector=None)],
    ))
    add_all(store, [make_record(f"b{i}", user="u1") for i in range(100)], vectors[300:400])
    want_state, want = _columns_state(store), _results(store, vectors[:15])
    _kill(store)

    again = HnswlibStore(path, exact_threshold=0)
    again.open(dimension=DIM)
    try:
        assert again.last_reconcile.source == "snapshot" and again.last_reconcile.deleted > 0
        got_state = _columns_state(again)
        assert np.array_equal(got_state["labels"], want_state["labels"])
        assert np.array_equal(got_state["vectors"], want_state["vectors"])
        assert _results(again, vectors[:15]) == want
    finally:
        again.close()


def test_a_snapshot_with_vectors_npy_still_opens_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a store written by the previous version looks like: the generation lists
    ``vectors`` (the unit vectors in slot order). It opens from the snapshot, using that file."""
    path = tmp_path / "db"
    vectors = clustered(200, DIM, seed=4)
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=DIM)
    add_all(store, [make_record(f"a{i}", user=f"u{i % 3}") for i in range(200)], vectors)
    store.close()
    store.open(dimension=DIM)
    want_state, want = _columns_state(store), _results(store, vectors[:10])
    cols = store._cols
    assert cols is not None
    slot_vectors = cols.vectors[: cols.n].copy()
    store.close()
    manifest_path = path / "hnsw.manifest.json"
    manifest = json.loads(manifest_path.read_text())
    name = f"hnsw.{manifest['generation']}.vectors.npy"
    np.save(path / name, slot_vectors)
    manifest["files"]["vectors"] = name
    manifest_path.write_text(json.dumps(manifest))

    def no_sqlite(*args: object) -> None:
        raise AssertionError("vectors read from SQLite although the snapshot has them")

    monkeypatch.setattr(HnswlibStore, "_fill_vectors", staticmethod(no_sqlite))
    old = HnswlibStore(path, exact_threshold=0)
    old.open(dimension=DIM)
    try:
        assert old.last_reconcile.source == "snapshot"
        got_state = _columns_state(old)
        assert np.array_equal(got_state["vectors"], want_state["vectors"])
        assert _results(old, vectors[:10]) == want
        monkeypatch.undo()
        old.checkpoint()
    finally:
        old.close()
    # the next generation is written without the vectors file, and the old one is gone
    assert not list(path.glob("*vectors*"))
    again = HnswlibStore(path, exact_threshold=0)
    again.open(dimension=DIM)
    try:
        assert again.last_reconcile.source == "snapshot"
        assert _results(again, vectors[:10]) == want
    finally:
        again.close()
