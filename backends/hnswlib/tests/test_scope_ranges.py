"""A scope with a user is found on that user's (or thread's) range of the sorted slots plus the
slots added after them (``Columns.scope``, ``sorted_n``): through adds, patches, removals (which
end the sorted run where they take a slot) and re-clustering, its mask and slots must equal a
slot-by-slot evaluation of the filter, and the ranges must actually be used."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
from agentmemory_hnswlib._columns import STATUS_CODE, TYPE_CODE, Columns, VectorRow, to_us

from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import ANY, RecordFilter

USERS = ["u1", "u2", "u3", None]
THREADS = ["t1", "t2", "t3", None]
TYPES = [RecordType.MESSAGE, RecordType.FACT, RecordType.MEMORY]
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _row(rng: random.Random, label: int, seq: int) -> VectorRow:
    expires = rng.choice([None, 1_000 + rng.randint(0, 5)])
    return VectorRow(
        label=label, record_id=f"r{label}", record_type=rng.choice(TYPES).value, user_id=rng.choice(USERS),
        agent_id=rng.choice(["a", None]), thread_id=rng.choice(THREADS), status=rng.choice(list(RecordStatus)).value,
        expires_us=expires, seq=seq, ntok=1, metadata="{}", embedding=np.ones(2, np.float32).tobytes(),
        content="x", role="user", timestamp="2026-01-01T00:00:00", created_at="2026-01-01T00:00:00",
        expires_at=None, index_text=None,
    )


def _filter(rng: random.Random) -> RecordFilter:
    kw: dict[str, Any] = {"user_id": rng.choice([*USERS, "nobody"])}
    if rng.random() < 0.3:
        kw["alive_at"] = EPOCH + timedelta(microseconds=1_000 + rng.randint(0, 6))
    if rng.random() < 0.5:
        kw["thread_id"] = rng.choice([*THREADS, "t-none"])
    if rng.random() < 0.5:
        kw["record_types"] = frozenset(rng.sample(TYPES, rng.randint(1, 2)))
    if rng.random() < 0.4:
        kw["statuses"] = frozenset({RecordStatus.VALID})
    if rng.random() < 0.3:
        kw["max_seq"] = rng.randint(0, 300)
    return RecordFilter(**kw)


def _by_slot(cols: Columns, flt: RecordFilter) -> np.ndarray:
    """The filter evaluated slot by slot, in Python."""
    code = cols.codes.get
    out = np.zeros(cols.n, bool)
    for s in range(cols.n):
        ok = True
        for want, column in ((flt.user_id, cols.user), (flt.agent_id, cols.agent), (flt.thread_id, cols.thread)):
            if want is not ANY:
                ok &= int(column[s]) == (0 if want is None else code(want, -1))
        if flt.record_types is not None:
            ok &= int(cols.rtype[s]) in {TYPE_CODE[RecordType(t)] for t in flt.record_types}
        if flt.statuses is not None:
            ok &= int(cols.status[s]) in {STATUS_CODE[RecordStatus(t)] for t in flt.statuses}
        if flt.max_seq is not None:
            ok &= int(cols.seq[s]) < flt.max_seq
        if flt.alive_at is not None:
            ok &= int(cols.expires[s]) > to_us(flt.alive_at)
        out[s] = ok
    return out


def test_ranged_scopes_equal_slot_by_slot_evaluation() -> None:
    rng = random.Random(11)
    cols = Columns(2, capacity=8)
    label = 0
    ranged = 0
    for step in range(400):
        roll = rng.random()
        if roll < 0.45 or cols.n < 10:
            rows = [_row(rng, label + i, label + i) for i in range(rng.randint(1, 6))]
            label += len(rows)
            cols.add(rows)
        elif roll < 0.65:
            cols.update(_patched(rng, cols))
        elif roll < 0.8:
            cols.remove(cols.rids[rng.randrange(cols.n)])
        elif roll < 0.9:
            cols.cluster()
            assert cols.sorted_n == cols.n
        for _ in range(4):
            flt = _filter(rng)
            mask, slots = cols.scope(flt)
            want = _by_slot(cols, flt)
            assert mask is not None and np.array_equal(mask, want), (step, flt)
            if slots is not None:
                ranged += 1
                assert np.array_equal(slots, np.flatnonzero(want)), (step, flt)
        # the sorted run is what it claims to be
        c = cols.sorted_n
        keys = list(zip(cols.user[:c].tolist(), cols.thread[:c].tolist()))
        assert keys == sorted(keys)
    assert ranged > 500, "scopes were found from the sorted ranges"


def _patched(rng: random.Random, cols: Columns) -> VectorRow:
    """A status and expiry patch of a random slot's record (scope columns unchanged)."""
    s = rng.randrange(cols.n)
    names = cols.names
    return VectorRow(
        label=int(cols.labels[s]), record_id=cols.rids[s], record_type=RecordType.MESSAGE.value,
        user_id=names[int(cols.user[s])], agent_id=names[int(cols.agent[s])], thread_id=names[int(cols.thread[s])],
        status=rng.choice(list(RecordStatus)).value, expires_us=rng.choice([None, 1_003]), seq=int(cols.seq[s]), ntok=1,
        metadata="{}", embedding=b"", content="x", role="user", timestamp="2026-01-01T00:00:00",
        created_at="2026-01-01T00:00:00", expires_at=None, index_text=None,
    )


def test_a_loaded_snapshot_knows_its_sorted_run() -> None:
    rng = random.Random(3)
    cols = Columns(2)
    cols.add([_row(rng, i, i) for i in range(200)])
    cols.cluster()
    cols.add([_row(rng, 200 + i, 200 + i) for i in range(20)])  # after the snapshot: unsorted tail
    vectors = cols.vectors[: cols.n].copy()
    again = Columns.from_snapshot(2, cols.snapshot_arrays(), vectors)
    assert 200 <= again.sorted_n <= 220
    for user in USERS:
        flt = RecordFilter(user_id=user)
        mask, slots = again.scope(flt)
        assert slots is not None and np.array_equal(mask, _by_slot(again, flt))
