"""Fixtures of the hnswlib backend tests; helpers live in ``hnswlib_testutil``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agentmemory_hnswlib import HnswlibStore  # noqa: E402


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., HnswlibStore]]:
    """Build and open stores under ``tmp_path``; all are closed after the test."""
    made: list[HnswlibStore] = []

    def build(name: str = "store", dimension: int = 16, **options: Any) -> HnswlibStore:
        store = HnswlibStore(tmp_path / name, **options)
        store.open(dimension=dimension)
        made.append(store)
        return store

    yield build
    for store in made:
        store.close()
