"""Shared helpers of the DuckDB backend tests: record builders and clustered test vectors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore
from agentmemory_duckdb import _keyword as keyword_module

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def make_record(rid: str, content: str = "", *, record_type: RecordType = RecordType.MEMORY, **fields: Any) -> Record:
    """A valid record with fixed timestamps; ``content`` defaults to a sentence naming ``rid``."""
    return Record(
        record_id=rid,
        record_type=record_type,
        content=content or f"record {rid}",
        timestamp=fields.pop("timestamp", T0),
        created_at=fields.pop("created_at", T0 + timedelta(seconds=1)),
        **fields,
    )


def new(rid: str, vector: Any = None, content: str = "", **fields: Any) -> NewRecord:
    """A ``NewRecord`` (vector as float32 when given)."""
    vec = None if vector is None else np.asarray(vector, dtype=np.float32)
    return NewRecord(make_record(rid, content, **fields), vec)


def clustered_vectors(n: int, dim: int, *, seed: int = 0, clusters: int = 50) -> np.ndarray:
    """Unit vectors drawn from Gaussian clusters (like sentence embeddings: neighbours are close,
    random pairs are not), so approximate search has realistic structure to get wrong."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    labels = rng.integers(0, clusters, n)
    x = centers[labels] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def open_store(path: Path, dimension: int = 4, **options: Any) -> DuckDBStore:
    """A ``DuckDBStore`` at ``path`` opened with ``dimension``."""
    store = DuckDBStore(path, **options)
    store.open(dimension=dimension)
    return store


class Helpers:
    """The helpers above as one object, for test modules (``--import-mode=importlib`` makes
    ``conftest`` unimportable): take the ``h`` fixture."""

    make_record = staticmethod(make_record)
    new = staticmethod(new)
    clustered_vectors = staticmethod(clustered_vectors)
    open_store = staticmethod(open_store)
    T0 = T0


@pytest.fixture(scope="session")
def h() -> type[Helpers]:
    """The shared test helpers."""
    return Helpers


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh database file path (not created)."""
    return tmp_path / "memory.duckdb"


@pytest.fixture
def store(db_path: Path) -> Iterator[DuckDBStore]:
    """An open 4-d store with background indexing off (tests build indexes explicitly)."""
    s = open_store(db_path, auto_index=False)
    yield s
    s.close()


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every rebuild of postings from the fts tables."""
    built: list[str] = []
    real = keyword_module.KeywordIndex.build.__func__  # type: ignore[attr-defined]

    def build(cls: Any, con: Any, table: str) -> Any:
        built.append(table)
        return real(cls, con, table)

    monkeypatch.setattr(keyword_module.KeywordIndex, "build", classmethod(build))
    return built
