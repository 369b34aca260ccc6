"""Every store operation as a generator of statements: one implementation, two drivers.

A plan yields ``Fetch`` / ``Execute`` / ``Copy`` statements and receives their results (rows, a
row count, nothing); the sync driver runs plans on a psycopg ``Connection``, the async driver on
an ``AsyncConnection`` (``store``). Driver errors come back into the plan already mapped to
agentmemory errors. The caller runs each plan in one transaction (writes: ``READ COMMITTED``
behind the store's meta-row lock; multi-statement reads: ``REPEATABLE READ READ ONLY``), except
vector searches, whose every statement is complete on its own (``vector_plan``): they run outside
a transaction, deferred statements pipelined with the next one.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from agentmemory.analysis import Analyzer
from agentmemory.bm25 import idf, length_norm, term_score
from agentmemory.errors import BackendUnavailable, Conflict, NotFound
from agentmemory.filters import metadata_matches
from agentmemory.records import Link, Record
from agentmemory.spi import UNSET, Hit, NewRecord, Order, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch
from agentmemory.validation import stored_metadata

from . import _sql as q

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """A statement whose rows come back (``binary``: in binary format, for vectors; ``step``:
    which step of a vector search it is, for ``explained``; ``defer``: the plan does not read
    its rows, so a pipelining driver sends it with the next statement and answers ``[]``)."""

    sql: str
    params: Sequence[Any] = ()
    binary: bool = False
    step: str = ""
    defer: bool = False


@dataclass(frozen=True)
class Execute:
    """A statement whose row count comes back."""

    sql: str
    params: Sequence[Any] = ()


@dataclass(frozen=True)
class Copy:
    """``COPY ... FROM STDIN (FORMAT BINARY)`` of ``rows`` typed ``types``."""

    sql: str
    types: Sequence[str]
    rows: Sequence[Sequence[Any]]


Statement = Fetch | Execute | Copy
Plan = Generator[Statement, Any, T]

TIE_SPARE = 4
"""Rows the exact vector scan fetches beyond ``k``, to order ties (rounded distance, id) and to
absorb pgvector's float32 arithmetic differing from the reference's in the last digits."""
_DIST_EPS = 2e-6
"""How far pgvector's cosine distance may be from the reference's numpy one (unit vectors)."""
_INSERT_COLUMNS = (
    "user_key, record_id, seq, record_type, content, index_text, user_id, agent_id, thread_id, role, "
    "ts, created_at, expires_at, status, metadata, embedding, terms, term_counts, doc_len"
)


def _insert_types(names: q.Names) -> tuple[str, ...]:
    return (
        "text", "text", "int8", "text", "text", "text", "text", "text", "text", "text",
        "timestamptz", "timestamptz", "timestamptz", "text", "text",
        "vector" if names.engine == "pgvector" else "bytea", "text[]", "int4[]", "int4",
    )


# ---- analysis ---------------------------------------------------------------------------------
MAX_TERM_BYTES = 200
"""Longer terms are stored as ``#`` + their SHA-256 (``term_key``): GIN and btree entries are
limited to a few kilobytes, and a token can be a million characters long. ``#`` is never part
of an analysed term (``\\w+`` tokens), so keys never collide with real terms."""


def term_key(term: str) -> str:
    """The form a term is stored and looked up in (itself, or a digest when it is long)."""
    if len(term) * 4 <= MAX_TERM_BYTES or len(term.encode()) <= MAX_TERM_BYTES:
        return term
    return "#" + hashlib.sha256(term.encode()).hexdigest()


def analysed(analyzer: Analyzer, text: str) -> tuple[list[str], list[int], int]:
    """Distinct term keys of ``text``, their counts, and the document length (total terms)."""
    counts = Counter(term_key(t) for t in analyzer.terms(text))
    terms = list(counts)
    tfs = [counts[t] for t in terms]
    return terms, tfs, sum(tfs)


@dataclass
class _Stats:
    """The meta row as a write changes it (seq counter and BM25 corpus statistics)."""

    seq: int
    n_docs: int
    total_len: int
    df: Counter[str] = field(default_factory=Counter)

    def add_doc(self, terms: Sequence[str], length: int) -> None:
        self.n_docs += 1
        self.total_len += length
        self.df.update(terms)

    def remove_doc(self, terms: Sequence[str], length: int) -> None:
        self.n_docs -= 1
        self.total_len -= length
        self.df.subtract(terms)


# ---- reads --------------------------------------------------------------------------------------
def _metadata_ok(text: str | None, flt: RecordFilter) -> bool:
    if not flt.metadata_filter:
        return True
    return metadata_matches(json.loads(text) if text else {}, flt.metadata_filter)


def query_plan(names: q.Names, flt: RecordFilter, order: Order, limit: int | None, offset: int) -> Plan[list[Record]]:
    """``query``: SQL filter and order; the metadata filter in Python before the window."""
    if limit == 0:
        return []
    where, params = q.compile_filter(flt)
    direction = "DESC" if order is Order.SEQ_DESC else "ASC"
    sql = f"SELECT {q.RECORD_COLUMNS} FROM {names.records} r WHERE {where} ORDER BY r.seq {direction}"
    if not flt.metadata_filter:
        if limit is not None:
            sql += " LIMIT %s"
            params = [*params, int(limit)]
        if offset:
            sql += " OFFSET %s"
            params = [*params, int(offset)]
        rows = yield Fetch(sql, params)
        return [q.decode_record(row) for row in rows]
    rows = yield Fetch(sql, params)
    kept = [row for row in rows if _metadata_ok(row[13], flt)]
    end = None if limit is None else offset + limit
    return [q.decode_record(row) for row in kept[offset:end]]


def count_plan(names: q.Names, flt: RecordFilter) -> Plan[int]:
    """``count``."""
    where, params = q.compile_filter(flt)
    if not flt.metadata_filter:
        rows = yield Fetch(f"SELECT count(*) FROM {names.records} r WHERE {where}", params)
        return int(rows[0][0])
    rows = yield Fetch(f"SELECT r.metadata FROM {names.records} r WHERE {where}", params)
    return sum(1 for (text,) in rows if _metadata_ok(text, flt))


def links_plan(names: q.Names, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> Plan[list[Link]]:
    """``links``, ordered by link id (code points, in Python)."""
    conds: list[str] = []
    params: list[Any] = []
    if record_ids is not None:
        ids = list(dict.fromkeys(record_ids))
        conds.append("(l.source_id = ANY(%s::text[]) OR l.target_id = ANY(%s::text[]))")
        params += [ids, ids]
    if link_ids is not None:
        conds.append("l.link_id = ANY(%s::text[])")
        params.append(list(dict.fromkeys(link_ids)))
    where = " AND ".join(conds) if conds else "TRUE"
    rows = yield Fetch(f"SELECT {q.LINK_COLUMNS} FROM {names.links} l WHERE {where}", params)
    return sorted((q.decode_link(row) for row in rows), key=lambda x: x.link_id)


def vectors_plan(names: q.Names, record_ids: Sequence[str]) -> Plan[dict[str, np.ndarray]]:
    """``read_vectors``."""
    rows = yield Fetch(
        f"SELECT r.record_id, r.embedding FROM {names.records} r "
        "WHERE r.record_id = ANY(%s::text[]) AND r.embedding IS NOT NULL",
        [list(dict.fromkeys(record_ids))],
        binary=True,
    )
    return {rid: q.decode_vector(vec) for rid, vec in rows}


def _records_by_id(names: q.Names, rids: Sequence[str]) -> Plan[dict[str, Record]]:
    if not rids:
        return {}
    rows = yield Fetch(f"SELECT {q.RECORD_COLUMNS} FROM {names.records} r WHERE r.record_id = ANY(%s::text[])", [list(rids)])
    return {row[0]: q.decode_record(row) for row in rows}


@dataclass(frozen=True)
class VectorPlanner:
    """How ``vector_search`` picks an exact scan or the HNSW index.

    A bounded count of the rows the filter selects decides (remembered for a large scope:
    ``ScopeSizes``): at most ``exact_limit(n)`` of a
    store's ``n`` vectors are ranked exactly (``ORDER BY distance + 0``, which no index can
    serve). The limit is ``max(exact_max_rows, sqrt(exact_scale * n))``: the exact scan costs
    in proportion to the scope's ``s`` rows, a filtered index scan in proportion to the rows it
    walks past to find enough of them, ``n / s`` per hit, so they break even where ``s`` grows
    as ``sqrt(n)``; ``exact_scale`` = 1,500 is measured (README, "Choosing the path"). More go through the
    HNSW index with iterative scans (``hnsw.iterative_scan = relaxed_order``), fetching
    ``k + min_extra`` candidates (``max(k * overfetch, k + filtered_extra)`` under a filter) that
    are re-ranked exactly. A metadata
    filter (applied in Python) asks the index for more rows, 4× at a time, until that many
    candidates pass it; when the index runs dry first (``max_scan_tuples``), or gives fewer
    than ``k``, the exact scan answers.
    """

    index: bool = True
    exact_max_rows: int = 2000
    exact_scale: int = 1500
    overfetch: int = 2
    min_extra: int = 4
    filtered_extra: int = 90
    ef_search: int = 100
    max_scan_tuples: int = 20_000

    def exact_limit(self, total: int) -> int:
        """The largest scope ranked exactly in a store of ``total`` vectors (``vector_plan``
        computes the same in SQL, beside the scope's count)."""
        return max(self.exact_max_rows, math.isqrt(self.exact_scale * max(total, 0)))

    def index_from(self) -> int:
        """The fewest vectors a store holds when its unscoped searches use the index (a scope of
        every row ``n`` passes ``exact_limit(n)`` once ``n > max(exact_max_rows, exact_scale)``)."""
        return max(self.exact_max_rows, self.exact_scale) + 1

    def fetch(self, k: int, filtered: bool = False) -> int:
        """Candidates the index query asks for (re-ranked exactly, then cut to ``k``).

        Unfiltered: ``k + min_extra`` (14 for k = 10; it was 50). An unfiltered scan's first batch
        is the search's ``hnsw.ef_search`` best in distance order, and ``ef_search`` is at least
        the fetch (``settings``), so more candidates cannot change which come first; the spare
        rows absorb pgvector's float arithmetic differing from the reference's at the k-th
        (100k × 384-d, 100 queries, 2026-12-04: the same hits as with 50, recall@10 0.999).
        A filtered query asks for ``max(k * overfetch, k + filtered_extra)`` (100 for k = 10): its
        iterative scan stops once that many rows passed the filter, and walking further finds
        more of the scope's true top k, whose batches come out of order (10 % scope at 100k ×
        384-d, 100 queries: recall@10 0.989 at 50, 0.996 at 100; pgvector 0.8.0, 2026-12-04)."""
        if filtered:
            return max(k * self.overfetch, k + self.filtered_extra)
        return k + self.min_extra

    def settings(self, fetch: int) -> list[str]:
        """``HNSW_SETTINGS``' parameters for a query fetching ``fetch`` candidates (pgvector
        caps ``hnsw.ef_search`` at 1,000; the iterative scan goes on past it)."""
        ef = min(MAX_EF_SEARCH, max(self.ef_search, fetch))
        return [str(ef), str(max(self.max_scan_tuples, fetch * 10))]


MAX_EF_SEARCH = 1000
"""pgvector's upper bound of ``hnsw.ef_search`` (a larger value is an error)."""


HNSW_SETTINGS = (
    "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true), "
    "set_config('hnsw.max_scan_tuples', %s, true), set_config('enable_sort', 'off', true), "
    "set_config('plan_cache_mode', 'force_generic_plan', true)"
)
"""The index query's settings, local to its transaction (``SET LOCAL``): the search width, pgvector
0.8's iterative scan (keep scanning the graph until enough rows pass the filter, or
``max_scan_tuples`` were visited), ``enable_sort = off``, so that PostgreSQL does serve the
query from the HNSW index once the planner has chosen it: left alone it answers scopes of up to
~10 % of the table with a bitmap scan and a sort, an exact scan slower than the index there, and
``plan_cache_mode = force_generic_plan``: the driver prepares a statement run five times
(psycopg's ``prepare_threshold``), and PostgreSQL then kept planning the index query afresh on
every execution (custom plans, about 0.2-0.4 ms each at 100k: its generic plan's estimate looked
dearer); the plan is the same (the HNSW index scan: ``enable_sort = off`` leaves no other without
a disabled sort), planned once per connection."""


def _ranked(query: np.ndarray, cands: Sequence[tuple[str, Any]], sent: bool = False) -> list[tuple[str, float]]:
    """``(rid, distance)`` best first by the reference's key ``(round(distance, 6), rid)``,
    distances computed as the reference does (``1 - matrix @ query`` in float32). ``sent``: the
    vectors are ``vector_send`` bytes (``q.vectors_from_send``), else stored or loaded vectors."""
    if not cands:
        return []
    if sent:
        matrix = q.vectors_from_send([v for _, v in cands])
    else:
        matrix = np.stack([q.decode_vector(v) for _, v in cands])
    dist = 1.0 - matrix @ query
    pairs = [(rid, float(d)) for (rid, _), d in zip(cands, dist)]
    pairs.sort(key=lambda p: (round(p[1], 6), p[0]))
    return pairs


class ScopeSizes:
    """What vector searches learned of scope sizes (``vector_plan``): a scope whose bounded count
    found more than ``exact_limit`` rows goes straight to the HNSW index on later searches, with
    no count, for at most ``ttl`` seconds and while the store's vector count has not fallen below
    the one at the count (checked inside the index query itself: ``vector_plan``). The count read
    up to ``exact_limit + 1`` rows of the scope (7,072 at 100k vectors, by sequential scan where no
    index serves the filter); a scope that large loses that status only through deletes (which
    the vector count shows), or through patches of status or expiry, which the ``ttl`` bounds and
    this store's own patches and deletes clear. A small scope is never remembered: its count
    travels with its exact ranking in one statement. Keys are the compiled filter with its time
    parameters left out (``alive_at`` = now changes on every call; it only ever shrinks a scope
    as rows expire). Thread-safe; at most ``capacity`` scopes (the oldest go first)."""

    def __init__(self, ttl: float = 30.0, capacity: int = 4096) -> None:
        self.ttl = ttl
        self.capacity = capacity
        self._items: dict[tuple[Any, ...], tuple[int, int, float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(where: str, params: Sequence[Any]) -> tuple[Any, ...]:
        return (where, *(tuple(p) if isinstance(p, list) else ("<time>" if isinstance(p, datetime) else p) for p in params))

    def get(self, key: tuple[Any, ...]) -> tuple[int, int] | None:
        """``(count, n_docs)`` of a large scope seen within ``ttl``, else None."""
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if time.monotonic() - item[2] > self.ttl:
                del self._items[key]
                return None
            return item[0], item[1]

    def put(self, key: tuple[Any, ...], count: int, n_docs: int) -> None:
        with self._lock:
            self._items.pop(key, None)
            while len(self._items) >= self.capacity:
                del self._items[next(iter(self._items))]
            self._items[key] = (count, n_docs, time.monotonic())

    def drop(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


HNSW_SPARE = 4
"""Rows the index query returns beyond ``k``: PostgreSQL sorts the index's candidates by
pgvector's distance (ties by record id) and sends the best ``k + HNSW_SPARE``, which the client
re-ranks with the reference's float32 distances (candidates were all sent before: 50 rows of
~1.8 kB each for the top 10). The candidates are sorted as ``(ctid, record id, distance)`` only,
and the best are joined back by ``ctid`` for their columns and ``vector_send`` (100 full rows
projected and sorted under a filter cost more server time than the index scan's extra rows).
The sort key is ``d + 0``: ordered by ``d`` itself, PostgreSQL takes the index scan's order for
sorted and only sorts within equal distances (an incremental sort), but an iterative scan
(``relaxed_order``) returns its rows slightly out of order."""


def _meta_sql(names: q.Names) -> str:
    """The store's vector count and ``VectorPlanner.exact_limit`` of it (``%s``: exact_max_rows,
    exact_scale)."""
    return (
        f"SELECT n_docs, greatest(%s::bigint, floor(sqrt(%s::float8 * n_docs))::bigint) AS l "
        f"FROM {names.meta} WHERE store_key = ''"
    )


def vector_plan(
    names: q.Names,
    vector: np.ndarray,
    flt: RecordFilter,
    k: int,
    planner: VectorPlanner,
    sizes: ScopeSizes | None = None,
    trace: VectorSearchTrace | None = None,
) -> Plan[list[Hit]]:
    """``vector_search``: exact up to the planner's threshold, HNSW above; hits are always
    re-ranked with exact distances, ties by record id.

    Every statement is complete on its own (one snapshot; the drivers run searches outside a
    transaction), and candidates come with their record columns, so the common searches are one
    round trip: a scope of unknown size is counted (bounded by ``exact_limit + 1``) and, when
    small, ranked exactly by the same statement; a large one, counted once (``ScopeSizes``), goes
    to the index with the index settings (``HNSW_SETTINGS``) pipelined before the index query,
    both in the implicit transaction of one protocol sync (settings local to it). The index
    query re-checks that the remembered count still holds against the store's vector count and
    ``exact_limit``, and sorts its candidates by distance to send only the best ``k +
    HNSW_SPARE``."""
    query = q.unit(vector)
    where, params = q.compile_filter(flt)
    if where == "FALSE":
        return []
    steps = trace.steps if trace is not None else []
    base = f"FROM {names.records} r WHERE r.embedding IS NOT NULL AND {where}"
    if names.engine != "pgvector":  # exact, in Python, over every vector the filter selects
        rows = yield Fetch(f"SELECT r.record_id, r.embedding, r.metadata {base}", params, binary=True, step="client")
        steps.append("client")
        md = bool(flt.metadata_filter)
        cands = [(row[0], row[1]) for row in rows if not md or _metadata_ok(row[2], flt)]
        top = _ranked(query, cands)[:k]
        records = yield from _records_by_id(names, [rid for rid, _ in top])
        return [Hit(record=records[rid], distance=d) for rid, d in top if rid in records]
    qvec = q.encode_vector(names, query)
    found: dict[str, Sequence[Any]]
    if not planner.index:
        steps.append("exact")
        top, found = yield from _exact_top(names, query, qvec, flt, base, params, k)
        return [Hit(record=q.decode_record(found[rid]), distance=d) for rid, d in top]
    key = ScopeSizes.key(where, params) if sizes is not None else None
    known = sizes.get(key) if sizes is not None and key is not None else None
    if known is not None:
        if trace is not None:
            trace.from_memo = True
        outcome = yield from _hnsw_top(names, query, qvec, flt, base, params, k, planner, known, trace)
        if outcome is not None:
            return outcome
        if sizes is not None and key is not None:
            sizes.drop(key)
        if trace is not None:
            trace.from_memo = False
    # one bounded scan of the scope: its size (at most exact_limit + 1) and, when that is within
    # the limit, its distances, the best k + TIE_SPARE of which come back with their rows
    unfiltered = where == "TRUE"
    gate = " AND (SELECT n_docs <= l FROM m)" if unfiltered else ""
    size = "least(m.n_docs, m.l + 1)" if unfiltered else "coalesce(top.n, 0)"
    limit = k + TIE_SPARE
    rows = yield Fetch(
        f"WITH m AS ({_meta_sql(names)}), "
        "top AS (SELECT s.t, s.d, count(*) OVER () AS n FROM ("
        f"SELECT r.ctid AS t, (r.embedding {names.cosine} %s) + 0 AS d {base}{gate} LIMIT (SELECT l + 1 FROM m)"
        ") s ORDER BY s.d LIMIT %s) "
        f"SELECT m.n_docs, m.l, {size}, x.* FROM m LEFT JOIN top ON true LEFT JOIN LATERAL ("
        f"SELECT {q.RECORD_COLUMNS}, {names.vector_send}(r.embedding), top.d FROM {names.records} r "
        f"WHERE r.ctid = top.t AND {size} <= m.l) x ON true",
        [planner.exact_max_rows, planner.exact_scale, qvec, *params, limit],
        binary=True,
        step="exact",
    )
    first: list[Sequence[Any]] | None = None
    if rows:
        total, limit_rows, n = int(rows[0][0]), int(rows[0][1]), int(rows[0][2])
        if trace is not None:
            trace.total_rows, trace.exact_limit, trace.scope_rows = total, limit_rows, n
        if n == 0:
            return []
        if n > limit_rows:
            if sizes is not None and key is not None:
                sizes.put(key, n, total)
            outcome = yield from _hnsw_top(names, query, qvec, flt, base, params, k, planner, (n, total), trace)
            if outcome is not None:
                return outcome
        else:
            first = [row[3:] for row in rows if row[3] is not None]
    steps.append("exact")
    top, found = yield from _exact_top(names, query, qvec, flt, base, params, k, first)
    return [Hit(record=q.decode_record(found[rid]), distance=d) for rid, d in top]


def _hnsw_top(
    names: q.Names,
    query: np.ndarray,
    qvec: Any,
    flt: RecordFilter,
    base: str,
    params: list[Any],
    k: int,
    planner: VectorPlanner,
    known: tuple[int, int],
    trace: VectorSearchTrace | None,
) -> Plan[list[Hit] | None]:
    """The index path for a scope counted at ``known = (count, n_docs)``: None when that count
    no longer shows the scope to be larger than ``exact_limit`` (the store's vector count fell
    below ``n_docs``, or grew so far that ``exact_limit`` passed ``count``: the caller counts
    again); the exact ranking when the index leaves fewer than ``k``."""
    md = bool(flt.metadata_filter)
    want = planner.fetch(k, filtered=not base.endswith(" AND TRUE") or md)
    limit = want
    steps = trace.steps if trace is not None else []
    while True:
        yield Fetch(HNSW_SETTINGS, planner.settings(limit), step="settings", defer=True)
        cut = limit if md else k + HNSW_SPARE
        rows = yield Fetch(
            f"WITH m AS ({_meta_sql(names)}) SELECT m.n_docs, m.l, x.* FROM m LEFT JOIN LATERAL ("
            f"SELECT {q.RECORD_COLUMNS}, {names.vector_send}(r.embedding), c.d FROM ("
            f"SELECT * FROM (SELECT r.ctid AS t, r.record_id AS id, r.embedding {names.cosine} %s AS d {base} "
            f"AND m.n_docs >= %s AND %s > m.l ORDER BY r.embedding {names.cosine} %s LIMIT %s) c0 "
            f"ORDER BY c0.d + 0, c0.id LIMIT %s) c JOIN {names.records} r ON r.ctid = c.t) x ON true",
            [planner.exact_max_rows, planner.exact_scale, qvec, *params, known[1], known[0], qvec, limit, cut],
            binary=True,
            step="hnsw",
        )
        if not rows or not (int(rows[0][0]) >= known[1] and known[0] > int(rows[0][1])):
            return None
        if trace is not None:
            trace.total_rows, trace.exact_limit = int(rows[0][0]), int(rows[0][1])
        cands = [row[2:] for row in rows if row[2] is not None]
        kept = [row for row in cands if not md or _metadata_ok(row[13], flt)]
        if not md or len(kept) >= want or len(cands) < limit or limit >= planner.max_scan_tuples:
            break
        limit *= 4
    steps.append("hnsw")
    if len(kept) < k:  # the index ran dry (max_scan_tuples) before k rows passed the filter
        steps.append("exact")
        top, found = yield from _exact_top(names, query, qvec, flt, base, params, k)
    else:
        found = {row[0]: row for row in kept}
        top = _ranked(query, [(row[0], row[14]) for row in kept], sent=True)[:k]
    return [Hit(record=q.decode_record(found[rid]), distance=d) for rid, d in top]


def _exact_top(
    names: q.Names,
    query: np.ndarray,
    qvec: Any,
    flt: RecordFilter,
    base: str,
    params: list[Any],
    k: int,
    first: list[Sequence[Any]] | None = None,
) -> Plan[tuple[list[tuple[str, float]], dict[str, Sequence[Any]]]]:
    """The exact top ``k`` and the candidates' rows: fetch ``k + TIE_SPARE`` rows by pgvector's
    distance (no index; ``first``: those rows, fetched already), re-rank exactly, and fetch more
    until no unfetched row can tie with or beat the k-th."""
    limit = k + TIE_SPARE
    md = bool(flt.metadata_filter)
    rows = first
    while True:
        if rows is None:
            rows = yield Fetch(
                f"SELECT {q.RECORD_COLUMNS}, {names.vector_send}(r.embedding), (r.embedding {names.cosine} %s) + 0 AS d {base} "
                "ORDER BY d LIMIT %s",
                [qvec, *params, limit],
                binary=True,
                step="exact",
            )
        kept = {row[0]: row for row in rows if not md or _metadata_ok(row[13], flt)}
        ranked = _ranked(query, [(rid, row[14]) for rid, row in kept.items()], sent=True)
        if len(rows) < limit:
            return ranked[:k], kept
        last = max(float(row[15]) for row in rows)
        if len(ranked) >= k and round(last - _DIST_EPS, 6) > round(ranked[k - 1][1], 6):
            return ranked[:k], kept
        limit *= 4
        rows = None


@dataclass
class VectorSearchTrace:
    """How one vector search ran (``PostgresStore.explain_vector_search``): the store's vector
    count, the largest scope it ranks exactly (``VectorPlanner.exact_limit``), the scope's row
    count as the planner's bounded count saw it (at most ``exact_limit + 1``; None when a count
    remembered from an earlier search sent it to the index: ``from_memo``), the path (``exact``,
    ``hnsw``, ``hnsw+exact`` when the index left fewer than ``k`` and the exact scan answered,
    ``client``), the index settings in force in the index query's transaction, and PostgreSQL's
    plan of each ranking statement (``EXPLAIN``, in that same transaction: ``exact`` is the
    counting statement that ranks a small scope, ``hnsw`` the index query)."""

    total_rows: int | None = None
    exact_limit: int | None = None
    scope_rows: int | None = None
    from_memo: bool = False
    steps: list[str] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    plans: dict[str, list[str]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)

    @property
    def path(self) -> str:
        ranked = [s for s in self.steps if s in ("client", "hnsw", "exact")]
        return "+".join(dict.fromkeys(ranked)) or "none"

    @property
    def index_used(self) -> bool:
        """True when the index answered (path ``hnsw``) and PostgreSQL's plan of the ``hnsw``
        step reads the HNSW index."""
        return "hnsw" in self.steps and any("am_records_hnsw" in line for line in self.plans.get("hnsw", []))


_SHOW_SETTINGS = (
    "SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan'), "
    "current_setting('hnsw.max_scan_tuples'), current_setting('enable_sort'), current_setting('plan_cache_mode')"
)


def explained(plan: Plan[list[Hit]], trace: VectorSearchTrace) -> Plan[VectorSearchTrace]:
    """Run a ``vector_plan`` made with ``trace`` and record how it ran: each ranking statement is
    preceded by its ``EXPLAIN`` and the settings step followed by a read of the settings in
    force, in the same transaction (the caller runs it in one); the search's own statements are
    unchanged."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            trace.hits = list(stop.value)
            return trace
        result, error = None, None
        step = stmt.step if isinstance(stmt, Fetch) else ""
        try:
            if isinstance(stmt, Fetch) and step in ("client", "hnsw", "exact") and step not in trace.plans:
                rows = yield Fetch("EXPLAIN " + stmt.sql, stmt.params)
                trace.plans[step] = [str(row[0]) for row in rows]
            result = yield stmt
            if step == "settings":
                rows = yield Fetch(_SHOW_SETTINGS)
                names = ("hnsw.ef_search", "hnsw.iterative_scan", "hnsw.max_scan_tuples", "enable_sort", "plan_cache_mode")
                trace.settings = {name: str(value) for name, value in zip(names, rows[0])}
        except Exception as exc:  # noqa: BLE001 - handed to the search plan, as the driver would
            error = exc


def keyword_plan(names: q.Names, text: str, flt: RecordFilter, k: int, analyzer: Analyzer) -> Plan[list[Hit]]:
    """``keyword_search``: the reference's Okapi BM25 over the searchable records (those with a
    vector), corpus statistics from the meta row and ``am_terms``, candidates through the GIN
    index on ``terms``, scored in Python with ``agentmemory.bm25`` in the reference's order."""
    terms = analyzer.term_set(text)
    if not terms:
        return []
    where, params = q.compile_filter(flt)
    if where == "FALSE":
        return []
    qterms = [term_key(t) for t in terms]  # the set's order: the reference sums in it
    rows = yield Fetch(f"SELECT n_docs, total_len FROM {names.meta} WHERE store_key = ''")
    if not rows or not int(rows[0][0]):
        return []
    n_docs, total_len = int(rows[0][0]), int(rows[0][1])
    avg_len = total_len / n_docs or 1.0
    df_rows = yield Fetch(f"SELECT term, df FROM {names.terms} WHERE term = ANY(%s::text[])", [qterms])
    df = {t: 0 for t in qterms}
    df.update({t: int(n) for t, n in df_rows})
    md = ", r.metadata" if flt.metadata_filter else ""
    rows = yield Fetch(
        "SELECT r.record_id, r.doc_len, ARRAY(SELECT coalesce(r.term_counts[array_position(r.terms, u.t)], 0) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, o) ORDER BY u.o)" + md
        + f" FROM {names.records} r WHERE r.embedding IS NOT NULL AND r.terms && %s::text[] AND {where}",
        [qterms, qterms, *params],
    )
    idfs = {t: idf(n_docs, df[t]) for t in qterms if df[t]}
    scored: list[tuple[str, float]] = []
    for row in rows:
        if md and not _metadata_ok(row[3], flt):
            continue
        norm = length_norm(float(row[1]), avg_len)
        score = 0.0
        for term, tf in zip(qterms, row[2]):
            if tf:
                score += term_score(idfs[term], float(tf), norm)
        if score > 0:
            scored.append((row[0], score))
    scored.sort(key=lambda p: (-round(p[1], 6), p[0]))
    top = scored[:k]
    records = yield from _records_by_id(names, [rid for rid, _ in top])
    return [Hit(record=records[rid], score=s) for rid, s in top if rid in records]


def settle_plan(names: q.Names, planner: VectorPlanner) -> Plan[dict[str, bool]]:
    """``settle``: both indexes are maintained by every write; the HNSW one answers searches
    once a scope holds more than ``exact_limit`` of the store's vectors."""
    rows = yield Fetch(f"SELECT n_docs FROM {names.meta} WHERE store_key = ''")
    n = int(rows[0][0]) if rows else 0
    out = {"keyword": True}
    if planner.index and names.engine == "pgvector":
        out["vector"] = n >= planner.index_from()
    return out


# ---- writes -------------------------------------------------------------------------------------
def _needs_lock(batch: WriteBatch) -> bool:
    """Batches that add, delete, link or re-index lock the meta row (seq, corpus statistics,
    uniqueness of ids and link pairs); patches of other fields and link deletes do not."""
    if batch.add or batch.add_links or batch.delete:
        return True
    return any(p.content is not UNSET or p.index_text is not UNSET or p.vector is not UNSET for p in batch.patch)


def _record_row(names: q.Names, item: NewRecord, seq: int, analyzer: Analyzer) -> tuple[tuple[Any, ...], Record, list[str], int]:
    rec = item.record
    metadata = stored_metadata(rec.metadata)
    terms, tfs, length = analysed(analyzer, rec.indexed_text)
    vec = None if item.vector is None else q.encode_vector(names, item.vector)
    row = (
        q.user_key(rec.user_id), rec.record_id, seq, rec.record_type.value, rec.content, rec.index_text,
        rec.user_id, rec.agent_id, rec.thread_id, rec.role, rec.timestamp, rec.created_at, rec.expires_at,
        rec.status.value, q.dump_json(metadata), vec, terms, tfs, length,
    )
    return row, rec.model_copy(update={"seq": seq, "metadata": metadata}), terms, length


REBUILD_MIN_ROWS = 10_000
"""A batch adding at least this many records, and at least as many as the store holds vectors,
builds the HNSW index afresh after its ``COPY`` (``DROP INDEX``, then ``CREATE INDEX`` in the
same transaction) instead of inserting every row into the graph: a bulk import into a new store,
as ``bulk_add`` does it. The drop holds the table's exclusive lock until the batch commits, so
readers of that store wait for such a batch (never for ordinary ones)."""


def write_plan(names: q.Names, batch: WriteBatch, analyzer: Analyzer) -> Plan[list[Record]]:
    """Apply a validated ``WriteBatch`` in the SPI's order: adds, patches, link deletes, link
    adds, record deletes. The caller runs it in one transaction and rolls back on any error."""
    adds = list(batch.add)
    patches = list(batch.patch)
    delete_links = list(batch.delete_links)
    add_links = list(batch.add_links)
    deletes = list(batch.delete)
    stats: _Stats | None = None
    if _needs_lock(batch):
        rows = yield Fetch(f"SELECT seq, n_docs, total_len FROM {names.meta} WHERE store_key = '' FOR UPDATE")
        if not rows:
            raise BackendUnavailable(f"postgres store {names.schema!r} has no meta row (was it dropped?)")
        stats = _Stats(int(rows[0][0]), int(rows[0][1]), int(rows[0][2]))
    added: list[Record] = []
    if adds:
        assert stats is not None
        ids = [item.record.record_id for item in adds]
        rows = yield Fetch(f"SELECT record_id FROM {names.records} WHERE record_id = ANY(%s::text[])", [ids])
        existing = {row[0] for row in rows}
        for rid in ids:
            if rid in existing:
                raise Conflict(f"record id {rid!r} already exists")
            existing.add(rid)
        insert: list[tuple[Any, ...]] = []
        held = stats.n_docs  # vectors in the store before this batch
        for item in adds:
            stats.seq += 1
            row, rec, terms, length = _record_row(names, item, stats.seq, analyzer)
            insert.append(row)
            added.append(rec)
            if item.vector is not None:
                stats.add_doc(terms, length)
        rebuild = False
        if names.engine == "pgvector" and len(adds) >= REBUILD_MIN_ROWS and len(adds) >= held:
            index = f"{names.s}.am_records_hnsw"
            rows = yield Fetch("SELECT to_regclass(%s) IS NOT NULL", [index])
            rebuild = bool(rows and rows[0][0])
            if rebuild:
                yield Execute(f"DROP INDEX {index}")
        yield Copy(f"COPY {names.records} ({_INSERT_COLUMNS}) FROM STDIN (FORMAT BINARY)", _insert_types(names), insert)
        if rebuild:
            yield Execute(q.hnsw_statement(names))
    for patch in patches:
        yield from _patch(names, patch, analyzer, stats)
    if delete_links:
        rows = yield Fetch(
            f"DELETE FROM {names.links} WHERE link_id = ANY(%s::text[]) RETURNING link_id", [list(dict.fromkeys(delete_links))]
        )
        found = {row[0] for row in rows}
        for lid in delete_links:
            if lid not in found:
                raise NotFound("link", lid)
            found.discard(lid)
    if add_links:
        yield from _add_links(names, add_links)
    if deletes:
        assert stats is not None
        unique = list(dict.fromkeys(deletes))
        rows = yield Fetch(
            f"DELETE FROM {names.records} WHERE record_id = ANY(%s::text[]) "
            "RETURNING record_id, embedding IS NOT NULL, terms, doc_len",
            [unique],
        )
        gone = {row[0]: row for row in rows}
        for rid in deletes:
            if rid not in gone:
                raise NotFound("record", rid)
            _, had_vec, terms, length = gone.pop(rid)
            if had_vec:
                stats.remove_doc(terms, int(length))
        yield Execute(
            f"DELETE FROM {names.links} WHERE source_id = ANY(%s::text[]) OR target_id = ANY(%s::text[])", [unique, unique]
        )
    if stats is not None:
        yield Execute(
            f"UPDATE {names.meta} SET seq = %s, n_docs = %s, total_len = %s, updated_at = now() WHERE store_key = ''",
            [stats.seq, stats.n_docs, stats.total_len],
        )
        changes = sorted((t, n) for t, n in stats.df.items() if n)
        if changes:
            yield Execute(
                f"INSERT INTO {names.terms} AS t (term, df) SELECT * FROM unnest(%s::text[], %s::bigint[]) "
                "ON CONFLICT (term) DO UPDATE SET df = t.df + EXCLUDED.df",
                [[t for t, _ in changes], [n for _, n in changes]],
            )
            gone_terms = [t for t, n in changes if n < 0]
            if gone_terms:
                yield Execute(f"DELETE FROM {names.terms} WHERE term = ANY(%s::text[]) AND df <= 0", [gone_terms])
    return added


def _patch(names: q.Names, patch: RecordPatch, analyzer: Analyzer, stats: _Stats | None) -> Plan[None]:
    rows = yield Fetch(
        f"SELECT content, index_text, embedding IS NOT NULL, terms, doc_len FROM {names.records} "
        "WHERE record_id = %s FOR UPDATE",
        [patch.record_id],
    )
    if not rows:
        raise NotFound("record", patch.record_id)
    content, index_text, had_vec, old_terms, old_len = rows[0]
    sets: list[str] = []
    params: list[Any] = []

    def put(column: str, value: Any) -> None:
        sets.append(f"{column} = %s")
        params.append(value)

    new_content, new_index = content, index_text
    if patch.content is not UNSET:
        new_content = patch.content
        put("content", new_content)
    if patch.index_text is not UNSET:
        new_index = patch.index_text
        put("index_text", new_index)
    elif patch.content is not UNSET:
        new_index = None
        put("index_text", None)
    if patch.metadata is not UNSET:
        put("metadata", q.dump_json(stored_metadata(patch.metadata)))  # type: ignore[arg-type]
    if patch.status is not UNSET:
        put("status", patch.status.value)  # type: ignore[union-attr]
    if patch.timestamp is not UNSET:
        put("ts", patch.timestamp)
    if patch.expires_at is not UNSET:
        put("expires_at", patch.expires_at)
    has_vec = bool(had_vec)
    if patch.vector is not UNSET:
        has_vec = patch.vector is not None
        put("embedding", None if patch.vector is None else q.encode_vector(names, patch.vector))
    old_text = content if index_text is None else index_text
    new_text = new_content if new_index is None else new_index
    terms, length = list(old_terms), int(old_len)
    if new_text != old_text:
        terms, tfs, length = analysed(analyzer, new_text)
        put("terms", terms)
        put("term_counts", tfs)
        put("doc_len", length)
    if stats is not None and (new_text != old_text or has_vec != bool(had_vec)):
        if had_vec:
            stats.remove_doc(old_terms, int(old_len))
        if has_vec:
            stats.add_doc(terms, length)
    if sets:
        yield Execute(f"UPDATE {names.records} SET {', '.join(sets)} WHERE record_id = %s", [*params, patch.record_id])
    return None


def _add_links(names: q.Names, links: Sequence[Link]) -> Plan[None]:
    """Check endpoints and clashes as the reference does (the first offending link in batch
    order decides the error), then insert every link."""
    ends = list(dict.fromkeys(end for link in links for end in (link.source_id, link.target_id)))
    rows = yield Fetch(f"SELECT record_id, user_key FROM {names.records} WHERE record_id = ANY(%s::text[])", [ends])
    owner = {row[0]: row[1] for row in rows}
    link_ids = [link.link_id for link in links]
    rows = yield Fetch(
        f"SELECT link_id, source_id, target_id FROM {names.links} "
        "WHERE link_id = ANY(%s::text[]) OR source_id = ANY(%s::text[]) OR target_id = ANY(%s::text[])",
        [link_ids, ends, ends],
    )
    taken = {row[0] for row in rows if row[0] in set(link_ids)}
    pairs = {frozenset((row[1], row[2])) for row in rows}
    insert: list[tuple[Any, ...]] = []
    for link in links:
        for end in (link.source_id, link.target_id):
            if end not in owner:
                raise NotFound("record", end)
        if link.link_id in taken:
            raise Conflict(f"link id {link.link_id!r} already exists")
        pair = frozenset((link.source_id, link.target_id))
        if pair in pairs:
            raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
        taken.add(link.link_id)
        pairs.add(pair)
        insert.append((
            owner[link.source_id], link.link_id, link.source_id, link.target_id, link.link_type.value,
            link.created_at, q.dump_json(stored_metadata(link.metadata)),
        ))
    yield Copy(
        f"COPY {names.links} (user_key, link_id, source_id, target_id, link_type, created_at, metadata) FROM STDIN (FORMAT BINARY)",
        ("text", "text", "text", "text", "text", "timestamptz", "text"),
        insert,
    )
    return None


# ---- schema -------------------------------------------------------------------------------------
@dataclass
class OpenResult:
    """What ``open_plan`` found or made."""

    schema_version: int
    language: str
    engine: str = "pgvector"
    created: bool = False
    reindexed: int = 0


def open_plan(
    names: q.Names, dimension: int, policy: SchemaPolicy, language: str | None, vector_index: bool = True
) -> Plan[OpenResult]:
    """Check, create or recreate the store per ``policy`` (the caller holds the store's DDL
    advisory lock in this transaction); verify version and dimension; re-analyse every record
    when the stored analyzer fingerprint is not the one in force."""
    hint = "open it with schema_policy='create_if_necessary' to create it"
    if policy is SchemaPolicy.RECREATE:
        yield Execute(q.drop_statement(names))
    sql, params = q.existing_tables(names)
    existing = {row[0] for row in (yield Fetch(sql, params))}
    created = False
    if set(q.TABLES) - existing:
        if policy is SchemaPolicy.REQUIRE_EXISTING:
            if not existing:
                raise BackendUnavailable(f"no agentmemory store in schema {names.schema!r}; {hint}")
            raise BackendUnavailable(
                f"agentmemory store in schema {names.schema!r} is incomplete (missing "
                f"{', '.join(sorted(set(q.TABLES) - existing))}); {hint}"
            )
        for statement in q.create_statements(names, dimension, vector_index):
            yield Execute(statement)
        created = True
    rows = yield Fetch(f"SELECT schema_version, dimension, language, fingerprint FROM {names.meta} WHERE store_key = ''")
    analyzer = Analyzer.for_language(language or (rows[0][2] if rows else None))
    if not rows:
        if policy is SchemaPolicy.REQUIRE_EXISTING:
            raise BackendUnavailable(f"agentmemory store in schema {names.schema!r} has no meta row; {hint}")
        yield Execute(
            f"INSERT INTO {names.meta} (store_key, schema_version, dimension, language, fingerprint, vector_engine) "
            "VALUES ('', %s, %s, %s, %s, %s)",
            [q.SCHEMA_VERSION, int(dimension), analyzer.language, analyzer.fingerprint, names.engine],
        )
        return OpenResult(q.SCHEMA_VERSION, analyzer.language, names.engine, created=True)
    version, stored_dim, _, fingerprint = int(rows[0][0]), int(rows[0][1]), rows[0][2], rows[0][3]
    if stored_dim != int(dimension):
        raise Conflict(
            f"postgres store {names.schema!r} holds {stored_dim}-d vectors, not {dimension}-d "
            "(use another schema, or schema_policy='recreate' to start over)"
        )
    if version > q.SCHEMA_VERSION:
        raise BackendUnavailable(
            f"postgres store {names.schema!r} has schema version {version}, newer than this package supports "
            f"({q.SCHEMA_VERSION}); upgrade agentmemory-postgres"
        )
    if version < q.SCHEMA_VERSION:
        if policy is SchemaPolicy.REQUIRE_EXISTING:
            raise BackendUnavailable(
                f"postgres store {names.schema!r} has schema version {version} and needs an upgrade to "
                f"{q.SCHEMA_VERSION}; open it with schema_policy='create_if_necessary'"
            )
        for v in range(version, q.SCHEMA_VERSION):
            for statement in MIGRATIONS_FOR(v):
                yield Execute(statement.format(s=names.s, vector=names.vector_type))
        yield Execute(f"UPDATE {names.meta} SET schema_version = %s, updated_at = now() WHERE store_key = ''", [q.SCHEMA_VERSION])
    result = OpenResult(q.SCHEMA_VERSION, analyzer.language, names.engine, created=created)
    if fingerprint != analyzer.fingerprint:
        result.reindexed = yield from _reanalyse(names, analyzer)
    return result


def MIGRATIONS_FOR(version: int) -> list[str]:  # noqa: N802 - reads as a table lookup
    """The statements lifting a store from ``version`` to ``version + 1``."""
    if version not in q.MIGRATIONS:
        raise BackendUnavailable(f"no migration from schema version {version}")
    return q.MIGRATIONS[version]


def _reanalyse(names: q.Names, analyzer: Analyzer) -> Plan[int]:
    """Recompute every record's terms, the document frequencies and the corpus statistics with
    ``analyzer``, and record its language and fingerprint (in the open's transaction)."""
    yield Fetch(f"SELECT 1 FROM {names.meta} WHERE store_key = '' FOR UPDATE")
    rows = yield Fetch(f"SELECT record_id, content, index_text, embedding IS NOT NULL FROM {names.records}")
    df: Counter[str] = Counter()
    n_docs = total = 0
    updates: list[tuple[Any, ...]] = []
    for rid, content, index_text, has_vec in rows:
        terms, tfs, length = analysed(analyzer, content if index_text is None else index_text)
        updates.append((rid, terms, tfs, length))
        if has_vec:
            n_docs += 1
            total += length
            df.update(terms)
    if updates:
        yield Execute("CREATE TEMP TABLE am_reindex (record_id text, terms text[], term_counts int[], doc_len int) ON COMMIT DROP")
        yield Copy("COPY am_reindex FROM STDIN (FORMAT BINARY)", ("text", "text[]", "int4[]", "int4"), updates)
        yield Execute(
            f"UPDATE {names.records} r SET terms = x.terms, term_counts = x.term_counts, doc_len = x.doc_len "
            "FROM am_reindex x WHERE r.record_id = x.record_id"
        )
    yield Execute(f"DELETE FROM {names.terms}")
    if df:
        items = sorted(df.items())
        yield Execute(
            f"INSERT INTO {names.terms} (term, df) SELECT * FROM unnest(%s::text[], %s::bigint[])",
            [[t for t, _ in items], [n for _, n in items]],
        )
    yield Execute(
        f"UPDATE {names.meta} SET n_docs = %s, total_len = %s, language = %s, fingerprint = %s, updated_at = now() "
        "WHERE store_key = ''",
        [n_docs, total, analyzer.language, analyzer.fingerprint],
    )
    return len(updates)
