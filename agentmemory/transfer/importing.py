"""Writing dump entries into a store: batched, atomic per batch, idempotent, resumable.

Records keep their ids, so rerunning an import after an interruption finds the records of the
batches already committed, sees they are equal, and skips them; nothing is duplicated or lost.
A record or link that exists with different content is a conflict, handled per
``on_conflict``: ``fail`` (default: raise ``Conflict`` naming it, before its batch is written),
``skip`` (keep the stored one, list it in the report) or ``overwrite`` (patch the stored record's
content, metadata, status, times and vector; its type, scope, role and creation time cannot
change, and a differing link cannot be replaced: both still fail).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from ..effects import run_sync
from ..embedders import Embedder
from ..embedders.base import embed_op
from ..errors import Conflict, InvalidArgument, NotFound
from ..ids import thread_record_id
from ..index_text import embedding_text
from ..operations.extraction import drop_newest_patch
from ..records import Link, Record, RecordType
from ..spi import MemoryStore, NewRecord, RecordFilter, RecordPatch, WriteBatch
from ..validation import validate_positive_int
from .dump_format import DumpEnd, DumpEntry, DumpFormatError, DumpHeader, LinkEntry, RecordEntry
from .exporting import embedder_identity

DEFAULT_BATCH: int = 1000
"""Records per write (each one atomic)."""
MAX_LISTED_CONFLICTS = 100
_FIXED_FIELDS = ("record_type", "user_id", "agent_id", "thread_id", "role", "created_at")


class OnConflict(str, Enum):
    """What an import does with a record or link that exists with different content."""

    FAIL = "fail"
    SKIP = "skip"
    OVERWRITE = "overwrite"


@dataclass
class TransferReport:
    """What an import or migration wrote (or, in a dry run, would write)."""

    records_written: int = 0
    records_unchanged: int = 0
    records_overwritten: int = 0
    records_conflicting: int = 0
    links_written: int = 0
    links_unchanged: int = 0
    links_conflicting: int = 0
    vectors: str = "none"
    """``kept`` (the source's vectors), ``re-embedded`` (with the target's embedder) or ``none``."""
    vectors_reason: str = ""
    reembedded: int = 0
    conflicts: list[str] = field(default_factory=list)
    """The first conflicting ids with what differs (up to 100)."""
    dry_run: bool = False
    seconds: float = 0.0

    def summary(self) -> str:
        """One readable paragraph, for the CLI."""
        verb = "would write" if self.dry_run else "wrote"
        return (
            f"{verb} {self.records_written} records and {self.links_written} links; "
            f"{self.records_unchanged} records and {self.links_unchanged} links already there and equal; "
            f"{self.records_overwritten} overwritten; "
            f"{self.records_conflicting + self.links_conflicting} conflicts skipped; "
            f"vectors {self.vectors} ({self.vectors_reason}) in {self.seconds:.1f}s"
        )


def import_entries(
    store: MemoryStore,
    embedder: Embedder,
    entries: Iterable[DumpEntry],
    *,
    on_conflict: OnConflict | str = OnConflict.FAIL,
    dry_run: bool = False,
    batch_size: int = DEFAULT_BATCH,
    progress: Callable[[int], None] | None = None,
) -> TransferReport:
    """Write ``entries`` (header first, end last) into ``store``; ``embedder`` re-embeds when
    the dump's vectors were made by another embedder (or it has none). Errors name the entry's
    1-based position, which is the dump's line number; nothing past the last complete batch is
    written, and the last batch is written only once the end entry confirms the dump is whole."""
    try:
        policy = OnConflict(on_conflict)
    except ValueError:
        known = ", ".join(p.value for p in OnConflict)
        raise InvalidArgument("on_conflict", f"must be one of {known}, got {on_conflict!r}") from None
    validate_positive_int("batch_size", batch_size, maximum=10_000)
    with store.deferring_indexes():
        return _import(store, embedder, entries, policy, dry_run, batch_size, progress)


def _import(store: MemoryStore, embedder: Embedder, entries: Iterable[DumpEntry],
            policy: OnConflict, dry_run: bool, batch_size: int, progress: Callable[[int], None] | None) -> TransferReport:
    started = time.perf_counter()
    report = TransferReport(dry_run=dry_run)
    writer: _BatchWriter | None = None
    number = 0
    for number, entry in enumerate(entries, start=1):
        if writer is None:
            if not isinstance(entry, DumpHeader):
                raise DumpFormatError(number, "the first entry must be the dump header")
            writer = _BatchWriter(store, embedder, _keep_vectors(entry, store, embedder_identity(embedder), report),
                                  policy, dry_run, report)
            continue
        if isinstance(entry, DumpHeader):
            raise DumpFormatError(number, "a second header")
        if isinstance(entry, DumpEnd):
            if (entry.records, entry.links) != (writer.records_seen, writer.links_seen):
                raise DumpFormatError(number, f"the end line promises {entry.records} records and {entry.links} "
                                      f"links, the dump holds {writer.records_seen} and {writer.links_seen}")
            writer.flush()
            _tick(progress, writer)
            report.seconds = time.perf_counter() - started
            return report
        writer.add(number, entry)
        if writer.pending >= batch_size:
            writer.flush()
            _tick(progress, writer)
    if writer is None:
        raise DumpFormatError(1, "the dump is empty")
    raise DumpFormatError(number + 1, "the dump ends without its end line (truncated?); the last "
                          "incomplete batch was not written")


def _tick(progress: Callable[[int], None] | None, writer: _BatchWriter) -> None:
    if progress is not None:
        progress(writer.records_seen)


def _keep_vectors(header: DumpHeader, store: MemoryStore, target_id: str, report: TransferReport) -> bool:
    """Whether the dump's vectors can be written as they are; says why in the report."""
    if not header.vectors:
        report.vectors, report.vectors_reason = "re-embedded", "the dump carries no vectors"
    elif header.embedder != target_id:
        report.vectors = "re-embedded"
        report.vectors_reason = f"dump vectors are from {header.embedder!r}, the target uses {target_id!r}"
    elif header.dimension != store.dimension:
        report.vectors = "re-embedded"
        report.vectors_reason = f"dump vectors have {header.dimension} dimensions, the target {store.dimension}"
    else:
        report.vectors, report.vectors_reason = "kept", f"same embedder {target_id!r}, {store.dimension} dimensions"
        return True
    return False


