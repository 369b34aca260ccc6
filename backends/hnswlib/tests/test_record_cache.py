"""The decoded-record cache (``HnswlibStore._records``): every read path returns what SQLite
holds now, after patches, status changes, expiry changes, deletes, re-adds, failed batches,
link-driven patches, purges, closes and recreates. Each read below goes through the cache
first (the record was read, so cached, just before the write)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import T0, make_record

from agentmemory.errors import NotFound
from agentmemory.records import Link, LinkType, Record, RecordStatus
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

DIM = 4
VEC = np.array([1, 0, 0, 0], np.float32)
ALL = RecordFilter()


def _reads(store: HnswlibStore, rid: str) -> list[Record | None]:
    """``rid`` as each read path returns it (None: not returned)."""
    def pick(records: list[Record]) -> Record | None:
        return next((r for r in records if r.record_id == rid), None)

    return [
        pick(store.query(RecordFilter(record_ids=(rid,)))),
        pick(store.query(ALL)),
        pick([h.record for h in store.vector_search(VEC, ALL, 10)]),
        pick([h.record for h in store.keyword_search("apple", ALL, 10)]),
    ]


def _fresh(path: Path, rid: str) -> Record | None:
    """``rid`` read by a newly opened store (nothing cached)."""
    other = HnswlibStore(path)
    other.open(dimension=DIM)
    try:
        found = other.query(RecordFilter(record_ids=(rid,)))
        return found[0] if found else None
    finally:
        other.close()


@pytest.fixture()
def store(tmp_path: Path):
    s = HnswlibStore(tmp_path / "m")
    s.open(dimension=DIM)
    s.write(WriteBatch(add=[
        NewRecord(make_record("a", content="apple pie"), VEC),
        NewRecord(make_record("b", content="apple tart"), VEC * 2),
    ]))
    yield s
    if s.is_open:
        s.close()


def _check(store: HnswlibStore, rid: str, **want: object) -> None:
    got = _reads(store, rid)
    for rec in got:
        assert rec is not None
        for name, value in want.items():
            assert getattr(rec, name) == value, (name, getattr(rec, name), value)
    store.close()
    fresh = _fresh(store.path, rid)
    store.open(dimension=DIM)
    assert fresh is not None and all(rec == fresh for rec in got)


@pytest.mark.parametrize(
    "fields",
    [
        {"content": "apple crumble"},
        {"metadata": {"k": [1, 2]}},
        {"status": RecordStatus.INVALID},
        {"timestamp": T0 + timedelta(days=3)},
        {"expires_at": T0 + timedelta(days=400)},
    ],
)
def test_a_patch_is_seen_by_every_read_path(store: HnswlibStore, fields: dict) -> None:
    assert all(r is not None for r in _reads(store, "a"))  # cached now
    store.write(WriteBatch(patch=[RecordPatch("a", **fields)]))
    _check(store, "a", **fields)


def test_clearing_expiry_and_patching_the_vector(store: HnswlibStore) -> None:
    store.write(WriteBatch(patch=[RecordPatch("a", expires_at=T0 + timedelta(days=9))]))
    _reads(store, "a")
    store.write(WriteBatch(patch=[RecordPatch("a", expires_at=None, vector=VEC * 3, content="apple again")]))
    _check(store, "a", expires_at=None, content="apple again")


def test_delete_then_readd_under_the_same_id(store: HnswlibStore) -> None:
    _reads(store, "a")
    store.write(WriteBatch(delete=["a"]))
    assert _reads(store, "a") == [None, None, None, None]
    store.write(WriteBatch(add=[NewRecord(make_record("a", content="apple sauce", metadata={"v": 2}), VEC)]))
    _check(store, "a", content="apple sauce", metadata={"v": 2})


def test_a_failed_batch_leaves_the_old_record(store: HnswlibStore) -> None:
    before = _reads(store, "a")
    with pytest.raises(NotFound):
        store.write(WriteBatch(patch=[RecordPatch("a", content="apple never")], delete=["missing"]))
    assert _reads(store, "a") == before
    _check(store, "a", content="apple pie")


def test_a_link_batch_that_patches_a_status(store: HnswlibStore) -> None:
    """What superseding does: a link plus a status patch in one batch."""
    _reads(store, "a")
    link = Link(link_id="l1", source_id="b", target_id="a", link_type=LinkType.SUPERSEDES, created_at=T0)
    store.write(WriteBatch(add_links=[link], patch=[RecordPatch("a", status=RecordStatus.INVALID)]))
    _check(store, "a", status=RecordStatus.INVALID)


def test_purged_records_are_gone(store: HnswlibStore) -> None:
    store.write(WriteBatch(patch=[RecordPatch("a", expires_at=T0)]))
    _reads(store, "a")
    expired = store.query(RecordFilter(expired_at=T0 + timedelta(seconds=1)))
    assert [r.record_id for r in expired] == ["a"]
    store.write(WriteBatch(delete=[r.record_id for r in expired]))
    assert _reads(store, "a") == [None, None, None, None]


def test_close_and_recreate_forget_the_cache(store: HnswlibStore) -> None:
    _reads(store, "a")
    assert store._records
    store.close()
    assert not store._records
    store.open(dimension=DIM, schema_policy=SchemaPolicy.RECREATE)
    assert _reads(store, "a") == [None, None, None, None]
    store.write(WriteBatch(add=[NewRecord(make_record("a", content="apple new"), VEC)]))
    _check(store, "a", content="apple new")


def test_the_cache_is_bounded(store: HnswlibStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentmemory_hnswlib import store as store_module

    monkeypatch.setattr(store_module, "_RECORD_CACHE", 3)
    store.write(WriteBatch(add=[NewRecord(make_record(f"r{i}", content="apple"), VEC) for i in range(6)]))
    for i in range(6):
        store.query(RecordFilter(record_ids=(f"r{i}",)))
        assert len(store._records) <= 3
    assert store.vector_search(VEC, ALL, 8)[0].record.content.startswith("apple")
    assert len(store._records) <= 3
