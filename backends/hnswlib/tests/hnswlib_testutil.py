"""Helpers shared by the hnswlib backend tests (imported by name; conftest puts this folder on
``sys.path`` because the suite runs with ``--import-mode=importlib``)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
from agentmemory_hnswlib import HnswlibStore

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def make_record(
    record_id: str,
    *,
    user: str | None = "u",
    agent: str | None = None,
    thread: str | None = None,
    content: str | None = None,
    type: RecordType = RecordType.MEMORY,
    metadata: dict[str, Any] | None = None,
    expires: datetime | None = None,
) -> Record:
    """A memory record with defaults that keep tests short."""
    return Record(
        record_id=record_id,
        record_type=type,
        content=content if content is not None else f"content of {record_id}",
        user_id=user,
        agent_id=agent,
        thread_id=thread,
        role="user" if type is RecordType.MESSAGE else None,
        timestamp=T0,
        created_at=T0,
        expires_at=expires,
        metadata=metadata or {},
    )


def clustered(n: int, dim: int, seed: int = 0, clusters: int = 50) -> np.ndarray:
    """Unit vectors drawn around random centres: neighbourhoods like real embeddings have."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    which = rng.integers(0, clusters, size=n)
    out = centres[which] + rng.normal(scale=0.6, size=(n, dim)).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def add_all(store: HnswlibStore, records: list[Record], vectors: np.ndarray, batch: int = 500) -> None:
    """Write ``records`` with ``vectors`` in batches."""
    from agentmemory.spi import WriteBatch

    for start in range(0, len(records), batch):
        store.write(
            WriteBatch(
                add=[NewRecord(r, v) for r, v in zip(records[start : start + batch], vectors[start : start + batch])]
            )
        )
