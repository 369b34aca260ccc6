"""Deliberately broken backends: each is ``InMemoryStore`` or ``DuckDBStore`` with one
realistic bug. The suite must fail on every one of them (``test_mutants.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow.dataset  # noqa: F401 - DuckDB imports it lazily; pytester's in-process runs must find it imported already
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import Conflict
from agentmemory.records import Record
from agentmemory.reference_store import InMemoryStore, record_matches
from agentmemory.spi import ANY, UNSET, Capability, Hit, Order, RecordFilter, WriteBatch


def _matching_with(store: InMemoryStore, flt: RecordFilter, matches: Callable[[Record, RecordFilter], bool]) -> list[Record]:
    with store._lock:
        pool = list(store._records.values())
    if flt.record_ids is not None:
        pool = [r for r in pool if r.record_id in flt.record_ids]
    return [r for r in pool if matches(r, flt)]


class ScopePrefixLeakStore(InMemoryStore):
    """Scope ids compared with ``LIKE 'id%'``: user ``u1`` also sees ``u10``'s records."""

    name = "mutant-scope-prefix"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        def matches(rec: Record, f: RecordFilter) -> bool:
            for dim in ("user_id", "agent_id", "thread_id"):
                want, have = getattr(f, dim), getattr(rec, dim)
                if isinstance(want, str) and isinstance(have, str) and have.startswith(want):
                    f = _replace_dim(f, dim, have)
            return record_matches(rec, f)

        return _matching_with(self, flt, matches)


def _replace_dim(flt: RecordFilter, dim: str, value: str) -> RecordFilter:
    from dataclasses import replace

    return replace(flt, **{dim: value})


class ScopeAbsentLeakStore(InMemoryStore):
    """"Absent" scope (``None``) treated as unconstrained: the SQL ``col = NULL`` mistake turned
    into "no condition"."""

    name = "mutant-scope-absent"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        loose = replace(flt, **{d: ANY for d in ("user_id", "agent_id", "thread_id") if getattr(flt, d) is None})
        return super()._matching(loose)


class LostUpdateStore(InMemoryStore):
    """Read-modify-write without holding the lock: concurrent batches overwrite each other."""

    name = "mutant-lost-update"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            records, vectors, links, seq = dict(self._records), dict(self._vectors), dict(self._link_rows), self._seq
        time.sleep(0.0005)  # the window in which another writer's batch gets lost
        shadow = InMemoryStore()
        shadow._records, shadow._vectors, shadow._link_rows, shadow._seq = records, vectors, links, seq
        added = InMemoryStore._write(shadow, batch)
        with self._lock:
            self._records, self._vectors, self._link_rows, self._seq = shadow._records, shadow._vectors, shadow._link_rows, shadow._seq
        return added


class StatusNotFlippedStore(InMemoryStore):
    """Patches never change ``status`` (a column left out of the UPDATE)."""

    name = "mutant-status"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        patches = [replace(p, status=UNSET) for p in batch.patch]
        return super()._write(replace(batch, patch=patches))


class AsyncOnlyBugStore(InMemoryStore):
    """The async query ignores the requested order (a native async path that drifted)."""

    name = "mutant-async"

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return self._query(filter, Order.SEQ_ASC, limit, offset)


class ExpiredVisibleInSearchStore(InMemoryStore):
    """Vector search forgets the expiry condition: expired records stay findable."""

    name = "mutant-expired-search"

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        from dataclasses import replace

        return super()._vector_search(vector, replace(filter, alive_at=None), k)


class ExpiryBoundaryStore(InMemoryStore):
    """A record is still visible at the very instant it expires (``<`` instead of ``<=``)."""

    name = "mutant-expiry-boundary"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        rows = super()._matching(replace(flt, alive_at=None))
        if flt.alive_at is None:
            return rows
        return [r for r in rows if r.expires_at is None or r.expires_at >= flt.alive_at]


