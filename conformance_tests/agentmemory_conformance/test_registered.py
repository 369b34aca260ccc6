"""The zero-code entry: ``pytest --pyargs agentmemory_conformance --agentmemory-backend NAME``."""

from __future__ import annotations

from agentmemory_conformance.suite import BackendConformance


class TestRegisteredBackend(BackendConformance):
    """The suite against the backend named on the command line (or given to ``validate``)."""
