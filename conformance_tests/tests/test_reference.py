"""The suite must pass on the reference store."""

from __future__ import annotations

from pathlib import Path

from agentmemory_conformance import BackendConformance

from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import MemoryStore


class TestInMemoryStoreConformance(BackendConformance):
    """``InMemoryStore`` (exact, not persistent, concurrent writers, keyword search)."""

    def make_store(self, path: Path) -> MemoryStore:
        return InMemoryStore()
