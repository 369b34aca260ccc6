"""Ratios, targets and the progress bar."""

from __future__ import annotations

import io
from typing import Any

import pytest
from agentmemory_bench.measure import Latencies
from agentmemory_bench.progress import Progress
from agentmemory_bench.report import add_ratios


def _cells(p50: float, recall: float = 1.0) -> dict[str, Any]:
    keys = ["scoped_0.1%", "scoped_1%", "scoped_10%", "scoped_50%", "scoped_100%", "unscoped"]
    return {k: {"p50_ms": p50, "p95_ms": p50 * 2, "recall": recall, "count": 10} for k in keys}


def test_ratios_divide_by_the_reference_method_of_each_cell() -> None:
    raw_cells = _cells(1.0)
    results: dict[str, Any] = {
        "speed": {
            "raw": {
                "hnswlib": {
                    "available": True,
                    "methods": {"knn": {"unscoped": raw_cells["unscoped"]}, "filter": {k: {**v, "p50_ms": 4.0} for k, v in raw_cells.items() if k != "unscoped"}},
                    "reference": {"unscoped": "knn", **{k: "filter" for k in raw_cells if k != "unscoped"}},
                    "ingest": {"seconds": 10.0}, "reopen": {"open_s": 0.1, "first_query_s": 0.1},
                    "file_bytes": 100, "rss_delta_bytes": 50,
                },
                "numpy": {"available": True, "methods": {"exact": _cells(0.5)}, "reference": {k: "exact" for k in raw_cells}},
            },
            "backends": [{
                "backend": "hnswlib", "raw_engine": "hnswlib",
                "cells": {**_cells(2.0, 0.995), "scoped_50%": {"p50_ms": 2.5, "p95_ms": 5.0, "recall": 0.98, "count": 10}},
                "ingest": {"seconds": 12.0, "rows_per_s": 1000.0}, "reopen": {"open_s": 0.3, "first_query_s": 0.1},
                "file_bytes": 150, "rss_delta_bytes": 100,
            }],
        }
    }
    add_ratios(results)
    backend = results["speed"]["backends"][0]
    r = backend["ratios"]
    assert r["ingest_time_x"] == 1.2 and r["file_x"] == 1.5 and r["rss_x"] == 2.0
    assert abs(r["reopen_x"] - 2.0) < 1e-9
    assert r["cells"]["unscoped"]["p50_x"] == 2.0  # vs knn_query
    assert r["cells"]["scoped_1%"]["p50_x"] == 0.5  # vs the filter callback
    assert r["cells"]["scoped_1%"]["p50_x_numpy"] == 4.0
    t = backend["targets"]
    assert t["scoped_p50_max_ms"]["value"] == 2.5 and t["scoped_p50_max_ms"]["ok"] is False  # target <= 2 ms
    assert t["recall_min"]["value"] == 0.98 and t["recall_min"]["ok"] is False  # target >= 0.99
    assert t["unscoped_p50_x_raw"]["ok"] is True and t["ingest_time_x_raw"]["ok"] is True


def test_percentiles_use_nearest_rank() -> None:
    lat = Latencies([i / 1000 for i in range(1, 101)])  # 1..100 ms
    assert lat.pct(50) == 50.0 and lat.pct(95) == 95.0 and lat.pct(100) == 100.0
    assert Latencies([]).pct(50) is None


def test_progress_bar_writes_plain_lines_when_not_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("ingest", 8, stream=stream) as bar:
        for _ in range(8):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("ingest") and "0/8" in lines[0]
    assert "8/8" in lines[-1] and len(lines) <= 6


def test_plain_progress_prints_a_line_when_a_slow_step_advances(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentmemory_bench import progress

    clock = iter([0.0, 0.0, 1.0, 40.0, 41.0, 90.0, 90.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    stream = io.StringIO()
    with Progress("evaluate", 1000, stream=stream) as bar:
        for _ in range(4):  # 4 of 1,000: no quarter reached, but 30 s passed twice
            bar.advance()
    assert [line.split()[1] for line in stream.getvalue().splitlines()] == ["0/1000", "2/1000", "4/1000"]
