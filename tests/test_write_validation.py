"""The SPI checks every added record before anything is written, also on the bulk fast paths.

``MemoryStore.write`` validates large batches with whole-matrix vector checks, a per-batch
memo of scope ids and a no-encode check for small flat metadata. These tests pin that the fast
paths accept and reject exactly what the per-record checks do, name the offending record, and
leave the store unchanged.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentmemory.bulk import RecordColumns
from agentmemory.errors import InvalidArgument
from agentmemory.records import Record, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, WriteBatch
from agentmemory.validation import bad_vector_row, metadata_json, validate_vector

DIM = 8
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _record(i: int, **fields: Any) -> Record:
    values: dict[str, Any] = {
        "record_id": f"r{i:05d}", "content": f"text {i}", "user_id": "u1", "agent_id": "a1",
        "thread_id": "t1", "timestamp": T0, "created_at": T0, "record_type": RecordType.MEMORY,
    }
    # unvalidated update: the SPI must catch what a record built without pydantic could carry
    return Record(**values).model_copy(update=fields)


def _batch(n: int, bad_at: int | None = None, bad_vector: Any = None, **bad_fields: Any) -> WriteBatch:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    items = []
    for i in range(n):
        vector: Any = vectors[i]
        fields: dict[str, Any] = {}
        if i == bad_at:
            fields = bad_fields
            if bad_vector is not None:
                vector = bad_vector
        items.append(NewRecord(_record(i, **fields), vector))
    return WriteBatch(add=items)


@pytest.fixture
def store() -> InMemoryStore:
    s = InMemoryStore()
    s.open(dimension=DIM)
    return s


@pytest.mark.parametrize(
    ("bad_vector", "message"),
    [
        (np.array([1.0, math.nan, 0, 0, 0, 0, 0, 0], dtype=np.float32), "NaN or infinity"),
        (np.array([1e39, 0, 0, 0, 0, 0, 0, 0], dtype=np.float64), "NaN or infinity"),  # inf as float32
        (np.zeros(DIM, dtype=np.float32), "all zeros"),
        (np.ones(DIM + 1, dtype=np.float32), "expected shape"),
        (np.ones((2, DIM // 2), dtype=np.float32), "expected shape"),
        ([1.0] * (DIM - 1) + ["x"], "not a numeric vector"),
    ],
    ids=["nan", "float64-overflow", "zeros", "too-long", "2-d", "non-numeric"],
)
def test_bad_vector_deep_in_a_large_batch_is_named_and_nothing_lands(store: InMemoryStore, bad_vector: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message) as info:
        store.write(_batch(9_000, bad_at=6_123, bad_vector=bad_vector))  # past the first 4,096-row chunk
    assert info.value.argument == "vector of 'r06123'"
    assert store.count(RecordFilter()) == 0


def test_first_bad_vector_wins_in_batch_order(store: InMemoryStore) -> None:
    batch = _batch(50)
    items = list(batch.add)
    items[30] = NewRecord(items[30].record, np.zeros(DIM, dtype=np.float32))
    items[10] = NewRecord(items[10].record, np.full(DIM, math.inf, dtype=np.float32))
    with pytest.raises(InvalidArgument, match="NaN or infinity") as info:
        store.write(WriteBatch(add=items))
    assert info.value.argument == "vector of 'r00010'"


def test_good_large_batch_lands_whole(store: InMemoryStore) -> None:
    added = store.write(_batch(9_000))
    assert [r.seq for r in added] == list(range(1, 9_001))
    assert store.count(RecordFilter()) == 9_000


@pytest.mark.parametrize(
    ("field", "value", "argument"),
    [("user_id", " u1", "user_id"), ("agent_id", "@a", "agent_id"), ("thread_id", "t\x00", "thread_id"),
     ("user_id", "x" * 129, "user_id")],
)
def test_bad_scope_id_after_good_ones_is_caught(store: InMemoryStore, field: str, value: str, argument: str) -> None:
    # the batch memo of checked scope ids must not let a bad id through
    with pytest.raises(InvalidArgument) as info:
        store.write(_batch(100, bad_at=77, **{field: value}))
    assert info.value.argument == argument
    assert store.count(RecordFilter()) == 0


@pytest.mark.parametrize(
    "metadata",
    [{"$x": 1}, {"a": "b\x00"}, {"a\x00": 1}, {"a": "\ud800"}, {"": 1}, {1: "a"}, {"a": math.nan},
     {"a": 10**400_000}, {"a": "x" * 1_000_001}, {"k" * 1_000_001: 1}, {"a": object()}],
    ids=["dollar", "nul-value", "nul-key", "surrogate", "empty-key", "int-key", "nan", "huge-int",
         "huge-str", "huge-key", "object"],
)
def test_bad_flat_metadata_is_rejected_on_the_fast_path_too(store: InMemoryStore, metadata: dict[Any, Any]) -> None:
    with pytest.raises(InvalidArgument) as info:
        store.write(_batch(20, bad_at=13, metadata=metadata))
    assert info.value.argument in ("metadata", "metadata key")
    assert store.count(RecordFilter()) == 0


_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20), st.sampled_from(["", "$", "a\x00", "\ud800", "tab\t", "ok"]),
)
_key = st.one_of(st.text(max_size=10), st.sampled_from(["", "$agent_memory", "$x", "a\x00", "\ud800"]))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_key, _scalar, max_size=6))
def test_fast_path_agrees_with_the_full_metadata_check(metadata: dict[str, Any]) -> None:
    try:
        metadata_json("metadata", metadata, allow_reserved=True)
        expected: str | None = None
    except InvalidArgument as exc:
        expected = exc.argument
    s = InMemoryStore()
    s.open(dimension=DIM)
    batch = WriteBatch(add=[NewRecord(_record(0, metadata=metadata), np.ones(DIM, dtype=np.float32))])
    if expected is None:
        (added,) = s.write(batch)
        assert added.metadata == metadata
    else:
        with pytest.raises(InvalidArgument) as info:
            s.write(batch)
        assert info.value.argument == expected


_text = st.one_of(st.text(max_size=8), st.sampled_from(["", " ", "a\x00", "\ud800", "ok", "@x", "x" * 129, " pad"]))
_maybe_id = st.one_of(st.none(), _text)
_when = st.sampled_from([T0, T0.replace(tzinfo=None), T0.astimezone(timezone(timedelta(hours=-5)))])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_text, _text, _maybe_id, _maybe_id, _when, st.dictionaries(_key, _scalar, max_size=3)),
                min_size=1, max_size=5))
def test_bulk_add_accepts_and_rejects_exactly_what_write_does(rows: list[tuple[Any, ...]]) -> None:
    """``bulk_add`` of some rows raises ``InvalidArgument`` exactly when ``write`` of the same
    rows does, and otherwise stores the same records."""
    by_write, by_columns = InMemoryStore(), InMemoryStore()
    by_write.open(dimension=DIM)
    by_columns.open(dimension=DIM)
    vectors = np.ones((len(rows), DIM), dtype=np.float32)
    batch = WriteBatch(add=[
        NewRecord(_record(0, record_id=rid, content=text, user_id=user, thread_id=thread, timestamp=when,
                          created_at=when, metadata=meta), vectors[i])
        for i, (rid, text, user, thread, when, meta) in enumerate(rows)
    ])
    columns = RecordColumns(
        record_id=[r[0] for r in rows], content=[r[1] for r in rows], record_type="memory",
        user_id=[r[2] for r in rows], agent_id="a1", thread_id=[r[3] for r in rows],
        timestamp=[r[4] for r in rows], metadata=[r[5] for r in rows], vectors=vectors,
    )
    try:
        by_write.write(batch)
        write_error = False
    except InvalidArgument:
        write_error = True
    try:
        by_columns.bulk_add(columns)
        columns_error = False
    except InvalidArgument:
        columns_error = True
    assert columns_error == write_error
    assert by_columns.query(RecordFilter()) == by_write.query(RecordFilter())


_float32 = st.one_of(
    st.floats(width=32, allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e-30, -1e-45, 3e38, -3e38, 1e20]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_float32, min_size=DIM, max_size=DIM))
def test_a_search_vector_is_judged_by_the_same_rule_as_a_batch_row(values: list[float]) -> None:
    """``vector_search``'s check (one sum of squares when it is finite and positive) accepts
    and rejects exactly what a written batch row is accepted and rejected for: huge values
    whose squares overflow and tiny ones whose squares underflow are still valid."""
    vector = np.array(values, dtype=np.float32)
    expected = bad_vector_row(vector[None, :])
    try:
        validate_vector("vector", vector, DIM)
        got = None
    except InvalidArgument as exc:
        got = exc
    if expected is None:
        assert got is None
    else:
        assert got is not None and expected[1] in str(got)
