"""Tables that keep ids whole: an id folded across two lines of an 80-column terminal cannot be
copied, so ``IdTable`` fits itself to the width it is rendered at by giving its id columns the
width of their longest id and narrowing (wrapping) every other column instead.

The commands stack a row's ids in one cell, a line each (the record id below the content, then
``thread <id>``, ``user <id>``), so one column needs the width of one id, and 80 columns leave the
others room. A column is marked with ``keep_whole(index, width, *narrower)``, most important
first. A column that holds only ids is never wrapped; a mixed one (content with its ids below it)
wraps its content at no less than that width. Where a marked column cannot fit, it takes the
first narrower width that does (the bare ids, the labels wrapping), and failing that wraps like
any other; ``--wide`` prints every column in full (``emit_rows(..., wide=True)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.measure import Measurement
from rich.table import Table

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult

MIN_OTHER = 4
"""The narrowest a column that holds no id is squeezed to (padding apart), unless it was given
a wider ``min_width`` of its own."""
WIDE = 100_000
"""The console width ``--wide`` renders at: wide enough that nothing wraps."""


@dataclass
class _Limits:
    min_width: int | None
    max_width: int | None
    no_wrap: bool


class IdTable(Table):
    """A Rich ``Table`` whose marked id columns are never folded at the render width."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.id_columns: list[tuple[int, tuple[int, ...]]] = []
        self._limits: list[_Limits] | None = None

    def keep_whole(self, column: int, id_width: int, *narrower: int) -> None:
        """Keep the ids of ``column`` (the longest ``id_width`` cells) on one line each; where
        that does not fit, the first of the ``narrower`` widths that does (the bare ids of a
        cell whose lines are labelled, ``user <id>``: the label then wraps, the id does not)."""
        widths = tuple(w for w in (id_width, *narrower) if w > 0)
        if widths:
            self.id_columns.append((column, widths))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        self._fit(console, options, options.max_width if self.width is None else self.width)
        yield from super().__rich_console__(console, options)

    def _fit(self, console: Console, options: ConsoleOptions, width: int) -> None:
        """Set the columns' width limits for ``width`` (recomputed from scratch on every render)."""
        if self._limits is None:
            self._limits = [_Limits(c.min_width, c.max_width, c.no_wrap) for c in self.columns]
        for column, limits in zip(self.columns, self._limits):
            column.min_width, column.max_width, column.no_wrap = limits.min_width, limits.max_width, limits.no_wrap
        if not self.id_columns:
            return
        count = len(self.columns)
        left, right = self.padding[3], self.padding[1]
        overhead = count * (left + right) + ((2 if self.show_edge else 0) + count - 1 if self.box else 0)
        natural = [_natural_width(console, options, [c.header, *c.cells]) for c in self.columns]
        floor = [max(MIN_OTHER, limits.min_width or 0) for limits in self._limits]
        kept: dict[int, int] = {}
        for index, widths in self.id_columns:
            for id_width in widths:
                trial = {**kept, index: max(kept.get(index, 0), id_width)}
                if sum(trial.values()) + sum(floor[i] for i in range(count) if i not in trial) + overhead <= width:
                    kept = trial
                    break
        for index, id_width in kept.items():
            column = self.columns[index]
            column.min_width = id_width
            if natural[index] <= id_width:
                column.no_wrap = True  # only ids: never wrapped, and never narrowed by Rich
        others = [i for i in range(count) if i not in kept]
        caps = {i: natural[i] for i in others}
        excess = sum(caps.values()) - (width - overhead - sum(kept.values()))
        while excess > 0:  # narrow the widest column still above its floor, a cell at a time
            shrinkable = [i for i in others if caps[i] > floor[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: caps[i])
            caps[widest] -= 1
            excess -= 1
        for index, cap in caps.items():
            if cap < natural[index]:
                self.columns[index].max_width = cap


def _natural_width(console: Console, options: ConsoleOptions, cells: Iterable[RenderableType]) -> int:
    """The widest any of ``cells`` renders unwrapped (padding apart)."""
    return max((Measurement.get(console, options, cell).maximum for cell in cells), default=0)


def longest(values: Iterable[object]) -> int:
    """The length of the longest ``str(value)`` (0 for none): the width an id column needs."""
    return max((len(str(v)) for v in values if v is not None), default=0)