class PartialBatchStore(InMemoryStore):
    """Applies each section straight to the live state: a failure late in a batch leaves the
    earlier parts written."""

    name = "mutant-partial-batch"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            added = []
            for item in batch.add:
                if item.record.record_id in self._records:
                    raise Conflict(f"record id {item.record.record_id!r} already exists")
                self._seq += 1
                rec = item.record.model_copy(update={"seq": self._seq})
                self._records[rec.record_id] = rec
                if item.vector is not None:
                    self._vectors[rec.record_id] = np.asarray(item.vector, dtype=np.float32) / np.linalg.norm(item.vector)
                added.append(rec)
            rest = WriteBatch(patch=batch.patch, add_links=batch.add_links, delete_links=batch.delete_links, delete=batch.delete)
            if not rest.is_empty():
                super()._write(rest)
            return added


class LinksSurviveDeleteStore(InMemoryStore):
    """Deleting a record leaves its links dangling (no cascade)."""

    name = "mutant-dangling-links"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            kept = {lid: lk for lid, lk in self._link_rows.items() if {lk.source_id, lk.target_id} & set(batch.delete)}
            added = super()._write(batch)
            for lid, lk in kept.items():
                if lid not in set(batch.delete_links):
                    self._link_rows[lid] = lk
            return added


class TieBreakStore(InMemoryStore):
    """Equal distances come in insertion order instead of record-id order."""

    name = "mutant-ties"

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        hits = super()._vector_search(vector, filter, 10_000)
        hits.sort(key=lambda h: (round(h.distance or 0.0, 6), h.record.seq))
        return hits[:k]


class SeqReuseStore(InMemoryStore):
    """``seq`` = number of records + 1: values are reused after a delete (a COUNT-based id)."""

    name = "mutant-seq-reuse"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            self._seq = len(self._records)
            return super()._write(batch)


class KeywordScopeLeakStore(InMemoryStore):
    """Keyword search ignores the scope part of the filter."""

    name = "mutant-keyword-scope"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        from dataclasses import replace

        return super()._keyword_search(text, replace(filter, user_id=ANY, agent_id=ANY, thread_id=ANY), k)


class PatchDropsMetadataStore(InMemoryStore):
    """A patch that sets content and metadata together keeps only the content (lost update of a
    field)."""

    name = "mutant-patch-metadata"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        patches = [replace(p, metadata=UNSET) if p.content is not UNSET else p for p in batch.patch]
        return super()._write(replace(batch, patch=patches))


class FalsePersistenceStore(InMemoryStore):
    """Declares ``PERSISTENCE`` but keeps data only in memory: a reopen finds nothing."""

    name = "mutant-false-persistence"

    def capabilities(self) -> frozenset[Capability]:
        return super().capabilities() | {Capability.PERSISTENCE}


class PoorRecallStore(InMemoryStore):
    """An approximate backend that promises recall 0.9 and loses every third neighbour."""

    name = "mutant-poor-recall"
    min_recall_at_10 = 0.9

    def capabilities(self) -> frozenset[Capability]:
        return super().capabilities() | {Capability.APPROXIMATE_SEARCH}

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        hits = super()._vector_search(vector, filter, 3 * k)
        return [h for i, h in enumerate(hits) if i % 3 != 1][:k]


class KeywordClaimStore(InMemoryStore):
    """Declares ``KEYWORD_SEARCH`` but answers every keyword query with nothing."""

    name = "mutant-keyword-claim"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return []


# ---- second set: bugs of other kinds, on the reference store and on DuckDB ------------------
# Each is one plausible vendor bug; ``SECOND_SET`` lists them, ``test_mutants.py`` runs the ones
# the suite catches deterministically (an example test fails, not only the state machine).
def _numbers_as_floats(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, list, dict)):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    return {k: _numbers_as_floats(v) for k, v in value.items()}


class MetadataIntAsFloatStore(InMemoryStore):
    """Metadata goes through a JSON codec that keeps every number as a double: ``1`` comes back
    as ``1.0`` (and ``2**53 + 1`` as ``2**53``)."""

    name = "mutant-int-as-float"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        adds = [replace(a, record=a.record.model_copy(update={"metadata": _numbers_as_floats(a.record.metadata)})) for a in batch.add]
        patches = [replace(p, metadata=_numbers_as_floats(dict(p.metadata))) if p.metadata is not UNSET else p for p in batch.patch]  # type: ignore[arg-type]
        return super()._write(replace(batch, add=adds, patch=patches))


