"""A memoised scope is brought up to date after writes by evaluating only the slots that changed
(``HnswlibStore._refreshed``, ``Columns.changed_since``): after any mix of adds, status and
expiry patches, deletes and re-clustering it must equal a fresh mask, with the same count and
slots, and searches must see exactly the records it holds."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from agentmemory_hnswlib._columns import Columns
from hnswlib_testutil import make_record

from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TYPES = [RecordType.MESSAGE, RecordType.FACT, RecordType.MEMORY]


def _filter(rng: random.Random, seqs: int) -> RecordFilter:
    kw: dict[str, Any] = {}
    if rng.random() < 0.6:
        kw["record_types"] = frozenset(rng.sample(TYPES, rng.randint(1, 2)))
    if rng.random() < 0.6:
        kw["user_id"] = rng.choice(["u1", "u2", None])
    if rng.random() < 0.4:
        kw["thread_id"] = rng.choice(["t1", "t2", "t3", "t-new", None])
    if rng.random() < 0.5:
        kw["statuses"] = frozenset({RecordStatus.VALID})
    if rng.random() < 0.5:
        kw["alive_at"] = NOW + timedelta(days=rng.randint(0, 6))
    if rng.random() < 0.2:
        kw["max_seq"] = rng.randint(0, seqs + 2)
    return RecordFilter(**kw)


def test_scopes_follow_every_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    patched: list[int] = []
    plain_mask_at = Columns.mask_at

    def counted(self: Columns, flt: RecordFilter, slots: np.ndarray) -> np.ndarray:
        patched.append(len(slots))
        return plain_mask_at(self, flt, slots)

    monkeypatch.setattr(Columns, "mask_at", counted)
    rng = random.Random(7)
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    ids: list[str] = []
    added = 0
    try:
        for step in range(150):
            roll = rng.random()
            if roll < 0.5 or len(ids) < 5:
                batch = []
                for _ in range(rng.randint(1, 3)):
                    rid = f"r{added}"
                    added += 1
                    expires = rng.choice([None, NOW + timedelta(days=rng.randint(1, 5))])
                    rec = make_record(rid, user=rng.choice(["u1", "u2", None]), thread=rng.choice(["t1", "t2", "t3", None]),
                                      type=rng.choice(TYPES), expires=expires)
                    batch.append(NewRecord(rec, np.array([rng.random() + 0.01 for _ in range(4)], np.float32)))
                    ids.append(rid)
                store.write(WriteBatch(add=batch))
            elif roll < 0.8:
                expires = rng.choice([None, NOW + timedelta(days=rng.randint(1, 5))])
                store.write(WriteBatch(patch=[RecordPatch(rng.choice(ids), status=rng.choice(list(RecordStatus)), expires_at=expires)]))
            else:
                rid = rng.choice(ids)
                ids.remove(rid)
                store.write(WriteBatch(delete=[rid]))
            if step % 50 == 49:
                with store._lock:
                    assert store._cols is not None
                    store._cols.cluster()
            for _ in range(3):
                flt = _filter(rng, added)
                with store._lock:
                    cols = store._cols
                    assert cols is not None
                    scope = store._scope(cols, flt)
                    want = cols.mask(flt)
                    want = np.ones(cols.n, bool) if want is None else want
                    have = np.ones(cols.n, bool) if scope.mask is None else scope.mask
                    assert np.array_equal(have, want), (step, flt)
                    assert scope.count == int(want.sum())
                    assert np.array_equal(scope.slots(), np.flatnonzero(want))
                expected = {cols.rids[s] for s in np.flatnonzero(want)}
                hits = store.vector_search(np.ones(4, np.float32), flt, 10_000)
                assert {h.record.record_id for h in hits} == expected
    finally:
        store.close()
    assert len(patched) > 20, "scopes were brought up to date slot by slot"
