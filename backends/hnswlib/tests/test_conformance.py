"""The shared conformance suite against the hnswlib backend (a real directory per test)."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance

from agentmemory_hnswlib import HnswlibStore


class TestHnswlibConformance(BackendConformance):
    """Default options: the planner picks exact or ANN per query (small test data: exact)."""

    def make_store(self, path: Path) -> HnswlibStore:
        return HnswlibStore(path / "memory.db")


class TestHnswlibConformanceAnn(BackendConformance):
    """Every vector query through the hnswlib graph (``exact_threshold=0``), so the suite
    checks the ANN path and its over-fetch, not just the exact scan."""

    def make_store(self, path: Path) -> HnswlibStore:
        return HnswlibStore(path / "memory.db", exact_threshold=0, checkpoint_min=1)
