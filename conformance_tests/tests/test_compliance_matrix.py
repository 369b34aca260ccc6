"""The compliance matrix (``agentmemory_conformance.matrix``): its shape on a real run, how it shows
failures, skips and backends that built no store, and that the committed matrices are current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentmemory_conformance import __version__
from agentmemory_conformance.matrix import (
    README_END,
    README_START,
    build_matrix,
    main,
    reason_gist,
    render_combined,
    render_markdown,
    short_test,
    suite_catalogue,
)

from agentmemory.spi import SPEC_VERSION, Capability

ROOT = Path(__file__).resolve().parents[1]
COMPLIANCE = ROOT / "compliance"
BACKENDS = ("memory", "duckdb", "hnswlib", "postgres", "oracle")
REGENERATE = "see 'Compliance matrix' in conformance_tests/README.md for the commands that regenerate it"
SUBSET = "test_deleted_text_is_forgotten_by_every_read_path or test_keyword_and_hybrid_strategies or test_client_data_survives_reopen"


def _rows(matrix: dict[str, Any], part: str, key: str) -> dict[str, dict[str, Any]]:
    return {row[key]: row for row in matrix[part]}


def test_matrix_of_the_memory_backend_on_a_subset(tmp_path: Path) -> None:
    """``report --backend memory -k ...`` runs the suite and writes the Markdown and JSON matrix:
    every clause and capability of the suite is a row; the selected ones carry their results (a
    skip with its reason), the others are ``not run``."""
    md, js = tmp_path / "memory.md", tmp_path / "memory.json"
    code = main(["report", "--backend", "memory", "--profile", "smoke", "-k", SUBSET, "--out", str(md), "--out", str(js)])
    assert code == 0
    matrix = json.loads(js.read_text())
    assert matrix["suite"] == "agentmemory-conformance" and matrix["suite_version"] == __version__
    assert matrix["spec_version"] == SPEC_VERSION and matrix["profile"] == "smoke" and matrix["selection"] == SUBSET
    assert matrix["backend"]["name"] == "memory" and matrix["backend"]["spec_version"] == SPEC_VERSION
    assert matrix["totals"] == {"passed": 4, "failed": 0, "skipped": 1, "xfailed": 0}, matrix["totals"]
    catalogue = suite_catalogue()
    clauses = _rows(matrix, "clauses", "clause")
    assert sorted(clauses) == sorted(catalogue["clauses"])
    assert clauses["3.forget"]["result"] == "passed" and clauses["3.forget"]["passed"] == 2
    assert clauses["7.strategies"]["result"] == "passed"
    persistence = clauses["9.persistence"]
    assert persistence["result"] == "skipped" and persistence["skipped"] == 1
    assert persistence["skip_reasons"] == [{"reason": "capability 'persistence' not declared by backend 'memory'", "tests": 1}]
    assert clauses["spi.query"]["result"] == "not run" and clauses["spi.query"]["suite_tests"] > 0
    caps = _rows(matrix, "capabilities", "capability")
    assert set(caps) == {"core", *(c.value for c in Capability)}
    assert caps["persistence"]["declared"] is False and caps["persistence"]["result"] == "skipped"
    assert caps["keyword_search"]["declared"] is True and caps["keyword_search"]["passed"] == 2
    text = md.read_text()
    assert text.startswith("# Compliance matrix: `memory`")
    assert f"agentmemory-conformance {__version__}" in text and f"spec_version {SPEC_VERSION}" in text
    assert "| `3.forget` | passed | 2 / 0 / 0 / 0 |  |" in text
    assert "| `9.persistence` | skipped | 0 / 0 / 1 / 0 | 1 skipped: capability 'persistence' not declared by backend 'memory' |" in text
    assert "| `persistence` | no | skipped |" in text


def _test(name: str, outcome: str, clauses: list[str], requires: list[str] = [], detail: str = "") -> dict[str, Any]:  # noqa: B006
    return {"test": f"pkg/test_registered.py::TestRegisteredBackend::{name}[oracle-sync]", "outcome": outcome,
            "clauses": clauses, "requires": requires, "detail": detail}


def test_failures_skips_and_a_backend_that_built_no_store() -> None:
    """A clause with one failure is ``failed`` and names the test; skip reasons are grouped by
    their gist; without a built store the header comes from the registered class."""
    report = {
        "suite_version": __version__, "spec_version": SPEC_VERSION, "profile": "ci", "backend": None,
        "totals": {"passed": 1, "failed": 1, "skipped": 2, "xfailed": 1},
        "tests": [
            _test("test_a", "passed", ["2.links"]),
            _test("test_b", "failed", ["2.links"], detail="call: AssertionError: link l1 still there\nmore"),
            _test("test_c", "skipped", ["spi.keyword-search"], ["keyword_search"], "backend 'oracle' built no store: no DSN at /tmp/x/y/z"),
            _test("test_d", "skipped", ["spi.keyword-search"], ["keyword_search"], "backend 'oracle' built no store: no DSN at /tmp/q/r"),
            _test("test_e", "xfailed", ["7.ties"], detail="acme#12: ties in insertion order"),
        ],
    }
    matrix = build_matrix(report, backend="oracle")
    assert matrix["backend"]["name"] == "oracle" and matrix["backend"]["class"] == "agentmemory_oracle.store.OracleStore"
    assert matrix["backend"]["spec_version"] == SPEC_VERSION and matrix["backend"]["capabilities"] is None
    assert matrix["ok"] is False
    clauses = _rows(matrix, "clauses", "clause")
    assert clauses["2.links"]["result"] == "failed"
    assert clauses["2.links"]["failures"] == [{"test": "test_b[sync]", "error": "call: AssertionError: link l1 still there"}]
    assert clauses["spi.keyword-search"]["skip_reasons"] == [{"reason": "backend 'oracle' built no store: no DSN at <path>", "tests": 2}]
    assert clauses["7.ties"]["result"] == "xfailed" and clauses["7.ties"]["opt_outs"][0]["test"] == "test_e[sync]"
    assert clauses["2.ttl"]["result"] == "not run"
    caps = _rows(matrix, "capabilities", "capability")
    assert caps["keyword_search"]["declared"] is None and caps["keyword_search"]["result"] == "skipped"
    text = render_markdown(matrix)
    assert "unknown" in text and "FAILED test_b[sync]" in text
    table = render_combined([matrix])
    assert "| `2.links` | ❌ 1 of 2 |" in table and "| `spi.keyword-search` | ⏭️ 2<sup>1</sup> |" in table
    assert "1. backend 'oracle' built no store: no DSN at <path>" in table
    assert short_test("a.py::C::test_x[memory-async]") == "test_x[async]" and short_test("a.py::C::test_y[duckdb]") == "test_y"
    assert reason_gist("") == "no reason given" and len(reason_gist("x" * 500)) == 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_committed_matrix_is_current(backend: str) -> None:
    """The committed matrix of each bundled backend lists exactly the suite's clauses and
    capabilities, with this suite's version and test counts (cheap: no backend is run), and its
    Markdown is the rendering of its JSON."""
    path = COMPLIANCE / f"{backend}.json"
    assert path.exists(), f"{path} is missing; {REGENERATE}"
    matrix = json.loads(path.read_text())
    catalogue = suite_catalogue()
    assert matrix["suite_version"] == __version__ and matrix["spec_version"] == SPEC_VERSION, REGENERATE
    assert matrix["backend"]["name"] == backend and matrix["selection"] is None
    got = {row["clause"]: row["suite_tests"] for row in matrix["clauses"]}
    want = {clause: len(tests) for clause, tests in catalogue["clauses"].items()}
    assert got == want, f"the suite's clauses or their tests changed since {path.name} was generated; {REGENERATE}"
    caps = {row["capability"]: row["suite_tests"] for row in matrix["capabilities"]}
    assert caps == {cap: len(tests) for cap, tests in catalogue["capabilities"].items()}, REGENERATE
    assert (COMPLIANCE / f"{backend}.md").read_text() == render_markdown(matrix), REGENERATE
    if backend == "oracle":  # offline: everything that needs the database skips, with the reason
        assert matrix["totals"]["failed"] == 0 and matrix["totals"]["skipped"] > 400
        assert all("AGENTMEMORY_ORACLE_DSN" in r["reason"] for row in matrix["clauses"] for r in row["skip_reasons"])
    else:
        assert matrix["ok"] is True and matrix["totals"]["failed"] == 0


def test_readme_shows_the_combined_matrix() -> None:
    """The README's compliance section is the combined table of the committed matrices."""
    matrices = [json.loads((COMPLIANCE / f"{b}.json").read_text()) for b in BACKENDS]
    readme = (ROOT / "README.md").read_text()
    start, end = readme.index(README_START) + len(README_START), readme.index(README_END)
    assert readme[start:end].strip() == render_combined(matrices).strip(), REGENERATE
