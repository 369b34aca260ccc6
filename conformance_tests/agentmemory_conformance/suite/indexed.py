"""The index tier: the search and filter checks again with the store filled past every index
threshold it declares (``MemoryStore.index_thresholds``) and its indexes brought up to date
(``MemoryStore.settle``), side by side with the reference ``InMemoryStore``; then again after
deletes, re-adds and patches made once the indexes were built (which the indexes must follow),
before settling again and after.

The other example tests stay at a few hundred records, below where real backends switch to an
index: DuckDB builds its BM25 index from 1,000 documents and its HNSW index from 20,000
vectors; hnswlib's planner sends a query through its graph from about 930 vectors. A test class
that overrides ``make_indexed_store`` to build the store with low thresholds gets the tier at a
few hundred records; otherwise the tier fills the store past its real thresholds, up to
``TIER_MAX_ROWS`` (an index with a higher threshold is left out, and the report says so).
``test_default_thresholds_are_reached`` always uses the store of ``make_store``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from agentmemory.bm25 import bm25
from agentmemory.bulk import RecordColumns
from agentmemory.records import Record, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore, record_matches
from agentmemory.spi import Capability, Hit, MemoryStore, NewRecord, RecordFilter, RecordPatch, WriteBatch

from ..support import (
    DIM,
    T0,
    Api,
    assert_hits_ordered,
    assert_vector_hits,
    clause,
    close_loop,
    ids,
    is_approximate,
    loop_for,
    rec,
    requires,
    skip_unless_capable,
)
from .base import StoreFactory, _record_backend

TIER_MIN_ROWS = 320
"""The tier's smallest store (records with a vector), whatever the thresholds."""
TIER_MAX_ROWS = 25_000
"""The tier's largest store: an index whose threshold is above it is not reached (reported)."""
WIDE_DIM = 64
"""The dimension of ``test_vector_search_at_a_wider_dimension`` (the tier's others use ``DIM``)."""
FULL_TIER_ROWS = 3_000
"""Above this size (high thresholds and no ``make_indexed_store``, e.g. the zero-code run) the
tier compares a smaller matrix: fewer filters and queries, rarer keywords (``matrix``)."""

PLUS2 = timezone(timedelta(hours=2))
MINUS5 = timezone(timedelta(hours=-5))
USERS = ("u1", "u2", "Bob", "bob", None, "u-rare")
USER_P = (0.3, 0.25, 0.12, 0.12, 0.19, 0.02)
WORDS = (
    "apple banana cherry invoice invoices invoiced running runs runner travel Paris café ünïcødé "
    "東京 日本語 order_7421 7421 meeting schedule doctor refund EUR weekly report garden jazz piano "
    "the of and with"
).split()
RARE = ("quokka", "zeppelin", "marimba")
VECTOR_FILTERS: dict[str, RecordFilter] = {
    "all": RecordFilter(),
    "user u1": RecordFilter(user_id="u1"),
    "user Bob (not bob)": RecordFilter(user_id="Bob"),
    "user absent": RecordFilter(user_id=None),
    "rare user": RecordFilter(user_id="u-rare"),
    "user and thread": RecordFilter(user_id="u2", thread_id="t1"),
    "thread only": RecordFilter(thread_id="t2"),
    "agent absent": RecordFilter(agent_id=None),
    "fact or guideline": RecordFilter(record_types=frozenset({RecordType.FACT, RecordType.GUIDELINE})),
    "no record type": RecordFilter(record_types=frozenset()),
    "invalid": RecordFilter(statuses=frozenset({RecordStatus.INVALID})),
    "no status": RecordFilter(statuses=frozenset()),
    "alive at T0": RecordFilter(alive_at=T0),
    "expired at T0": RecordFilter(expired_at=T0),
    "topic billing": RecordFilter(metadata_filter={"topic": "billing"}),
    "topic not billing": RecordFilter(metadata_filter={"topic": {"$not": "billing"}}),
    "tags red or blue": RecordFilter(metadata_filter={"tags": {"$array_contains_any": ["red", "blue"]}}),
    "n is 1 (not true)": RecordFilter(metadata_filter={"n": 1}),
    "flag is true": RecordFilter(metadata_filter={"flag": True}),
    "combined": RecordFilter(
        user_id="u1", record_types=frozenset({RecordType.MEMORY, RecordType.MESSAGE}),
        statuses=frozenset({RecordStatus.VALID}), alive_at=T0, metadata_filter={"flag": False},
    ),
}
KEYWORD_QUERIES = (
    "apple", "invoice", "RUNNING", "café", "東京", "日本語 report", "order_7421", "7421",
    "apple banana cherry", "the of", "zebra", "Paris travel", "quokka", "ünïcødé piano",
)


LARGE_FILTERS = ("all", "user Bob (not bob)", "rare user", "thread only", "expired at T0", "tags red or blue", "combined")
LARGE_KEYWORDS = ("quokka", "東京", "order_7421", "ünïcødé piano", "zeppelin marimba")


