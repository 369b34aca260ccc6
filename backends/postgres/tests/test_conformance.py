"""The shared conformance suite against the PostgreSQL backend (a real server, one schema per test)."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance
from agentmemory_postgres import PostgresStore


class TestPostgresConformance(BackendConformance):
    """Default options, as ``--agentmemory-backend postgres`` builds them (``in_directory``)."""

    def make_store(self, path: Path) -> PostgresStore:
        return PostgresStore.in_directory(path)

    def make_indexed_store(self, path: Path) -> PostgresStore:
        """The index tier's store: the HNSW path from 100 vectors per scope (pgvector engine;
        ``exact_scale=0``: no size-dependent exact limit), so the tier's 320 records reach it."""
        return PostgresStore.in_directory(path, exact_max_rows=100, exact_scale=0)
