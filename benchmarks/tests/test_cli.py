"""The CLI runs end to end on the memory backend and writes a sane report and JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentmemory_bench.cli import parse_args
from agentmemory_bench.plan import UNSCOPED, cell_key


def test_json_has_speed_figures_for_memory_backend(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    _out, results = tiny_run
    speed = results["speed"]
    assert speed["n"] == 400 and speed["dim"] == 384
    (memory,) = speed["backends"]
    assert memory["backend"] == "memory" and memory["raw_engine"] == "numpy"
    assert memory["ingest"]["rows_per_s"] > 0 and memory["count_ok"] is True
    assert memory["ingest_bulk_add"]["rows_per_s"] > 0 and memory["ingest_bulk_add"]["batch_size"] == 400
    keys = {cell_key(s) for s in (0.001, 0.01, 0.1, 0.5, 1.0)} | {UNSCOPED}
    assert set(memory["cells"]) == keys
    for key, cell in memory["cells"].items():
        assert cell["count"] >= 5, key
        assert 0 < cell["p50_ms"] <= cell["p95_ms"], key
        # the reference store is exact: anything below 1.0 is a bug in the plan or the scoring
        assert cell["recall"] == 1.0, key
    ratios = memory["ratios"]["cells"][UNSCOPED]
    assert ratios["p50_x"] == pytest.approx(memory["cells"][UNSCOPED]["p50_ms"] / speed["raw"]["numpy"]["methods"]["exact"][UNSCOPED]["p50_ms"])
    assert memory["reopen"] is None  # the memory backend is not persistent


def test_selectivities_span_tenth_of_a_percent_to_all(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    cells = tiny_run[1]["speed"]["cells"]
    assert cells["scoped_0.1%"]["actual_selectivity"] == pytest.approx(0.001, abs=0.002)
    assert cells["scoped_1%"]["actual_selectivity"] == pytest.approx(0.01, rel=0.25)
    assert cells["scoped_50%"]["actual_selectivity"] == pytest.approx(0.5, rel=0.05)
    assert cells["scoped_100%"]["actual_selectivity"] == 1.0


def test_framework_and_embedder_figures(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    _out, results = tiny_run
    fw = results["framework"]["memory"]
    for label in ("add_messages (no extraction)", "add_messages (rule-based extraction)"):
        assert fw[label]["count"] == fw["conversation_messages"] // 2
        assert fw[label]["p50_ms"] > 0
    assert fw["memories_extracted"] > 0  # the planted name, preferences and ids
    assert fw["links_created"] >= 1  # hops have a path to walk
    assert set(fw["context_card"]) and all(v["p50_ms"] > 0 for v in fw["context_card"].values())
    assert "vector, num_hops=2" in fw["search"] and "hybrid" in fw["search"]
    for section in ("context_card", "search"):
        # each section times its own floor in its round robin: every row has a ratio to it
        rows = fw[section]
        floor = rows["SPI vector_search (same scope)"]
        assert floor["count"] == rows["card (defaults)" if section == "context_card" else "hybrid"]["count"]
        assert floor["x_floor"] == pytest.approx(1.0)
        for row in rows.values():
            assert row["x_floor"] == pytest.approx(row["p50_ms"] / floor["p50_ms"])
    assert results["embedders"]["hashing (384)"]["batch_32"]["ms_per_text"] > 0


def test_quality_figures_respect_budgets(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    quality = tiny_run[1]["quality"]
    assert quality["embedder"] == "hashing" and quality["budgets"] == [300, 800]
    assert set(quality["methods"]) == {"last-N window", "vector search", "keyword search", "hybrid search", "context card"}
    for name, method in quality["methods"].items():
        for budget, entry in method["budgets"].items():
            assert 0.0 <= entry["evidence_recall"] <= 1.0, name
            assert entry["all_evidence_hit_rate"] <= entry["evidence_recall"] + 1e-9, name
            assert entry["mean_tokens"] <= int(budget), (name, budget)
            assert entry["questions"] == quality["questions"]
    assert quality["transcript_tokens_mean"] > quality["budgets"][0]


def test_markdown_report_and_plots(tiny_run: tuple[Path, dict[str, Any]]) -> None:
    out, _results = tiny_run
    text = (out / "report.md").read_text(encoding="utf-8")
    for heading in ("## Speed and scale", "### Search latency and recall by scope selectivity", "## Framework operations", "## Memory quality"):
        assert heading in text
    assert "| **memory** (vs numpy) |" in text
    card_row = next(line for line in text.splitlines() if "| card (defaults) |" in line)
    assert card_row.rstrip(" |").endswith("×")  # the card's ratio to its round robin's floor
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "| memory (vs numpy) |" in summary and "last-N window" in summary
    pngs = sorted(p.name for p in out.glob("*.png"))
    if pngs:  # matplotlib is optional
        assert pngs == ["latency_vs_selectivity.png", "recall_vs_budget.png"]
        assert all((out / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


def test_duckdb_ingest_is_compared_with_the_same_records(tmp_path: Path) -> None:
    """DuckDB's ingest is set against raw Arrow inserts of the same records (one INSERT and the
    same batch size), for ``write`` and ``bulk_add``, and the report checks the issue's target."""
    import json

    from agentmemory_bench.cli import main

    out = tmp_path / "out"
    args = ["--n", "300", "--queries", "4", "--cell-budget", "0.3", "--batch-size", "100", "--backends", "duckdb",
            "--suites", "speed", "--raw", "duckdb", "--quiet", "--out", str(out), "--workdir", str(tmp_path / "w")]
    assert main(args) == 0
    speed = json.loads((out / "results.json").read_text(encoding="utf-8"))["speed"]
    same = speed["raw"]["duckdb"]["ingest_same_records"]
    assert same["one_insert"]["batch_size"] == 300 and same["batched"]["batch_size"] == 100
    (duck,) = speed["backends"]
    ratios, checks = duck["ratios"], duck["targets"]
    assert ratios["bulk_add_time_x_same_records"] == pytest.approx(duck["ingest_bulk_add"]["seconds"] / same["one_insert"]["seconds"])
    assert ratios["ingest_time_x_same_records_batched"] == pytest.approx(duck["ingest"]["seconds"] / same["batched"]["seconds"])
    assert {"bulk_add_time_x_raw_same_records", "write_time_x_raw_same_records_batched", "bulk_add_rows_per_s"} <= set(checks)
    assert "ingest_time_x_raw" not in checks  # the minimal-table ratio is shown, not judged
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "duckdb (same records)" in text and "bulk_add rec/s" in text


def test_unknown_suite_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--suites", "speed,nonsense"])
    assert "unknown suite" in capsys.readouterr().err
