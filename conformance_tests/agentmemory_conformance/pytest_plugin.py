"""The pytest11 plugin: command-line options, markers, the Hypothesis profile choice and the
conformance report (per capability and spec clause, written as JSON at session end).

Kept import-light: module level imports only pytest and the standard library, because every
pytest run in an environment with this distribution installed loads it.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

PROFILE_ENV = "AGENTMEMORY_CONFORMANCE_PROFILE"
PROFILES = ("smoke", "ci", "remote", "nightly")
DEFAULT_PROFILE = "ci"
SUITE_MODULE_PREFIX = "agentmemory_conformance."

FACTORY_KEY = pytest.StashKey[Any]()
"""A store factory handed in by ``validate()`` (overrides the command-line backend)."""
COLLECTOR_KEY = pytest.StashKey["ResultCollector"]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--agentmemory-*`` options of the zero-code run and the report."""
    group = parser.getgroup("agentmemory", "agentmemory conformance suite")
    group.addoption("--agentmemory-backend", action="append", default=[], metavar="NAME",
                    help="run the suite against the backend registered as NAME (repeatable)")
    group.addoption("--agentmemory-option", action="append", default=[], metavar="KEY=VALUE",
                    help="constructor keyword of the backend (JSON values are decoded); "
                    "'{tmp}' in a value is replaced by the per-test directory; without one the "
                    "backend places itself there (Class.in_directory)")
    group.addoption("--agentmemory-uri", default=None, metavar="URI",
                    help="build the backend with Class.from_uri(URI); '{tmp}' is the per-test directory; "
                    "the backend name defaults to the URI scheme")
    group.addoption("--agentmemory-profile", default=None, metavar="NAME",
                    help=f"Hypothesis profile of the model-based tests: {', '.join(PROFILES)} "
                    f"(default ${PROFILE_ENV} or {DEFAULT_PROFILE})")
    group.addoption("--agentmemory-reranker", action="append", default=[], metavar="NAME",
                    help="run the reranker conformance checks on the reranker registered as NAME (repeatable)")
    group.addoption("--agentmemory-renderer", action="append", default=[], metavar="NAME",
                    help="run the card-renderer conformance checks on the renderer registered as NAME (repeatable)")
    group.addoption("--agentmemory-extractor", action="append", default=[], metavar="NAME",
                    help="run the extractor conformance checks on the extractor registered as NAME (repeatable; "
                    "one that needs an LLM gets the suite's scripted LLM)")
    group.addoption("--agentmemory-report-json", default=None, metavar="PATH",
                    help="write the conformance report (per backend, capability and spec clause) to PATH")


def pytest_configure(config: pytest.Config) -> None:
    """Register markers and the result collector."""
    config.addinivalue_line("markers", "agentmemory_clause(*ids): spec clauses a conformance test checks")
    config.addinivalue_line("markers", "agentmemory_requires(*capabilities): capabilities a conformance test needs")
    profile = selected_profile(config)
    if profile not in PROFILES:
        raise pytest.UsageError(f"--agentmemory-profile must be one of {', '.join(PROFILES)}, got {profile!r}")
    collector = ResultCollector(profile)
    config.stash[COLLECTOR_KEY] = collector
    config.pluginmanager.register(collector, "agentmemory-conformance-results")


def selected_profile(config: pytest.Config) -> str:
    """The Hypothesis profile: option, then environment, then ``ci``."""
    return str(config.getoption("agentmemory_profile", None) or os.environ.get(PROFILE_ENV) or DEFAULT_PROFILE)


# ---- the zero-code backend -------------------------------------------------------------------
@dataclass(frozen=True)
class BackendSpec:
    """How to build one backend from the command line (or a ``validate`` factory)."""

    id: str
    name: str | None = None
    uri: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    factory: Any = None

    def build(self, path: Path) -> Any:
        """A fresh store for ``path``: from the URI or the options when they place it ('{tmp}'
        becomes ``path``), else ``Class.in_directory(path, **options)``, so that
        ``--agentmemory-backend NAME`` alone gives every test its own location. A backend that
        cannot build a store here (``BackendUnavailable``, e.g. Oracle without
        ``AGENTMEMORY_ORACLE_DSN``) skips the test with its reason and a warning."""
        if self.factory is not None:
            return self.factory(path)
        from agentmemory.errors import BackendUnavailable
        from agentmemory.plugins import get_plugin_manager
        from agentmemory.registry import create_store

        assert self.name is not None
        cls = get_plugin_manager().load("backends", self.name)
        if self.uri is not None:
            return create_store(cls, uri=self.uri.replace("{tmp}", str(path)))
        if any(isinstance(v, str) and "{tmp}" in v for v in self.options.values()):
            options = {k: v.replace("{tmp}", str(path)) if isinstance(v, str) else v for k, v in self.options.items()}
            return create_store(cls, **options)
        in_directory = getattr(cls, "in_directory", None)
        if in_directory is None:
            return create_store(cls, **self.options)
        try:
            return in_directory(path, **self.options)
        except BackendUnavailable as exc:
            reason = f"backend {self.name!r} built no store: {exc}"
            warnings.warn(reason, UserWarning, stacklevel=1)
            pytest.skip(reason)
        except TypeError as exc:
            raise pytest.UsageError(
                f"backend {self.name!r} cannot be built from --agentmemory-option values {sorted(self.options)}: {exc}"
            ) from None