class NullIsMissingStore(InMemoryStore):
    """Metadata filters read a stored JSON ``null`` as a missing key (``json_extract`` gives SQL
    NULL for both): ``{"k": {"$not": null}}`` matches a record whose ``k`` is null, and
    ``{"k": null}`` matches nothing."""

    name = "mutant-null-is-missing"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        from agentmemory.filters import metadata_matches

        rows = super()._matching(replace(flt, metadata_filter=None))
        if not flt.metadata_filter:
            return rows
        return [r for r in rows if metadata_matches({k: v for k, v in r.metadata.items() if v is not None}, flt.metadata_filter)]


class ResurrectedVectorStore(InMemoryStore):
    """Deleting a record leaves its vector row behind (vectors live in a side table keyed by
    record id); re-adding the id without a vector makes the old vector findable again."""

    name = "mutant-resurrected-vector"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            old = dict(self._vectors)
            added = super()._write(batch)
            for rid in batch.delete:
                if rid in old:
                    self._vectors[rid] = old[rid]
            return added


class _FoldingAnalyzer:
    """The store's analyzer with accents folded away (``unicodedata`` NFKD, marks dropped)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.language = inner.language
        self.fingerprint = inner.fingerprint

    @staticmethod
    def _fold(text: str) -> str:
        import unicodedata

        return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))

    def terms(self, text: str) -> list[str]:
        return self.inner.terms(self._fold(text))

    def query_terms(self, text: str) -> list[str]:
        return self.inner.query_terms(self._fold(text))


class AccentFoldingKeywordStore(InMemoryStore):
    """The full-text engine's default tokenizer folds accents (``remove_diacritics``): "cafe"
    finds "café", and "ünïcødé" is indexed as "unicode"."""

    name = "mutant-accent-folding"

    def __init__(self) -> None:
        super().__init__()
        self.analyzer = _FoldingAnalyzer(self.analyzer)  # type: ignore[assignment]


class ExpiryAsTextStore(InMemoryStore):
    """``expires_at`` is compared as ISO-8601 text, not as an instant: right in UTC, wrong for an
    expiry or ``alive_at`` given with another offset."""

    name = "mutant-expiry-as-text"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        rows = super()._matching(replace(flt, alive_at=None, expired_at=None))
        out = []
        for r in rows:
            exp = None if r.expires_at is None else r.expires_at.isoformat()
            if flt.alive_at is not None and exp is not None and exp <= flt.alive_at.isoformat():
                continue
            if flt.expired_at is not None and (exp is None or exp > flt.expired_at.isoformat()):
                continue
            out.append(r)
        return out


def _python_equal_match(value: Any, expr: Any) -> bool:
    """The metadata-filter rules with Python ``==`` for equality (``True == 1 == 1.0``)."""
    missing = _python_equal_match  # sentinel: never a stored value
    if isinstance(expr, dict) and len(expr) == 1 and next(iter(expr)).startswith("$"):
        (op, arg), = expr.items()
        if op == "$not":
            return value is missing or not _python_equal_match(value, arg)
        if not isinstance(value, list):
            return False
        wanted = arg if isinstance(arg, list) else [arg]
        return all(w in value for w in wanted) if op == "$array_contains" else any(w in value for w in wanted)
    if value is missing:
        return False
    if isinstance(expr, dict):
        return isinstance(value, dict) and all(_python_equal_match(value.get(k, missing), e) for k, e in expr.items())
    return bool(value == expr)


class PythonEqualityFilterStore(InMemoryStore):
    """Metadata filters compare with Python ``==`` and ``in``: ``{"n": 1}`` matches a stored
    ``true`` and ``{"tags": {"$array_contains": 1}}`` matches ``[true]``."""

    name = "mutant-python-equality"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        rows = super()._matching(replace(flt, metadata_filter=None))
        if not flt.metadata_filter:
            return rows
        missing = _python_equal_match
        return [r for r in rows if all(_python_equal_match(r.metadata.get(k, missing), e) for k, e in flt.metadata_filter.items())]


class LimitPlusOneStore(InMemoryStore):
    """Pages are read one row long to learn whether another page follows, and the extra row is
    trimmed only when a COUNT says so (``>`` instead of ``>=``): when exactly ``limit + 1`` rows
    remain, ``limit + 1`` come back."""

    name = "mutant-limit-plus-one"

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        if limit is None:
            return super()._query(filter, order, None, offset)
        rows = super()._query(filter, order, limit + 1, offset)
        if self._count(filter) > offset + limit + 1:
            rows = rows[:limit]
        return rows


class TombstonedLinksStore(InMemoryStore):
    """Deleted links are tombstoned, and the "already linked" check still counts tombstones:
    linking two records again after unlinking them raises ``Conflict``."""

    name = "mutant-tombstoned-links"

    def __init__(self) -> None:
        super().__init__()
        self._tombstones: set[frozenset[str]] = set()

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            for link in batch.add_links:
                if frozenset((link.source_id, link.target_id)) in self._tombstones:
                    raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
            gone = [self._link_rows[lid] for lid in batch.delete_links if lid in self._link_rows]
            added = super()._write(batch)
            self._tombstones.update(frozenset((lk.source_id, lk.target_id)) for lk in gone)
            return added


class DottedKeyPathStore(InMemoryStore):
    """A metadata-filter key with a dot is read as a JSON path (``$.a.b``): ``{"a.b": 1}``
    matches ``{"a": {"b": 1}}`` and misses a record whose key is literally ``"a.b"``."""

    name = "mutant-dotted-key"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        from dataclasses import replace

        if not flt.metadata_filter or not any("." in k for k in flt.metadata_filter):
            return super()._matching(flt)
        nested: dict[str, Any] = {}
        for key, expr in flt.metadata_filter.items():
            parts = key.split(".")
            for part in reversed(parts[1:]):
                expr = {part: expr}
            nested[parts[0]] = expr
        return super()._matching(replace(flt, metadata_filter=nested))


def _filtered_after(store: Any, flt: RecordFilter, loose: RecordFilter, keep: Callable[[Record], bool], order: Order,
                    limit: int | None, offset: int) -> list[Record]:
    rows = [r for r in DuckDBStore._query(store, loose, order, None, 0) if keep(r)]
    return rows[offset:None if limit is None else offset + limit]


class CaseInsensitiveScopeDuckStore(DuckDBStore):
    """Scope ids compared case-insensitively (``ILIKE`` / a NOCASE collation): user ``Bob``
    sees ``bob``'s records, in every read."""

    name = "mutant-duck-nocase-scope"

    @staticmethod
    def _loose(flt: RecordFilter) -> tuple[RecordFilter, Callable[[Record], bool]]:
        from dataclasses import replace

        dims = {d: getattr(flt, d) for d in ("user_id", "agent_id", "thread_id") if isinstance(getattr(flt, d), str)}

        def keep(r: Record) -> bool:
            return all(isinstance(getattr(r, d), str) and getattr(r, d).casefold() == v.casefold() for d, v in dims.items())

        return replace(flt, **{d: ANY for d in dims}), keep

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        loose, keep = self._loose(filter)
        return _filtered_after(self, filter, loose, keep, order, limit, offset)

    def _count(self, filter: RecordFilter) -> int:
        return len(self._query(filter, Order.SEQ_ASC, None, 0))

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        loose, keep = self._loose(filter)
        return [h for h in super()._vector_search(vector, loose, 10_000) if keep(h.record)][:k]

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        loose, keep = self._loose(filter)
        return [h for h in super()._keyword_search(text, loose, 10_000) if keep(h.record)][:k]


