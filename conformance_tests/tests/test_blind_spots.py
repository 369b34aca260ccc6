"""``BlindSpotTests`` prove their power: run them (with pytester) against the deliberately broken
stores of ``conformance_tests/mutation/blind_spot_mutants.py`` and require each to fail exactly
the test written for its bug, and the unbroken reference to pass them all through the same
harness."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from agentmemory_conformance.suite.spi_blind_spots import BlindSpotTests

MUTATION = Path(__file__).resolve().parents[1] / "mutation"
if str(MUTATION) not in sys.path:
    sys.path.insert(0, str(MUTATION))

import blind_spot_mutants  # noqa: E402,F401 - imported once here, before pytester's in-process runs
from blind_spot_mutants import MUTANTS  # noqa: E402

TESTS = sorted(n for n in vars(BlindSpotTests) if n.startswith("test_"))

TEST_FILE = """
from agentmemory_conformance.suite.base import ConformanceBase
from agentmemory_conformance.suite.spi_blind_spots import BlindSpotTests
from {module} import {cls}


class TestUnderTest(BlindSpotTests, ConformanceBase):
    def make_store(self, path):
        return {cls}()
"""


def run_blind_spots(pytester: pytest.Pytester, module: str, cls: str) -> tuple[pytest.RunResult, set[str]]:
    """Run ``BlindSpotTests`` on ``module.cls``; the result and the names of the failed tests."""
    pytester.syspathinsert(MUTATION)
    pytester.makepyfile(test_under_test=TEST_FILE.format(module=module, cls=cls))
    result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "--agentmemory-profile", "smoke", "-W", "ignore")
    failed = {m.group(1) for line in result.outlines if (m := re.match(r"FAILED \S+::(\w+)", line))}
    return result, failed


def test_every_blind_spot_test_has_a_mutant() -> None:
    """Each test of ``BlindSpotTests`` is shown failing on at least one broken store."""
    covered = set().union(*MUTANTS.values())
    assert covered == set(TESTS), f"tests without a mutant: {sorted(set(TESTS) - covered)}"


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_blind_spot_tests_fail_on_mutant(pytester: pytest.Pytester, mutant: str) -> None:
    """The mutant fails exactly the tests written for its bug; the others pass."""
    result, failed = run_blind_spots(pytester, "blind_spot_mutants", mutant)
    tail = "\n".join(result.outlines[-30:])
    assert failed == MUTANTS[mutant], f"{mutant}: failed {sorted(failed)}, expected {sorted(MUTANTS[mutant])}\n{tail}"
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1, tail


def test_blind_spot_tests_pass_on_the_reference(pytester: pytest.Pytester) -> None:
    """The same harness on the unbroken ``InMemoryStore``: every test runs and passes."""
    result, failed = run_blind_spots(pytester, "agentmemory.reference_store", "InMemoryStore")
    outcomes = result.parseoutcomes()
    assert not failed and outcomes.get("failed", 0) == 0, "\n".join(result.outlines[-30:])
    assert outcomes.get("passed", 0) >= len(TESTS) and not outcomes.get("skipped"), result.outlines[-10:]
