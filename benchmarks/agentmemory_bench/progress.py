"""Progress on stderr through Rich: a live bar on a terminal, sparse plain lines otherwise (CI
logs, pipes), nothing when disabled (``--quiet``)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress

LINE_SECONDS = 30.0
"""Longest silence of a plain-log progress line while work advances."""


class Progress:
    """``with Progress("ingest duckdb", total) as bar: bar.advance(k)``."""

    enabled: bool = True
    """Class-wide switch (the CLI's ``--quiet``)."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None, width: int = 28) -> None:
        self.label = label
        self.total = max(int(total), 1)
        self.done = 0
        self.width = width
        self.console = Console(file=stream or sys.stderr, highlight=False, soft_wrap=True)
        self.start = time.perf_counter()
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None
        self._last_quarter = -1
        self._last_done = -1
        self._last_line = self.start

    def __enter__(self) -> Progress:
        if not Progress.enabled:
            return self
        if self.console.is_terminal:
            self._bar = RichProgress(
                TextColumn("{task.description:<34}"),
                BarColumn(bar_width=self.width),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                refresh_per_second=10,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total)
        else:
            self._line(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done = min(self.done, self.total)
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done)
            self._bar.stop()
            self._bar = None
        elif Progress.enabled:
            self._line(force=True)

    def advance(self, step: int = 1) -> None:
        """Count ``step`` more units done."""
        self.done += step
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=min(self.done, self.total))
        elif Progress.enabled:
            self._line()

    def _line(self, *, force: bool = False) -> None:
        """Plain logs: a line at the start, at each quarter, at least every ``LINE_SECONDS`` while
        work advances (a long step never looks stuck), and at the end."""
        quarter = min(self.done / self.total, 1.0) * 100 // 25
        now = time.perf_counter()
        due = force or quarter != self._last_quarter or now - self._last_line >= LINE_SECONDS
        if self.done == self._last_done or not due:
            return
        self._last_quarter, self._last_done, self._last_line = int(quarter), self.done, now
        elapsed = now - self.start
        self.console.print(f"{self.label:<34} {self.done}/{self.total} {elapsed:6.1f}s", markup=False)


def note(message: str) -> None:
    """A one-line status message on stderr (silent with ``--quiet``)."""
    if Progress.enabled:
        Console(file=sys.stderr, highlight=False, soft_wrap=True).print(message, markup=False)