@dataclass(frozen=True)
class Matrix:
    """What the tier compares at one size: filters, keyword queries, query vectors (indexes
    into ``TierData.queries``)."""

    filters: dict[str, RecordFilter]
    keywords: tuple[str, ...]
    vectors: tuple[int, ...]


def matrix(rows: int) -> Matrix:
    """Every filter and query up to ``FULL_TIER_ROWS`` records; above, a subset that still
    mixes scopes (case, rare), threads, expiry, metadata operators and ties."""
    if rows <= FULL_TIER_ROWS:
        return Matrix(dict(VECTOR_FILTERS), KEYWORD_QUERIES, tuple(range(10)))
    return Matrix({name: VECTOR_FILTERS[name] for name in LARGE_FILTERS}, LARGE_KEYWORDS, (0, 6, 7, 8, 9))


# ---- the tier's data -----------------------------------------------------------------------
@dataclass
class TierData:
    """A deterministic corpus: ``rows`` records with a vector (bulk-added), ``extra`` records
    without one (threads, summaries, a few memories), query vectors and anchors (vectors that
    several records share exactly, so ties appear at the top)."""

    columns: RecordColumns
    extra: list[NewRecord]
    queries: list[np.ndarray]
    rows: int


@functools.lru_cache(maxsize=4)
def tier_data(rows: int, seed: int = 1234) -> TierData:
    """``rows`` searchable records covering scopes (case-distinct users, absent ones), types,
    statuses, expiry in several zones, typed metadata, accented and CJK words, duplicates.
    Cached: treat it as read-only."""
    rng = np.random.default_rng(seed)
    user_idx = rng.choice(len(USERS), size=rows, p=USER_P)
    types = rng.choice([RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE, RecordType.GUIDELINE, RecordType.PREFERENCE],
                       size=rows, p=[0.35, 0.2, 0.3, 0.1, 0.05])
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    weights /= weights.sum()
    anchors = [rng.normal(size=DIM).astype(np.float32) for _ in range(3)]
    vectors = rng.normal(size=(rows, DIM)).astype(np.float32)
    lengths = rng.integers(3, 11, size=rows)
    drawn = np.asarray(WORDS, dtype=object)[rng.choice(len(WORDS), size=int(lengths.sum()), p=weights)].tolist()
    ends = np.cumsum(lengths).tolist()
    record_id, content, rtype, user, agent, thread, role, expires, status, metadata = ([] for _ in range(10))
    for i in range(rows):
        t = RecordType(types[i])
        words = drawn[ends[i] - int(lengths[i]):ends[i]]
        if i % 97 == 5:
            words.append(RARE[i % len(RARE)])
        if i % 53 == 7:  # exact duplicates of an anchor: ties at the top of its query
            vectors[i] = anchors[i % len(anchors)]
        record_id.append(f"ix{i:06d}")
        content.append(" ".join(words))
        rtype.append(t)
        user.append(USERS[int(user_idx[i])])
        agent.append(("a1", "a2", None)[i % 3])
        thread.append(f"t{1 + i % 4}" if t is RecordType.MESSAGE else ("t1" if i % 11 == 0 else None))
        role.append(("user", "assistant")[i % 2] if t is RecordType.MESSAGE else None)
        r = i % 10
        expires.append(None if r < 6 else T0 - timedelta(hours=1 + i % 5) if r == 6 else
                       (T0 + timedelta(days=1 + i % 9)).astimezone(PLUS2 if i % 2 else MINUS5) if r < 9 else
                       T0.astimezone(PLUS2))  # exactly T0, in another zone: expired at T0
        status.append(RecordStatus.INVALID if i % 7 == 3 else RecordStatus.VALID)
        meta: dict[str, Any] = {}
        if i % 5:
            meta["topic"] = ("billing", "travel", "health", "Billing")[i % 4]
        meta["n"] = True if i % 13 == 1 else i % 4
        meta["flag"] = bool(i % 2)
        if i % 3 == 0:
            meta["tags"] = [("red", "green", "blue", "black")[j] for j in range(4) if (i >> j) & 1]
        metadata.append(meta)
    columns = RecordColumns(
        record_id=record_id, content=content, record_type=rtype, timestamp=[T0 + timedelta(seconds=i) for i in range(rows)],
        created_at=T0, user_id=user, agent_id=agent, thread_id=thread, role=role, expires_at=expires, status=status,
        metadata=metadata, vectors=vectors,
    )
    extra = [NewRecord(rec(f"@thread:t{j}", type=RecordType.THREAD, content="", user="u1", thread=f"t{j}"), None) for j in range(1, 5)]
    extra += [NewRecord(rec(f"ix-summary-{j}", type=RecordType.SUMMARY, content="apple invoice summary", user="u1", thread="t1"), None) for j in range(3)]
    extra += [NewRecord(rec(f"ix-novec-{j}", content="apple café 東京 report", user=USERS[j % 4]), None) for j in range(6)]
    queries = [rng.normal(size=DIM).astype(np.float32) for _ in range(6)] + anchors + [vectors[rows // 2].copy()]
    return TierData(columns, extra, queries, rows)


def tier_size(thresholds: Mapping[str, int]) -> int:
    """Records with a vector the tier adds: past every reachable threshold, with a margin."""
    reachable = [t for t in thresholds.values() if t <= TIER_MAX_ROWS]
    top = max(reachable, default=0)
    return max(TIER_MIN_ROWS, top + max(64, top // 20))


# ---- comparisons with the reference ------------------------------------------------------------
Q = TypeVar("Q")


def pairs(filters: Mapping[str, RecordFilter], queries: Sequence[Q], per_filter: int) -> list[tuple[int, str, RecordFilter, list[tuple[int, Q]]]]:
    """Which queries run under which filter: every query under the first filter (unfiltered),
    ``per_filter`` of them, rotating, under each other one (so every query meets several)."""
    out = []
    for i, (name, flt) in enumerate(filters.items()):
        picked = range(len(queries)) if i == 0 else [(i * per_filter + j) % len(queries) for j in range(per_filter)]
        out.append((i, name, flt, [(qi, queries[qi]) for qi in dict.fromkeys(picked)]))
    return out


def compare_vector_search(
    apis: Sequence[Api], ref: InMemoryStore, queries: Sequence[np.ndarray], filters: Mapping[str, RecordFilter],
    *, k: int = 10, per_filter: int = 3, recall: bool = True,
) -> None:
    """The queries under the filters (``pairs``; the filters take turns with the sync and async
    API): exact backends give the reference's ranking (ties by id, distances within 1e-4);
    approximate ones only eligible hits with correct distances, best first, and per filter a
    mean recall@k at their ``min_recall_at_10`` (unless ``recall`` is false). Every hit is the
    live record, field by field."""
    store = apis[0].store
    for i, name, flt, picked in pairs(filters, queries, per_filter):
        api = apis[i % len(apis)]
        recalls = []
        for qi, query in picked:
            expected = [(h.record.record_id, float(h.distance or 0.0)) for h in ref.vector_search(query, flt, 10_000)]
            hits = api.vector_search(query, flt, k=k)
            try:
                assert_vector_hits(store, hits, expected, k, recall_floor=0.0)
                _assert_live_records(hits, ref, "vector")
            except AssertionError as exc:
                raise AssertionError(f"vector_search(query {qi}, filter {name!r}, k={k}) [{api.mode}]: {exc}") from None
            top = {rid for rid, _ in expected[:k]}
            if top:
                recalls.append(len(top & set(ids(hits))) / len(top))
        if recall and recalls and is_approximate(store):
            mean = sum(recalls) / len(recalls)
            assert mean >= store.min_recall_at_10 - 1e-9, (
                f"vector_search with filter {name!r} [{api.mode}]: mean recall@{k} {mean:.3f} below the declared "
                f"min_recall_at_10={store.min_recall_at_10} with the index built"
            )


def compare_keyword_search(
    apis: Sequence[Api], ref: InMemoryStore, queries: Sequence[str], filters: Mapping[str, RecordFilter], *,
    exact_scores: bool, k: int = 10, per_filter: int = 2,
) -> None:
    """The queries under the filters (``pairs``, the filters taking turns with the sync and
    async API): at ``k`` and at 10,000, the reference's matching set, hits best first with
    positive scores, the live records. ``exact_scores`` (indexes settled): also the reference's
    order and BM25 scores within 1e-6 relative. Without it (changes pending in an index, which
    may score them with the corpus statistics of its last build) the top ``k`` need only come
    from the matching set."""
    for i, name, flt, picked in pairs(filters, queries, per_filter):
        api = apis[i % len(apis)]
        for _, text in picked:
            want = ref.keyword_search(text, flt, 10_000)
            where = f"keyword_search({text!r}, filter {name!r}) [{api.mode}]"
            every = api.keyword_search(text, flt, k=10_000)
            if len(want) == 10_000:  # cut at the largest k: only the exact mode compares these
                assert len(every) == 10_000, f"{where}: {len(every)} hits at k=10000, expected 10000"
            else:
                assert set(ids(every)) == set(ids(want)), (
                    f"{where}: matching set differs from the reference: missing "
                    f"{sorted(set(ids(want)) - set(ids(every)))[:10]}, extra {sorted(set(ids(every)) - set(ids(want)))[:10]}"
                )
            top = api.keyword_search(text, flt, k=k)
            assert_hits_ordered(top, by="score")
            assert all(h.score is not None and h.score > 0 for h in top), f"{where}: hits need a positive score"
            assert len(top) == min(k, len(want)), f"{where}: {len(top)} hits, expected {min(k, len(want))}"
            _assert_live_records(top, ref, "keyword")
            if not exact_scores:
                assert set(ids(top)) <= set(ids(want)) or len(want) == 10_000, f"{where}: top hits outside the matching set"
                continue
            for got_hits, cut in ((every, len(want)), (top, k)):
                got = [(h.record.record_id, float(h.score or 0.0)) for h in got_hits]
                exp = [(h.record.record_id, float(h.score or 0.0)) for h in want[:cut]]
                assert [r for r, _ in got] == [r for r, _ in exp], (
                    f"{where}, k={min(cut, 10_000)}: order differs from the reference: got {got[:6]}, expected {exp[:6]}"
                )
                for (rid, g), (_, e) in zip(got, exp):
                    assert math.isclose(g, e, rel_tol=1e-6, abs_tol=1e-9), f"{where}: score of {rid!r} {g} != reference {e}"


def compare_reads(apis: Sequence[Api], ref: InMemoryStore, filters: Mapping[str, RecordFilter]) -> None:
    """``query`` and ``count`` under every filter equal the reference's (ids in seq order)."""
    for i, (name, flt) in enumerate(filters.items()):
        api = apis[i % len(apis)]
        want = [r.record_id for r in ref.query(flt)]
        assert ids(api.query(flt)) == want, f"query(filter {name!r}) [{api.mode}] differs from the reference"
        assert api.count(flt) == len(want), f"count(filter {name!r}) [{api.mode}] differs from the reference"


def _assert_live_records(hits: Sequence[Hit], ref: InMemoryStore, kind: str) -> None:
    """The records a search returns are the live records, every field as the reference holds
    them (``seq`` aside): never a row an index kept from before a patch."""
    if not hits:
        return
    live = {r.record_id: r for r in ref.query(RecordFilter(record_ids=tuple(ids(hits))))}
    for hit in hits:
        want = live.get(hit.record.record_id)
        assert want is not None, f"{kind} hit {hit.record.record_id!r} is not a live record"
        got = hit.record
        same = got.model_copy(update={"seq": 0, "metadata": {}}) == want.model_copy(update={"seq": 0, "metadata": {}})
        # metadata type-exact (1, 1.0 and true differ; big ints exact): compared as JSON text
        same = same and json.dumps(got.metadata, sort_keys=True) == json.dumps(want.metadata, sort_keys=True)
        assert same, f"{kind} hit {got.record_id!r} is not the stored record (a stale index row?): {got!r} vs {want!r}"


def mutations(data: TierData, ref: InMemoryStore) -> list[WriteBatch]:
    """Changes made after the indexes were built, aimed at what the queries find: deletes of top
    hits, re-adds of deleted ids (without a vector, and with a vector at a query), content
    patches (old words gone, new found), vectors removed and added, statuses, expiry (expired
    made alive, alive made expired, in other zones) and metadata."""
    q = data.queries
    vec_top = [h.record.record_id for h in ref.vector_search(q[0], RecordFilter(), 4)]
    kw_top = [h.record.record_id for h in ref.keyword_search("quokka", RecordFilter(), 4)]
    deleted = list(dict.fromkeys(vec_top[:3] + kw_top[:3] + [f"ix{i:06d}" for i in range(7, data.rows, max(7, data.rows // 40))]))
    invoice = [h.record.record_id for h in ref.keyword_search("invoice", RecordFilter(), 6) if h.record.record_id not in deleted]
    unvector = [h.record.record_id for h in ref.vector_search(q[1], RecordFilter(), 3) if h.record.record_id not in deleted]
    taken = {*deleted, *invoice, *unvector}
    alive = [r.record_id for r in ref.query(RecordFilter(alive_at=T0), limit=80) if r.record_id not in taken and r.record_id.startswith("ix0")]
    expired = [r.record_id for r in ref.query(RecordFilter(expired_at=T0), limit=20) if r.record_id not in taken]
    first = WriteBatch(delete=deleted)
    second = WriteBatch(
        add=[
            NewRecord(rec(deleted[0], content="quokka zebra returned without a vector", user="u1"), None),
            NewRecord(rec(deleted[1], content="zebra quokka returned at query two", user="u1", agent="a1"), q[2] * 3),
        ],
        patch=[
            *(RecordPatch(rid, content="zebra crossing quokka") for rid in invoice[:4]),
            *(RecordPatch(rid, vector=None) for rid in unvector[:2]),
            RecordPatch("ix-novec-0", vector=q[3]),
            *(RecordPatch(rid, status=RecordStatus.INVALID) for rid in alive[:5]),
        ],
    )
    third = WriteBatch(patch=[
        *(RecordPatch(rid, expires_at=None) for rid in expired[:4]),
        *(RecordPatch(rid, expires_at=T0.astimezone(MINUS5) - timedelta(minutes=1)) for rid in alive[5:9]),
        *(RecordPatch(rid, metadata={"topic": "billing", "n": 1, "flag": True, "tags": ["red"]}) for rid in alive[9:14]),
        *(RecordPatch(rid, metadata={}) for rid in alive[14:17]),
        RecordPatch(invoice[4] if len(invoice) > 4 else alive[17], content="quokka quokka quokka", vector=q[4]),
    ])
    return [first, second, third]


# ---- the tests -----------------------------------------------------------------------------
class IndexTierTests:
    """Search and filters past each declared index threshold, the indexes settled, and after
    changes the indexes must follow (``index_thresholds`` / ``settle``)."""

    def make_indexed_store(self, path: Path) -> MemoryStore:
        """The store the index tier fills (fresh, unopened, data under ``path``). Default: the
        class's ``make_store``. Override it to build the store with low index thresholds (and a
        planner that takes the index), so the tier reaches the indexed paths with a few hundred
        records instead of filling the store past the real thresholds."""
        return self.make_store(path)  # type: ignore[attr-defined]

    @pytest.fixture
    def indexed_store_factory(self, store_factory: StoreFactory) -> StoreFactory:
        """``make_indexed_store`` when the test class overrides it, else ``store_factory``."""
        if type(self).make_indexed_store is IndexTierTests.make_indexed_store:
            return store_factory
        return self.make_indexed_store

    @pytest.fixture
    def open_tier_store(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., MemoryStore]]:
        """Build and open a store from a factory (closed after the test); tests needing an
        undeclared capability skip here."""
        built: list[MemoryStore] = []

        def build(factory: StoreFactory, name: str, dimension: int = DIM) -> MemoryStore:
            store = factory(tmp_path / name)
            if not isinstance(store, MemoryStore):
                raise TypeError(f"the store factory must return a MemoryStore, got {type(store).__name__}")
            built.append(store)
            store.open(dimension=dimension)
            _record_backend(request, store)
            skip_unless_capable(request.node, store, getattr(self, "excluded_capabilities", {}))
            return store

        yield build
        for store in reversed(built):
            try:
                store.close()
            finally:
                close_loop(store)

    @pytest.fixture
    def tier_store(self, indexed_store_factory: StoreFactory, open_tier_store: Callable[[StoreFactory, str], MemoryStore]) -> MemoryStore:
        """The (empty, open) store of ``make_indexed_store``."""
        return open_tier_store(indexed_store_factory, "indexed")

    @clause("spi.vector-search", "spi.index-tier", "7.scope")
    def test_vector_search_with_indexes_settled(self, tier_store: MemoryStore, request: pytest.FixtureRequest) -> None:
        """Past the declared ``"vector"`` threshold (bulk-added) and after ``settle``, vector
        search under every kind of filter (scopes that differ in case or are absent, record
        types and statuses including empty sets, expiry at an instant written in other zones,
        metadata operators with type-exact values) returns what the reference returns: exact
        backends its ranking, approximate ones at their recall floor, no ineligible record;
        ``query`` and ``count`` agree too. Sync and async API in turns.

        Troubleshooting: the indexed path must apply every filter before the cut at ``k``
        (over-fetch, or scan exactly when a filter is selective), skip records without a
        vector, and break ties by record id exactly like the exact path.
        """
        ref, data = _fill(tier_store, "sync", request)
        apis = [Api(tier_store, "sync"), Api(tier_store, "async")]
        m = matrix(data.rows)
        compare_vector_search(apis, ref, [data.queries[i] for i in m.vectors], m.filters)
        compare_vector_search(apis, ref, data.queries[:3], {"all": RecordFilter(), "user u1": RecordFilter(user_id="u1")}, k=1)
        compare_vector_search(apis, ref, data.queries[6:9], {"all": RecordFilter(), "alive at T0": RecordFilter(alive_at=T0)}, k=50)
        compare_reads(apis, ref, _read_filters(m, data))

    @clause("spi.vector-search", "spi.index-tier", "spi.delete")
    def test_vector_search_at_a_wider_dimension(self, indexed_store_factory: StoreFactory, open_tier_store: Callable[..., MemoryStore]) -> None:
        """At ``WIDE_DIM`` dimensions, past the declared ``"vector"`` threshold and settled,
        then after deletes and vector patches made since, then settled again: vector search
        unfiltered, in a scope holding most records and under a record-type filter every
        record passes returns what the reference returns (exact backends its ranking,
        approximate ones at their recall floor), never a deleted record nor a patched one at
        its old vector. (At the tier's 4 dimensions an exact scan of 20,000 vectors is cheaper
        than any graph search, so a cost-based planner may never take its index there.) The
        declared recall floor is the business of the tier's other tests: here only the hits'
        correctness is checked (DuckDB's HNSW measured a mean recall@10 of 0.983-0.988 on
        this data, under its declared 0.99 measured at 384 dimensions).

        Troubleshooting: the index path must drop the index rows of records deleted or
        patched since it was built (and find their new vectors), apply the filter to what it
        fetches, and return the records as they are now.
        """
        store = open_tier_store(indexed_store_factory, "wide", WIDE_DIM)
        vector_threshold = {name: t for name, t in _thresholds(store).items() if name == "vector"}
        rows = tier_size(vector_threshold)
        rng = np.random.default_rng(4321)
        # embeddings-like: records gathered around topics (graph indexes keep their recall there)
        topics = rng.normal(size=(256, WIDE_DIM))
        vectors = (topics[rng.integers(0, len(topics), size=rows)] + 0.35 * rng.normal(size=(rows, WIDE_DIM))).astype(np.float32)
        users = ["u2" if i % 10 == 3 else "u1" for i in range(rows)]
        columns = RecordColumns(
            record_id=[f"w{i:06d}" for i in range(rows)], content=[f"wide record {i}" for i in range(rows)],
            record_type=RecordType.FACT, timestamp=T0, created_at=T0, user_id=users, vectors=vectors,
        )
        ref = InMemoryStore()
        ref.open(dimension=WIDE_DIM)
        api = Api(store, "sync")
        assert api.bulk_add(columns) == rows
        ref.bulk_add(columns)
        _settle(api, rows, "after the fill")
        filters = {"all": RecordFilter(), "user u1 (90 %)": RecordFilter(user_id="u1"),
                   "facts (every record)": RecordFilter(record_types=frozenset({RecordType.FACT}))}
        probes = [(topics[j] + 0.35 * rng.normal(size=WIDE_DIM)).astype(np.float32) for j in range(16)]
        queries = [*probes, vectors[rows // 3].copy(), vectors[rows - 1].copy()]
        apis = [api, Api(store, "async")]
        compare_vector_search(apis, ref, queries, filters, per_filter=len(queries), recall=False)
        deleted = [f"w{i:06d}" for i in range(0, rows, rows // 40)][:40]
        patched = [f"w{i:06d}" for i in range(7, rows, rows // 40)][:40]
        moved = {rid: rng.normal(size=WIDE_DIM).astype(np.float32) for rid in patched}
        batch = WriteBatch(delete=deleted, patch=[RecordPatch(rid, vector=v) for rid, v in moved.items()])
        api.write(batch)
        ref.write(batch)
        # the deleted records' and patched records' old vectors: they were their own nearest
        old = [vectors[int(rid[1:])].copy() for rid in deleted[:3] + patched[:3]]
        new_ones = [moved[rid] for rid in patched[3:5]]
        compare_vector_search(apis, ref, [*old, *new_ones, *probes[:8]], filters, per_filter=16, recall=False)
        _settle(api, rows, "after the changes")
        compare_vector_search(apis, ref, [*old[:2], *new_ones, *probes[8:]], filters, per_filter=12, recall=False)

    @clause("spi.keyword-search", "spi.index-tier")
    @requires(Capability.KEYWORD_SEARCH)
    def test_keyword_search_with_indexes_settled(self, tier_store: MemoryStore, request: pytest.FixtureRequest) -> None:
        """Past the declared ``"keyword"`` threshold (bulk-added through the async API) and
        after ``asettle``, keyword search (stemmed, accented, CJK, digit and ``_`` words;
        stop-word and unknown queries) under the same filters gives the reference's hits in its
        order with its BM25 scores.

        Troubleshooting: the keyword index must hold the core analyzer's terms and score with
        the live corpus statistics (documents with a vector, their average length, each term's
        document frequency); filters apply inside the index's candidates, never after a cut.
        """
        ref, data = _fill(tier_store, "async", request)
        apis = [Api(tier_store, "async"), Api(tier_store, "sync")]
        m = matrix(data.rows)
        compare_keyword_search(apis, ref, m.keywords, m.filters, exact_scores=True)

    @clause("spi.vector-search", "spi.keyword-search", "spi.index-tier", "spi.write")
    def test_indexes_follow_deletes_and_patches(
        self, tier_store: MemoryStore, indexed_store_factory: StoreFactory,
        open_tier_store: Callable[[StoreFactory, str], MemoryStore], request: pytest.FixtureRequest,
    ) -> None:
        """After the indexes are built: deleting top hits, re-adding deleted ids (without a
        vector: not searchable; with one: found at its new place), patching content, vectors
        (removed, added), statuses, expiry and metadata. Searches match the reference at once
        (before any ``settle``: keyword scores may then use the index's last statistics, the
        matching sets may not), again after a reopen (``PERSISTENCE``: indexes and pending
        changes loaded from storage), and exactly after ``settle``; then one delete and a reopen
        (``PERSISTENCE``): the deleted record is gone.

        Troubleshooting: an index built earlier must not answer for a record changed or deleted
        since: track changed ids durably (or rebuild) and read every returned field from the
        live row.
        """
        store = tier_store
        ref, data = _fill(store, "sync", request)
        apis = [Api(store, "sync"), Api(store, "async")]
        for i, batch in enumerate(mutations(data, ref)):
            apis[i % 2].write(batch)
            ref.write(batch)
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        m = matrix(data.rows)
        queries = tuple(dict.fromkeys((*m.keywords[:6], "zebra", "quokka", "returned")))
        # queries 2-4 are where ``mutations`` put new vectors: records written since the index was
        # built are then the nearest hits, and a store that leaves them out loses recall at once
        vectors = [data.queries[i] for i in dict.fromkeys((*m.vectors, 2, 3, 4))]

        def compare(exact_scores: bool, per_filter: int) -> None:
            compare_vector_search(apis, ref, vectors, m.filters, per_filter=per_filter)
            if keyword:
                compare_keyword_search(apis, ref, queries, m.filters, exact_scores=exact_scores, per_filter=per_filter)

        compare(False, 2)
        compare_reads(apis, ref, _read_filters(m, data))
        if Capability.PERSISTENCE in store.capabilities():
            store.close()
            close_loop(store)
            store = open_tier_store(indexed_store_factory, "indexed")
            apis = [Api(store, "async"), Api(store, "sync")]
            compare(False, 1)
        _settle(apis[1], data.rows, "after the changes")
        apis.reverse()
        compare(True, 2)
        # exactly one change after the build, a patch that takes a top hit's vector away (then
        # one that gives it a new one): a store that does not count such a patch as a change
        # lets the built index answer alone, which still returns the record at its old place
        # (checked on the record itself: a recall mean over two queries is too coarse for an
        # approximate index, and neither answer is approximate: a record without a vector is
        # never a hit, and one whose vector is the query itself is the nearest)
        [top] = ref.vector_search(vectors[1], RecordFilter(), 1)
        rid = top.record.record_id
        for step, vector in (("removed", None), ("given back elsewhere", data.queries[0])):
            batch = WriteBatch(patch=[RecordPatch(rid, vector=vector)])
            apis[0].write(batch)
            ref.write(batch)
            for api in apis:
                found = ids(api.vector_search(vectors[1] if vector is None else vector, RecordFilter(), 10))
                assert (rid in found) is (vector is not None), (
                    f"[{api.mode}] one change after the build, the vector {step}: {rid!r} "
                    f"{'missing from' if vector is not None else 'still among'} the hits {found}"
                )
            _settle(apis[1], data.rows, f"after the vector was {step}")
        if Capability.PERSISTENCE in store.capabilities():
            # exactly one change after the build, then a reopen: the store must still know that
            # its index is one change behind (a counter restored off by one would call it clean)
            gone = [h.record.record_id for h in ref.vector_search(vectors[0], RecordFilter(), 1)]
            apis[0].write(WriteBatch(delete=gone))
            ref.write(WriteBatch(delete=gone))
            store.close()
            close_loop(store)
            store = open_tier_store(indexed_store_factory, "indexed")
            apis = [Api(store, "sync"), Api(store, "async")]
            compare_vector_search(apis, ref, vectors[:2], {"all": RecordFilter()}, per_filter=1)
            assert not set(gone) & set(ids(apis[0].vector_search(vectors[0], RecordFilter(), 10))), (
                f"the record deleted just before the reopen came back: {gone}"
            )

    @clause("spi.vector-search", "spi.keyword-search", "spi.index-tier")
    def test_default_thresholds_are_reached(self, store_factory: StoreFactory, open_tier_store: Callable[[StoreFactory, str], MemoryStore], request: pytest.FixtureRequest) -> None:
        """The store of ``make_store`` (default options) filled past its own declared thresholds
        (up to ``TIER_MAX_ROWS`` records with a vector, bulk-added): ``settle`` builds each of
        those indexes, searches match the reference, and still do after deletes and patches.

        Troubleshooting: ``index_thresholds`` must report this instance's real thresholds, and
        ``settle`` must build every index the store has reached (``True`` in its result).
        """
        store = open_tier_store(store_factory, "defaults")
        thresholds = _thresholds(store)
        if not thresholds:
            pytest.skip(f"backend {store.name!r} declares no index thresholds (no indexed path to reach)")
        if not any(t <= TIER_MAX_ROWS for t in thresholds.values()):
            pytest.skip(f"every declared threshold {thresholds} is above the tier's {TIER_MAX_ROWS:,} records")
        ref, data = _fill(store, "sync", request, seed=99)
        apis = [Api(store, "sync"), Api(store, "async")]
        filters = {name: VECTOR_FILTERS[name] for name in ("all", "user Bob (not bob)", "rare user", "combined")}
        compare_vector_search(apis, ref, data.queries[5:9], filters, per_filter=2)
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        if keyword:
            compare_keyword_search(apis, ref, ("quokka", "東京", "order_7421 zeppelin"), filters, exact_scores=True, per_filter=1)
        for batch in mutations(data, ref):
            apis[0].write(batch)
            ref.write(batch)
        compare_vector_search(apis, ref, data.queries[:2], filters, per_filter=1)
        if keyword:
            compare_keyword_search(apis, ref, ("zebra", "quokka"), filters, exact_scores=False, per_filter=1)


def _read_filters(m: Matrix, data: TierData) -> dict[str, RecordFilter]:
    """The filters ``query``/``count`` are compared under: all of them, except the unfiltered
    one above ``FULL_TIER_ROWS`` (reading every record twice costs more than it checks)."""
    if data.rows <= FULL_TIER_ROWS:
        return m.filters
    return {name: flt for name, flt in m.filters.items() if name != "all"}


def _thresholds(store: MemoryStore) -> dict[str, int]:
    thresholds = store.index_thresholds()
    assert isinstance(thresholds, dict) and all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0 for k, v in thresholds.items()
    ), f"index_thresholds() must map index names to record counts, got {thresholds!r}"
    return thresholds


def _settle(api: Api, rows: int, when: str) -> dict[str, bool]:
    """``settle`` (or ``asettle``, by the api's mode); every index whose threshold ``rows``
    reached must come back built."""
    store = api.store
    if api.mode == "sync":
        status = store.settle()
    else:
        status = loop_for(store).run_until_complete(store.asettle())
    thresholds = _thresholds(store)
    assert isinstance(status, dict) and set(status) <= set(thresholds), (
        f"settle() must report the indexes of index_thresholds() {sorted(thresholds)}, got {status!r}"
    )
    missing = [name for name, t in thresholds.items() if t <= rows and not status.get(name)]
    assert not missing, f"settle() {when} left {missing} unbuilt with {rows} records past their thresholds {thresholds}"
    return status


class TierReference(InMemoryStore):
    """The reference store with an inverted index of its documents' analysed terms, kept from
    one write to the next: ``InMemoryStore`` visits its whole corpus on every keyword search,
    and the tier searches hundreds of times over thousands of records. The scores are the
    reference's: the same corpus, statistics, filter and ``bm25`` calls with the terms in the
    same order (``_fill`` checks a few searches against ``InMemoryStore``'s)."""

    def __init__(self, *, language: str | None = None) -> None:
        super().__init__(language=language)
        self._postings: dict[str, set[str]] | None = None

    def _write(self, batch: WriteBatch) -> list[Record]:
        self._postings = None
        return super()._write(batch)

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        terms = set(self.analyzer.terms(text))
        with self._lock:
            corpus = [r for r in self._records.values() if r.record_id in self._vectors]
        if not terms or not corpus:
            return []
        docs = {r.record_id: self._terms_of(r.indexed_text) for r in corpus}
        if self._postings is None:
            postings: dict[str, set[str]] = {}
            for rid, counts in docs.items():
                for term in counts:
                    postings.setdefault(term, set()).add(rid)
            self._postings = postings
        avg_len = sum(sum(c.values()) for c in docs.values()) / len(docs) or 1.0
        df = {t: len(self._postings.get(t, ())) for t in terms}
        candidates = set().union(*(self._postings.get(t, set()) for t in terms))
        hits = []
        for record in corpus:
            if record.record_id not in candidates or not record_matches(record, filter):
                continue
            score = bm25(docs[record.record_id], terms, df, len(docs), avg_len)
            if score > 0:
                hits.append(Hit(record=record, score=score))
        hits.sort(key=lambda h: (-round(h.score or 0.0, 6), h.record.record_id))
        return hits[:k]


def _fill(store: MemoryStore, mode: str, request: pytest.FixtureRequest, seed: int = 1234) -> tuple[TierReference, TierData]:
    """Fill ``store`` past its thresholds (``bulk_add``, then records without a vector) and
    settle it, through the API of ``mode``; the reference gets the same records. The size,
    thresholds and what ``settle`` reported go to the report (``agentmemory_index_tier``)."""
    api = Api(store, mode)
    thresholds = _thresholds(store)
    rows = tier_size(thresholds)
    data = tier_data(rows, seed)
    language = getattr(getattr(store, "analyzer", None), "language", "english")
    ref = TierReference(language=language)
    ref.open(dimension=DIM)
    assert api.bulk_add(data.columns) == rows
    ref.bulk_add(data.columns)
    api.write(WriteBatch(add=data.extra))
    ref.write(WriteBatch(add=data.extra))
    if rows <= FULL_TIER_ROWS:  # the tier's reference scores as InMemoryStore does
        for text, flt in (("apple banana", RecordFilter()), ("invoice 東京", VECTOR_FILTERS["combined"])):
            assert [(h.record.record_id, h.score) for h in ref.keyword_search(text, flt, 10_000)] == [
                (h.record.record_id, h.score) for h in InMemoryStore._keyword_search(ref, text, flt, 10_000)
            ], "TierReference disagrees with InMemoryStore"
    status = _settle(api, rows, "after the fill")
    request.node.user_properties.append(("agentmemory_index_tier", {
        "rows": rows, "thresholds": thresholds, "settled": status,
        "beyond_tier": sorted(name for name, t in thresholds.items() if t > TIER_MAX_ROWS),
    }))
    return ref, data
