"""The suite: ``BackendConformance`` gathers every test mixin over the shared fixtures.

Subclass it in a test module (the subclass name must start with ``Test``; this base does not,
so importing it never collects it) and implement ``make_store(self, path)``.
"""

from __future__ import annotations

from .base import ConformanceBase
from .client_rules import (
    BudgetTests,
    CascadeTests,
    ClientScopeTests,
    ClientStrategyTests,
    HopTests,
    LinkLifecycleTests,
    MessageTests,
    TtlTests,
)
from .forgetting import ForgettingTests
from .guards import GuardTests
from .hostile import HostileInputTests
from .indexed import IndexTierTests
from .model_based import ModelBasedTests
from .resilience import ConcurrencyTests, FaultTests
from .spi_blind_spots import BlindSpotTests
from .spi_bulk import BulkAddTests
from .spi_exact import ExactValueTests
from .spi_index_text import IndexTextTests
from .spi_links import LinkTests
from .spi_paths import SearchPathTests
from .spi_records import BatchOrderTests, LifecycleTests, PersistenceTests, QueryTests, RecordCrudTests
from .spi_scope import MetadataFilterTests, RecordTypeTests, ScopeTests
from .spi_search import CapabilityTests, KeywordSearchTests, VectorSearchTests


class BackendConformance(
    # pytest runs inherited tests from the last base to the first: cheap, basic checks first,
    # the model-based run last (after the index tier, which fills stores past index thresholds).
    ModelBasedTests,
    IndexTierTests,
    BlindSpotTests,
    SearchPathTests,
    ConcurrencyTests,
    FaultTests,
    HostileInputTests,
    ForgettingTests,
    ClientStrategyTests,
    ClientScopeTests,
    MessageTests,
    CascadeTests,
    TtlTests,
    BudgetTests,
    HopTests,
    LinkLifecycleTests,
    PersistenceTests,
    CapabilityTests,
    ExactValueTests,
    IndexTextTests,
    KeywordSearchTests,
    VectorSearchTests,
    RecordTypeTests,
    MetadataFilterTests,
    ScopeTests,
    LinkTests,
    QueryTests,
    BatchOrderTests,
    BulkAddTests,
    RecordCrudTests,
    LifecycleTests,
    GuardTests,
    ConformanceBase,
):
    """Every conformance test for one backend. Implement ``make_store(self, path)``; optionally
    ``make_indexed_store(self, path)`` (the index tier's store, e.g. with low index thresholds)."""


__all__ = ["BackendConformance", "ConformanceBase", "IndexTierTests"]
