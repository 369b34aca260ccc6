"""The shared conformance suite against the DuckDB backend (a real file per test)."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance
from agentmemory_duckdb import DuckDBStore


class TestDuckDBConformance(BackendConformance):
    """Default options: what ``AgentMemory()`` gets."""

    def make_store(self, path: Path) -> DuckDBStore:
        return DuckDBStore(path / "memory.duckdb")

    def make_indexed_store(self, path: Path) -> DuckDBStore:
        """The index tier's store: both snapshot indexes from a few hundred records and a
        planner that takes the HNSW index whenever its fetch allows (selective filters still
        scan the snapshot exactly), so the tier's 320 records reach every indexed path;
        ``test_default_thresholds_are_reached`` covers the defaults (20,000 / 1,000)."""
        return DuckDBStore(path / "memory.duckdb", vector_index_min_rows=200, fts_min_rows=100, planner="index", exact_max_rows=0)