class ChunkedBulkAddDuckStore(DuckDBStore):
    """``bulk_add`` commits every 1,000 rows (to bound the transaction): a duplicate id in a later
    chunk leaves the earlier chunks written."""

    name = "mutant-duck-chunked-bulk"
    CHUNK = 1_000

    def _bulk_add(self, columns: Any) -> int:
        from dataclasses import fields, replace

        n = len(columns)
        for start in range(0, n, self.CHUNK):
            end = min(n, start + self.CHUNK)
            part = replace(columns, **{f.name: getattr(columns, f.name)[start:end] for f in fields(columns)
                                       if getattr(columns, f.name) is not None})
            super()._bulk_add(part)
        return n


class EmptySetsUnfilteredDuckStore(DuckDBStore):
    """An empty ``record_types`` or ``statuses`` set adds no condition (``if flt.record_types:``
    in the SQL builder) instead of matching nothing."""

    name = "mutant-duck-empty-sets"

    @staticmethod
    def _fix(flt: RecordFilter) -> RecordFilter:
        from dataclasses import replace

        return replace(flt, record_types=flt.record_types or None, statuses=flt.statuses or None)

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return super()._query(self._fix(filter), order, limit, offset)

    def _count(self, filter: RecordFilter) -> int:
        return super()._count(self._fix(filter))

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return super()._vector_search(vector, self._fix(filter), k)

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return super()._keyword_search(text, self._fix(filter), k)


