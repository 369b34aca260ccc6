"""Shared helpers for the benchmark tests: a tiny end-to-end CLI run, done once per session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

TINY_ARGS = [
    "--n", "400", "--queries", "6", "--cell-budget", "0.5", "--batch-size", "150",
    "--backends", "memory", "--suites", "speed,framework,quality", "--raw", "numpy",
    "--quality-embedder", "hashing", "--conversations", "1", "--sessions", "2", "--turns", "10",
    "--budgets", "300,800", "--quiet",
]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """Run ``agentmemory-bench`` in-process on the memory backend; returns (out dir, results)."""
    from agentmemory_bench.cli import main

    out = tmp_path_factory.mktemp("bench-out")
    work = tmp_path_factory.mktemp("bench-work")
    assert main([*TINY_ARGS, "--out", str(out), "--workdir", str(work)]) == 0
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))
