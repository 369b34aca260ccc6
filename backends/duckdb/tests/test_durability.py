"""Durability and sharing: SIGKILL in the middle of an ingest (and of an index build) loses no
committed batch and leaves no partial one; a second process gets a clear error; threads and
asyncio tasks share one store without losing or duplicating records."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import BackendUnavailable
from agentmemory.spi import RecordFilter, WriteBatch

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL semantics")

DIM = 8
BATCH = 200

_CHILD = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timezone
    import numpy as np
    from agentmemory.records import Record
    from agentmemory.spi import NewRecord, WriteBatch
    from agentmemory_duckdb import DuckDBStore

    T = datetime(2025, 1, 1, tzinfo=timezone.utc)

    def vec(b, i):
        return np.random.default_rng(b * 100_000 + i).standard_normal(8).astype(np.float32)

    class HeldMidBuild(DuckDBStore):
        def _after_snapshot(self, job):  # a snapshot written, not yet current: the kill lands here
            print("snapshotted", flush=True)
            import time
            time.sleep(600)

    path, mode, threshold = sys.argv[1], sys.argv[2], sys.argv[3]
    store = (HeldMidBuild if mode == "build" else DuckDBStore)(
        path, vector_index_min_rows=300, fts_min_rows=300, rebuild_fraction=0.1, checkpoint_threshold=threshold)
    store.open(dimension=8)
    if mode == "build":
        print("building", flush=True)
        store.build_indexes(force=True)
        print("built", flush=True)
        sys.exit(0)
    b = 0
    while True:
        store.write(WriteBatch(add=[
            NewRecord(Record(record_id=f"b{b:04d}_{i:03d}", record_type="message", content=f"batch {b} tok{b}x{i}",
                             user_id=f"u{i % 3}", timestamp=T, created_at=T), vec(b, i))
            for i in range(200)
        ]))
        print(b, flush=True)
        b += 1
    """
)


def _vec(b: int, i: int) -> np.ndarray:
    return np.random.default_rng(b * 100_000 + i).standard_normal(DIM).astype(np.float32)