def parse_options(values: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; values that parse as JSON (numbers, booleans, null, lists) are
    decoded, anything else stays a string."""
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"--agentmemory-option expects KEY=VALUE, got {item!r}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out[key.strip()] = value
    return out


def backend_specs(config: pytest.Config) -> list[BackendSpec]:
    """The backends the zero-code test class runs against (empty when none was named)."""
    factory = config.stash.get(FACTORY_KEY, None)
    if factory is not None:
        return [BackendSpec(id="validate", factory=factory)]
    names = list(config.getoption("agentmemory_backend", None) or [])
    uri = config.getoption("agentmemory_uri", None)
    options = parse_options(list(config.getoption("agentmemory_option", None) or []))
    if uri and not names:
        from urllib.parse import urlsplit

        names = [urlsplit(uri).scheme]
    return [BackendSpec(id=name, name=name, uri=uri, options=options) for name in names]


# ---- results and the report ------------------------------------------------------------------
@dataclass
class TestResult:
    """The outcome of one conformance test, with what it checks."""

    nodeid: str
    group: str
    outcome: str = "passed"
    clauses: list[str] = field(default_factory=list)
    requires: list[str] = field(default_factory=list)
    detail: str = ""
    backend: dict[str, Any] | None = None


class ResultCollector:
    """Collects outcomes of conformance tests, grouped per test class and backend."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.results: dict[str, TestResult] = {}
        self._meta: dict[str, tuple[str, list[str], list[str]]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Remember clauses and capabilities of every collected conformance test."""
        for item in items:
            suite_func = _suite_function(item)
            if suite_func is None:
                continue
            marks = [*item.iter_markers(), *getattr(suite_func, "pytestmark", [])]
            clauses = sorted({c for m in marks if m.name == "agentmemory_clause" for c in m.args})
            requires = sorted({c for m in marks if m.name == "agentmemory_requires" for c in m.args})
            self._meta[item.nodeid] = (_group_of(item), clauses, requires)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Fold each phase's report into the test's outcome."""
        meta = self._meta.get(report.nodeid)
        if meta is None:
            return
        res = self.results.setdefault(report.nodeid, TestResult(report.nodeid, meta[0], clauses=meta[1], requires=meta[2]))
        for key, value in report.user_properties:
            if key == "agentmemory_backend" and res.backend is None and isinstance(value, dict):
                res.backend = value
        if hasattr(report, "wasxfail"):
            if report.skipped:
                res.outcome, res.detail = "xfailed", str(report.wasxfail)
            return
        if report.failed:
            res.outcome = "failed"
            res.detail = _short(report)
        elif report.skipped and res.outcome != "failed":
            res.outcome = "skipped"
            res.detail = _skip_reason(report)

    def reports(self, *, suite_version: str | None = None) -> list[dict[str, Any]]:
        """One report per test class (and backend), as JSON-ready dicts."""
        from .report import build_report

        groups: dict[str, list[TestResult]] = {}
        for res in self.results.values():
            groups.setdefault(res.group, []).append(res)
        return [build_report(group, results, profile=self.profile) for group, results in sorted(groups.items())]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write ``--agentmemory-report-json``."""
        path = session.config.getoption("agentmemory_report_json", None)
        if path:
            Path(path).write_text(json.dumps({"reports": self.reports()}, indent=2, sort_keys=True) + "\n")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """One line per backend: what passed, failed, was skipped."""
        if not self.results:
            return
        for rep in self.reports():
            t = rep["totals"]
            name = (rep.get("backend") or {}).get("name")
            label = f"backend={name}" if name else "plugin checks"
            terminalreporter.write_line(
                f"agentmemory conformance [{rep['group']}] {label}: {t['passed']} passed, {t['failed']} failed, "
                f"{t['skipped']} skipped, {t['xfailed']} xfailed (profile {self.profile})"
            )


def _suite_function(item: pytest.Item) -> Any:
    """The suite's own definition of a collected test (also when a backend's class overrides
    it, e.g. as a strict xfail), or None for tests that are not conformance tests."""
    cls = getattr(item, "cls", None)
    name = getattr(item, "originalname", None) or item.name
    for klass in getattr(cls, "__mro__", ()):
        if klass.__module__.startswith(SUITE_MODULE_PREFIX) and name in vars(klass):
            return vars(klass)[name]
    return None


def _group_of(item: pytest.Item) -> str:
    cls_node = item.getparent(pytest.Class)
    base = cls_node.nodeid if cls_node is not None else item.nodeid.split("::")[0]
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "registered_backend" in callspec.params:
        return f"{base}[{callspec.id.split('-')[0]}]"
    return base


def _short(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr)
    return f"{report.when}: {text}"[:2000]


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)
