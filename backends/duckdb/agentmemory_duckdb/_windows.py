"""A scope's newest rows kept in process (a thread's newest messages, its newest memories), so
``query`` with a small limit (the context card's reads, a turn's unextracted messages) asks
DuckDB nothing: at 100k rows any statement over ``am_records`` with a thread filter costs
~1-2 ms, the kept answer a few microseconds.

A window is keyed by the exact scope of a filter (types, user, agent, thread, statuses) and
holds, newest first, *every* row of that scope with ``seq >= floor`` (``floor`` 0: every row of
it), expired ones included: expiry, ``min_seq``/``max_seq``, the order and the limit are applied
per query. The store's write path brings each window to what the committed write made of the
table (``Windows.after_write``): a few added rows are put in front (and the oldest cut past the
window's depth), patches applied, deletes removed; what cannot be followed cheaply (a bulk add,
a status patch of a record the window does not hold) drops the window instead. A failed or
rolled-back write never reaches it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentmemory.records import Record, RecordStatus, RecordType
from agentmemory.spi import ANY, UNSET, Order, RecordFilter, RecordPatch, ScopeValue

from ._sql import decode_record, patched_row, to_micros

LOAD_MAX = 128
"""A descending query with ``offset + limit`` up to this reads (and keeps) a window."""
MIN_DEPTH = 32
"""A window keeps at least this many rows (twice the query's need when more): a card's 20
messages plus room for a few expired ones and for the rows later writes push out."""
MAX_WINDOWS = 64
"""Windows kept at once (least recently used dropped first): at most 64 x 256 rows."""
MAX_FOLLOWED = 256
"""A write with more patches and deletes than this drops every window instead of following it."""


@dataclass(frozen=True)
class WindowKey:
    """The exact scope of a filter that a window answers for (values as stored)."""

    types: frozenset[str] | None
    user_id: ScopeValue
    agent_id: ScopeValue
    thread_id: ScopeValue
    statuses: frozenset[str] | None

    def as_filter(self) -> RecordFilter:
        """The filter selecting the window's rows (to read them with)."""
        return RecordFilter(
            record_types=None if self.types is None else frozenset(RecordType(t) for t in self.types),
            user_id=self.user_id, agent_id=self.agent_id, thread_id=self.thread_id,
            statuses=None if self.statuses is None else frozenset(RecordStatus(s) for s in self.statuses),
        )

    def selects(self, row: Sequence[Any]) -> bool:
        """Whether a stored row (``RECORD_COLUMNS`` order) is in this scope, as the compiled
        filter decides it (``None``: the column is NULL)."""
        if self.types is not None and row[1] not in self.types:
            return False
        for value, want in ((row[3], self.user_id), (row[4], self.agent_id), (row[5], self.thread_id)):
            if want is not ANY and value != want:
                return False
        return self.statuses is None or row[11] in self.statuses


def key_of(flt: RecordFilter) -> WindowKey | None:
    """The window a query with ``flt`` can be answered from, or None: only scoped filters (a
    user, agent or thread named) without ids, metadata conditions or ``expired_at``."""
    if flt.record_ids is not None or flt.metadata_filter or flt.expired_at is not None:
        return None
    if flt.user_id is ANY and flt.agent_id is ANY and flt.thread_id is ANY:
        return None
    return WindowKey(
        None if flt.record_types is None else frozenset(RecordType(t).value for t in flt.record_types),
        flt.user_id, flt.agent_id, flt.thread_id,
        None if flt.statuses is None else frozenset(RecordStatus(s).value for s in flt.statuses),
    )


class _Entry:
    """One kept row (``RECORD_COLUMNS`` and ``has_vec``), its expiry in microseconds and its
    record once decoded."""

    __slots__ = ("expires_us", "record", "row")

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.row = row
        self.expires_us = None if row[10] is None else to_micros(datetime.fromisoformat(row[10]))
        self.record: Record | None = None

    def decoded(self) -> Record:
        if self.record is None:
            self.record = decode_record(self.row)
        return self.record


class _Window:
    """Every row of one scope with ``seq >= floor``, newest first, at most ``depth`` of them."""

    def __init__(self, rows: Sequence[tuple[Any, ...]], depth: int) -> None:
        self.entries = [_Entry(row) for row in rows]
        self.rids = {row[0] for row in rows}
        self.depth = depth
        self.floor = 0 if len(rows) < depth else int(rows[-1][7])

    def answer(self, flt: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record] | None:
        """The query's records when the window holds every row the query could return, else None."""
        alive = None if flt.alive_at is None else to_micros(flt.alive_at)
        lo, hi = flt.min_seq, flt.max_seq
        need = None if limit is None or order is not Order.SEQ_DESC else offset + limit
        out: list[_Entry] = []
        for entry in self.entries:
            seq = entry.row[7]
            if hi is not None and seq >= hi:
                continue
            if lo is not None and seq < lo:
                break
            if alive is not None and entry.expires_us is not None and entry.expires_us <= alive:
                continue
            out.append(entry)
            if need is not None and len(out) >= need:
                break
        # rows the window lacks are older than all it holds: they matter only when it is not
        # every row of the scope, the query reaches below its floor and the need is not met
        if not (self.floor == 0 or (lo is not None and lo >= self.floor) or (need is not None and len(out) >= need)):
            return None
        if order is not Order.SEQ_DESC:
            out.reverse()
        window = out[offset:] if limit is None else out[offset : offset + limit]
        return [entry.decoded() for entry in window]

    def prepend(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Rows just inserted (in ``seq`` order, newer than every stored row), in front; past
        ``depth`` the oldest are cut and the floor rises to the oldest one kept."""
        self.entries[:0] = [_Entry(row) for row in reversed(rows)]
        self.rids.update(row[0] for row in rows)
        if len(self.entries) > self.depth:
            for entry in self.entries[self.depth :]:
                self.rids.discard(entry.row[0])
            del self.entries[self.depth :]
            self.floor = int(self.entries[-1].row[7])

    def enter(self, row: tuple[Any, ...]) -> None:
        """A row that a patch brought into the scope, in its place by ``seq`` when the window
        reaches down to it (past ``depth`` the oldest is cut, as in ``prepend``)."""
        seq = int(row[7])
        if seq < self.floor:
            return
        at = next((i for i, entry in enumerate(self.entries) if entry.row[7] < seq), len(self.entries))
        self.entries.insert(at, _Entry(row))
        self.rids.add(row[0])
        if len(self.entries) > self.depth:
            self.rids.discard(self.entries.pop().row[0])
            self.floor = int(self.entries[-1].row[7])

    def patch(self, key: WindowKey, patch: RecordPatch) -> None:
        """A held row after ``patch``; removed when its new status leaves the scope."""
        at = next(i for i, entry in enumerate(self.entries) if entry.row[0] == patch.record_id)
        row = patched_row(self.entries[at].row, patch)
        if key.selects(row):
            self.entries[at] = _Entry(row)
        else:
            del self.entries[at]
            self.rids.discard(patch.record_id)

    def remove(self, rid: str) -> None:
        """A deleted row gone (every row at or above the floor is still held)."""
        self.entries = [entry for entry in self.entries if entry.row[0] != rid]
        self.rids.discard(rid)


class Windows:
    """The kept windows, least recently used first (call under the store's lock)."""

    def __init__(self) -> None:
        self._kept: OrderedDict[WindowKey, _Window] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        self._kept.clear()

    def answer(self, flt: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record] | None:
        """The query's records from a kept window, or None when none holds all of them."""
        if not self._kept:
            return None
        key = key_of(flt)
        window = None if key is None else self._kept.get(key)
        if key is None or window is None:
            return None
        self._kept.move_to_end(key)
        return window.answer(flt, order, limit, offset)

    def to_load(self, flt: RecordFilter, order: Order, limit: int | None, offset: int) -> tuple[WindowKey, int] | None:
        """(the window to read, how many rows) for a query worth keeping one for: newest first,
        with a small limit (a thread's newest messages or memories), else None."""
        if order is not Order.SEQ_DESC or limit is None or offset + limit > LOAD_MAX:
            return None
        key = key_of(flt)
        if key is None:
            return None
        held = self._kept.get(key)
        return key, max(MIN_DEPTH, 2 * (offset + limit), 0 if held is None else held.depth)

    def load(self, key: WindowKey, rows: Sequence[tuple[Any, ...]], depth: int) -> None:
        """Keep the newest ``depth`` rows of ``key``'s scope as read (newest first)."""
        self._kept.pop(key, None)
        while len(self._kept) >= MAX_WINDOWS:
            self._kept.popitem(last=False)
        self._kept[key] = _Window(rows, depth)

    def after_write(
        self, inserted: Sequence[tuple[Any, ...]], unknown_adds: bool, patches: Sequence[RecordPatch], deletes: Iterable[str],
        rows_after: Mapping[str, tuple[Any, ...]],
    ) -> None:
        """Bring every window to what a committed write made of the table: its ``inserted``
        rows (all of its adds unless ``unknown_adds``: then every window goes), then its
        patches, then its deletes, in the order the batch applied them. ``rows_after``: rows
        as the whole write left them (the store's rows kept by id), which tell whether a record
        a status patch touched, and the window does not hold, has entered its scope."""
        if not self._kept:
            return
        deletes = list(deletes)
        if unknown_adds or len(patches) + len(deletes) > MAX_FOLLOWED:
            self._kept.clear()
            return
        for key, window in list(self._kept.items()):
            if inserted:
                fresh = [row for row in inserted if key.selects(row)]
                if fresh:
                    window.prepend(fresh)
            for patch in patches:
                if patch.record_id in window.rids:
                    window.patch(key, patch)
                elif key.statuses is not None and patch.status is not UNSET:
                    row = rows_after.get(patch.record_id)
                    if row is None:  # it may have entered the scope, and its row is not at hand
                        del self._kept[key]
                        break
                    if key.selects(row):
                        window.enter(row)
            else:
                for rid in deletes:
                    if rid in window.rids:
                        window.remove(rid)
