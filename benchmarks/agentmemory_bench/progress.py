"""A dependency-free progress bar on stderr (a single redrawn line on a terminal, sparse lines
otherwise, nothing when disabled)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``with Progress("ingest duckdb", total) as bar: bar.advance(k)``."""

    enabled: bool = True
    """Class-wide switch (the CLI's ``--quiet``)."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None, width: int = 28) -> None:
        self.label = label
        self.total = max(int(total), 1)
        self.done = 0
        self.stream = stream or sys.stderr
        self.width = width
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_pct = -1
        self._last_done = -1

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.done = min(self.done, self.total)
        self._draw(force=True, final=True)

    def advance(self, step: int = 1) -> None:
        """Count ``step`` more units done and redraw at most ~10 times a second."""
        self.done += step
        self._draw()

    def _draw(self, *, force: bool = False, final: bool = False) -> None:
        if not Progress.enabled:
            return
        now = time.perf_counter()
        frac = min(self.done / self.total, 1.0)
        pct = int(frac * 100)
        if self._tty:
            if not force and now - self._last_draw < 0.1:
                return
        elif self.done == self._last_done or not (force or pct // 25 != self._last_pct // 25):
            return  # plain logs: a line at start, at each quarter and at the end
        self._last_draw = now
        self._last_pct = pct
        self._last_done = self.done
        filled = int(frac * self.width)
        bar = "#" * filled + "-" * (self.width - filled)
        elapsed = now - self.start
        line = f"{self.label:<34} [{bar}] {self.done}/{self.total} {elapsed:6.1f}s"
        if self._tty:
            self.stream.write("\r" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def note(message: str) -> None:
    """A one-line status message on stderr (silent with ``--quiet``)."""
    if Progress.enabled:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
