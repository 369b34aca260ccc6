"""Guards that keep a backend's test class from silently weakening the suite."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from agentmemory.spi import Capability

from ..support import clause

SUITE_PACKAGE = "agentmemory_conformance"
ALLOWED_FIXTURE_OVERRIDES = frozenset({"store_factory"})


def _suite_attribute(cls: type, name: str) -> Any:
    """The attribute ``name`` as the suite itself defines it (first suite class in the MRO)."""
    for klass in cls.__mro__:
        if klass.__module__.startswith(SUITE_PACKAGE + ".") and name in vars(klass):
            return vars(klass)[name]
    return None


def _strict_xfail_reason(func: Any) -> str | None:
    for mark in getattr(func, "pytestmark", []):
        if mark.name == "xfail":
            reason = mark.kwargs.get("reason") or (mark.args[1] if len(mark.args) > 1 else "")
            if mark.kwargs.get("strict") is True and isinstance(reason, str) and reason.strip():
                return reason
    return None


class GuardTests:
    """The override guard (langchain-tests' ``test_no_overrides_DO_NOT_OVERRIDE``)."""

    @clause("suite.guard")
    def test_no_overrides_DO_NOT_OVERRIDE(self) -> None:
        """No suite test is removed, and a test overridden by the backend's class must carry
        ``@pytest.mark.xfail(reason=..., strict=True)`` (an opt-out that shows in the report and
        fails loudly once the backend is fixed). ``excluded_capabilities`` entries need a reason
        and may only name real capabilities.

        Troubleshooting: never replace a suite test with ``pass``; narrow capabilities in
        ``capabilities()`` of the backend instead, or opt out with a strict xfail.
        """
        cls = type(self)
        problems = []
        for name in dir(cls):
            suite_value = _suite_attribute(cls, name)
            if suite_value is None:
                continue
            own = inspect.getattr_static(cls, name)
            if own is suite_value:
                continue
            if name.startswith("test_"):
                if not callable(own):
                    problems.append(f"{name} was removed (set to {own!r})")
                elif _strict_xfail_reason(own) is None:
                    problems.append(f"{name} is overridden without @pytest.mark.xfail(reason=..., strict=True)")
            elif hasattr(suite_value, "_fixture_function_marker") or type(suite_value).__name__ == "FixtureFunctionDefinition":
                if name not in ALLOWED_FIXTURE_OVERRIDES:
                    problems.append(f"suite fixture {name!r} is overridden")
        for cap, reason in dict(getattr(cls, "excluded_capabilities", {})).items():
            if not isinstance(cap, Capability):
                problems.append(f"excluded_capabilities key {cap!r} is not a Capability")
            if not isinstance(reason, str) or not reason.strip():
                problems.append(f"excluded capability {cap!r} needs a reason")
        if problems:
            pytest.fail("the conformance suite was weakened:\n  " + "\n  ".join(problems))
