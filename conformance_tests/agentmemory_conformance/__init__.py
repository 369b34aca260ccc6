"""agentmemory-conformance: the one suite every agentmemory backend must pass.

Three ways in:

* subclass :class:`BackendConformance` in your tests and implement ``make_store(path)``;
* ``pytest --pyargs agentmemory_conformance --agentmemory-backend NAME`` (no code);
* ``validate(factory)`` returns a :class:`Report` (``to_json()``).

Plugins have theirs (``plugin_suite``): subclass :class:`RerankerConformance`,
:class:`RendererConformance` or :class:`ExtractorConformance`, or run ``pytest --pyargs
agentmemory_conformance --agentmemory-reranker NAME`` (``--agentmemory-renderer``,
``--agentmemory-extractor``).

The package is also a ``pytest11`` plugin, so it must stay import-light: the suite itself
(agentmemory core, numpy, Hypothesis) is imported only when one of the names below is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

__version__ = "0.1.0"

# Suite modules hold plain ``assert`` statements; vendors must see full diffs, so they are
# registered for assertion rewriting before anything imports them.
pytest.register_assert_rewrite(
    "agentmemory_conformance.suite",
    "agentmemory_conformance.stateful",
    "agentmemory_conformance.support",
    "agentmemory_conformance.faults",
    "agentmemory_conformance.catalogue",
    "agentmemory_conformance.test_registered",
    "agentmemory_conformance.plugin_suite",
    "agentmemory_conformance.test_registered_plugins",
)

_LAZY = {
    "BackendConformance": "agentmemory_conformance.suite",
    "FaultPlan": "agentmemory_conformance.faults",
    "FaultyStore": "agentmemory_conformance.faults",
    "Report": "agentmemory_conformance.report",
    "validate": "agentmemory_conformance.report",
    "make_state_machine": "agentmemory_conformance.stateful",
    "StoreComparison": "agentmemory_conformance.stateful",
    "RerankerConformance": "agentmemory_conformance.plugin_suite",
    "RendererConformance": "agentmemory_conformance.plugin_suite",
    "ExtractorConformance": "agentmemory_conformance.plugin_suite",
    "ScriptedLlm": "agentmemory_conformance.plugin_suite",
}

__all__ = [
    "BackendConformance",
    "ExtractorConformance",
    "RendererConformance",
    "RerankerConformance",
    "ScriptedLlm",
    "FaultPlan",
    "FaultyStore",
    "Report",
    "StoreComparison",
    "__version__",
    "make_state_machine",
    "validate",
]

if TYPE_CHECKING:
    from .faults import FaultPlan, FaultyStore
    from .plugin_suite import ExtractorConformance, RendererConformance, RerankerConformance, ScriptedLlm
    from .report import Report, validate
    from .stateful import StoreComparison, make_state_machine
    from .suite import BackendConformance


def __getattr__(name: str) -> Any:
    """Import the suite on first use of a public name (keeps the pytest11 plugin light)."""
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'agentmemory_conformance' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
