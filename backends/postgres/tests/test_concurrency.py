"""Many processes × threads writing one store, and a server killed and restarted mid-run:
nothing acknowledged is lost, nothing is duplicated, order holds per writer thread."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_postgres import PostgresStore

from agentmemory.errors import BackendError, BackendUnavailable
from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, Order, RecordFilter, WriteBatch

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
PROCESSES = int(os.environ.get("AGENTMEMORY_POSTGRES_TEST_PROCESSES", "4"))
THREADS = int(os.environ.get("AGENTMEMORY_POSTGRES_TEST_THREADS", "4"))
RECORDS = int(os.environ.get("AGENTMEMORY_POSTGRES_TEST_RECORDS", "20000"))
"""Records written in all by the multi-process test (issue #30: 20,000; about a minute on 2 vCPUs)."""

WORKER = r"""
import sys, threading
from datetime import datetime, timezone
import numpy as np
from agentmemory_postgres import PostgresStore
from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, WriteBatch

dsn, schema, engine, proc, threads, per_thread = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
store = PostgresStore(dsn, schema=schema, vector_engine=engine, pool_max=threads)
store.open(dimension=8)
errors = []

def rec(rid, thread):
    return Record(record_id=rid, record_type=RecordType.MESSAGE, role="user", content=f"message {rid}",
                  user_id=f"u{proc}", thread_id=thread, timestamp=T0, created_at=T0)

def writer(t):
    rng = np.random.default_rng(proc * 100 + t)
    thread = f"p{proc}-t{t}"
    try:
        for i in range(0, per_thread, 2):
            store.write(WriteBatch(add=[NewRecord(rec(f"{thread}-{i:06d}", thread), rng.standard_normal(8).astype(np.float32)),
                                        NewRecord(rec(f"{thread}-{i + 1:06d}", thread), rng.standard_normal(8).astype(np.float32))]))
    except BaseException as exc:
        errors.append(repr(exc))

ts = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
for th in ts: th.start()
for th in ts: th.join()
store.close()
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
"""


def test_processes_and_threads_lose_and_duplicate_nothing(make_pg_store: Any, pg_dsn: str) -> None:
    """PROCESSES × THREADS writers, batches of two messages each: every record lands once,
    ``seq`` values are unique, and each writer thread's messages keep their order."""
    store = make_pg_store()
    store.open(dimension=8)
    per_thread = max(2, RECORDS // (PROCESSES * THREADS) // 2 * 2)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, pg_dsn, store.schema, store.vector_engine, str(p), str(THREADS), str(per_thread)],
            stderr=subprocess.PIPE, text=True,
        )
        for p in range(PROCESSES)
    ]
    failures = []
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode:
            failures.append(err[-2000:])
    assert not failures, failures
    rows = store.query(RecordFilter())
    expected = PROCESSES * THREADS * per_thread
    assert len(rows) == expected, f"{expected - len(rows)} records lost"
    assert len({r.record_id for r in rows}) == expected, "duplicate records"
    assert len({r.seq for r in rows}) == expected, "duplicate seq values"
    for p in range(PROCESSES):
        for t in range(THREADS):
            thread = f"p{p}-t{t}"
            got = [r.record_id for r in store.query(RecordFilter(user_id=f"u{p}", thread_id=thread), order=Order.SEQ_ASC)]
            assert got == [f"{thread}-{i:06d}" for i in range(per_thread)], f"order broken in {thread}"
    assert store.count(RecordFilter()) == expected


# ---- a server of its own, killed and restarted --------------------------------------------------
def _stop_immediately(srv: Any) -> None:
    from pgserver._commands import pg_ctl

    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=srv.pgdata, user=srv.system_user)


def _start(srv: Any) -> None:
    with srv._lock:
        srv.ensure_postgres_running()


def test_server_killed_mid_write_and_restarted(own_server: Any) -> None:
    """A writer thread keeps writing batches while the server is killed (``-m immediate``, no
    shutdown checkpoint) and restarted: the writes in between fail with ``BackendUnavailable``
    (typed), the store recovers without being reopened, every acknowledged batch is there
    exactly once, and every failed one is there whole or not at all."""
    from agentmemory_postgres._server import local_pgvector_usable

    engine = "pgvector" if local_pgvector_usable() else "client"
    store = PostgresStore(own_server.get_uri(), schema="killed", vector_engine=engine, pool_timeout=1, connect_timeout=2)
    store.open(dimension=8)
    acked: list[int] = []
    failed: list[tuple[int, BaseException]] = []
    stop = threading.Event()
    rng = np.random.default_rng(0)

    def batch(i: int) -> WriteBatch:
        recs = [
            Record(record_id=f"b{i:05d}-{j}", record_type=RecordType.MEMORY, content=f"batch {i} item {j}",
                   user_id="u", timestamp=T0, created_at=T0)
            for j in range(3)
        ]
        return WriteBatch(add=[NewRecord(r, rng.standard_normal(8).astype(np.float32)) for r in recs])

    def writer() -> None:
        i = 0
        while not stop.is_set():
            try:
                store.write(batch(i))
                acked.append(i)
            except BackendError as exc:
                failed.append((i, exc))
                time.sleep(0.05)
            i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        deadline = time.time() + 30
        while len(acked) < 20 and time.time() < deadline:
            time.sleep(0.01)
        _stop_immediately(own_server)
        deadline = time.time() + 30
        while not failed and time.time() < deadline:
            time.sleep(0.01)
        _start(own_server)
        before = len(acked)
        deadline = time.time() + 60
        while len(acked) < before + 20 and time.time() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert failed, "no write failed while the server was down"
    assert all(isinstance(exc, BackendUnavailable) for _, exc in failed), [repr(e) for _, e in failed[:3]]
    assert len(acked) >= before + 20, "the store did not recover after the restart"
    rows = store.query(RecordFilter())
    present: dict[int, int] = {}
    for r in rows:
        present[int(r.record_id[1:6])] = present.get(int(r.record_id[1:6]), 0) + 1
    lost = [i for i in acked if present.get(i) != 3]
    assert not lost, f"acknowledged batches lost or partial: {lost[:10]}"
    partial = [i for i, n in present.items() if n != 3]
    assert not partial, f"partial batches: {partial[:10]}"
    assert len({r.seq for r in rows}) == len(rows)
    store.close()


def test_unreachable_server_is_backend_unavailable(tmp_path: Path) -> None:
    """Opening a store on a server that is not there raises ``BackendUnavailable``."""
    store = PostgresStore(f"postgresql://nobody@/postgres?host={tmp_path}", connect_timeout=1)
    with pytest.raises(BackendUnavailable):
        store.open(dimension=4)
