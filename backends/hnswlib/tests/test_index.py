"""The index's life: growth past its capacity, deletion (tombstones reused, rebuild when they
dominate), persistence across reopen, and the one-opener lock (threads and processes)."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.errors import BackendUnavailable
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch

Factory = Callable[..., HnswlibStore]


def _self_hits(store: HnswlibStore, ids: list[str], vectors: np.ndarray) -> None:
    for rid, vec in zip(ids, vectors):
        assert store.vector_search(vec, RecordFilter(), 1)[0].record.record_id == rid


def test_index_grows_past_initial_capacity(open_store: Factory) -> None:
    store = open_store(exact_threshold=0)
    assert store._index is not None
    initial = int(store._index.index.max_elements)
    vectors = clustered(initial * 3, 16, seed=1)
    ids = [f"g{i}" for i in range(len(vectors))]
    add_all(store, [make_record(r) for r in ids], vectors, batch=700)
    assert int(store._index.index.max_elements) >= len(vectors) > initial
    assert store.info().extra["index_elements"] == len(vectors)
    _self_hits(store, ids[::17], vectors[::17])


def test_deleted_slots_are_reused(open_store: Factory) -> None:
    store = open_store(exact_threshold=0, rebuild_min=10**6)
    vectors = clustered(400, 16, seed=2)
    add_all(store, [make_record(f"a{i}") for i in range(400)], vectors)
    store.write(WriteBatch(delete=[f"a{i}" for i in range(100)]))
    assert store.info().extra["index_tombstones"] == 100
    fresh = clustered(100, 16, seed=3)
    add_all(store, [make_record(f"b{i}") for i in range(100)], fresh)
    extra = store.info().extra
    assert extra["index_tombstones"] == 0 and extra["index_elements"] == 400
    _self_hits(store, [f"b{i}" for i in range(100)], fresh)
    for i in range(100):  # deleted vectors are never returned
        assert store.vector_search(vectors[i], RecordFilter(), 1)[0].record.record_id != f"a{i}"


def test_rebuild_when_tombstones_outnumber_live_vectors(open_store: Factory) -> None:
    store = open_store(exact_threshold=0, rebuild_min=50)
    vectors = clustered(300, 16, seed=4)
    add_all(store, [make_record(f"a{i}") for i in range(300)], vectors)
    store.write(WriteBatch(delete=[f"a{i}" for i in range(140)]))
    assert store.info().extra["index_tombstones"] == 140  # 140 < 160 live: no rebuild yet
    store.write(WriteBatch(delete=[f"a{i}" for i in range(140, 200)]))
    extra = store.info().extra
    assert extra["index_tombstones"] == 0 and extra["index_elements"] == 100
    assert extra["unsaved_index_changes"] == 0  # the rebuilt index was snapshotted at once
    _self_hits(store, [f"a{i}" for i in range(200, 300)], vectors[200:])


def test_vector_patch_replaces_the_indexed_vector(open_store: Factory) -> None:
    store = open_store(exact_threshold=0)
    vectors = clustered(200, 16, seed=5)
    add_all(store, [make_record(f"a{i}") for i in range(200)], vectors)
    moved = -vectors[0]
    store.write(WriteBatch(patch=[RecordPatch("a0", vector=moved)]))
    assert store.vector_search(moved, RecordFilter(), 1)[0].record.record_id == "a0"
    assert store.vector_search(vectors[0], RecordFilter(), 1)[0].record.record_id != "a0"
    store.write(WriteBatch(patch=[RecordPatch("a1", vector=None)]))
    assert all(h.record.record_id != "a1" for h in store.vector_search(vectors[1], RecordFilter(), 200))
    assert store.info().extra["vectors"] == 199


def test_reopen_keeps_everything_without_reconciling(tmp_path: Path) -> None:
    path = tmp_path / "db"
    vectors = clustered(500, 16, seed=6)
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=16)
    add_all(store, [make_record(f"a{i}", user=f"u{i % 5}") for i in range(500)], vectors)
    store.write(WriteBatch(delete=[f"a{i}" for i in range(0, 500, 10)]))
    before = [
        [h.record.record_id for h in store.vector_search(v, RecordFilter(user_id="u1"), 10)]
        for v in vectors[:20]
    ]
    store.close()
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=16)
    try:
        report = store.last_reconcile
        assert report.loaded_generation is not None and not report.rebuilt
        assert (report.added, report.deleted) == (0, 0)
        after = [
            [h.record.record_id for h in store.vector_search(v, RecordFilter(user_id="u1"), 10)]
            for v in vectors[:20]
        ]
        assert after == before
        assert store.count(RecordFilter()) == 450
    finally:
        store.close()


def test_second_opener_in_process_gets_backend_unavailable(tmp_path: Path) -> None:
    first = HnswlibStore(tmp_path / "db")
    first.open(dimension=4)
    second = HnswlibStore(tmp_path / "db")
    with pytest.raises(BackendUnavailable, match="already open"):
        second.open(dimension=4)
    first.close()
    second.open(dimension=4)  # free again once the first one closed
    second.close()


def test_second_process_gets_backend_unavailable(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    code = (
        "import sys\n"
        "from agentmemory.errors import BackendUnavailable\n"
        "from agentmemory_hnswlib import HnswlibStore\n"
        "try:\n"
        "    HnswlibStore(sys.argv[1]).open(dimension=4)\n"
        "except BackendUnavailable as exc:\n"
        "    print('unavailable:', exc)\n"
        "    sys.exit(3)\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], capture_output=True, text=True, timeout=60)
        assert done.returncode == 3, done.stderr
        assert "already open" in done.stdout
    finally:
        store.close()
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "db")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_concurrent_writers_and_readers(open_store: Factory) -> None:
    store = open_store(exact_threshold=0, checkpoint_min=50)
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            rng = np.random.default_rng(w)
            for i in range(40):
                rid = f"w{w}_{i}"
                store.write(WriteBatch(add=[NewRecord(make_record(rid, user=f"u{w}"), rng.normal(size=16))]))
                if i % 4 == 3:
                    store.write(WriteBatch(delete=[f"w{w}_{i - 1}"]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def reader() -> None:
        try:
            rng = np.random.default_rng(99)
            for _ in range(100):
                store.vector_search(rng.normal(size=16), RecordFilter(user_id="u1"), 5)
                store.keyword_search("content", RecordFilter(), 5)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert store.count(RecordFilter()) == 4 * 30
    extra = store.info().extra
    assert extra["vectors"] == 120 and extra["index_elements"] - extra["index_tombstones"] == 120


def test_checkpoint_clusters_slots_by_scope(open_store: Factory) -> None:
    """After a snapshot each user's vectors are contiguous (sequential exact scans); ids,
    labels and search results are unchanged by the reordering."""
    store = open_store(checkpoint_min=10**9)
    vectors = clustered(600, 16, seed=8)
    add_all(store, [make_record(f"a{i}", user=f"u{i % 7}", thread=f"t{i % 3}") for i in range(600)], vectors, batch=50)
    store.write(WriteBatch(delete=[f"a{i}" for i in range(0, 600, 11)]))
    flt = RecordFilter(user_id="u3")
    before = [[h.record.record_id for h in store.vector_search(v, flt, 10)] for v in vectors[:30]]
    store.checkpoint()
    cols = store._cols
    assert cols is not None
    users = cols.user[: cols.n]
    assert np.all(np.diff(users) >= 0)
    assert all(cols.slot_of[rid] == slot for slot, rid in enumerate(cols.rids))
    assert all(cols.label_slot[cols.labels[slot]] == slot for slot in range(cols.n))
    after = [[h.record.record_id for h in store.vector_search(v, flt, 10)] for v in vectors[:30]]
    assert after == before
    _self_hits(store, [f"a{i}" for i in range(1, 600, 11)], vectors[1:600:11])