class AsyncPageCapDuckStore(DuckDBStore):
    """The native async query reads one driver page: without a limit, at most 100 rows."""

    name = "mutant-duck-async-page"

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return self._query(filter, order, 100 if limit is None else limit, offset)


class KeywordTiesBySeqDuckStore(DuckDBStore):
    """Keyword hits with equal scores come in insertion order, not by record id."""

    name = "mutant-duck-keyword-ties"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        hits = super()._keyword_search(text, filter, 10_000)
        hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.seq))
        return hits[:k]


class AsyncOffsetIgnoredDuckStore(DuckDBStore):
    """The native async query drops ``offset`` (the async driver's query builder has no OFFSET)."""

    name = "mutant-duck-async-offset"

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return self._query(filter, order, limit, 0)


class LinksSourceOnlyDuckStore(DuckDBStore):
    """``links(record_ids=...)`` matches the source end only (``WHERE source_id IN ...``): links
    pointing at a record are missing from its listing."""

    name = "mutant-duck-links-source-only"

    def _links(self, record_ids: Any, link_ids: Any) -> list[Any]:
        out = super()._links(None, link_ids)
        if record_ids is not None:
            wanted = set(record_ids)
            out = [lk for lk in out if lk.source_id in wanted]
        return out


class MetadataPatchMergeDuckStore(DuckDBStore):
    """A metadata patch is merged into the stored object (``json_merge_patch``) instead of
    replacing it: keys the patch leaves out survive."""

    name = "mutant-duck-metadata-merge"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        with self._lock:
            ids = tuple(p.record_id for p in batch.patch if p.metadata is not UNSET)
            stored = {r.record_id: r.metadata for r in self._query(RecordFilter(record_ids=ids), Order.SEQ_ASC, None, 0)} if ids else {}
            patches = [replace(p, metadata={**stored.get(p.record_id, {}), **p.metadata}) if p.metadata is not UNSET else p  # type: ignore[dict-item]
                       for p in batch.patch]
            return super()._write(replace(batch, patch=patches))


