"""The zero-code entry: ``pytest --pyargs agentmemory_conformance --agentmemory-backend NAME``
(also what ``validate(factory)`` runs). Without a backend every test skips with the reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentmemory_conformance.pytest_plugin import BackendSpec, backend_specs
from agentmemory_conformance.suite import BackendConformance

NO_BACKEND = "no backend selected: pass --agentmemory-backend NAME and/or --agentmemory-uri URI"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One copy of the suite per backend named on the command line."""
    if "registered_backend" in metafunc.fixturenames:
        specs: list[Any] = backend_specs(metafunc.config) or [None]
        metafunc.parametrize("registered_backend", specs, ids=[s.id if s else "none" for s in specs], scope="class")


class TestRegisteredBackend(BackendConformance):
    """The suite against the backend named on the command line (or given to ``validate``)."""

    @pytest.fixture
    def store_factory(self, registered_backend: BackendSpec | None) -> Callable[[Path], Any]:
        """Build stores from the command-line backend."""
        if registered_backend is None:
            pytest.skip(NO_BACKEND)
        return registered_backend.build

    @pytest.fixture(autouse=True)
    def _registered_backend_required(self, registered_backend: BackendSpec | None) -> None:
        """Skip even the tests that build no store when no backend was named."""
        if registered_backend is None:
            pytest.skip(NO_BACKEND)
