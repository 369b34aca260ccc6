"""``index_thresholds`` and ``settle`` (the SPI hook of the conformance suite's index tier): the
declared vector threshold is where the planner really starts using the graph, ``settle`` builds
the keyword postings and folds their overlay of changed documents into a fresh base, and it
snapshots unsaved index changes so a reopen has nothing to reconcile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import add_all, clustered, make_record

from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

Factory = Callable[..., HnswlibStore]


def test_vector_threshold_is_where_the_planner_takes_the_graph(open_store: Factory) -> None:
    """Default (cost model): exact at the threshold minus one vector, ANN at the threshold;
    with ``exact_threshold`` the threshold is one past it."""
    assert open_store("forced", exact_threshold=0).index_thresholds() == {"vector": 1, "keyword": 1}
    assert open_store("fixed", exact_threshold=500).index_thresholds() == {"vector": 501, "keyword": 1}
    store = open_store("auto", dimension=4)
    threshold = store.index_thresholds()["vector"]
    assert 100 < threshold < 5_000
    vectors = clustered(threshold, 4, seed=2)
    add_all(store, [make_record(f"v{i:05d}") for i in range(threshold - 1)], vectors[:-1])
    store.vector_search(vectors[0], RecordFilter(), 10)
    assert store.plan_counts == {"exact": 1}
    add_all(store, [make_record("last")], vectors[-1:])
    store.vector_search(vectors[0], RecordFilter(), 10)
    assert store.plan_counts["ann"] == 1


def test_settle_builds_and_refreshes_the_keyword_postings(open_store: Factory) -> None:
    store = open_store(dimension=4)
    vectors = clustered(300, 4, seed=3)
    words = ["apple", "banana", "cherry"]
    add_all(store, [make_record(f"k{i:03d}", content=f"{words[i % 3]} note") for i in range(300)], vectors)
    assert store._postings is None  # built lazily, at the first keyword search
    assert store.settle() == {"vector": True, "keyword": True}
    base = store._postings
    assert base is not None and not base.overlay and base.masked == 0
    store.write(WriteBatch(patch=[RecordPatch("k000", content="zebra")], delete=["k001"]))
    assert base.overlay and base.masked == 2  # changes wait in the overlay
    assert [h.record.record_id for h in store.keyword_search("zebra", RecordFilter(), 5)] == ["k000"]
    assert asyncio.run(store.asettle()) == {"vector": True, "keyword": True}
    fresh = store._postings
    assert fresh is not base and fresh is not None and not fresh.overlay and fresh.masked == 0
    assert [h.record.record_id for h in store.keyword_search("zebra", RecordFilter(), 5)] == ["k000"]
    assert "k001" not in [h.record.record_id for h in store.keyword_search("banana", RecordFilter(), 300)]


def test_settle_snapshots_unsaved_index_changes(open_store: Factory) -> None:
    store = open_store(dimension=4, checkpoint_min=10_000)
    vectors = clustered(50, 4, seed=4)
    add_all(store, [make_record(f"s{i:02d}") for i in range(50)], vectors)
    assert store.info().extra["unsaved_index_changes"] == 50
    generation = store.info().extra["index_generation"]
    store.settle()
    assert store.info().extra["unsaved_index_changes"] == 0
    assert store.info().extra["index_generation"] > generation
    assert np.isclose(store.vector_search(vectors[7], RecordFilter(), 1)[0].distance or 0.0, 0.0, atol=1e-5)
