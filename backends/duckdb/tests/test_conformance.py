"""The shared conformance suite against the DuckDB backend (a real file per test)."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance
from agentmemory_duckdb import DuckDBStore


class TestDuckDBConformance(BackendConformance):
    """Default options: what ``AgentMemory()`` gets."""

    def make_store(self, path: Path) -> DuckDBStore:
        return DuckDBStore(path / "memory.duckdb")
