"""The in-process reference store: pure Python + numpy, exact search.

It defines the SPI's semantics (the conformance suite compares every backend against it) and
makes the core testable without a database. Data lives in memory; ``memory://`` selects it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from .analysis import Analyzer
from .bm25 import bm25
from .errors import Conflict, InvalidArgument, NotFound
from .filters import metadata_matches
from .records import Link, Record
from .spi import (
    ANY,
    UNSET,
    Capability,
    Hit,
    MemoryStore,
    Order,
    RecordFilter,
    RecordPatch,
    SchemaPolicy,
    WriteBatch,
)
from .validation import stored_metadata


def record_matches(record: Record, flt: RecordFilter) -> bool:
    """The reference semantics of ``RecordFilter`` for one record."""
    if flt.record_ids is not None and record.record_id not in flt.record_ids:
        return False
    if flt.record_types is not None and record.record_type not in flt.record_types:
        return False
    for dim in ("user_id", "agent_id", "thread_id"):
        want = getattr(flt, dim)
        if want is not ANY and getattr(record, dim) != want:
            return False
    if flt.statuses is not None and record.status not in flt.statuses:
        return False
    if flt.alive_at is not None and record.expires_at is not None:
        if record.expires_at <= flt.alive_at:
            return False
    if flt.expired_at is not None:
        if record.expires_at is None or record.expires_at > flt.expired_at:
            return False
    if flt.min_seq is not None and record.seq < flt.min_seq:
        return False
    if flt.max_seq is not None and record.seq >= flt.max_seq:
        return False
    return metadata_matches(record.metadata, flt.metadata_filter)


def apply_patch(record: Record, patch: RecordPatch) -> Record:
    """The record after ``patch`` (vector excluded; stores keep vectors apart). New content
    without a new ``index_text`` resets it: the index follows the words the record holds."""
    changes: dict[str, object] = {}
    for name in ("content", "index_text", "metadata", "status", "timestamp", "expires_at"):
        value = getattr(patch, name)
        if value is not UNSET:
            changes[name] = stored_metadata(value) if name == "metadata" else value
    if patch.content is not UNSET and patch.index_text is UNSET:
        changes["index_text"] = None
    return record.model_copy(update=changes)


class InMemoryStore(MemoryStore):
    """Exact, thread-safe, in-memory store; a batch is applied to a copy and swapped in.

    ``language`` picks the keyword analyzer (``agentmemory.analysis``; default English,
    ``"none"`` for plain case-folded words)."""

    name = "memory"

    def __init__(self, *, language: str | None = None) -> None:
        super().__init__()
        self.analyzer = Analyzer.for_language(language)
        """Turns content and queries into BM25 terms (the same one every backend uses)."""
        self._lock = threading.RLock()
        self._records: dict[str, Record] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._link_rows: dict[str, Link] = {}
        self._seq = 0
        self._term_counts: dict[str, Counter[str]] = {}
        """BM25 term counts by indexed text, so a keyword search analyses only texts it has not
        seen (content-addressed: a patched text gets its own entry; pruned to the live ones)."""

    @classmethod
    def from_uri(cls, uri: str) -> InMemoryStore:
        """``memory://``, optionally ``memory://?language=none``."""
        from urllib.parse import parse_qsl, urlsplit

        parts = urlsplit(uri)
        if parts.netloc or parts.path.strip("/"):
            raise InvalidArgument("store", f"backend {cls.name!r} takes no location, got {uri!r}")
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = sorted(set(options) - {"language"})
        if unknown:
            raise InvalidArgument("store", f"unknown option(s) {unknown} in {uri!r}; known: ['language']")
        return cls(**options)

    def capabilities(self) -> frozenset[Capability]:
        return frozenset({Capability.KEYWORD_SEARCH, Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS})

    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        with self._lock:
            if schema_policy is SchemaPolicy.RECREATE:
                self._records.clear()
                self._vectors.clear()
                self._link_rows.clear()
                self._seq = 0
            elif self._vectors:
                some = next(iter(self._vectors.values()))
                if some.shape[0] != dimension:
                    raise Conflict(f"store holds {some.shape[0]}-d vectors, not {dimension}-d")

    def _close(self) -> None:
        """Nothing to release; the data stays for a reopen in the same process."""

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            records = dict(self._records)
            vectors = dict(self._vectors)
            links = dict(self._link_rows)
            seq = self._seq
            added: list[Record] = []
            for item in batch.add:
                rid = item.record.record_id
                if rid in records:
                    raise Conflict(f"record id {rid!r} already exists")
                seq += 1
                rec = item.record.model_copy(update={"seq": seq, "metadata": stored_metadata(item.record.metadata)})
                records[rid] = rec
                if item.vector is not None:
                    vectors[rid] = _unit(item.vector)
                added.append(rec)
            for patch in batch.patch:
                if patch.record_id not in records:
                    raise NotFound("record", patch.record_id)
                records[patch.record_id] = apply_patch(records[patch.record_id], patch)
                if patch.vector is not UNSET:
                    if patch.vector is None:
                        vectors.pop(patch.record_id, None)
                    else:
                        vectors[patch.record_id] = _unit(patch.vector)  # type: ignore[arg-type]
            for link_id in batch.delete_links:
                if link_id not in links:
                    raise NotFound("link", link_id)
                del links[link_id]
            for link in batch.add_links:
                for end in (link.source_id, link.target_id):
                    if end not in records:
                        raise NotFound("record", end)
                if link.link_id in links:
                    raise Conflict(f"link id {link.link_id!r} already exists")
                pair = {link.source_id, link.target_id}
                if any({x.source_id, x.target_id} == pair for x in links.values()):
                    raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
                links[link.link_id] = link
            for rid in batch.delete:
                if rid not in records:
                    raise NotFound("record", rid)
                del records[rid]
                vectors.pop(rid, None)
                for lid in [lid for lid, x in links.items() if rid in (x.source_id, x.target_id)]:
                    del links[lid]
            self._records, self._vectors, self._link_rows, self._seq = records, vectors, links, seq
            return added

    def _matching(self, flt: RecordFilter) -> list[Record]:
        with self._lock:
            if flt.record_ids is not None:
                pool = [self._records[r] for r in dict.fromkeys(flt.record_ids) if r in self._records]
            else:
                pool = list(self._records.values())
        return [r for r in pool if record_matches(r, flt)]

    def _query(
        self, filter: RecordFilter, order: Order, limit: int | None, offset: int
    ) -> list[Record]:
        rows = sorted(self._matching(filter), key=lambda r: r.seq, reverse=order is Order.SEQ_DESC)
        end = None if limit is None else offset + limit
        return rows[offset:end]

    def _count(self, filter: RecordFilter) -> int:
        return len(self._matching(filter))

    def _links(
        self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None
    ) -> list[Link]:
        with self._lock:
            out = list(self._link_rows.values())
        if record_ids is not None:
            wanted = set(record_ids)
            out = [x for x in out if x.source_id in wanted or x.target_id in wanted]
        if link_ids is not None:
            ids = set(link_ids)
            out = [x for x in out if x.link_id in ids]
        return sorted(out, key=lambda x: x.link_id)

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            vectors = self._vectors
        return {rid: vectors[rid].copy() for rid in record_ids if rid in vectors}

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        with self._lock:  # records and vectors from one state: a batch committing now is all in or out
            vectors = self._vectors
            pool = [r for r in self._matching(filter) if r.record_id in vectors]
        if not pool:
            return []
        matrix = np.stack([vectors[r.record_id] for r in pool])
        distances = 1.0 - matrix @ _unit(vector)
        hits = [Hit(record=r, distance=float(d)) for r, d in zip(pool, distances)]
        hits.sort(key=lambda h: (round(h.distance or 0.0, 6), h.record.record_id))
        return hits[:k]

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        terms = self.analyzer.term_set(text)
        with self._lock:
            corpus = [r for r in self._records.values() if r.record_id in self._vectors]
        if not terms or not corpus:
            return []
        docs = {r.record_id: self._terms_of(r.indexed_text) for r in corpus}
        if len(self._term_counts) > 2 * len(corpus) + 1000:  # texts of deleted or patched records
            live = {r.indexed_text for r in corpus}
            self._term_counts = {t: c for t, c in self._term_counts.items() if t in live}
        avg_len = sum(sum(c.values()) for c in docs.values()) / len(docs) or 1.0
        df = {t: sum(1 for c in docs.values() if t in c) for t in terms}
        hits = []
        for rec in corpus:
            if not record_matches(rec, filter):
                continue
            counts = docs[rec.record_id]
            score = bm25(counts, terms, df, len(docs), avg_len)
            if score > 0:
                hits.append(Hit(record=rec, score=score))
        hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.record_id))
        return hits[:k]

    def _terms_of(self, text: str) -> Counter[str]:
        counts = self._term_counts.get(text)
        if counts is None:
            counts = self._term_counts[text] = Counter(self.analyzer.terms(text))
        return counts


def _unit(vector: np.ndarray) -> np.ndarray:
    arr = np.asarray(vector, dtype=np.float32)
    return arr / np.float32(np.linalg.norm(arr))


def now_utc() -> datetime:
    """The wall clock in UTC (the default clock of the client)."""
    from datetime import timezone

    return datetime.now(timezone.utc)
