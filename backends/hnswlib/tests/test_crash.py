"""Crash safety: a child process ingesting batches is killed with SIGKILL; reopening must show
every committed batch (and at most the one in flight, whole), with the index reconciled: missing
vectors re-added, deleted ones gone. Also damaged or missing snapshot files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import hnswlib_crash_child as child
import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.records import RecordStatus
from agentmemory.spi import RecordFilter, WriteBatch

CHILD = Path(child.__file__)


def _run_and_kill(path: Path, mode: str, kill_after: int) -> int:
    """Start the child, SIGKILL it once it reported ``kill_after`` committed batches; return
    the last batch it reported."""
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(path), mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    last = -1
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            last = json.loads(line)["batch"]
            if last >= kill_after:
                os.kill(proc.pid, signal.SIGKILL)
                break
            if time.monotonic() > deadline:
                pytest.fail("child too slow")
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    stderr = proc.stderr.read() if proc.stderr else ""
    assert proc.returncode == -signal.SIGKILL, f"child ended on its own ({proc.returncode}): {stderr}"
    return last


def _expected(applied: int) -> dict[str, np.ndarray]:
    state: dict[str, np.ndarray] = {}
    for i in range(applied + 1):
        _, vectors, deletes = child.batch(i)
        state.update(vectors)
        for rid in deletes:
            del state[rid]
    return state


def _check_store(store: HnswlibStore, last_reported: int) -> dict[str, np.ndarray]:
    ids = {r.record_id for r in store.query(RecordFilter())}
    in_flight = f"r{last_reported + 1}_0" in ids
    assert f"r{last_reported + 2}_0" not in ids
    applied = last_reported + (1 if in_flight else 0)
    expected = _expected(applied)
    assert ids == set(expected), "committed records lost or uncommitted ones present"
    invalid = {f"r{i - 6}_4": i for i in range(child.SNAPSHOT_AFTER + 1, applied + 1)}
    for rec in store.query(RecordFilter()):
        assert (rec.status is RecordStatus.INVALID) == (rec.record_id in invalid)
        assert rec.metadata == ({"patched_in": invalid[rec.record_id]} if rec.record_id in invalid else {})
    only_invalid = RecordFilter(statuses=frozenset({RecordStatus.INVALID}))
    for rid in invalid:  # the in-memory scope columns caught up with the status patches
        assert store.vector_search(expected[rid], only_invalid, 1)[0].record.record_id == rid
        assert store.vector_search(expected[rid], RecordFilter(metadata_filter={"patched_in": invalid[rid]}), 5)[
            0
        ].record.record_id == rid
    extra = store.info().extra
    assert extra["vectors"] == len(expected)
    assert extra["index_elements"] - extra["index_tombstones"] == len(expected)
    for rid, vec in expected.items():  # every vector is found through the graph, as itself
        hits = store.vector_search(vec, RecordFilter(), 1)
        assert hits[0].record.record_id == rid
        assert hits[0].distance is not None and hits[0].distance < 1e-5
    patched = store.keyword_search("patched", RecordFilter(), 1000)
    assert {h.record.record_id for h in patched} == {
        r.record_id for r in store.query(RecordFilter()) if r.content.startswith("patched")
    }
    return expected


@pytest.mark.parametrize("mode", ["snapshot-once", "snapshot-often"])
def test_sigkill_mid_ingest_loses_no_committed_record(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "db"
    last = _run_and_kill(path, mode, kill_after=14)
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=child.DIM)
    try:
        report = store.last_reconcile
        if mode == "snapshot-once":
            # The only snapshot was taken after batch 5: later adds must be re-added and the
            # deletes/patches of its vectors marked deleted.
            assert report.loaded_generation is not None and not report.rebuilt
            assert report.source == "snapshot"
            assert report.added > 0 and report.deleted > 0
        _check_store(store, last)
    finally:
        store.close()
    again = HnswlibStore(path, exact_threshold=0)
    again.open(dimension=child.DIM)
    try:
        assert again.last_reconcile.added == 0 and again.last_reconcile.deleted == 0
        _check_store(again, last)
    finally:
        again.close()


def _populated(path: Path) -> tuple[list[str], np.ndarray]:
    vectors = clustered(300, 16, seed=11)
    records = [make_record(f"r{i}") for i in range(300)]
    store = HnswlibStore(path)
    store.open(dimension=16)
    add_all(store, records, vectors, batch=100)
    store.write(WriteBatch(delete=[f"r{i}" for i in range(0, 300, 3)]))
    store.close()
    return [r.record_id for r in records], vectors


def _assert_searchable(path: Path, ids: list[str], vectors: np.ndarray) -> HnswlibStore:
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=16)
    for i, rid in enumerate(ids):
        hits = store.vector_search(vectors[i], RecordFilter(), 1)
        if i % 3 == 0:
            assert hits[0].record.record_id != rid
        else:
            assert hits[0].record.record_id == rid
    return store


def test_missing_snapshot_files_rebuild_from_records(tmp_path: Path) -> None:
    path = tmp_path / "db"
    ids, vectors = _populated(path)
    for f in path.glob("hnsw.*"):
        f.unlink()
    store = _assert_searchable(path, ids, vectors)
    assert store.last_reconcile.rebuilt
    store.close()


def test_corrupt_snapshot_rebuilds_from_records(tmp_path: Path) -> None:
    path = tmp_path / "db"
    ids, vectors = _populated(path)
    manifest = json.loads((path / "hnsw.manifest.json").read_text())
    index_file = path / manifest["files"]["index"]
    index_file.write_bytes(index_file.read_bytes()[:1000])  # truncated, as by a crash mid-copy
    store = _assert_searchable(path, ids, vectors)
    assert store.last_reconcile.rebuilt
    store.close()


def test_damaged_column_snapshot_falls_back_to_the_records(tmp_path: Path) -> None:
    """The columns come from SQLite, the index snapshot is still used (no rebuild)."""
    path = tmp_path / "db"
    ids, vectors = _populated(path)
    manifest = json.loads((path / "hnsw.manifest.json").read_text())
    (path / manifest["files"]["columns"]).write_bytes(b"not a zip file")
    store = _assert_searchable(path, ids, vectors)
    report = store.last_reconcile
    assert report.source == "records" and not report.rebuilt and (report.added, report.deleted) == (0, 0)
    store.close()
    again = _assert_searchable(path, ids, vectors)  # the close wrote a good snapshot again
    assert again.last_reconcile.source == "snapshot"
    again.close()


def test_half_written_next_generation_is_ignored(tmp_path: Path) -> None:
    """A crash while saving leaves files of generation g+1 and a temp manifest; generation g
    stays in force and the strays are removed."""
    path = tmp_path / "db"
    ids, vectors = _populated(path)
    gen = json.loads((path / "hnsw.manifest.json").read_text())["generation"]
    (path / f"hnsw.{gen + 1}.bin").write_bytes(b"\x00" * 100)
    (path / "hnsw.manifest.json.deadbeef.tmp").write_text("{")
    store = _assert_searchable(path, ids, vectors)
    assert store.last_reconcile.loaded_generation == gen and not store.last_reconcile.rebuilt
    assert not (path / f"hnsw.{gen + 1}.bin").exists()
    assert not list(path.glob("*.tmp"))
    store.close()


def test_snapshot_of_another_store_is_not_trusted(tmp_path: Path) -> None:
    """Labels restart when the database is recreated; a leftover index must not be reused."""
    path = tmp_path / "db"
    _populated(path)
    manifest = (path / "hnsw.manifest.json").read_text()
    files = {f.name: f.read_bytes() for f in path.glob("hnsw.*")}
    store = HnswlibStore(path)
    from agentmemory.spi import SchemaPolicy

    store.open(dimension=16, schema_policy=SchemaPolicy.RECREATE)
    vectors = clustered(50, 16, seed=99)
    add_all(store, [make_record(f"n{i}") for i in range(50)], vectors)
    store.close()
    for name, data in files.items():  # put the old store's snapshot back
        (path / name).write_bytes(data)
    (path / "hnsw.manifest.json").write_text(manifest)
    store = HnswlibStore(path, exact_threshold=0)
    store.open(dimension=16)
    try:
        assert store.last_reconcile.rebuilt
        for i in range(50):
            assert store.vector_search(vectors[i], RecordFilter(), 1)[0].record.record_id == f"n{i}"
    finally:
        store.close()
