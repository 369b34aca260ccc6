"""The conformance report and ``validate()``, the programmatic way in.

A report says, for one backend, what passed, failed, was skipped (with the reason) and was an
opt-out (strict xfail), overall and per capability and per spec clause: the compatibility
matrix row of that backend.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from agentmemory.spi import MemoryStore

    from .pytest_plugin import TestResult

OUTCOMES = ("passed", "failed", "skipped", "xfailed")


def _counts() -> dict[str, int]:
    return dict.fromkeys(OUTCOMES, 0)


def build_report(group: str, results: Sequence[TestResult], *, profile: str) -> dict[str, Any]:
    """Aggregate test results into the JSON form of a report."""
    from agentmemory.spi import SPEC_VERSION, Capability

    from . import __version__

    backend = next((r.backend for r in results if r.backend), None)
    declared = set((backend or {}).get("capabilities") or [])
    totals = _counts()
    clauses: dict[str, dict[str, int]] = {}
    capabilities: dict[str, dict[str, Any]] = {"core": {**_counts(), "declared": True}}
    for known in Capability:
        capabilities[known.value] = {**_counts(), "declared": known.value in declared}
    tests = []
    for res in sorted(results, key=lambda r: r.nodeid):
        totals[res.outcome] += 1
        for c in res.clauses or ["unclassified"]:
            clauses.setdefault(c, _counts())[res.outcome] += 1
        for cap in res.requires or ["core"]:
            capabilities.setdefault(cap, {**_counts(), "declared": cap in declared})[res.outcome] += 1
        entry: dict[str, Any] = {"test": res.nodeid, "outcome": res.outcome, "clauses": res.clauses, "requires": res.requires}
        if res.detail:
            entry["detail"] = res.detail
        tests.append(entry)
    return {
        "group": group,
        "suite": "agentmemory-conformance",
        "suite_version": __version__,
        "spec_version": SPEC_VERSION,
        "profile": profile,
        "backend": backend,
        "ok": totals["failed"] == 0 and totals["passed"] > 0,
        "totals": totals,
        "capabilities": capabilities,
        "clauses": dict(sorted(clauses.items())),
        "tests": tests,
    }


@dataclass
class Report:
    """The result of ``validate()`` for one backend."""

    data: dict[str, Any] = field(default_factory=dict)
    exit_code: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing failed (and something ran)."""
        return bool(self.data.get("ok")) and self.exit_code in (0, 5)

    def passed(self, capability: str | None = None) -> bool:
        """True when every test (of ``capability``, e.g. ``"core"`` or ``"keyword_search"``)
        that ran passed."""
        if capability is None:
            return self.ok
        counts = self.data["capabilities"].get(capability)
        return counts is not None and counts["failed"] == 0 and counts["passed"] > 0

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The failed tests with their first error line."""
        return [t for t in self.data.get("tests", []) if t["outcome"] == "failed"]

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data."""
        return dict(self.data)

    def to_json(self, indent: int | None = 2) -> str:
        """The report as JSON (stable key order)."""
        return json.dumps(self.data, indent=indent, sort_keys=True)


class _ValidatePlugin:
    """Hands the factory to the zero-code test class and keeps the reports at the end."""

    def __init__(self, factory: Callable[[Path], MemoryStore]) -> None:
        self.factory = factory
        self.reports: list[dict[str, Any]] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        from .pytest_plugin import FACTORY_KEY

        config.stash[FACTORY_KEY] = self.factory

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        from .pytest_plugin import COLLECTOR_KEY

        collector = session.config.stash.get(COLLECTOR_KEY, None)
        if collector is not None:
            self.reports = collector.reports()


def validate(
    factory: Callable[[Path], MemoryStore],
    *,
    profile: str | None = None,
    pytest_args: Sequence[str] = (),
    quiet: bool = True,
) -> Report:
    """Run the whole suite against stores built by ``factory(path)`` and return the report.

    ``path`` is a fresh per-test directory (it may not exist yet; calling ``factory`` again
    with the same path must reopen the data when the backend declares ``PERSISTENCE``).
    ``profile`` picks the Hypothesis profile (``smoke``, ``ci``, ``remote``, ``nightly``);
    ``pytest_args`` are passed through (``-k``, ``-x``, ...).
    """
    if not callable(factory):
        from agentmemory.errors import InvalidArgument

        raise InvalidArgument("factory", "must be a callable taking a path and returning a MemoryStore")
    plugin = _ValidatePlugin(factory)
    with tempfile.TemporaryDirectory(prefix="agentmemory-validate-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        args = [
            str(Path(__file__).with_name("test_registered.py")),
            "-c", str(ini), "--rootdir", tmp,
            "-p", "no:cacheprovider",
            "--basetemp", str(Path(tmp) / "basetemp"),
        ]
        if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
            args += ["-p", "agentmemory_conformance.pytest_plugin"]
        if profile is not None:
            args += ["--agentmemory-profile", profile]
        args += ["-p", "no:terminal", "-p", "no:warnings"] if quiet else []
        args += list(pytest_args)
        code = pytest.main(args, plugins=[plugin])
    data = plugin.reports[0] if plugin.reports else {"ok": False, "totals": {}, "capabilities": {}, "clauses": {}, "tests": []}
    return Report(data=data, exit_code=int(code))