class _BatchWriter:
    """Collects entries and writes them as one atomic ``WriteBatch`` per flush."""

    def __init__(self, store: MemoryStore, embedder: Embedder, keep_vectors: bool, policy: OnConflict,
                 dry_run: bool, report: TransferReport) -> None:
        self.store, self.embedder, self.keep_vectors = store, embedder, keep_vectors
        self.policy, self.dry_run, self.report = policy, dry_run, report
        self.records: list[tuple[int, RecordEntry]] = []
        self.links: list[tuple[int, Link]] = []
        self.records_seen = self.links_seen = 0

    @property
    def pending(self) -> int:
        return len(self.records) + len(self.links)

    def add(self, number: int, entry: DumpEntry) -> None:
        if isinstance(entry, RecordEntry):
            self.records.append((number, entry))
            self.records_seen += 1
        elif isinstance(entry, LinkEntry):
            self.links.append((number, entry.link))
            self.links_seen += 1

    def flush(self) -> None:
        """Write what is pending (or, in a dry run, only count it)."""
        if not self.pending:
            return
        lines = f"dump lines {min(n for n, _ in self.records + self.links)}-{max(n for n, _ in self.records + self.links)}"
        adds, overwrites = self._records()
        new_links = self._links()
        if not self.dry_run:
            add_vectors, patch_vectors = self._vectors([entry for _, entry in adds], overwrites)
            batch = WriteBatch(add=[NewRecord(e.record, v) for (_, e), v in zip(adds, add_vectors, strict=True)],
                               patch=[_overwrite(e, v) for e, v in zip(overwrites, patch_vectors, strict=True)]
                               + self._threads_told(adds, overwrites),
                               add_links=new_links)
            try:
                self.store.write(batch)
            except (Conflict, NotFound) as exc:
                raise type(exc)(*_with_context(exc, lines)) from None
        self.report.records_written += len(adds)
        self.report.links_written += len(new_links)
        self.records, self.links = [], []

    def _threads_told(self, adds: Sequence[tuple[int, RecordEntry]], overwrites: Sequence[RecordEntry]) -> list[RecordPatch]:
        """Patches, in the same batch, that drop the stored "newest message" of each thread
        this batch adds messages to (``operations.extraction.NEWEST``): with it the thread's
        next turn would read only that message, not the imported ones after it. A thread record
        the batch itself writes keeps the dump's own state."""
        threads = {e.record.thread_id for _, e in adds if e.record.record_type is RecordType.MESSAGE and e.record.thread_id}
        written = {e.record.record_id for _, e in adds} | {e.record.record_id for e in overwrites}
        ids = tuple(rid for rid in sorted(thread_record_id(t) for t in threads) if rid not in written)
        if not ids:
            return []
        stored = self.store.query(RecordFilter(record_ids=ids, record_types=frozenset({RecordType.THREAD})))
        return [patch for thread in stored if (patch := drop_newest_patch(thread)) is not None]

    def _records(self) -> tuple[list[tuple[int, RecordEntry]], list[RecordEntry]]:
        """The pending records to add (with their line numbers) and those to overwrite; equal
        ones are counted, conflicting ones handled per the policy."""
        ids = [e.record.record_id for _, e in self.records]
        duplicates = len(ids) - len(set(ids))
        if duplicates:
            seen: set[str] = set()
            for number, entry in self.records:
                if entry.record.record_id in seen:
                    raise DumpFormatError(number, f"record id {entry.record.record_id!r} appears twice")
                seen.add(entry.record.record_id)
        stored = {r.record_id: r for r in self.store.query(RecordFilter(record_ids=tuple(ids)))}
        adds: list[tuple[int, RecordEntry]] = []
        overwrites: list[RecordEntry] = []
        for number, entry in self.records:
            old = stored.get(entry.record.record_id)
            if old is None:
                adds.append((number, entry))
                continue
            differs = _differing(old, entry.record)
            if not differs:
                self.report.records_unchanged += 1
            elif self._overwrites(number, entry.record, differs):
                overwrites.append(entry)
        return adds, overwrites

    def _overwrites(self, number: int, new: Record, differs: list[str]) -> bool:
        """Whether a record stored with other content (``differs``) is overwritten: raises
        ``Conflict`` (``fail``, or a field ``overwrite`` cannot change), or counts and lists it
        (``skip``)."""
        text = f"record {new.record_id!r} (dump line {number}) exists with a different {', '.join(differs)}"
        fixed = [f for f in differs if f in _FIXED_FIELDS]
        if self.policy is OnConflict.FAIL or (self.policy is OnConflict.OVERWRITE and fixed):
            hint = (f"; {', '.join(fixed)} cannot be overwritten (delete the record first)" if fixed
                    else "; rerun with --on-conflict skip or overwrite")
            raise Conflict(text + hint)
        if self.policy is OnConflict.SKIP:
            self.report.records_conflicting += 1
            if len(self.report.conflicts) < MAX_LISTED_CONFLICTS:
                self.report.conflicts.append(text)
            return False
        self.report.records_overwritten += 1
        return True

    def _links(self) -> list[Link]:
        if not self.links:
            return []
        stored = {x.link_id: x for x in self.store.links(link_ids=[x.link_id for _, x in self.links])}
        out: list[Link] = []
        for number, link in self.links:
            old = stored.get(link.link_id)
            if old is None:
                out.append(link)
            elif not _differing(old, link):
                self.report.links_unchanged += 1
            else:
                text = f"link {link.link_id!r} (dump line {number}) exists with different endpoints, type or metadata"
                if self.policy is not OnConflict.SKIP:
                    raise Conflict(text + ("; a link cannot be overwritten" if self.policy is OnConflict.OVERWRITE
                                           else "; rerun with --on-conflict skip"))
                self.report.links_conflicting += 1
                if len(self.report.conflicts) < MAX_LISTED_CONFLICTS:
                    self.report.conflicts.append(text)
        return out

    def _vectors(self, adds: Sequence[RecordEntry], overwrites: Sequence[RecordEntry]
                 ) -> tuple[list[np.ndarray | None], list[np.ndarray | None]]:
        """The vector each added and each overwritten record gets: the dump's when kept, else a
        fresh embedding of its content (one embedder call per batch, through ``embed_op``), None
        for records without one. ``reembedded`` counts the added records embedded here."""
        entries = [*adds, *overwrites]
        out: list[np.ndarray | None] = [e.vector if self.keep_vectors and e.has_vector else None for e in entries]
        todo = [i for i, e in enumerate(entries) if e.has_vector and out[i] is None]
        if todo:
            fresh = run_sync(embed_op(self.embedder, [embedding_text(entries[i].record) for i in todo]))
            for i, vector in zip(todo, fresh, strict=True):
                out[i] = vector
            self.report.reembedded += sum(1 for i in todo if i < len(adds))
        return out[:len(adds)], out[len(adds):]


