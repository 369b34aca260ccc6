"""The shared conformance suite against the hnswlib backend (a real directory per test)."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance
from agentmemory_conformance.suite import (
    ConformanceBase,
    KeywordSearchTests,
    MetadataFilterTests,
    PersistenceTests,
    RecordTypeTests,
    ScopeTests,
    VectorSearchTests,
)
from agentmemory_hnswlib import HnswlibStore


class TestHnswlibConformance(BackendConformance):
    """Default options: the planner picks exact or ANN per query (small test data: exact)."""

    def make_store(self, path: Path) -> HnswlibStore:
        return HnswlibStore(path / "memory.db")

    def make_indexed_store(self, path: Path) -> HnswlibStore:
        """The index tier's store: every vector query through the graph, a snapshot after every
        change; ``test_default_thresholds_are_reached`` covers the cost model's threshold."""
        return HnswlibStore(path / "memory.db", exact_threshold=0, checkpoint_min=1)


class TestHnswlibAnnPathConformance(
    VectorSearchTests,
    KeywordSearchTests,
    ScopeTests,
    MetadataFilterTests,
    RecordTypeTests,
    PersistenceTests,
    ConformanceBase,
):
    """The search and scope parts of the suite again with every vector query sent through the
    hnswlib graph (``exact_threshold=0``) and a snapshot after every change, so the ANN path,
    its over-fetch and tie handling, and snapshot reloads are held to the same rules."""

    def make_store(self, path: Path) -> HnswlibStore:
        return HnswlibStore(path / "memory.db", exact_threshold=0, checkpoint_min=1)
