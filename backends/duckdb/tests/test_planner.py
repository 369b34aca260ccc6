"""The per-query planner: recall@10 against exact search at every selectivity, both strategies
exercised, fallback, and the exact delta over an HNSW snapshot (fresh writes, deletes, patches).

DuckDB's HNSW index filters *after* the index: a plain ``WHERE`` + index query returns ~1% of
the right rows at 1% selectivity. These tests would fail on such a store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.spi import ANY, RecordFilter, RecordPatch, WriteBatch

N = 10_000
DIM = 32
K = 10
QUERIES = 25

# (filter, the boolean mask over the dataset it selects), built from the attributes below
SELECTIVITIES = {
    "0.1%": ("agent_id", "a01"),
    "1%": ("agent_id", "a1"),
    "5%": ("thread_id", "t5"),
    "10%": ("agent_id", "a10"),
    "25%": ("thread_id", "t25"),
    "50%": ("user_id", "half"),
    "100%": None,
}


def _attributes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    u = rng.random(n)
    a = rng.random(n)
    t = rng.random(n)
    return {
        "user_id": np.where(u < 0.5, "half", "other"),
        "agent_id": np.where(a < 0.001, "a01", np.where(a < 0.011, "a1", np.where(a < 0.111, "a10", "rest"))),
        "thread_id": np.where(t < 0.05, "t5", np.where(t < 0.30, "t25", "rest")),
    }


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory, h: Any) -> Iterator[dict[str, Any]]:
    """10k clustered 32-d vectors in a store whose HNSW snapshot covers them all; the planner is
    tuned so that small scale still exercises both strategies (exact at <= 200 rows)."""
    rng = np.random.default_rng(7)
    vectors = h.clustered_vectors(N + QUERIES, DIM, seed=7)
    data, queries = vectors[:N], vectors[N:]
    attrs = _attributes(N, rng)
    path = tmp_path_factory.mktemp("planner") / "memory.duckdb"
    store = DuckDBStore(path, auto_index=False, planner="index", exact_max_rows=200, max_fetch=5_000, hnsw_ef_construction=64)
    store.open(dimension=DIM)
    for start in range(0, N, 2_500):
        store.write(
            WriteBatch(
                add=[
                    h.new(f"r{i:05d}", data[i], user_id=str(attrs["user_id"][i]), agent_id=str(attrs["agent_id"][i]),
                        thread_id=str(attrs["thread_id"][i]), metadata={"bucket": int(i % 10)})
                    for i in range(start, min(N, start + 2_500))
                ]
            )
        )
    assert store.build_indexes() == {"vector": True, "fts": True}
    yield {"store": store, "data": data, "queries": queries, "attrs": attrs}
    store.close()


def _truth(data: np.ndarray, mask: np.ndarray, q: np.ndarray, k: int) -> list[str]:
    idx = np.flatnonzero(mask)
    dist = 1.0 - data[idx] @ q
    order = np.lexsort((idx, np.round(dist, 6)))[:k]
    return [f"r{i:05d}" for i in idx[order]]


@pytest.mark.parametrize("label", list(SELECTIVITIES))
def test_recall_at_10_at_every_selectivity(dataset: dict[str, Any], label: str) -> None:
    store: DuckDBStore = dataset["store"]
    spec = SELECTIVITIES[label]
    if spec is None:
        flt, mask = RecordFilter(), np.ones(N, dtype=bool)
    else:
        dim, value = spec
        flt, mask = RecordFilter(**{dim: value}), dataset["attrs"][dim] == value
    strategies = set()
    found = wanted = 0
    for q in dataset["queries"]:
        truth = _truth(dataset["data"], mask, q, K)
        hits = store.vector_search(q, flt, K)
        assert store.last_plan is not None
        strategies.add(store.last_plan.strategy)
        got = [h.record.record_id for h in hits]
        assert len(got) == min(K, int(mask.sum()))
        for h in hits:  # every hit is eligible and carries its true distance
            assert mask[int(h.record.record_id[1:])]
            true_d = 1.0 - float(dataset["data"][int(h.record.record_id[1:])] @ q)
            assert abs(h.distance - true_d) < 1e-4
        found += len(set(got) & set(truth))
        wanted += len(truth)
    recall = found / wanted
    assert recall >= 0.99, f"recall@10 {recall:.4f} at selectivity {label} ({strategies})"
    expected = "exact" if mask.sum() <= 200 else "index"
    assert strategies == {expected}, f"planner chose {strategies} at {label}"


def test_metadata_filter_goes_through_the_planner(dataset: dict[str, Any]) -> None:
    store: DuckDBStore = dataset["store"]
    mask = (np.arange(N) % 10) == 3
    found = 0
    for q in dataset["queries"][:10]:
        hits = store.vector_search(q, RecordFilter(user_id=ANY, metadata_filter={"bucket": 3}), K)
        found += len({h.record.record_id for h in hits} & set(_truth(dataset["data"], mask, q, K)))
        assert store.last_plan is not None and store.last_plan.strategy == "index"
    assert found / (10 * K) >= 0.99


def test_fallback_to_exact_when_the_index_comes_back_short(tmp_path: Path, dataset: dict[str, Any], h: Any) -> None:
    """With no over-fetch margin and the index forced at 1% selectivity, the index path often
    yields fewer than k matching rows; the planner must notice and answer exactly."""
    data, attrs = dataset["data"][:4_000], {k: v[:4_000] for k, v in dataset["attrs"].items()}
    store = DuckDBStore(tmp_path / "m.duckdb", auto_index=False, planner="index", exact_max_rows=0, overfetch=1.0, max_fetch=100_000)
    store.open(dimension=DIM)
    try:
        store.write(WriteBatch(add=[h.new(f"r{i:05d}", data[i], agent_id=str(attrs["agent_id"][i])) for i in range(4_000)]))
        store.build_indexes()
        mask = attrs["agent_id"] == "a1"
        fallbacks = 0
        for q in dataset["queries"]:
            hits = store.vector_search(q, RecordFilter(agent_id="a1"), K)
            assert [h.record.record_id for h in hits] == _truth(data, mask, q, K)
            assert store.last_plan is not None and store.last_plan.strategy == "index"
            fallbacks += store.last_plan.fallback
        assert fallbacks > 0
    finally:
        store.close()


def test_delta_over_a_stale_snapshot_is_exact(tmp_path: Path, h: Any) -> None:
    """Rows written after the HNSW build are found at once; deleted or re-embedded rows never
    come back from the stale snapshot."""
    data = h.clustered_vectors(3_000, DIM, seed=3)
    store = DuckDBStore(tmp_path / "m.duckdb", auto_index=False, planner="index", exact_max_rows=0)
    store.open(dimension=DIM)
    try:
        store.write(WriteBatch(add=[h.new(f"r{i:05d}", data[i]) for i in range(3_000)]))
        store.build_indexes()
        q = data[0]
        first = [h.record.record_id for h in store.vector_search(q, RecordFilter(), K)]
        assert first[0] == "r00000" and store.last_plan is not None and store.last_plan.strategy == "index"
        # a new exact match, a deleted neighbour, a neighbour moved far away
        far = -q
        store.write(WriteBatch(add=[h.new("fresh", q)], patch=[RecordPatch(first[1], vector=far)], delete=[first[2]]))
        got = [h.record.record_id for h in store.vector_search(q, RecordFilter(), K)]
        assert store.last_plan.strategy == "index"
        assert got[:2] == sorted(["fresh", "r00000"])
        assert first[1] not in got and first[2] not in got
        # removing the vector takes the record out of vector search too
        store.write(WriteBatch(patch=[RecordPatch("fresh", vector=None)]))
        assert "fresh" not in [h.record.record_id for h in store.vector_search(q, RecordFilter(), K)]
        moved = store.vector_search(far, RecordFilter(record_ids=(first[1],)), 1)
        assert moved and moved[0].distance < 1e-5
    finally:
        store.close()


def test_writes_during_a_build_are_not_lost_by_the_swap(tmp_path: Path, h: Any) -> None:
    """Rows deleted, re-embedded or added while a rebuild runs (after its snapshot was taken)
    must stay correct once the new snapshot becomes current."""
    data = h.clustered_vectors(800, DIM, seed=11)

    class Racing(DuckDBStore):
        race: bool = False

        def _after_snapshot(self, job: str) -> None:
            if self.race and job == "vector":
                self.race = False
                self.write(WriteBatch(add=[h.new("late", data[0], "late words")], patch=[RecordPatch("r00001", vector=-data[1])], delete=["r00002"]))

    store = Racing(tmp_path / "m.duckdb", auto_index=False, planner="index", exact_max_rows=0)
    store.open(dimension=DIM)
    try:
        store.write(WriteBatch(add=[h.new(f"r{i:05d}", data[i], f"doc {i}") for i in range(800)]))
        store.build_indexes()
        store.write(WriteBatch(add=[h.new("pre", data[3])]))  # makes the index stale
        store.race = True
        store.build_indexes()
        assert not store.race
        got = [x.record.record_id for x in store.vector_search(data[0], RecordFilter(), 5)]
        assert store.last_plan is not None and store.last_plan.strategy == "index"
        assert got[:2] == ["late", "r00000"]
        assert "r00002" not in [x.record.record_id for x in store.vector_search(data[2], RecordFilter(), 5)]
        assert "r00001" not in [x.record.record_id for x in store.vector_search(data[1], RecordFilter(), 5)]
        assert [x.record.record_id for x in store.keyword_search("doc 2", RecordFilter(), 900)].count("r00002") == 0
    finally:
        store.close()


def test_auto_planner_rule() -> None:
    """Exact for few matching rows or huge over-fetch; the index for broad queries."""
    store = DuckDBStore("unused.duckdb")
    assert not store._index_pays(1_500, 50, 384)  # at most exact_max_rows
    assert store._fetch_size(100_000, 100_000, 10) == 10
    assert store._index_pays(100_000, 10, 384)  # unscoped at 100k
    assert not store._index_pays(5_000, store._fetch_size(5_000, 100_000, 10), 384)  # 5%: fetch 810
    assert not store._index_pays(100_000, 5_000, 384)  # beyond max_fetch
    assert not DuckDBStore("unused.duckdb", planner="exact")._index_pays(100_000, 50, 384)
    assert DuckDBStore("unused.duckdb", planner="index")._index_pays(3_000, 4_000, 384)
    with pytest.raises(Exception, match="planner"):
        DuckDBStore("unused.duckdb", planner="fast")


def test_stale_snapshot_rows_stay_hidden_after_reopen(tmp_path: Path, h: Any) -> None:
    """Deletes recorded against a snapshot are honoured after a reopen, when the in-memory
    change counters start from the file (a delete leaves no delta row: a store that counted
    only those would think its snapshot clean and skip the stale look-up)."""
    data = h.clustered_vectors(600, DIM, seed=5)
    path = tmp_path / "m.duckdb"
    store = DuckDBStore(path, auto_index=False, planner="index", exact_max_rows=0)
    store.open(dimension=DIM)
    store.write(WriteBatch(add=[h.new(f"r{i:05d}", data[i], f"doc{i} words") for i in range(600)]))
    store.build_indexes()
    store.write(WriteBatch(delete=["r00000"]))
    store.close()
    store = DuckDBStore(path, auto_index=False, planner="index", exact_max_rows=0)
    store.open(dimension=DIM)
    try:
        assert "r00000" not in [x.record.record_id for x in store.vector_search(data[0], RecordFilter(), 5)]
        assert store.last_plan is not None and store.last_plan.strategy == "index"
        assert store.keyword_search("doc0", RecordFilter(), 5) == []
        store.write(WriteBatch(patch=[RecordPatch("r00001", content="changed", vector=-data[1])]))
        assert "r00001" not in [x.record.record_id for x in store.vector_search(data[1], RecordFilter(), 5)]
        assert [x.record.record_id for x in store.keyword_search("changed", RecordFilter(), 5)] == ["r00001"]
        assert store.keyword_search("doc1", RecordFilter(), 5) == []
    finally:
        store.close()


def test_ef_grows_with_the_index() -> None:
    store = DuckDBStore("unused.duckdb")
    assert [store._ef_floor(n) for n in (10_000, 200_000, 1_000_000)] == [64, 128, 256]
    assert DuckDBStore("unused.duckdb", hnsw_ef_search=300)._ef_floor(1_000_000) == 300


@pytest.mark.parametrize("snapshot", [False, True], ids=["records", "clustered-snapshot"])
@pytest.mark.parametrize("jitter", [0.0, 1e-9], ids=["identical", "equal-after-rounding"])
def test_exact_scan_orders_ties_by_id_beyond_the_spare_rows(tmp_path: Path, h: Any, jitter: float, snapshot: bool) -> None:
    """The exact scan fetches ``k + TIE_SPARE`` rows by bare distance; when more rows than that
    tie with the k-th after rounding to 6 decimals, it must still return the smallest ids (the
    reference order), not whichever tied rows DuckDB's top-N happened to keep."""
    from agentmemory_duckdb.store import TIE_SPARE

    from agentmemory.records import Record
    from agentmemory.reference_store import InMemoryStore
    from agentmemory.spi import NewRecord

    rng = np.random.default_rng(3)
    n = 4 * (K + TIE_SPARE)
    base = np.ones(4, dtype=np.float32)
    vectors = [base + np.float32(jitter) * rng.standard_normal(4).astype(np.float32) for _ in range(n)]
    ids = [f"m{i:03d}" for i in rng.permutation(n)]  # ids not in insertion order
    adds = [NewRecord(Record(record_id=rid, record_type="memory", content="x", user_id="u", timestamp=h.T0, created_at=h.T0), v)
            for rid, v in zip(ids, vectors)]
    far = [NewRecord(Record(record_id=f"z{i}", record_type="memory", content="x", user_id="u", timestamp=h.T0, created_at=h.T0),
                     np.array([1, -1, 0, 0], dtype=np.float32)) for i in range(5)]
    results = []
    for store in (DuckDBStore(tmp_path / "m.duckdb", auto_index=False, planner="exact"), InMemoryStore()):
        store.open(dimension=4)
        store.write(WriteBatch(add=adds[:n // 2] + far))
        if snapshot and isinstance(store, DuckDBStore):
            store.build_indexes()  # half the ties in the snapshot, half in the delta
        store.write(WriteBatch(add=adds[n // 2:]))
        results.append([hit.record.record_id for hit in store.vector_search(base, RecordFilter(user_id="u"), K)])
        store.close()
    assert results[0] == results[1] == sorted(ids)[:K]


def test_a_kept_scope_applies_expiry_at_each_query_time(tmp_path: Path, h: Any) -> None:
    """A small scope is read once and kept until the next write, whatever time each query names
    (a card's ``alive_at`` is "now"), so expiry is applied per query: a record that expires
    between two queries, with no write in between, is gone from the second one's vector and
    keyword results, and back when asked at the earlier time."""
    from datetime import timedelta

    from agentmemory.records import RecordType

    t0 = h.T0
    store = h.open_store(tmp_path / "m.duckdb", auto_index=False)
    rows = [
        h.new("keep", [1, 0, 0, 0], "lisbon trip plans", user_id="u", record_type=RecordType.MESSAGE),
        h.new("soon", [1, 0.1, 0, 0], "lisbon hotel booking", user_id="u", record_type=RecordType.MESSAGE,
              expires_at=t0 + timedelta(hours=1)),
        h.new("other", [1, 0, 0, 0], "lisbon", user_id="v", record_type=RecordType.MESSAGE),
    ]
    try:
        store.write(WriteBatch(add=rows))
        store.build_indexes()
        store.write(WriteBatch(add=[  # after the snapshot: the exact delta
            h.new("late", [0, 1, 0, 0], "lisbon again", user_id="u", record_type=RecordType.MESSAGE),
            h.new("brief", [0, 1, 0.1, 0], "lisbon brief", user_id="u", record_type=RecordType.MESSAGE,
                  expires_at=t0 + timedelta(hours=1)),
        ]))
        statements: list[str] = []
        con = store._conn()
        store._conn = lambda: _Logged(con, statements)  # type: ignore[method-assign]

        def ids(at: Any) -> tuple[list[str], list[str]]:
            flt = RecordFilter(user_id="u", alive_at=at)
            vec = [x.record.record_id for x in store.vector_search(np.array([1, 0, 0, 0], np.float32), flt, 10)]
            kw = [x.record.record_id for x in store.keyword_search("lisbon", flt, 10)]
            return vec, kw

        before = ids(t0)
        read = len(statements)
        after = ids(t0 + timedelta(hours=2))
        assert set(before[0]) == set(before[1]) == {"keep", "soon", "late", "brief"}
        assert set(after[0]) == set(after[1]) == {"keep", "late"}
        assert ids(t0) == before
        assert not any("am_records r WHERE r.has_vec" in q for q in statements[read:])  # the scope was kept
        store.write(WriteBatch(add=[h.new("elsewhere", [0, 0, 1, 0], "porto", user_id="v")]))
        del statements[:]
        vec, kw = ids(t0)
        assert vec == before[0] and set(kw) == set(before[1])  # BM25 statistics moved with the write
        # after a write the scope, small when last read, is read again at once, without a count
        assert sum("FROM am_records r WHERE r.has_vec" in q for q in statements) == 1
        assert not any(q.startswith("SELECT count(*)") for q in statements)
    finally:
        store.close()


class _Logged:
    """A DuckDB connection that records the statements it runs."""

    def __init__(self, con: Any, log: list[str]) -> None:
        self._con, self._log = con, log

    def execute(self, sql: str, *args: Any) -> Any:
        self._log.append(sql)
        return self._con.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def test_a_kept_memory_scope_survives_message_writes_and_follows_every_memory_change(db_path: Path, h: Any) -> None:
    """The small scope a user's memory search reads is kept across a write that only adds,
    patches or deletes messages (a turn that extracts nothing reads it once), and any write
    touching a memory makes the next search read it again: every search returns exactly what an
    uncached store returns."""
    from agentmemory.records import RecordStatus, RecordType

    store = h.open_store(db_path, dimension=DIM, auto_index=False)
    fresh = h.open_store(db_path.with_name("other.duckdb"), dimension=DIM, auto_index=False)
    rng = np.random.default_rng(3)
    vecs = h.clustered_vectors(400, DIM, seed=3)
    memory_types = frozenset({RecordType.MEMORY, RecordType.FACT})
    flt = RecordFilter(user_id="u", record_types=memory_types)
    ids = iter(range(10_000))

    def both(batch: WriteBatch) -> None:
        store.write(batch)
        fresh.write(batch)

    vector_of: dict[str, np.ndarray] = {}

    def add(kind: RecordType, n: int) -> list[str]:
        made = [f"{kind.value}-{next(ids)}" for _ in range(n)]
        vector_of.update((rid, vecs[int(rng.integers(0, 400))]) for rid in made)
        both(WriteBatch(add=[h.new(rid, vector_of[rid], user_id="u", thread_id="t", record_type=kind) for rid in made]))
        return made

    def check(near: str | None = None) -> None:
        """Compare at the vector of record ``near`` (a changed record is then the first hit)."""
        q = vector_of[near] if near else vecs[int(rng.integers(0, 400))]
        got = [(x.record.record_id, round(float(x.distance or 0), 5), x.record.status) for x in store.vector_search(q, flt, 5)]
        fresh._sync_memo()
        fresh._scopes.clear()  # the comparison store reads its scope every time
        want = [(x.record.record_id, round(float(x.distance or 0), 5), x.record.status) for x in fresh.vector_search(q, flt, 5)]
        assert got == want

    add(RecordType.FACT, 30)
    add(RecordType.MESSAGE, 50)
    check()
    kept = dict(store._scopes)
    assert kept
    add(RecordType.MESSAGE, 2)  # a turn that extracts nothing
    message = add(RecordType.MESSAGE, 1)[0]
    both(WriteBatch(patch=[RecordPatch(message, metadata={"k": 1})]))
    check()
    assert all(store._scopes.get(w) is s for w, s in kept.items()), "message writes must keep the memory scope"
    memory = add(RecordType.MEMORY, 1)[0]  # a new memory in the scope
    check(memory)
    assert all(store._scopes.get(w) is not s for w, s in kept.items())
    fact = next(iter(store._scopes.values())).rids[0]
    kept = dict(store._scopes)
    both(WriteBatch(patch=[RecordPatch(fact, status=RecordStatus.INVALID)]))  # a memory changes
    check(fact)
    assert all(store._scopes.get(w) is not s for w, s in kept.items())
    kept = dict(store._scopes)
    both(WriteBatch(delete=[message]))  # deleting a message leaves the memory scope as it was
    check()
    assert all(store._scopes.get(w) is s for w, s in kept.items())
    both(WriteBatch(delete=[memory]))  # deleting a memory does not
    check(memory)
    assert all(store._scopes.get(w) is not s for w, s in kept.items())
    store.close()
    fresh.close()
