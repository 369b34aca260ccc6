"""The three ways in: subclassing (``test_reference.py``), the zero-code ``--pyargs`` run and
``validate()``; plus the report, the override guard and the fault wrapper itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentmemory_conformance import FaultPlan, FaultyStore, validate
from agentmemory_conformance.faults import FaultySequence, InjectedFault
from agentmemory_conformance.support import new, rec

from agentmemory.errors import InvalidArgument
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import MemoryStore, RecordFilter, WriteBatch

SUBSET = "scope or guard or reopen or keyword_search_raises or state_machine"


def test_validate_returns_a_passing_report_for_the_reference() -> None:
    """``validate(factory)`` runs the suite and reports per capability and clause."""
    report = validate(lambda path: InMemoryStore(), profile="smoke", pytest_args=["-k", SUBSET])
    assert report.ok, report.failures
    data = json.loads(report.to_json())
    assert data["backend"]["name"] == "memory"
    assert data["totals"]["failed"] == 0 and data["totals"]["passed"] > 5
    persistence_tests = [t for t in data["tests"] if "persistence" in t["requires"]]
    assert len(persistence_tests) >= 5 and all(t["outcome"] == "skipped" for t in persistence_tests)
    assert data["capabilities"]["persistence"] == {
        "declared": False, "passed": 0, "failed": 0, "skipped": len(persistence_tests), "xfailed": 0}
    assert data["capabilities"]["keyword_search"]["declared"] is True
    assert data["clauses"]["7.scope"]["passed"] >= 4
    assert report.passed("core") and report.passed("keyword_search")
    skipped = [t for t in data["tests"] if t["outcome"] == "skipped"]
    assert all("not declared" in t["detail"] or "declared" in t["detail"] for t in skipped)


def test_validate_reports_failures_of_a_broken_backend() -> None:
    """A backend that leaks scope fails, and the report names the tests and clauses."""
    from mutant_stores import ScopeAbsentLeakStore

    report = validate(lambda path: ScopeAbsentLeakStore(), profile="smoke", pytest_args=["-k", "scope"])
    assert not report.ok
    assert report.failures and all(t["outcome"] == "failed" for t in report.failures)
    assert report.data["clauses"]["9.scope-boundary"]["failed"] >= 1
    assert not report.passed("core")


def test_validate_rejects_a_non_callable() -> None:
    """``validate`` takes a factory."""
    with pytest.raises(InvalidArgument):
        validate("memory://")  # type: ignore[arg-type]


def test_zero_code_run_with_a_registered_backend(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """``pytest --pyargs agentmemory_conformance --agentmemory-backend memory`` runs the suite
    and writes the JSON report."""
    out = tmp_path / "report.json"
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance", "--agentmemory-backend", "memory",
        "--agentmemory-profile", "smoke", "--agentmemory-report-json", str(out),
        "-k", SUBSET, "-q", "-p", "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) > 5, result.outlines[-20:]
    reports = json.loads(out.read_text())["reports"]
    [report] = [r for r in reports if r["group"].endswith("TestRegisteredBackend[memory]")]  # plugin groups skip here
    assert report["backend"]["class"] == "agentmemory.reference_store.InMemoryStore"
    assert any("agentmemory conformance" in line and "backend=memory" in line for line in result.outlines)


def test_zero_code_run_without_a_backend_skips_with_the_reason(pytester: pytest.Pytester) -> None:
    """Without ``--agentmemory-backend`` nothing runs, and the skip says what to pass."""
    result = pytester.runpytest_inprocess("--pyargs", "agentmemory_conformance", "-q", "-rs", "-k", "scope", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes.get("skipped", 0) > 0
    assert any("pass --agentmemory-backend NAME" in line for line in result.outlines)


def test_zero_code_unknown_backend_names_the_installed_ones(pytester: pytest.Pytester) -> None:
    """An unknown name fails with the list of registered backends."""
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance", "--agentmemory-backend", "no-such-backend", "-q", "-k", "test_every_scope_combination_in_query_and_count", "-p", "no:cacheprovider"
    )
    text = "\n".join(result.outlines)
    assert "no backend named 'no-such-backend'" in text and "memory" in text


ZERO_CODE_SUBSET = "scope or test_duplicate_ids or test_schema_policies_on_reopen or test_client_data_survives_reopen"
"""Fast tests that build stores, reopen one at the same location, and run a client over it."""


@pytest.mark.parametrize(("backend", "module"), [
    ("duckdb", "agentmemory_duckdb.store"), ("hnswlib", "agentmemory_hnswlib.store"), ("postgres", "agentmemory_postgres.store"),
])
def test_zero_code_run_places_every_built_in_backend_by_itself(pytester: pytest.Pytester, tmp_path: Path, backend: str, module: str) -> None:
    """``pytest --pyargs agentmemory_conformance --agentmemory-backend NAME`` needs no location:
    the plugin builds each test's store with ``Class.in_directory(<per-test directory>)``
    (issue #14: every DuckDB and hnswlib test failed because nobody passed a path)."""
    pytest.importorskip(module)  # imported before the in-process run, which drops new modules
    out = tmp_path / "report.json"
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance", "--agentmemory-backend", backend, "--agentmemory-profile", "smoke",
        "--agentmemory-report-json", str(out), "-k", ZERO_CODE_SUBSET, "-q", "-p", "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("errors", 0) == 0, result.outlines[-30:]
    assert outcomes.get("passed", 0) >= 10, result.outlines[-30:]
    reports = json.loads(out.read_text())["reports"]
    [report] = [r for r in reports if "TestRegisteredBackend" in r["group"]]  # plugin groups skip: no plugin named
    assert report["totals"]["skipped"] == 0, report["totals"]
    assert report["backend"]["name"] == backend
    assert report["clauses"]["9.persistence"]["passed"] >= 1  # reopened at the same per-test location


def test_zero_code_run_of_oracle_without_a_dsn_skips_loudly(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Oracle needs a database: without ``AGENTMEMORY_ORACLE_DSN`` every test skips, and the
    reason says what to set (an unrun suite must never look like a pass)."""
    pytest.importorskip("agentmemory_oracle.store")
    monkeypatch.delenv("AGENTMEMORY_ORACLE_DSN", raising=False)
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance", "--agentmemory-backend", "oracle", "--agentmemory-profile", "smoke",
        "-k", "test_duplicate_ids", "-q", "-rs", "-p", "no:cacheprovider",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes.get("failed", 0) == 0 and outcomes.get("skipped", 0) >= 2
    assert any("AGENTMEMORY_ORACLE_DSN" in line for line in result.outlines), result.outlines[-20:]


class _PlacedStore(InMemoryStore):
    """A throwaway backend that places itself: records where ``in_directory`` put it."""

    name = "placed-probe"
    seen: list[tuple[Path, dict[str, Any]]] = []

    @classmethod
    def in_directory(cls, directory: Path, **options: Any) -> _PlacedStore:
        cls.seen.append((Path(directory), options))
        return cls()


class _PlacedPlugin:
    from agentmemory.hookspecs import hookimpl

    @hookimpl
    def agentmemory_register_backends(self, register: Any) -> None:
        register("placed-probe", _PlacedStore)


def test_zero_code_run_gives_each_test_its_own_directory_and_passes_options(pytester: pytest.Pytester) -> None:
    """Without ``{tmp}`` in a URI or option, the store class places itself in the per-test
    directory, and ``--agentmemory-option`` values reach ``in_directory`` as keywords."""
    from agentmemory.plugins import get_plugin_manager

    pm = get_plugin_manager()
    pm.register(_PlacedPlugin(), name="placed-probe-test")
    _PlacedStore.seen.clear()
    try:
        result = pytester.runpytest_inprocess(
            "--pyargs", "agentmemory_conformance", "--agentmemory-backend", "placed-probe",
            "--agentmemory-option", "size=3", "-k", "test_duplicate_ids", "-q", "-p", "no:cacheprovider",
        )
    finally:
        pm.unregister("placed-probe-test")
    assert result.parseoutcomes().get("passed", 0) == 2, result.outlines[-20:]
    directories = [d for d, _ in _PlacedStore.seen]
    assert len(directories) >= 2 and len(set(directories)) == len(directories)  # one per test (sync, async)
    assert all(d.name == "store" and not d.exists() for d in directories)
    assert all(options == {"size": 3} for _, options in _PlacedStore.seen)


class _OptionsStore(InMemoryStore):
    """A throwaway backend recording the options it was built with."""

    name = "options-probe"
    seen: list[dict[str, Any]] = []

    def __init__(self, location: str, flag: bool = False, size: int = 0) -> None:
        super().__init__()
        type(self).seen.append({"location": location, "flag": flag, "size": size})


class _OptionsPlugin:
    from agentmemory.hookspecs import hookimpl

    @hookimpl
    def agentmemory_register_backends(self, register: Any) -> None:
        register("options-probe", _OptionsStore)


def test_zero_code_options_decode_json_and_substitute_tmp(pytester: pytest.Pytester) -> None:
    """``--agentmemory-option key=value`` decodes JSON values and puts the per-test directory
    where ``{tmp}`` is written."""
    from agentmemory.plugins import get_plugin_manager

    pm = get_plugin_manager()
    pm.register(_OptionsPlugin(), name="options-probe-test")
    _OptionsStore.seen.clear()
    try:
        result = pytester.runpytest_inprocess(
            "--pyargs", "agentmemory_conformance", "--agentmemory-backend", "options-probe",
            "--agentmemory-option", "location={tmp}/data.db", "--agentmemory-option", "flag=true",
            "--agentmemory-option", "size=3", "-k", "test_duplicate_ids", "-q", "-p", "no:cacheprovider",
        )
    finally:
        pm.unregister("options-probe-test")
    assert result.parseoutcomes().get("passed", 0) == 2, result.outlines[-20:]
    assert _OptionsStore.seen and all(s["flag"] is True and s["size"] == 3 for s in _OptionsStore.seen)
    assert all(s["location"].endswith("/store/data.db") and "{tmp}" not in s["location"] for s in _OptionsStore.seen)


GUARD_FILE = """
import pytest
from agentmemory.reference_store import InMemoryStore
from agentmemory_conformance import BackendConformance


class TestWeakened(BackendConformance):
    def make_store(self, path):
        return InMemoryStore()

    {body}
"""


@pytest.mark.parametrize(
    ("body", "guard_passes"),
    [
        ("def test_ties_break_by_record_id(self):\n        pass", False),
        ("test_seq_bounds = None", False),
        ("@pytest.mark.xfail(reason='known')\n    def test_ties_break_by_record_id(self):\n        assert False", False),
        ("@pytest.mark.xfail(reason='tie order differs, see issue 12', strict=True)\n    def test_ties_break_by_record_id(self):\n        assert False", True),
    ],
    ids=["pass-override", "removed", "non-strict-xfail", "strict-xfail-with-reason"],
)
def test_override_guard(pytester: pytest.Pytester, body: str, guard_passes: bool, tmp_path: Path) -> None:
    """Overrides are only allowed as strict xfails with a reason; anything else fails the guard.
    An allowed opt-out shows in the report as ``xfailed`` with its reason and clauses."""
    pytester.makepyfile(test_weakened=GUARD_FILE.format(body=body))
    out = tmp_path / "report.json"
    result = pytester.runpytest_inprocess(
        "-q", "-k", "DO_NOT_OVERRIDE or test_ties_break_by_record_id", "-p", "no:cacheprovider", "--agentmemory-report-json", str(out)
    )
    guard = [t for t in json.loads(out.read_text())["reports"][0]["tests"] if "DO_NOT_OVERRIDE" in t["test"]]
    assert (guard[0]["outcome"] == "passed") is guard_passes, result.outlines[-15:]
    if guard_passes:
        [opt_out] = [t for t in json.loads(out.read_text())["reports"][0]["tests"] if "test_ties_break_by_record_id" in t["test"]]
        assert opt_out["outcome"] == "xfailed" and "issue 12" in opt_out["detail"] and "7.ties" in opt_out["clauses"]


def test_faulty_sequence_fires_only_after_the_validation_pass() -> None:
    """The first pass (the SPI's validation) sees every item; the second raises at the item."""
    seq = FaultySequence(["a", "b", "c"], fail_at=1)
    assert list(seq) == ["a", "b", "c"] and not seq.fired
    it = iter(seq)
    assert next(it) == "a"
    with pytest.raises(InjectedFault):
        next(it)
    assert seq.fired and len(seq) == 3


@pytest.mark.parametrize("where", ["before", "mid", "after"])
def test_faulty_store_plans(where: str) -> None:
    """``FaultyStore`` fails the planned write only; reads pass through."""
    inner = InMemoryStore()
    store: MemoryStore = FaultyStore(inner, FaultPlan(on_call=2, where=where, section="add", fail_at=1))  # type: ignore[arg-type]
    store.open(dimension=4)
    store.write(WriteBatch(add=[new(rec("a"))]))
    with pytest.raises(InjectedFault):
        store.write(WriteBatch(add=[new(rec("b")), new(rec("c"))]))
    expected = ["a", "b", "c"] if where == "after" else ["a"]
    assert [r.record_id for r in store.query(RecordFilter())] == expected
    store.write(WriteBatch(add=[new(rec("d"))]))
    assert store.count(RecordFilter()) == len(expected) + 1


def test_zero_code_run_from_a_uri(pytester: pytest.Pytester) -> None:
    """``--agentmemory-uri memory://`` alone picks the backend by the URI's scheme and builds it
    with ``from_uri``."""
    result = pytester.runpytest_inprocess(
        "--pyargs", "agentmemory_conformance", "--agentmemory-uri", "memory://", "-k", "test_duplicate_ids", "-q", "-p", "no:cacheprovider"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 2 and outcomes.get("failed", 0) == 0, result.outlines[-20:]


def test_profile_is_validated(pytester: pytest.Pytester) -> None:
    """An unknown ``--agentmemory-profile`` is a usage error, not a silent default."""
    result = pytester.runpytest_inprocess("--pyargs", "agentmemory_conformance", "--agentmemory-profile", "weekly", "-q", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert any("weekly" in line for line in result.errlines + result.outlines)
