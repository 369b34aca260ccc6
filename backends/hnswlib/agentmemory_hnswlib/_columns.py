"""In-memory columns of every vector-bearing record: what scoped search needs, per query, fast.

Each record that has a vector owns one dense *slot*: its index label, scope codes, status,
expiry, sequence number, token count, metadata JSON and its unit vector, plus the text fields a
returned record needs (content, role, timestamps as stored), so a search builds its hits without
reading SQLite. Deleting swaps the last slot into the hole, so the arrays stay dense and a filter
is a handful of vectorised numpy comparisons. SQLite stays the source of truth; these columns are
rebuilt from it on open.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from agentmemory.filters import metadata_matches
from agentmemory.records import RecordStatus, RecordType
from agentmemory.snapshot_arrays import isin_codes, pack_texts, unpack_texts
from agentmemory.spi import ANY, RecordFilter

RECORD_TYPES: tuple[RecordType, ...] = tuple(RecordType)
TYPE_CODE: dict[RecordType, int] = {t: i for i, t in enumerate(RECORD_TYPES)}
STATUS_CODE: dict[RecordStatus, int] = {RecordStatus.VALID: 0, RecordStatus.INVALID: 1}
NO_EXPIRY = int(np.iinfo(np.int64).max)
"""``expires`` of a record that never expires: later than any instant."""

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)
_CHUNK = 512
"""Rows gathered per step of an exact search: the buffer stays in cache, no page faults."""
_SMALL = 64
"""Candidate sets up to this size are ranked in plain Python (``Columns.top_k``)."""


def to_us(value: datetime) -> int:
    """Microseconds since the epoch, exact (naive datetimes are read as UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return (value - _EPOCH) // _US


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1, float32, computed exactly as the reference store does."""
    arr = np.asarray(vector, dtype=np.float32)
    return arr / np.float32(np.linalg.norm(arr))


Fields = tuple[str, str | None, str, str, str | None, str | None]
"""A slot's content, role, timestamp, created_at, expires_at and index_text, as SQLite stores them."""


@dataclass(frozen=True)
class VectorRow:
    """One vector-bearing record as the columns hold it (built from a SQLite row)."""

    label: int
    record_id: str
    record_type: str
    user_id: str | None
    agent_id: str | None
    thread_id: str | None
    status: str
    expires_us: int | None
    seq: int
    ntok: int
    metadata: str
    embedding: bytes
    content: str
    role: str | None
    timestamp: str
    created_at: str
    expires_at: str | None
    index_text: str | None

    @property
    def fields(self) -> Fields:
        """The row's content, role, timestamp, created_at, expires_at and index_text."""
        return (self.content, self.role, self.timestamp, self.created_at, self.expires_at, self.index_text)


_JOURNAL = 64
"""Changes ``Columns.changed_since`` remembers (a memoised mask older than them is rebuilt)."""
_UIDS = itertools.count(1)

_FIELD_ARRAYS = ("content", "role", "timestamp", "created_at", "expires_at", "index_text")
"""Snapshot arrays of ``Fields``, NUL-joined in that order (None is stored as ""; a role or
timestamp is never empty)."""
_TYPE_VALUE = [t.value for t in RECORD_TYPES]
_STATUS_VALUE = {c: s.value for s, c in STATUS_CODE.items()}


class Columns:
    """Slot-indexed numpy columns plus the id and label maps that scoped search needs."""

    def __init__(self, dimension: int, capacity: int = 1024) -> None:
        self.dim = dimension
        self.n = 0
        self.version = 0
        """Bumped by every change to the slots (what a memoised mask depends on)."""
        self.uid = next(_UIDS)
        """This object's own number (``id()`` may be reused by a later one)."""
        self._journal: list[tuple[int, int, int]] = []
        """(version, lo, hi): the slots ``[lo, hi)`` whose filtered values changed on reaching
        that version (lo -1: every slot), the last ``_JOURNAL`` changes (``changed_since``)."""
        cap = max(16, capacity)
        self.labels = np.empty(cap, np.int64)
        self.rtype = np.empty(cap, np.int8)
        self.user = np.empty(cap, np.int32)
        self.agent = np.empty(cap, np.int32)
        self.thread = np.empty(cap, np.int32)
        self.status = np.empty(cap, np.int8)
        self.expires = np.empty(cap, np.int64)
        self.seq = np.empty(cap, np.int64)
        self.ntok = np.empty(cap, np.int64)
        self.vectors = np.empty((cap, dimension), np.float32)
        self.rids: list[str] = []
        self.meta: list[str | None] = []
        self.fields: list[Fields] = []
        self._roles: dict[str, str] = {}
        self.slot_of: dict[str, int] = {}
        self.label_slot = np.full(1024, -1, np.int64)
        self.codes: dict[str, int] = {}
        self.names: list[str | None] = [None]
        """The text of each scope code (code 0 is None)."""
        self.total_tokens = 0
        self.sorted_n = 0
        """The first ``sorted_n`` slots are in (user, thread) code order (``cluster`` puts every
        slot so; adds go after them, a removal inside them ends them there): a user's or a
        thread's slots among them are one range, found by binary search (``scope``)."""
        self._buf = np.empty((_CHUNK, dimension), np.float32)

    # ---- maintenance ------------------------------------------------------------------------
    def _code(self, value: str | None) -> int:
        if value is None:
            return 0
        code = self.codes.get(value)
        if code is None:
            code = self.codes[value] = len(self.codes) + 1
            self.names.append(value)
        return code

    def _shared(self, fields: Iterable[tuple[str, str | None, str, str, str | None, str | None]]) -> list[Fields]:
        """Slots' fields with equal strings shared: one object per distinct role, and
        ``created_at`` the ``timestamp`` object when they are equal. An empty role or expiry
        (how a snapshot stores None; neither is ever empty) becomes None."""
        known = self._roles
        return [(c, known.setdefault(r, r) if r else None, t, t if a == t else a, e or None, x or None) for c, r, t, a, e, x in fields]

    def _reserve(self, extra: int) -> None:
        need = self.n + extra
        cap = self.labels.shape[0]
        if need > cap:
            new = max(need, cap * 2)
            for name in ("labels", "rtype", "user", "agent", "thread", "status", "expires", "seq", "ntok"):
                old = getattr(self, name)
                arr = np.empty(new, old.dtype)
                arr[: self.n] = old[: self.n]
                setattr(self, name, arr)
            vecs = np.empty((new, self.dim), np.float32)
            vecs[: self.n] = self.vectors[: self.n]
            self.vectors = vecs

    def _reserve_label(self, label: int) -> None:
        if label >= self.label_slot.shape[0]:
            arr = np.full(max(label + 1, self.label_slot.shape[0] * 2), -1, np.int64)
            arr[: self.label_slot.shape[0]] = self.label_slot
            self.label_slot = arr

    def load(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Fill empty columns from ``VECTOR_ROW_SQL`` rows in bulk (the open path: 100k rows in
        tens of milliseconds, where appending row by row would take most of a second)."""
        assert self.n == 0
        n = len(rows)
        if not n:
            return
        self._reserve(n)
        (labels, rids, rtypes, users, agents, threads, statuses, expires, seqs, ntoks, metas,
         blobs, contents, roles, stamps, created, expiry, index_texts) = zip(*rows)
        type_code = {t.value: c for t, c in TYPE_CODE.items()}
        status_code = {s.value: c for s, c in STATUS_CODE.items()}
        code = self._code
        self.labels[:n] = np.fromiter(labels, np.int64, n)
        self.rtype[:n] = np.fromiter((type_code[t] for t in rtypes), np.int8, n)
        self.user[:n] = np.fromiter((code(v) for v in users), np.int32, n)
        self.agent[:n] = np.fromiter((code(v) for v in agents), np.int32, n)
        self.thread[:n] = np.fromiter((code(v) for v in threads), np.int32, n)
        self.status[:n] = np.fromiter((status_code[v] for v in statuses), np.int8, n)
        self.expires[:n] = np.fromiter((NO_EXPIRY if e is None else e for e in expires), np.int64, n)
        self.seq[:n] = np.fromiter(seqs, np.int64, n)
        self.ntok[:n] = np.fromiter(ntoks, np.int64, n)
        self.vectors[:n] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(n, self.dim)
        self.rids = list(rids)
        self.meta = [None if m == "{}" else m for m in metas]
        self.fields = self._shared(zip(contents, roles, stamps, created, expiry, index_texts))
        self.slot_of = dict(zip(self.rids, range(n)))
        self._reserve_label(int(self.labels[:n].max()))
        self.label_slot[self.labels[:n]] = np.arange(n)
        self.total_tokens = int(self.ntok[:n].sum())
        self.n = n
        self.sorted_n = self._sorted_prefix()
        self._changed(-1, -1)

    _ARRAYS = ("labels", "rtype", "user", "agent", "thread", "status", "expires", "seq", "ntok")

    def snapshot_arrays(self) -> dict[str, np.ndarray]:
        """The columns as arrays for a snapshot (strings NUL-joined: ids and JSON cannot hold
        NUL, validation refuses it)."""
        n = self.n
        codes = [""] * len(self.codes)
        for text, code in self.codes.items():
            codes[code - 1] = text
        out = {name: getattr(self, name)[:n] for name in self._ARRAYS}
        out["rids"] = pack_texts(self.rids)
        out["meta"] = pack_texts([m or "" for m in self.meta])
        for name, column in zip(_FIELD_ARRAYS, zip(*self.fields) if n else [()] * len(_FIELD_ARRAYS)):
            out[name] = pack_texts([v or "" for v in column])
        out["codes"] = pack_texts(codes)
        out["codes_count"] = np.array([len(codes)], np.int64)
        return out

    @classmethod
    def from_snapshot(
        cls, dimension: int, arrays: dict[str, np.ndarray], vectors: np.ndarray | None
    ) -> Columns:
        """Columns rebuilt from ``snapshot_arrays`` output and the matching vectors (None: the
        caller fills ``vectors[:n]``)."""
        n = len(arrays["labels"])
        cols = cls(dimension, capacity=int(n * 1.25) + 16)
        rids = unpack_texts(arrays["rids"], n)
        meta = unpack_texts(arrays["meta"], n)
        if len(rids) != n or len(meta) != n or (vectors is not None and vectors.shape[0] != n):
            raise ValueError("snapshot columns disagree in length")
        missing = [name for name in _FIELD_ARRAYS if name not in arrays]
        if missing:  # a snapshot written before the columns held them: the caller reads the records
            raise ValueError(f"snapshot columns lack {', '.join(missing)}")
        content, role, stamp, created, expiry, index_text = (unpack_texts(arrays[name], n) for name in _FIELD_ARRAYS)
        if any(len(column) != n for column in (content, role, stamp, created, expiry, index_text)):
            raise ValueError("snapshot record fields disagree in length")
        for name in cls._ARRAYS:
            column = arrays[name]
            if len(column) != n:
                raise ValueError(f"snapshot column {name} has {len(column)} rows, not {n}")
            getattr(cols, name)[:n] = column
        if vectors is not None:
            cols.vectors[:n] = vectors
        cols.rids = rids
        cols.meta = [m or None for m in meta]
        cols.fields = cols._shared(zip(content, role, stamp, created, expiry, index_text))
        names = unpack_texts(arrays["codes"], int(arrays["codes_count"][0]))
        cols.codes = {text: i + 1 for i, text in enumerate(names)}
        cols.names = [None, *names]
        cols.slot_of = dict(zip(rids, range(n)))
        if n:
            cols._reserve_label(int(cols.labels[:n].max()))
            cols.label_slot[cols.labels[:n]] = np.arange(n)
        cols.total_tokens = int(cols.ntok[:n].sum())
        cols.n = n
        cols.sorted_n = cols._sorted_prefix()
        return cols

    def add(self, rows: Sequence[VectorRow]) -> np.ndarray:
        """Append ``rows`` (their record ids must be new); return their slots."""
        self._reserve(len(rows))
        start = self.n
        if rows:
            self._reserve_label(max(r.label for r in rows))
        for i, row in enumerate(rows):
            slot = start + i
            self.labels[slot] = row.label
            self.rtype[slot] = TYPE_CODE[RecordType(row.record_type)]
            self.user[slot] = self._code(row.user_id)
            self.agent[slot] = self._code(row.agent_id)
            self.thread[slot] = self._code(row.thread_id)
            self.status[slot] = STATUS_CODE[RecordStatus(row.status)]
            self.expires[slot] = NO_EXPIRY if row.expires_us is None else row.expires_us
            self.seq[slot] = row.seq
            self.ntok[slot] = row.ntok
            self.vectors[slot] = np.frombuffer(row.embedding, dtype=np.float32)
            self.rids.append(row.record_id)
            self.meta.append(None if row.metadata == "{}" else row.metadata)
            self.slot_of[row.record_id] = slot
            self.label_slot[row.label] = slot
            self.total_tokens += row.ntok
        self.fields.extend(self._shared(row.fields for row in rows))
        self.n = start + len(rows)
        self._changed(start, self.n)
        return np.arange(start, self.n)

    def update(self, row: VectorRow) -> None:
        """Refresh the mutable columns (status, expiry, metadata, tokens, record fields) of an
        existing slot."""
        slot = self.slot_of[row.record_id]
        self._changed(slot, slot + 1)
        self.status[slot] = STATUS_CODE[RecordStatus(row.status)]
        self.expires[slot] = NO_EXPIRY if row.expires_us is None else row.expires_us
        self.total_tokens += row.ntok - int(self.ntok[slot])
        self.ntok[slot] = row.ntok
        self.meta[slot] = None if row.metadata == "{}" else row.metadata
        (self.fields[slot],) = self._shared([row.fields])

    def remove(self, record_id: str) -> int:
        """Drop the slot of ``record_id`` (swap-with-last); return the label it held."""
        slot = self.slot_of.pop(record_id)
        self._changed(slot, slot + 1)  # the last slot's row moves here; the slots end before it
        self.sorted_n = min(self.sorted_n, slot)  # the row moved into the hole is out of order
        label = int(self.labels[slot])
        self.label_slot[label] = -1
        self.total_tokens -= int(self.ntok[slot])
        last = self.n - 1
        if slot != last:
            for arr in (self.labels, self.rtype, self.user, self.agent, self.thread, self.status,
                        self.expires, self.seq, self.ntok, self.vectors):
                arr[slot] = arr[last]
            moved = self.rids[last]
            self.rids[slot] = moved
            self.meta[slot] = self.meta[last]
            self.fields[slot] = self.fields[last]
            self.slot_of[moved] = slot
            self.label_slot[int(self.labels[slot])] = slot
        self.rids.pop()
        self.meta.pop()
        self.fields.pop()
        self.n = last
        return label

    def cluster(self) -> bool:
        """Reorder the slots by (user, thread, agent, seq) so a scope's vectors lie together:
        an exact scan of one user's or thread's rows then reads memory sequentially instead of
        gathering rows from all over the matrix. Returns whether anything moved."""
        n = self.n
        if n < 2:
            return False
        keys = (self.seq[:n], self.agent[:n], self.thread[:n], self.user[:n])
        order = np.lexsort(keys)  # the last key is the primary one
        if np.array_equal(order, np.arange(n)):
            self.sorted_n = n
            return False
        self._changed(-1, -1)
        for name in self._ARRAYS:
            column = getattr(self, name)
            column[:n] = column[:n][order]
        vectors = np.empty_like(self.vectors)
        np.take(self.vectors[:n], order, axis=0, out=vectors[:n])
        self.vectors = vectors
        self.rids = [self.rids[i] for i in order]
        self.meta = [self.meta[i] for i in order]
        self.fields = [self.fields[i] for i in order]
        self.slot_of = dict(zip(self.rids, range(n)))
        self.label_slot[self.labels[:n]] = np.arange(n)
        self.sorted_n = n
        return True

    def _sorted_prefix(self) -> int:
        """How many leading slots are in (user, thread) code order (a snapshot is saved
        clustered; records added after it follow)."""
        n = self.n
        if n < 2:
            return n
        user, thread = self.user[:n], self.thread[:n]
        ok = (user[1:] > user[:-1]) | ((user[1:] == user[:-1]) & (thread[1:] >= thread[:-1]))
        bad = np.flatnonzero(~ok)
        return n if not len(bad) else int(bad[0]) + 1

    def rows(self, slots: list[int]) -> list[tuple[Any, ...]]:
        """``slots`` as rows of ``_sql.RECORD_COLUMNS``: each record as SQLite holds it (one
        gather per column, no numpy scalar per value)."""
        at = np.asarray(slots, np.int64)
        names, fields, rids, meta = self.names, self.fields, self.rids, self.meta
        return [
            (rids[slot], _TYPE_VALUE[rtype], f[0], names[user], names[agent], names[thread], f[1], seq,
             f[2], f[3], f[4], _STATUS_VALUE[status], meta[slot] or "{}", f[5])
            for slot, rtype, user, agent, thread, seq, status in zip(
                slots, self.rtype[at].tolist(), self.user[at].tolist(), self.agent[at].tolist(),
                self.thread[at].tolist(), self.seq[at].tolist(), self.status[at].tolist(),
            )
            for f in (fields[slot],)
        ]

    def label_of(self, record_id: str) -> int | None:
        """The index label of ``record_id``'s vector, or None."""
        slot = self.slot_of.get(record_id)
        return None if slot is None else int(self.labels[slot])

    # ---- filtering --------------------------------------------------------------------------
    def _changed(self, lo: int, hi: int) -> None:
        """A new version, at which the slots ``[lo, hi)`` changed (-1: every slot)."""
        self.version += 1
        journal = self._journal
        if len(journal) >= _JOURNAL:
            del journal[: _JOURNAL // 2]
        journal.append((self.version, lo, hi))

    def changed_since(self, version: int) -> np.ndarray | None:
        """The slots below ``n`` whose filtered values (type, scope, status, expiry, sequence)
        may differ from what they were at ``version``, ascending; None when that is not known
        (the journal no longer reaches back to it, or every slot changed). A slot past ``n``
        then was added since; one past ``n`` now was dropped."""
        journal = self._journal
        if version == self.version:
            return np.zeros(0, np.int64)
        if version > self.version or not journal or journal[0][0] > version + 1:
            return None
        spans = []
        for v, lo, hi in reversed(journal):  # the newest first: a scope is usually a turn behind
            if v <= version:
                break
            if lo < 0:
                return None
            spans.append((lo, hi))
        n = self.n
        parts = [np.arange(lo, min(hi, n)) for lo, hi in spans if lo < n]
        if len(parts) == 1:
            return parts[0]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)

    def mask(self, flt: RecordFilter) -> np.ndarray | None:
        """Slots matching every condition of ``flt`` except the metadata filter (None = all)."""
        return self.scope(flt)[0]

    def scope(self, flt: RecordFilter) -> tuple[np.ndarray | None, np.ndarray | None]:
        """``mask(flt)`` and, when it was found from the sorted slots' ranges, the matching
        slots (ascending; else None). A scope with a user is evaluated on that user's (or its
        thread's) range of the sorted slots and on the slots after them only, not on every slot:
        at 1M records a new scope's mask cost five passes over every slot (~3 ms)."""
        span = self._span(flt)
        if span is None:
            return self._match(flt, slice(0, self.n), self.n), None
        n, lo, hi = self.n, *span
        mask = np.zeros(n, bool)
        parts = []
        for a, b in ((lo, hi), (self.sorted_n, n)):
            if b > a:
                sub = self._match(flt, slice(a, b), b - a)
                assert sub is not None  # the user condition is one
                mask[a:b] = sub
                parts.append(np.flatnonzero(sub) + a)
        slots = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return mask, slots

    def _span(self, flt: RecordFilter) -> tuple[int, int] | None:
        """The range of the sorted slots that holds every one of them in ``flt``'s user (and
        thread) scope; None when ``flt`` names no user or none are sorted."""
        c, want_user, want_thread = self.sorted_n, flt.user_id, flt.thread_id
        if want_user is ANY or not c:
            return None
        user = 0 if want_user is None else self.codes.get(str(want_user))
        if user is None:
            return 0, 0
        users = self.user[:c]
        key = np.int32(user)  # a Python int would make numpy search an int64 copy of the column
        lo, hi = int(np.searchsorted(users, key, "left")), int(np.searchsorted(users, key, "right"))
        if want_thread is not ANY and hi > lo:
            thread = 0 if want_thread is None else self.codes.get(str(want_thread))
            if thread is None:
                return 0, 0
            threads, key = self.thread[lo:hi], np.int32(thread)
            lo, hi = lo + int(np.searchsorted(threads, key, "left")), lo + int(np.searchsorted(threads, key, "right"))
        return lo, hi

    def mask_at(self, flt: RecordFilter, slots: np.ndarray) -> np.ndarray:
        """Which of ``slots`` match ``flt`` as ``mask`` decides it (a mask of the slots)."""
        out = self._match(flt, slots, len(slots))
        return np.ones(len(slots), bool) if out is None else out

    def _match(self, flt: RecordFilter, at: Any, n: int) -> np.ndarray | None:
        """``mask`` over the ``n`` slots ``at`` (a slice or an array of slots)."""
        out: np.ndarray | None = None

        def both(cond: np.ndarray) -> None:
            nonlocal out
            out = cond if out is None else np.logical_and(out, cond, out=out)

        if flt.record_ids is not None:
            cond = np.zeros(self.n, bool)
            cond[[s for s in (self.slot_of.get(r) for r in flt.record_ids) if s is not None]] = True
            both(cond[at])
        if flt.record_types is not None:
            both(isin_codes(self.rtype[at], [TYPE_CODE[RecordType(t)] for t in flt.record_types]))
        for name, col in (("user_id", self.user), ("agent_id", self.agent), ("thread_id", self.thread)):
            want = getattr(flt, name)
            if want is ANY:
                continue
            code = 0 if want is None else self.codes.get(want)
            if code is None:
                return np.zeros(n, bool)
            both(col[at] == code)
        if flt.statuses is not None:
            both(isin_codes(self.status[at], [STATUS_CODE[RecordStatus(s)] for s in flt.statuses]))
        if flt.alive_at is not None:
            both(self.expires[at] > to_us(flt.alive_at))
        if flt.expired_at is not None:
            both(self.expires[at] <= to_us(flt.expired_at))
        if flt.min_seq is not None:
            both(self.seq[at] >= flt.min_seq)
        if flt.max_seq is not None:
            both(self.seq[at] < flt.max_seq)
        return out

    def meta_ok(self, slots: Iterable[int], metadata_filter: dict[str, object]) -> np.ndarray:
        """Which of ``slots`` satisfy ``metadata_filter`` (the reference matcher, in Python)."""
        meta = self.meta
        return np.fromiter(
            (metadata_matches(json.loads(m) if (m := meta[s]) else {}, metadata_filter) for s in slots),
            dtype=bool,
        )

    # ---- exact search -----------------------------------------------------------------------
    def distances(self, query: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Cosine distances (float32, as the reference computes them) of ``slots`` to the unit
        ``query``; gathered in cache-sized chunks so no large temporary is allocated."""
        count = len(slots)
        out = np.empty(count, np.float32)
        buf = self._buf
        for start in range(0, count, _CHUNK):
            stop = min(count, start + _CHUNK)
            chunk = buf[: stop - start]
            np.take(self.vectors, slots[start:stop], axis=0, out=chunk)
            np.dot(chunk, query, out=out[start:stop])
        return np.float32(1.0) - out

    def top_k(self, query: np.ndarray, slots: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` nearest of ``slots``: (slot, distance), ordered by (distance rounded to 6
        decimals, record id) exactly like the reference store."""
        if len(slots) == 0:
            return []
        dist = self.distances(query, slots)
        if len(dist) <= _SMALL:  # an ANN fetch: the same selection in Python, no numpy call per step
            near = dist.tolist()
            at = slots.tolist()
            if len(near) > k:
                # numpy compares the float32 distances with the bound cast to float32: so here
                bound = float(np.float32(sorted(near)[k - 1] + 2e-6))
                kept = [(round(d, 6), self.rids[slot], slot, d) for d, slot in zip(near, at) if d <= bound]
            else:
                kept = [(round(d, 6), self.rids[slot], slot, d) for d, slot in zip(near, at)]
            kept.sort()
            return [(slot, d) for _, _, slot, d in kept[:k]]
        if len(dist) > k:
            part = np.argpartition(dist, k - 1)[:k]
            bound = float(dist[part].max()) + 2e-6  # anything that could round to a tie
            keep = np.flatnonzero(dist <= bound)
        else:
            keep = np.arange(len(dist))
        # (rounded distance, record id, slot, distance) for each kept slot, built by C-level maps:
        # tolist() gives the same Python floats and ints as float() / int() of each element
        near = dist[keep].tolist()
        at = slots[keep].tolist()
        ranked = sorted(zip(map(round, near, [6] * len(near)), map(self.rids.__getitem__, at), at, near))
        return [(slot, d) for _, _, slot, d in ranked[:k]]

