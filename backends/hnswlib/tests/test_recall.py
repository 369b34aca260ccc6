"""Recall@10 against exact search at every selectivity from 0.1% to 100%, with the planner's
own choice and with every query forced through the ANN graph (over-fetch and its fallbacks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.records import Record
from agentmemory.spi import ANY, RecordFilter

N, DIM, CLUSTERS, QUERIES, K = 4000, 32, 40, 40, 10


Dataset = tuple[list[Record], np.ndarray, np.ndarray, dict[str, np.ndarray]]


def _dataset() -> Dataset:
    rng = np.random.default_rng(7)
    data = clustered(N + QUERIES, DIM, seed=3, clusters=CLUSTERS)
    vectors, queries = data[:N], data[N:]
    # Which cluster each vector is closest to: a scope that is *correlated* with geometry.
    centre_of = np.argmax(vectors @ vectors[rng.choice(N, CLUSTERS, replace=False)].T, axis=1)
    user = rng.choice(["u_a", "u_b", "u_c", "u_rest"], size=N, p=[0.001, 0.01, 0.05, 0.939])
    user[:4] = "u_a"  # exactly 0.1% even for this seed
    agent = np.where(rng.random(N) < 0.5, "a50", "a_other")
    thread = np.where(rng.random(N) < 0.2, "t20", "t_other")
    records = [
        make_record(
            f"r{i:05d}",
            user=str(user[i]),
            agent=str(agent[i]),
            thread=str(thread[i]) if centre_of[i] != 0 else "t_cluster0",
            metadata={"grp": int(i % 10)},
        )
        for i in range(N)
    ]
    masks = {
        "0.1% user": user == "u_a",
        "1% user": user == "u_b",
        "5% user": user == "u_c",
        "20% thread": (thread == "t20") & (centre_of != 0),
        "50% agent": agent == "a50",
        "100%": np.ones(N, bool),
        "10% metadata": (np.arange(N) % 10) == 3,
        "one cluster (anti-correlated)": centre_of == 0,
    }
    return records, vectors, queries, masks


FILTERS = {
    "0.1% user": RecordFilter(user_id="u_a"),
    "1% user": RecordFilter(user_id="u_b"),
    "5% user": RecordFilter(user_id="u_c"),
    "20% thread": RecordFilter(thread_id="t20"),
    "50% agent": RecordFilter(agent_id="a50"),
    "100%": RecordFilter(user_id=ANY),
    "10% metadata": RecordFilter(metadata_filter={"grp": 3}),
    "one cluster (anti-correlated)": RecordFilter(thread_id="t_cluster0"),
}


@pytest.fixture(scope="module")
def dataset() -> Dataset:
    return _dataset()


@pytest.fixture(scope="module", params=["planner", "ann-only"])
def loaded(
    request: pytest.FixtureRequest, dataset: Dataset, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HnswlibStore]:
    records, vectors, _, _ = dataset
    options: dict[str, Any] = {"exact_threshold": 0} if request.param == "ann-only" else {}
    path: Path = tmp_path_factory.mktemp(request.param)
    store = HnswlibStore(path / "db", ef_construction=100, **options)
    store.open(dimension=DIM)
    add_all(store, records, vectors, batch=1000)
    yield store
    store.close()


@pytest.mark.parametrize("scope", list(FILTERS))
def test_recall_at_10_by_selectivity(loaded: HnswlibStore, dataset: Dataset, scope: str) -> None:
    records, vectors, queries, masks = dataset
    mask = masks[scope]
    assert mask.sum() >= 1
    allowed = np.flatnonzero(mask)
    total, found = 0, 0
    for q in queries:
        dist = 1.0 - vectors[allowed] @ (q / np.linalg.norm(q))
        truth = {records[i].record_id for i in allowed[np.argsort(dist, kind="stable")[:K]]}
        hits = loaded.vector_search(q, FILTERS[scope], K)
        got = [h.record.record_id for h in hits]
        assert len(got) == min(K, len(allowed))
        assert set(got) <= {records[i].record_id for i in allowed}, "a hit outside the scope"
        distances = [float(h.distance or 0.0) for h in hits]
        assert distances == sorted(distances)
        total += len(truth)
        found += len(truth & set(got))
    recall = found / total
    assert recall >= loaded.min_recall_at_10, f"{scope}: recall@10 {recall:.4f}"
    if loaded._exact_threshold == 0:
        assert loaded.plan_counts["ann"] > 0 and loaded.plan_counts["exact"] == 0


def test_planner_uses_both_paths(loaded: HnswlibStore, dataset: Dataset) -> None:
    """At this scale the cost model scans small scopes exactly and sends wide ones to the graph."""
    if loaded._exact_threshold == 0:
        pytest.skip("ANN-only store")
    _, _, queries, _ = dataset
    loaded.plan_counts.clear()
    loaded.vector_search(queries[0], FILTERS["1% user"], K)
    assert loaded.plan_counts == {"exact": 1}
    loaded.plan_counts.clear()
    loaded.vector_search(queries[0], FILTERS["100%"], K)
    assert loaded.plan_counts["ann"] == 1 and loaded.plan_counts["exact"] == 0


def test_declared_recall_is_what_the_tests_hold(loaded: HnswlibStore) -> None:
    assert loaded.min_recall_at_10 == 0.99
