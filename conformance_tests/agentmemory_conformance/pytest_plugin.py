"""The pytest11 plugin: command-line options, markers and the JSON report.

Kept import-light: it imports only pytest at module level, because every pytest run in an
environment with this distribution installed loads it.
"""

from __future__ import annotations

from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--agentmemory-*`` options of the zero-code run and the report."""
    group = parser.getgroup("agentmemory", "agentmemory conformance suite")
    group.addoption("--agentmemory-backend", action="append", default=[], metavar="NAME",
                    help="run the suite against the backend registered as NAME (repeatable)")
    group.addoption("--agentmemory-option", action="append", default=[], metavar="KEY=VALUE",
                    help="constructor keyword for the backend; '{tmp}' in VALUE is the per-test directory")
    group.addoption("--agentmemory-uri", default=None, metavar="URI",
                    help="build the backend with Class.from_uri(URI); '{tmp}' is the per-test directory")
    group.addoption("--agentmemory-profile", default=None, metavar="NAME",
                    help="Hypothesis profile of the model-based tests: smoke, ci (default), remote, nightly")
    group.addoption("--agentmemory-report-json", default=None, metavar="PATH",
                    help="write the conformance report (per capability and spec clause) to PATH")


def pytest_configure(config: pytest.Config) -> None:
    """Register the suite's markers."""
    config.addinivalue_line("markers", "agentmemory_clause(*ids): spec clauses a conformance test checks")
    config.addinivalue_line("markers", "agentmemory_requires(*capabilities): capabilities a conformance test needs")


_ = Any
