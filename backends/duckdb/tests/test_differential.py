"""Differential test: random batches (valid and invalid) applied to ``DuckDBStore`` and to the
reference ``InMemoryStore``; every error, every returned record and every read must agree.

Three DuckDB configurations run: the default (small stores are scanned exactly), one that
forces the index paths (HNSW snapshot + exact delta, BM25 snapshot + exact delta), and one with
snapshots whose searches are all exact scans of the snapshot plus the delta, with index
rebuilds and close/reopen steps mixed into the sequence.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import AgentMemoryError
from agentmemory.records import Link, LinkType, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import ANY, MemoryStore, Order, RecordFilter, RecordPatch, WriteBatch

DIM = 4
IDS = [f"id{i}" for i in range(30)]
USERS = ["u1", "u2", None]
WORDS = ["order", "7421", "return", "invoice", "maya", "bob", "café", "delivery", "late", "refund"]
METADATA: list[dict[str, Any]] = [
    {},
    {"topic": "billing", "tags": ["a", "b"]},
    {"topic": "support", "tags": ["b"], "n": 1},
    {"topic": "billing", "n": 1.0, "flag": True},
    {"nested": {"k": "v", "deep": {"x": 2}}, "flag": False},
    {"tags": [], "topic": None},
]
FILTERS: list[dict[str, Any] | None] = [
    None,
    {"topic": "billing"},
    {"n": 1},
    {"flag": True},
    {"tags": {"$array_contains": "b"}},
    {"tags": {"$array_contains_any": ["a", "z"]}},
    {"topic": {"$not": "billing"}},
    {"nested": {"deep": {"x": 2}}},
    {"topic": None},
]
CONFIGS = {
    "default": {"auto_index": False},
    "indexed": {"auto_index": False, "planner": "index", "exact_max_rows": 0, "max_fetch": 1_000_000},
    # snapshots exist but every search is exact: the scan over the scope-clustered snapshot,
    # minus stale rows, plus the rows written since
    "snapshot_exact": {"auto_index": False, "planner": "exact"},
}
SNAPSHOT_CONFIGS = ("indexed", "snapshot_exact")


def _vector(rng: random.Random) -> np.ndarray | None:
    if rng.random() < 0.2:
        return None
    v = np.array([rng.uniform(-1, 1) for _ in range(DIM)], dtype=np.float32)
    return v if np.any(v) else None


def _random_batch(rng: random.Random, h: Any, step: int, existing: list[str], link_ids: list[str]) -> WriteBatch:
    """A batch that is usually valid against the current state (ids picked from ``existing``);
    about one in six carries a deliberate mistake (duplicate id, missing record or link)."""
    free = [rid for rid in IDS if rid not in existing]
    wrong = rng.random() < 0.17

    def stored() -> str:
        if existing and not (wrong and rng.random() < 0.5):
            return rng.choice(existing)
        return rng.choice([rid for rid in IDS if rid not in existing] or ["missing"])

    add = []
    for rid in rng.sample(free, min(len(free), rng.choice([0, 1, 2, 4]))):
        rtype = rng.choice([RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE, RecordType.PREFERENCE, RecordType.THREAD])
        expires = None if rng.random() < 0.7 else h.T0 + timedelta(days=rng.randint(-2, 2))
        add.append(
            h.new(
                rid, _vector(rng), " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))),
                record_type=rtype, user_id=rng.choice(USERS), thread_id=rng.choice(["t1", "t2", None]),
                metadata=rng.choice(METADATA), expires_at=expires,
                status=rng.choice([RecordStatus.VALID, RecordStatus.VALID, RecordStatus.INVALID]),
            )
        )
    if wrong and existing and rng.random() < 0.3:
        add.append(h.new(rng.choice(existing), _vector(rng)))
    patch = []
    for _ in range(rng.choice([0, 1, 2]) if existing else 0):
        fields: dict[str, Any] = {}
        if rng.random() < 0.5:
            fields["content"] = " ".join(rng.choice(WORDS) for _ in range(3))
        if rng.random() < 0.3:
            fields["metadata"] = rng.choice(METADATA)
        if rng.random() < 0.3:
            fields["status"] = rng.choice(list(RecordStatus))
        if rng.random() < 0.4:
            fields["vector"] = _vector(rng)
        if rng.random() < 0.2:
            fields["expires_at"] = rng.choice([None, h.T0 + timedelta(hours=rng.randint(-30, 30))])
        if rng.random() < 0.2:
            fields["timestamp"] = h.T0 + timedelta(minutes=step)
        patch.append(RecordPatch(stored(), **fields))
    add_links = []
    for i in range(rng.choice([0, 1, 2]) if len(existing) >= 2 else 0):
        a, b = rng.sample(existing, 2)
        if wrong and rng.random() < 0.3:
            b = stored()
        link_id = rng.choice(link_ids) if wrong and link_ids and rng.random() < 0.3 else f"l{step}_{i}"
        if a != b:
            add_links.append(Link(link_id=link_id, source_id=a, target_id=b, link_type=rng.choice(list(LinkType)), created_at=h.T0, metadata={"s": step}))
    delete_links = []
    if link_ids and rng.random() < 0.3:
        delete_links.append(rng.choice(link_ids + (["nolink"] if wrong else [])))
    delete = []
    if existing and rng.random() < 0.35:
        delete.append(stored())
    return WriteBatch(add=add, patch=patch, add_links=add_links, delete_links=delete_links, delete=delete)


def _apply(store: MemoryStore, batch: WriteBatch) -> tuple[str, Any]:
    try:
        return "ok", store.write(batch)
    except AgentMemoryError as exc:
        return type(exc).__name__, None


def _random_filter(rng: random.Random, h: Any) -> RecordFilter:
    kw: dict[str, Any] = {}
    if rng.random() < 0.4:
        kw["user_id"] = rng.choice(USERS + [ANY])
    if rng.random() < 0.2:
        kw["thread_id"] = rng.choice(["t1", None])
    if rng.random() < 0.3:
        kw["record_types"] = frozenset(rng.sample([RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE], 2))
    if rng.random() < 0.2:
        kw["statuses"] = frozenset({RecordStatus.VALID})
    if rng.random() < 0.3:
        kw["metadata_filter"] = rng.choice(FILTERS)
    if rng.random() < 0.2:
        kw["alive_at"] = h.T0
    if rng.random() < 0.1:
        kw["expired_at"] = h.T0 + timedelta(days=1)
    if rng.random() < 0.15:
        kw["record_ids"] = tuple(rng.sample(IDS, 6))
    if rng.random() < 0.1:
        kw["min_seq"], kw["max_seq"] = 3, 30
    return RecordFilter(**kw)


def _compare_reads(duck: DuckDBStore, ref: InMemoryStore, rng: random.Random, h: Any, indexed: bool) -> None:
    assert duck.query(RecordFilter()) == ref.query(RecordFilter())
    assert duck.links() == ref.links()
    for _ in range(4):
        flt = _random_filter(rng, h)
        order = rng.choice(list(Order))
        limit, offset = rng.choice([None, 0, 3]), rng.choice([0, 2])
        assert duck.query(flt, order=order, limit=limit, offset=offset) == ref.query(flt, order=order, limit=limit, offset=offset), flt
        assert duck.count(flt) == ref.count(flt), flt
        some = rng.sample(IDS, 3)
        assert duck.links(record_ids=some) == ref.links(record_ids=some)
        q = np.array([rng.uniform(-1, 1) for _ in range(DIM)], dtype=np.float32) + 0.01
        k = rng.choice([1, 3, 10, 50])
        got, want = duck.vector_search(q, flt, k), ref.vector_search(q, flt, k)
        assert [x.record for x in got] == [x.record for x in want], flt
        assert np.allclose([x.distance for x in got], [x.distance for x in want], atol=1e-5)
        text = " ".join(rng.sample(WORDS, 2))
        kw_got, kw_want = duck.keyword_search(text, flt, 50), ref.keyword_search(text, flt, 50)
        assert {x.record.record_id for x in kw_got} == {x.record.record_id for x in kw_want}, (text, flt)
        if not indexed and flt == RecordFilter():
            # no BM25 snapshot yet: the exact path computes the reference's own BM25
            assert [x.record for x in kw_got] == [x.record for x in kw_want]
            assert np.allclose([x.score for x in kw_got], [x.score for x in kw_want], rtol=1e-6)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("seed", [1, 2])
def test_random_batches_match_the_reference(tmp_path: Path, h: Any, config: str, seed: int) -> None:
    rng = random.Random(seed)
    options = CONFIGS[config]
    path = tmp_path / "memory.duckdb"
    duck, ref = DuckDBStore(path, **options), InMemoryStore()
    duck.open(dimension=DIM)
    ref.open(dimension=DIM)
    outcomes: set[str] = set()
    try:
        for step in range(72):
            existing = [r.record_id for r in ref.query(RecordFilter())]
            live_links = [x.link_id for x in ref.links()]
            batch = _random_batch(rng, h, step, existing, live_links)
            got, want = _apply(duck, batch), _apply(ref, batch)
            assert got == want, f"step {step}: {batch}"
            outcomes.add(got[0])
            if config in SNAPSHOT_CONFIGS and step % 9 == 8:
                duck.build_indexes(force=True)
            if step % 23 == 22:
                duck.close()
                duck = DuckDBStore(path, **options)
                duck.open(dimension=DIM)
            if step % 8 == 7:
                _compare_reads(duck, ref, rng, h, indexed=config in SNAPSHOT_CONFIGS)
        _compare_reads(duck, ref, rng, h, indexed=config in SNAPSHOT_CONFIGS)
        assert {"ok", "Conflict", "NotFound"} <= outcomes  # the sequence exercised the error paths
    finally:
        duck.close()
