"""The benchmark's progress display (Rich): a live bar on a terminal, sparse plain lines in logs,
nothing with ``--quiet``."""

from __future__ import annotations

import io

import pytest

progress = pytest.importorskip("agentmemory_bench.progress")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_rich_bar_that_ends_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TERM", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = Terminal()
    with progress.Progress("ingest duckdb", 8, stream=stream) as bar:
        assert bar._bar is not None  # the Rich live display
        for _ in range(8):
            bar.advance()
    out = stream.getvalue()
    assert "ingest duckdb" in out and "8/8" in out
    assert "\x1b[" in out  # drawn with terminal control codes
    assert bar._bar is None  # stopped


def test_logs_get_a_line_at_start_each_quarter_and_end() -> None:
    stream = io.StringIO()
    with progress.Progress("evaluate", 100, stream=stream) as bar:
        for _ in range(100):
            bar.advance()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("evaluate") and "0/100" in lines[0]
    assert [line.split()[1] for line in lines] == ["0/100", "25/100", "50/100", "75/100", "100/100"]
    assert "\x1b[" not in stream.getvalue()


def test_quiet_prints_nothing(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(progress.Progress, "enabled", False)
    stream = Terminal()
    with progress.Progress("quiet", 4, stream=stream) as bar:
        bar.advance(4)
    progress.note("hidden")
    assert stream.getvalue() == "" and capsys.readouterr().err == ""
