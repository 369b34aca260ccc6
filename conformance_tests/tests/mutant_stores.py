"""Deliberately broken backends: each is ``InMemoryStore`` with one realistic bug. The suite
must fail on every one of them (``test_mutants.py``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

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


# ---- valid variants: the suite must pass on these ------------------------------------------
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
