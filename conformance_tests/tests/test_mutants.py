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

SECOND_SET_CAUGHT = [
    "MetadataIntAsFloatStore",
    "CaseInsensitiveScopeDuckStore",
    "ChunkedBulkAddDuckStore",
    "NullIsMissingStore",
    "ResurrectedVectorStore",
    "EmptySetsUnfilteredDuckStore",
    "AsyncPageCapDuckStore",
    "AccentFoldingKeywordStore",
    "ExpiryAsTextStore",
    "PythonEqualityFilterStore",
    "KeywordTiesBySeqDuckStore",
    "LimitPlusOneStore",
    "AsyncOffsetIgnoredDuckStore",
    "LinksSourceOnlyDuckStore",
    "MetadataPatchMergeDuckStore",
    "MillisecondTimestampsDuckStore",
    "VectorSearchIgnoresStatusDuckStore",
    "TombstonedLinksStore",
    "DottedKeyPathStore",
    "DescWindowDuckStore",
]
"""The second, independent set of buggy backends (``mutant_stores.SECOND_SET``: wrappers of the
reference store and of DuckDB, bugs of other kinds than the first set's) that the suite catches
with an example test, i.e. on every run. ``conformance_tests/mutation/buggy_backends.py``
reports the whole set (caught, caught only by the state machine, missed)."""

INDEX_TEXT_CAUGHT = {
    "KeywordIgnoresIndexTextStore": {
        "test_keyword_search_scores_the_index_text",
        "test_patches_reindex",
        "test_bulk_add_takes_an_index_text_column",
    },
    "StaleIndexTextPatchStore": {"test_patches_reindex"},
}
"""SPI 1.1 mutants (``mutant_stores.INDEX_TEXT_SET``) and the ``IndexTextTests`` each must fail
(at least these; every failure must be one of ``IndexTextTests``)."""

TEST_FILE = """
from agentmemory_conformance import BackendConformance
from {module} import {cls}


class TestUnderTest(BackendConformance):
    def make_store(self, path):
        return {cls}()
"""

NAMED_FILE = """
from agentmemory_conformance import BackendConformance
from mutant_stores import make


class TestUnderTest(BackendConformance):
    def make_store(self, path):
        return make({name!r}, path, duckdb_file=False)
"""


def run_suite(pytester: pytest.Pytester, module: str, cls: str, *args: str) -> pytest.RunResult:
    """Run the whole suite on ``module.cls`` in a pytester sandbox (smoke Hypothesis profile)."""
    pytester.syspathinsert(HERE)
    pytester.makepyfile(test_under_test=TEST_FILE.format(module=module, cls=cls))
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--agentmemory-profile", "smoke", "-W", "ignore", *args)


def run_named(pytester: pytest.Pytester, name: str, *args: str) -> pytest.RunResult:
    """Run the whole suite on ``mutant_stores.make(name, path)`` (DuckDB ones in memory: a
    file per test costs about a third of a second, and none of these bugs is about persistence)."""
    pytester.syspathinsert(HERE)
    pytester.makepyfile(test_under_test=NAMED_FILE.format(name=name))
    return pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--agentmemory-profile", "smoke", "-W", "ignore", *args)


@pytest.mark.parametrize("mutant", MUTANT_NAMES)
def test_suite_fails_on_mutant(pytester: pytest.Pytester, mutant: str) -> None:
    """Each broken store makes the suite fail (``-x``: the first failure is enough)."""
    result = run_suite(pytester, "mutant_stores", mutant, "-x")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"the suite did not catch {mutant}:\n" + "\n".join(result.outlines[-20:])
    caught_by = [m.group(1) for line in result.outlines if (m := re.match(r"FAILED \S+::(\S+)", line))]
    print(f"{mutant} caught by {caught_by}")


@pytest.mark.parametrize("mutant", SECOND_SET_CAUGHT)
def test_suite_fails_on_second_set(pytester: pytest.Pytester, mutant: str) -> None:
    """Each caught store of the second set makes an example test fail (``-x``; the state
    machine, which runs last, is never what catches these)."""
    result = run_named(pytester, mutant, "-x")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 1, f"the suite did not catch {mutant}:\n" + "\n".join(result.outlines[-20:])
    caught_by = [m.group(1) for line in result.outlines if (m := re.match(r"FAILED \S+::(\S+)", line))]
    assert not any(t.startswith("test_state_machine_against_reference") for t in caught_by), caught_by
    print(f"{mutant} caught by {caught_by}")


@pytest.mark.parametrize("mutant", sorted(INDEX_TEXT_CAUGHT))
def test_index_text_tests_fail_on_index_text_mutants(pytester: pytest.Pytester, mutant: str) -> None:
    """``IndexTextTests`` alone (``-k`` on its test names) catch each SPI 1.1 bug: the named tests
    fail and nothing but ``IndexTextTests`` does; the rest of the class passes."""
    from agentmemory_conformance.suite.spi_index_text import IndexTextTests

    tests = sorted(n for n in vars(IndexTextTests) if n.startswith("test_"))
    result = run_named(pytester, mutant, "-k", " or ".join(tests))
    outcomes = result.parseoutcomes()
    failed = {m.group(1) for line in result.outlines if (m := re.match(r"FAILED \S+::(\w+)", line))}
    tail = "\n".join(result.outlines[-30:])
    assert outcomes.get("failed", 0) >= 1, f"IndexTextTests did not catch {mutant}:\n{tail}"
    assert INDEX_TEXT_CAUGHT[mutant] <= failed <= set(tests), f"{mutant}: {sorted(failed)}\n{tail}"
    assert outcomes.get("passed", 0) >= 1, tail  # the same run passes the tests the bug does not touch
    print(f"{mutant} caught by {sorted(failed)}")


def test_index_text_tests_pass_on_the_reference(pytester: pytest.Pytester) -> None:
    """The same ``-k`` selection on the unbroken reference store passes (and is not empty)."""
    from agentmemory_conformance.suite.spi_index_text import IndexTextTests

    tests = sorted(n for n in vars(IndexTextTests) if n.startswith("test_"))
    result = run_suite(pytester, "agentmemory.reference_store", "InMemoryStore", "-k", " or ".join(tests))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= len(tests) - 1, result.outlines[-20:]


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
