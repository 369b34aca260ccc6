"""Shared helpers of the suite's own tests: pytester for running the suite on mutants."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# pytester's in-process runs drop modules first imported inside them; C extensions cannot be
# imported twice, so everything the suite touches is imported once here, up front.
import agentmemory_conformance.faults  # noqa: E402,F401
import agentmemory_conformance.report  # noqa: E402,F401
import agentmemory_conformance.stateful  # noqa: E402,F401
import agentmemory_conformance.suite  # noqa: E402,F401
import mutant_stores  # noqa: E402,F401
import numpy.linalg  # noqa: E402,F401
import numpy.random  # noqa: E402,F401

import agentmemory  # noqa: E402,F401
import agentmemory.reference_store  # noqa: E402,F401


def pytest_configure(config: pytest.Config) -> None:
    """Load pytester here (``pytest_plugins`` is only allowed in the root conftest)."""
    config.pluginmanager.import_plugin("pytester")