def _ms(value: Any) -> Any:
    return value.replace(microsecond=value.microsecond // 1000 * 1000) if value is not None else None


class MillisecondTimestampsDuckStore(DuckDBStore):
    """Timestamps are stored with millisecond precision (``TIMESTAMP_MS``): microseconds of
    ``timestamp``, ``created_at`` and ``expires_at`` are lost."""

    name = "mutant-duck-milliseconds"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        adds = [replace(a, record=a.record.model_copy(update={f: _ms(getattr(a.record, f)) for f in ("timestamp", "created_at", "expires_at")}))
                for a in batch.add]
        patches = [replace(p, **{f: _ms(getattr(p, f)) for f in ("timestamp", "expires_at") if getattr(p, f) not in (UNSET, None)})
                   for p in batch.patch]
        return super()._write(replace(batch, add=adds, patch=patches))


class VectorSearchIgnoresStatusDuckStore(DuckDBStore):
    """Vector search leaves the ``statuses`` condition out (it is applied after the index in
    the client, the vendor assumed): invalid records come back when only valid ones were asked."""

    name = "mutant-duck-vector-status"

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        from dataclasses import replace

        return super()._vector_search(vector, replace(filter, statuses=None), k)


class DescWindowDuckStore(DuckDBStore):
    """``SEQ_DESC`` reads the ascending window and reverses it: ``limit``/``offset`` count from
    the oldest row instead of the newest."""

    name = "mutant-duck-desc-window"

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        rows = super()._query(filter, Order.SEQ_ASC, limit, offset)
        return rows[::-1] if order is Order.SEQ_DESC else rows


# ---- valid variants: the suite must pass on these ------------------------------------------
class KeywordIgnoresIndexTextStore(InMemoryStore):
    """SPI 1.1 done halfway: ``index_text`` is stored and returned, but the keyword index still
    analyses ``content`` (the 1.0 code path left in place)."""

    name = "mutant-keyword-content"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        with self._lock:
            records, vectors = dict(self._records), dict(self._vectors)
        shadow = InMemoryStore()
        shadow.analyzer = self.analyzer
        shadow._records = {rid: r.model_copy(update={"index_text": None}) for rid, r in records.items()}
        shadow._vectors = vectors
        return [Hit(record=records[h.record.record_id], score=h.score) for h in InMemoryStore._keyword_search(shadow, text, filter, k)]


class StaleIndexTextPatchStore(InMemoryStore):
    """A content patch leaves the stored ``index_text`` as it was (the UPDATE sets ``content``
    only), so the record stays indexed by words it no longer holds."""

    name = "mutant-stale-index-text"

    def _write(self, batch: WriteBatch) -> list[Record]:
        from dataclasses import replace

        with self._lock:
            stored = {rid: r.index_text for rid, r in self._records.items()}
        patches = [
            replace(p, index_text=stored[p.record_id])
            if p.content is not UNSET and p.index_text is UNSET and p.record_id in stored
            else p
            for p in batch.patch
        ]
        return super()._write(replace(batch, patch=patches))


class ApproximateButExactStore(InMemoryStore):
    """Declares ``APPROXIMATE_SEARCH`` with a 0.9 floor and is in fact exact (valid)."""

    name = "variant-approximate"
    min_recall_at_10 = 0.9

    def capabilities(self) -> frozenset[Capability]:
        return super().capabilities() | {Capability.APPROXIMATE_SEARCH}


class MinimalStore(InMemoryStore):
    """Declares no optional capability at all (valid): keyword search must raise."""

    name = "variant-minimal"

    def capabilities(self) -> frozenset[Capability]:
        return frozenset()

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        from agentmemory.spi import MemoryStore

        return MemoryStore._keyword_search(self, text, filter, k)


MUTANTS = {
    cls.__name__: cls
    for cls in (
        ScopePrefixLeakStore,
        ScopeAbsentLeakStore,
        LostUpdateStore,
        StatusNotFlippedStore,
        AsyncOnlyBugStore,
        ExpiredVisibleInSearchStore,
        ExpiryBoundaryStore,
        PartialBatchStore,
        LinksSurviveDeleteStore,
        TieBreakStore,
        SeqReuseStore,
        KeywordScopeLeakStore,
        PatchDropsMetadataStore,
        FalsePersistenceStore,
        PoorRecallStore,
        KeywordClaimStore,
    )
}
VARIANTS = {cls.__name__: cls for cls in (ApproximateButExactStore, MinimalStore)}
SECOND_SET = {
    cls.__name__: cls
    for cls in (
        MetadataIntAsFloatStore,
        CaseInsensitiveScopeDuckStore,
        ChunkedBulkAddDuckStore,
        NullIsMissingStore,
        ResurrectedVectorStore,
        EmptySetsUnfilteredDuckStore,
        AsyncPageCapDuckStore,
        AccentFoldingKeywordStore,
        ExpiryAsTextStore,
        PythonEqualityFilterStore,
        KeywordTiesBySeqDuckStore,
        LimitPlusOneStore,
        AsyncOffsetIgnoredDuckStore,
        LinksSourceOnlyDuckStore,
        MetadataPatchMergeDuckStore,
        MillisecondTimestampsDuckStore,
        VectorSearchIgnoresStatusDuckStore,
        TombstonedLinksStore,
        DottedKeyPathStore,
        DescWindowDuckStore,
    )
}
"""The second, independent set: twenty bugs of kinds unlike the first set's."""
INDEX_TEXT_SET = {cls.__name__: cls for cls in (KeywordIgnoresIndexTextStore, StaleIndexTextPatchStore)}
"""SPI 1.1 bugs: ``index_text`` stored but not what keyword search scores, or left stale by a
content patch (``IndexTextTests`` must catch both)."""


def make(name: str, path: Any, *, duckdb_file: bool = True) -> Any:
    """A fresh instance of the store class ``name``: DuckDB ones in a file under ``path``, or
    with ``duckdb_file=False`` in memory (faster; the suite then skips its persistence tests)."""
    cls = {**MUTANTS, **VARIANTS, **SECOND_SET, **INDEX_TEXT_SET}[name]
    if issubclass(cls, DuckDBStore):
        return cls(path / "memory.duckdb" if duckdb_file else ":memory:")
    return cls()
