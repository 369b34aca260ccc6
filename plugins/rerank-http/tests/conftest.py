"""Fixtures of the HTTP reranker's tests: scripted rerank servers (``rerank_server.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from rerank_server import RerankServer  # noqa: E402


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str, dict[str, Any]], Any]], RerankServer]]:
    """Start scripted servers; all are closed after the test."""
    started: list[RerankServer] = []

    def start(script: Callable[[str, dict[str, Any]], Any]) -> RerankServer:
        server = RerankServer(script)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()
