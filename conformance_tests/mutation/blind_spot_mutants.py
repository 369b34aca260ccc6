#!/usr/bin/env python3
"""Deliberately broken stores for ``BlindSpotTests`` (issue #32), one or more per blind-spot
area (large results, read isolation, batched reads out of storage order, keyword search after
deletes and without an indexable word, nested-object equality, ``aclose``, ``seq`` on hits,
newest-first windows after patches):
each is the reference ``InMemoryStore`` with one realistic bug of the kinds an independent set
of buggy backends slipped through.

    .venv/bin/python conformance_tests/mutation/blind_spot_mutants.py

runs ``BlindSpotTests`` on each and prints which tests it failed; exits 1 when a store fails
other tests than the ones written for its bug (``MUTANTS``) or the reference fails any.
``conformance_tests/tests/test_blind_spots.py`` checks the same in CI."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from agentmemory.errors import BackendError
from agentmemory.filters import _equal as json_equal
from agentmemory.records import Record
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import Hit, Order, RecordFilter, WriteBatch

CAP = 1_000


class SearchCapStore(InMemoryStore):
    """Vector and keyword search cap ``k`` at 1,000 (an engine's default top-k limit)."""

    name = "blind-search-cap"

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return super()._vector_search(vector, filter, min(k, CAP))

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return super()._keyword_search(text, filter, min(k, CAP))


class QueryPageCapStore(InMemoryStore):
    """``query`` reads one page of 1,000 rows and never asks for the next one."""

    name = "blind-query-page"

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        rows = super()._query(filter, order, None, 0)[:CAP]
        end = None if limit is None else offset + limit
        return rows[offset:end]


class TornBatchStore(InMemoryStore):
    """Commits a batch section by section (adds, patches, link deletes, link adds, deletes),
    each on its own: a concurrent reader sees half a batch."""

    name = "blind-torn-batch"

    def _write(self, batch: WriteBatch) -> list[Record]:
        added = InMemoryStore._write(self, WriteBatch(add=batch.add)) if batch.add else []
        for part in (WriteBatch(patch=batch.patch), WriteBatch(delete_links=batch.delete_links),
                     WriteBatch(add_links=batch.add_links), WriteBatch(delete=batch.delete)):
            if not part.is_empty():
                time.sleep(0.002)
                InMemoryStore._write(self, part)
        return added


class StorageOrderVectorsStore(InMemoryStore):
    """``read_vectors`` runs ``WHERE id IN (...)`` (rows in storage order) and zips the rows with
    the ids as asked."""

    name = "blind-vectors-order"

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        with self._lock:
            vectors = self._vectors
        wanted = set(record_ids)
        rows = [v.copy() for rid, v in vectors.items() if rid in wanted]
        asked = [rid for rid in dict.fromkeys(record_ids) if rid in vectors]
        return dict(zip(asked, rows))


class KeywordSnapshotResurrectsStore(InMemoryStore):
    """``settle`` builds a keyword snapshot of the corpus; later keyword searches score the
    snapshot plus the records added since, so records deleted after the build come back."""

    name = "blind-keyword-snapshot"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._snapshot: tuple[dict[str, Record], dict[str, np.ndarray], int] | None = None

    def index_thresholds(self) -> dict[str, int]:
        return {"keyword": 1}

    def _settle(self) -> dict[str, bool]:
        with self._lock:
            self._snapshot = (dict(self._records), dict(self._vectors), self._seq)
        return {"keyword": True}

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        if self._snapshot is None:
            return super()._keyword_search(text, filter, k)
        records, vectors, built_at = self._snapshot
        with self._lock:
            newer = {rid: r for rid, r in self._records.items() if r.seq > built_at}
            records = {**records, **newer}
            vectors = {**vectors, **{rid: v for rid, v in self._vectors.items() if rid in newer}}
        shadow = InMemoryStore()
        shadow.analyzer = self.analyzer
        shadow._records, shadow._vectors = records, vectors
        return InMemoryStore._keyword_search(shadow, text, filter, k)


class NoTermsRaisesStore(InMemoryStore):
    """A query without an indexable word reaches the engine as an empty ``MATCH ''``, which is a
    syntax error there."""

    name = "blind-no-terms"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        if not self.analyzer.query_terms(text):
            raise BackendError('fts: syntax error near ""')
        return super()._keyword_search(text, filter, k)


def _ordered_equal(a: Any, b: Any) -> bool:
    """JSON equality that compares objects as serialized text would: key order matters."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return list(a) == list(b) and all(_ordered_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_ordered_equal(x, y) for x, y in zip(a, b))
    return json_equal(a, b)


_MISSING = object()


def _ordered_match(value: Any, expr: Any) -> bool:
    """``filters._match`` with ``_ordered_equal`` for values."""
    if isinstance(expr, Mapping) and len(expr) == 1:
        (op, arg), = expr.items()
        if op == "$not":
            return value is _MISSING or not _ordered_match(value, arg)
        if op == "$array_contains":
            wanted = arg if isinstance(arg, list) else [arg]
            return isinstance(value, list) and all(any(_ordered_equal(v, w) for v in value) for w in wanted)
        if op == "$array_contains_any":
            return isinstance(value, list) and any(_ordered_equal(v, w) for v in value for w in arg)
    if value is _MISSING:
        return False
    if isinstance(expr, Mapping):
        return isinstance(value, Mapping) and all(_ordered_match(value.get(k, _MISSING), e) for k, e in expr.items())
    return _ordered_equal(value, expr)


class KeyOrderNestedEqualityStore(InMemoryStore):
    """Objects inside metadata values are compared as JSON text: ``{"x": 1, "y": 2}`` does not
    equal ``{"y": 2, "x": 1}``."""

    name = "blind-key-order"

    def _matching(self, flt: RecordFilter) -> list[Record]:
        rows = super()._matching(replace(flt, metadata_filter=None))
        wanted = flt.metadata_filter or {}
        return [r for r in rows if all(_ordered_match(r.metadata.get(k, _MISSING), e) for k, e in wanted.items())]


class AcloseNoopStore(InMemoryStore):
    """A native ``aclose`` that flushes and returns without closing the store."""

    name = "blind-aclose-noop"

    async def aclose(self) -> None:
        await asyncio.sleep(0)


class WrongSeqVectorHitsStore(InMemoryStore):
    """Vector hits are built from the vector table, whose row number stands in for ``seq``."""

    name = "blind-vector-seq"

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        hits = super()._vector_search(vector, filter, k)
        return [replace(h, record=h.record.model_copy(update={"seq": i + 1})) for i, h in enumerate(hits)]


class NoSeqKeywordHitsStore(InMemoryStore):
    """Keyword hits come from a full-text index that does not store ``seq``: it is None."""

    name = "blind-keyword-seq"

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        hits = super()._keyword_search(text, filter, k)
        return [replace(h, record=h.record.model_copy(update={"seq": None})) for h in hits]


class SeqFromMaxStore(InMemoryStore):
    """A new record's ``seq`` is ``max(seq) + 1`` over the live records: after deleting the newest
    record its seq is handed out again."""

    name = "blind-seq-max"

    def _write(self, batch: WriteBatch) -> list[Record]:
        with self._lock:
            self._seq = max((r.seq for r in self._records.values()), default=0)
            return super()._write(batch)

    def _bulk_add(self, columns: Any) -> int:
        with self._lock:
            self._seq = max((r.seq for r in self._records.values()), default=0)
            return super()._bulk_add(columns)


class PatchBlindWindowStore(InMemoryStore):
    """Keeps each small newest-first ``query`` answer (a card's windows) until a write adds or
    deletes records; a batch of patches only (a status change, a content edit, an expiry) does
    not reach it, so the window keeps serving the rows as they were."""

    name = "blind-patch-window"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._windows: dict[tuple[Any, ...], list[Record]] = {}

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        if order is not Order.SEQ_DESC or limit is None or offset + limit > 128:
            return super()._query(filter, order, limit, offset)
        key = (repr(replace(filter, alive_at=None)), filter.alive_at, limit, offset)
        if key not in self._windows:
            self._windows[key] = super()._query(filter, order, limit, offset)
        return list(self._windows[key])

    def _write(self, batch: WriteBatch) -> list[Record]:
        out = super()._write(batch)
        if batch.add or batch.delete:
            self._windows.clear()
        return out


MUTANTS: dict[str, set[str]] = {
    "SearchCapStore": {"test_results_beyond_a_thousand_hits"},
    "QueryPageCapStore": {"test_results_beyond_a_thousand_hits"},
    "TornBatchStore": {"test_readers_never_see_half_a_batch"},
    "StorageOrderVectorsStore": {"test_read_vectors_in_any_order"},
    "KeywordSnapshotResurrectsStore": {"test_keyword_search_after_deletes_on_a_built_index"},
    "NoTermsRaisesStore": {"test_queries_without_an_indexable_word"},
    "KeyOrderNestedEqualityStore": {"test_objects_nested_in_arrays_compare_without_key_order"},
    "AcloseNoopStore": {"test_aclose_really_closes"},
    "WrongSeqVectorHitsStore": {"test_seq_on_every_hit_and_after_deletes"},
    "NoSeqKeywordHitsStore": {"test_seq_on_every_hit_and_after_deletes"},
    "SeqFromMaxStore": {"test_seq_on_every_hit_and_after_deletes"},
    "PatchBlindWindowStore": {"test_newest_windows_follow_every_write"},
}
"""Each mutant and the ``BlindSpotTests`` it must fail (exactly these: the bug is targeted)."""


def main() -> int:
    """Run ``BlindSpotTests`` on the reference and on each broken store; report and judge."""
    from agentmemory_conformance import validate

    bad = 0
    for name in ("InMemoryStore", *MUTANTS):
        cls = InMemoryStore if name == "InMemoryStore" else globals()[name]
        report = validate(lambda _path, cls=cls: cls(), profile="smoke", pytest_args=["-k", "BlindSpotTests"])
        failed = {t["test"].split("::")[-1].split("[")[0] for t in report.failures}
        expected = MUTANTS.get(name, set())
        verdict = "as intended" if failed == expected else "WRONG"
        print(f"{name}: failed {sorted(failed) or 'nothing'} ({verdict}) {report.data.get('totals', {})}")
        bad += failed != expected
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
