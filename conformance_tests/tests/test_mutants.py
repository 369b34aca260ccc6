"""The suite proves its power: run it (with pytester) against deliberately broken stores and
require it to fail on each, and to pass on the unbroken reference through the same harness."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

HERE = Path(__file__).parent

MUTANT_NAMES = [
    "ScopePrefixLeakStore",
    "ScopeAbsentLeakStore",
    "LostUpdateStore",
    "StatusNotFlippedStore",
    "AsyncOnlyBugStore",
    "ExpiredVisibleInSearchStore",
    "ExpiryBoundaryStore",
    "PartialBatchStore",
    "LinksSurviveDeleteStore",
    "TieBreakStore",
    "SeqReuseStore",
    "KeywordScopeLeakStore",
    "PatchDropsMetadataStore",
    "FalsePersistenceStore",
    "PoorRecallStore",
    "KeywordClaimStore",
]

TEST_FILE = """
from agentmemory_conformance import BackendConformance
from {module} import {cls}


class TestUnderTest(BackendConformance):
    def make_store(self, path):
        return {cls}()
"""


def run_suite(pytester: pytest.Pytester, module: str, cls: str, *args: str) -> pytest.RunResult:
    """Run the whole suite on ``module.cls`` in a pytester sandbox (smoke Hypothesis profile)."""
    pytester.syspathinsert(HERE)
    pytester.makepyfile(test_under_test=TEST_FILE.format(module=module, cls=cls))
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--agentmemory-profile", "smoke", "-W", "ignore", *args)


@pytest.mark.parametrize("mutant", MUTANT_NAMES)
def test_suite_fails_on_mutant(pytester: pytest.Pytester, mutant: str) -> None:
    """Each broken store makes the suite fail (``-x``: the first failure is enough)."""
    result = run_suite(pytester, "mutant_stores", mutant, "-x")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"the suite did not catch {mutant}:\n" + "\n".join(result.outlines[-20:])
    caught_by = [m.group(1) for line in result.outlines if (m := re.match(r"FAILED \S+::(\S+)", line))]
    print(f"{mutant} caught by {caught_by}")


@pytest.mark.parametrize("variant", ["ApproximateButExactStore", "MinimalStore"])
def test_suite_passes_valid_variants(pytester: pytest.Pytester, variant: str) -> None:
    """Valid backends with other capability sets pass: an approximate one held to its floor,
    and one declaring nothing optional (its keyword tests skip with the reason)."""
    result = run_suite(pytester, "mutant_stores", variant, "-rs")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) > 200, "\n".join(result.outlines[-30:])
    if variant == "MinimalStore":
        assert any("capability 'keyword_search' not declared by backend 'variant-minimal'" in line for line in result.outlines)
        assert any("capability 'concurrent_writers' not declared" in line for line in result.outlines)


def test_harness_passes_the_reference(pytester: pytest.Pytester) -> None:
    """The same harness on the unbroken ``InMemoryStore`` passes: the failures above come from
    the mutations, not from the harness."""
    result = run_suite(pytester, "agentmemory.reference_store", "InMemoryStore")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) > 300, result.outlines[-20:]
