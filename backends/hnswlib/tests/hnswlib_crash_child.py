"""Child process of the SIGKILL tests: ingests deterministic batches forever, printing the number
of each batch after its write returned (committed). The parent kills it with SIGKILL mid-run.

``batch(i)`` is shared with the parent, which replays the committed batches to know exactly what
the store must hold after the crash.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from agentmemory_hnswlib import HnswlibStore

from agentmemory.records import Record, RecordStatus, RecordType
from agentmemory.spi import NewRecord, RecordPatch, WriteBatch

DIM = 16
PER_BATCH = 25
SNAPSHOT_AFTER = 5
"""In "snapshot-once" mode the child checkpoints after this batch and never again."""


def vector(i: int, j: int, version: int = 0) -> np.ndarray:
    """The vector of record ``r{i}_{j}`` (``version`` > 0 after a vector patch)."""
    rng = np.random.default_rng(i * 1000 + j * 7 + version * 100003)
    return rng.normal(size=DIM).astype(np.float32)


def batch(i: int) -> tuple[WriteBatch, dict[str, np.ndarray], list[str]]:
    """Batch ``i``: 25 adds; from batch 6 on also a vector patch of a record of batch i-1, a
    status + metadata patch of one of batch i-6 and deletes of two more of batch i-6 (batches
    up to 5 are in the snapshot in "snapshot-once" mode)."""
    from datetime import datetime, timezone

    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    vectors: dict[str, np.ndarray] = {}
    adds = []
    for j in range(PER_BATCH):
        rid = f"r{i}_{j}"
        vec = vector(i, j)
        vectors[rid] = vec
        adds.append(
            NewRecord(
                Record(
                    record_id=rid, record_type=RecordType.MEMORY, content=f"batch {i} item {j}",
                    user_id=f"u{j % 3}", timestamp=t0, created_at=t0,
                ),
                vec,
            )
        )
    patches, deletes = [], []
    if i > SNAPSHOT_AFTER:
        rid = f"r{i - 1}_1"
        vectors[rid] = vector(i - 1, 1, version=1)
        patches.append(RecordPatch(rid, vector=vectors[rid], content=f"patched in batch {i}"))
        patches.append(RecordPatch(f"r{i - 6}_4", status=RecordStatus.INVALID, metadata={"patched_in": i}))
        deletes = [f"r{i - 6}_2", f"r{i - 6}_3"]
    return WriteBatch(add=adds, patch=patches, delete=deletes), vectors, deletes


def main() -> None:
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "snapshot-once":
        store = HnswlibStore(path, checkpoint_min=10**9)
    else:  # "snapshot-often": a snapshot every few dozen changes, so kills land mid-save too
        store = HnswlibStore(path, checkpoint_min=30, checkpoint_ratio=0.0)
    store.open(dimension=DIM)
    i = 0
    while True:
        store.write(batch(i)[0])
        if mode == "snapshot-once" and i == SNAPSHOT_AFTER:
            store.checkpoint()
        print(json.dumps({"batch": i}), flush=True)
        i += 1


if __name__ == "__main__":
    main()
