"""The suite: ``BackendConformance`` gathers every test mixin over the shared fixtures.

Subclass it in a test module (the subclass name must start with ``Test``; this base does not,
so importing it never collects it) and implement ``make_store(self, path)``.
"""

from __future__ import annotations

from .base import ConformanceBase
from .spi_records import BatchOrderTests, LifecycleTests, PersistenceTests, QueryTests, RecordCrudTests


class BackendConformance(
    LifecycleTests,
    RecordCrudTests,
    BatchOrderTests,
    QueryTests,
    PersistenceTests,
    ConformanceBase,
):
    """Every conformance test for one backend. Implement ``make_store(self, path)``."""


__all__ = ["BackendConformance", "ConformanceBase"]