def _spawn(path: Path, mode: str, checkpoint_threshold: str = "256MB") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), mode, checkpoint_threshold],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _check_committed(path: Path, last: int) -> None:
    """Every batch up to ``last`` is whole, the next one is whole or absent, and all of it is
    searchable (vector and keyword), before and after an index rebuild."""
    store = DuckDBStore(path, auto_index=False, planner="index", exact_max_rows=0)
    store.open(dimension=DIM)
    try:
        records = store.query(RecordFilter())
        per_batch: dict[int, int] = {}
        for rec in records:
            per_batch[int(rec.record_id[1:5])] = per_batch.get(int(rec.record_id[1:5]), 0) + 1
        for b in range(last + 1):
            assert per_batch.get(b) == BATCH, f"committed batch {b} has {per_batch.get(b)} records"
        assert per_batch.get(last + 1, 0) in (0, BATCH), "a batch was partially written"
        assert set(per_batch) <= set(range(last + 2))
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        for attempt in range(2):
            for b, i in ((0, 0), (last, BATCH - 1), (last // 2, 17)):
                hits = store.vector_search(_vec(b, i), RecordFilter(), 1)
                assert hits and hits[0].record.record_id == f"b{b:04d}_{i:03d}" and hits[0].distance < 1e-5
                scoped = store.vector_search(_vec(b, i), RecordFilter(user_id=f"u{i % 3}"), 3)
                assert scoped[0].record.record_id == f"b{b:04d}_{i:03d}"
                kw = store.keyword_search(f"tok{b}x{i}", RecordFilter(), 3)
                assert [h.record.record_id for h in kw] == [f"b{b:04d}_{i:03d}"]
            if attempt == 0:
                store.build_indexes()
        assert store.info().extra["vector_index"]["rows"] == len(records)
    finally:
        store.close()


@pytest.mark.parametrize(
    "checkpoint_threshold",
    ["256MB", "64KB"],
    ids=["recovered-from-the-log", "checkpointing-during-ingest"],
)
def test_sigkill_during_ingest_loses_no_committed_batch(tmp_path: Path, checkpoint_threshold: str) -> None:
    # 256MB (the default): nothing is checkpointed here, reopening replays the whole log;
    # 64KB: checkpoints run between batches, so the kill may hit one
    path = tmp_path / "memory.duckdb"
    child = _spawn(path, "ingest", checkpoint_threshold)
    assert child.stdout is not None
    last = -1
    try:
        target = 14  # ~2,800 records: background HNSW/BM25 builds run during the ingest
        for line in child.stdout:
            last = int(line)
            if last >= target:
                break
        assert last >= target, child.stderr.read() if child.stderr else ""
        time.sleep(0.05)  # let it get into the middle of the next batch
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    # lines printed after our last read are committed too; count what the pipe still holds
    tail = child.stdout.read().split()
    last = int(tail[-1]) if tail else last
    _check_committed(path, last)


def test_sigkill_during_index_build_recovers(tmp_path: Path, h: Any) -> None:
    path = tmp_path / "memory.duckdb"
    store = h.open_store(path, dimension=DIM, auto_index=False)
    rng = np.random.default_rng(1)
    n = 12_000
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    store.write(WriteBatch(add=[h.new(f"b0000_{i:05d}", vectors[i], f"batch 0 tok0x{i}") for i in range(n)]))
    store.close()
    child = _spawn(path, "build")
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "building"
        # killed in the middle of the build, wherever the machine's speed puts it: the child
        # holds at the build's first snapshot (written, not yet made current) until it is killed
        assert child.stdout.readline().strip() == "snapshotted"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    assert "built" not in child.stdout.read(), "the build finished before the kill"
    store = h.open_store(path, dimension=DIM, auto_index=False)
    try:
        assert store.count(RecordFilter()) == n
        # whatever the build left behind is either current (it finished) or dropped as an orphan
        tables = {t for (t,) in store._conn().execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'am_%'").fetchall()}
        current = {s["table"] for s in (store._vidx and {"table": store._vidx.table}, store._fts and {"table": store._fts.table}) if s}
        assert tables - {"am_meta", "am_migrations", "am_records", "am_links", "am_stale"} == current
        hits = store.vector_search(vectors[123], RecordFilter(), 1)
        assert hits[0].record.record_id == "b0000_00123"
        assert [x.record.record_id for x in store.keyword_search("tok0x77", RecordFilter(), 2)] == ["b0000_00077"]
    finally:
        store.close()


def test_second_process_gets_a_clear_error(tmp_path: Path, h: Any) -> None:
    path = tmp_path / "memory.duckdb"
    store = h.open_store(path, dimension=DIM)
    probe = textwrap.dedent(
        """
        import sys
        from agentmemory_duckdb import DuckDBStore
        try:
            DuckDBStore(sys.argv[1]).open(dimension=8)
            print("OPENED")
        except Exception as exc:
            print(type(exc).__name__, "|", exc)
        """
    )
    try:
        out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120).stdout
        assert out.startswith("BackendUnavailable |"), out
        assert "another process" in out
    finally:
        store.close()
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120).stdout
    assert out.strip() == "OPENED", out  # released on close, file intact


def test_threads_share_one_store(store: DuckDBStore, h: Any) -> None:
    errors: list[BaseException] = []
    threads_n, writes, per_write = 6, 15, 4

    def worker(t: int) -> None:
        try:
            rng = np.random.default_rng(t)
            for w in range(writes):
                store.write(WriteBatch(add=[h.new(f"t{t}_{w}_{i}", rng.standard_normal(4), f"thread {t} write {w}", user_id=f"u{t}") for i in range(per_write)]))
                assert len(store.vector_search(rng.standard_normal(4), RecordFilter(user_id=f"u{t}"), 3)) == 3
                assert store.keyword_search(f"thread {t}", RecordFilter(user_id=f"u{t}"), 1000)
                assert store.count(RecordFilter(user_id=f"u{t}")) == (w + 1) * per_write
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    records = store.query(RecordFilter())
    assert len(records) == threads_n * writes * per_write
    assert sorted(r.seq for r in records) == list(range(1, len(records) + 1))


def test_asyncio_tasks_share_one_store(store: DuckDBStore, h: Any) -> None:
    async def task(n: int) -> int:
        await store.awrite(WriteBatch(add=[h.new(f"a{n}_{i}", np.ones(4) + n, f"task {n}") for i in range(3)]))
        hits = await store.avector_search(np.ones(4), RecordFilter(), 5)
        assert hits
        return await store.acount(RecordFilter())

    async def main() -> list[int]:
        return await asyncio.gather(*(task(n) for n in range(25)))

    counts = asyncio.run(main())
    assert max(counts) == 75 and store.count(RecordFilter()) == 75
    assert len({r.record_id for r in store.query(RecordFilter())}) == 75


def test_closed_store_refuses_work(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path)
    store.close()
    with pytest.raises(BackendUnavailable):
        store.query(RecordFilter())


def test_second_writer_in_the_same_process_is_refused(db_path: Path, h: Any) -> None:
    first = h.open_store(db_path)
    try:
        with pytest.raises(BackendUnavailable, match="already open"):
            DuckDBStore(db_path).open(dimension=4)
        first.open(dimension=4)  # reopening the open store itself is a no-op
    finally:
        first.close()
    second = h.open_store(db_path)  # released on close
    second.close()