def _overwrite(entry: RecordEntry, vector: np.ndarray | None) -> RecordPatch:
    """The patch that overwrites a stored record with ``entry`` (its vector too, when it has one)."""
    new = entry.record
    return RecordPatch(new.record_id, content=new.content, index_text=new.index_text, metadata=new.metadata, status=new.status,
                       timestamp=new.timestamp, expires_at=new.expires_at, vector=vector)


def _differing(old: Record | Link, new: Record | Link) -> list[str]:
    """The fields in which ``old`` and ``new`` differ, in field order with ``metadata`` last,
    ``seq`` aside (the store assigns it); times compare as instants, metadata as JSON (so ``1``,
    ``1.0`` and ``true`` differ)."""
    differs = [f for f in type(new).model_fields
               if f not in ("seq", "metadata") and getattr(old, f) != getattr(new, f)]
    if _canonical(old.metadata) != _canonical(new.metadata):
        differs.append("metadata")
    return differs


def _canonical(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True, ensure_ascii=False)


def _with_context(exc: Exception, lines: str) -> tuple[Any, ...]:
    if isinstance(exc, NotFound):
        return (exc.kind, f"{exc.identifier} ({lines}: a link names a record that is neither in the dump before it nor in the target)")
    return (f"{lines}: {exc}",)
