"""Row decoding without a server: ``decode_record``'s copy of a constructed record equals what
``Record.model_construct`` builds (and what validation builds), records stay independent, and
``vectors_from_send`` reads pgvector's binary ``vector_send`` form (``vector_to_binary``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
from agentmemory_postgres import _sql as q

from agentmemory.records import Record, RecordStatus, RecordType

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _row(i: int, **over: object) -> tuple[object, ...]:
    values = {
        "record_id": f"r{i}", "record_type": "fact", "content": f"text {i}", "index_text": None, "user_id": "u",
        "agent_id": None, "thread_id": "t", "role": None, "seq": i, "timestamp": T0, "created_at": T0 + timedelta(seconds=i),
        "expires_at": None, "status": "invalid", "metadata": '{"a":[1,2.0,true]}',
    }
    values.update(over)
    return tuple(values.values())


def test_decode_record_equals_model_construct_and_validation() -> None:
    row = _row(3, index_text="indexed", role="user", expires_at=T0 + timedelta(days=1))
    got = q.decode_record(row)
    fields = {
        "record_id": "r3", "record_type": RecordType.FACT, "content": "text 3", "index_text": "indexed", "user_id": "u",
        "agent_id": None, "thread_id": "t", "role": "user", "seq": 3, "timestamp": T0,
        "created_at": T0 + timedelta(seconds=3), "expires_at": T0 + timedelta(days=1), "status": RecordStatus.INVALID,
        "metadata": {"a": [1, 2.0, True]},
    }
    built = Record.model_construct(**fields)
    assert got == built == Record(**fields)
    assert got.model_dump() == built.model_dump()
    assert got.model_fields_set == built.model_fields_set
    assert type(got.record_type) is RecordType and type(got.status) is RecordStatus
    assert q.decode_record(_row(1, metadata="{}")).metadata == {}


def test_decoded_records_are_independent() -> None:
    a, b = q.decode_record(_row(1)), q.decode_record(_row(2))
    assert (a.record_id, a.seq, b.record_id, b.seq) == ("r1", 1, "r2", 2)
    assert a.metadata is not b.metadata
    assert q.decode_record(_row(1)) == a != b


def test_vectors_from_send_reads_the_binary_form() -> None:
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((7, 384)).astype(np.float32)
    matrix = q.vectors_from_send([q.vector_to_binary(v) for v in vectors])
    assert matrix.dtype == np.float32 and matrix.shape == (7, 384)
    assert np.array_equal(matrix, vectors)
    assert np.array_equal(q.vectors_from_send([q.vector_to_binary(vectors[0])]), vectors[:1])
