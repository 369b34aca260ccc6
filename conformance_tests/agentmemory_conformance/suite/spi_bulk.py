"""SPI examples: ``bulk_add`` adds exactly what ``write`` adds, with the same checks, atomically."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory.bulk import RecordColumns
from agentmemory.errors import Conflict, InvalidArgument
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import Capability, MemoryStore, Order, RecordFilter, WriteBatch

from ..support import DIM, E1, E2, E3, T0, Api, assert_same, clause, ids, new, rec

PLUS2 = timezone(timedelta(hours=2))


def _rows() -> list[dict[str, Any]]:
    """Searchable rows covering every column: types, scopes, roles, zones, expiry, status,
    nested metadata."""
    return [
        dict(record_id="b1", record_type=RecordType.MEMORY, content="Maya prefers invoices in EUR", user_id="u1",
             agent_id="a1", thread_id=None, role=None, timestamp=T0, created_at=T0, expires_at=None,
             status=RecordStatus.VALID, metadata={"topic": "billing", "n": 3}, vector=E1),
        dict(record_id="b2", record_type=RecordType.MESSAGE, content="Hallo, ich bin Bob — 你好", user_id="u1",
             agent_id="a1", thread_id="t1", role="user", timestamp=T0.astimezone(PLUS2),
             created_at=T0 + timedelta(seconds=1), expires_at=T0 + timedelta(days=30),
             status=RecordStatus.VALID, metadata={"nested": {"list": [1, 2.5, "x", None, True]}, "tuple": (1, 2)},
             vector=E2),
        dict(record_id="b3", record_type=RecordType.FACT, content="order 7421 shipped", user_id="u2",
             agent_id=None, thread_id=None, role=None, timestamp=T0 + timedelta(microseconds=1),
             created_at=T0, expires_at=None, status=RecordStatus.INVALID, metadata={}, vector=E3),
        dict(record_id="b4", record_type=RecordType.GUIDELINE, content="answer briefly", user_id=None,
             agent_id="a1", thread_id=None, role=None, timestamp=T0, created_at=T0, expires_at=None,
             status=RecordStatus.VALID, metadata={"$agent_memory": {"kind": "x"}}, vector=(E1 + E2)),
    ]


def _columns(rows: list[dict[str, Any]], *, vectors: bool = True) -> RecordColumns:
    def col(name: str) -> list[Any]:
        return [row[name] for row in rows]

    return RecordColumns(
        record_id=col("record_id"), content=col("content"), record_type=col("record_type"),
        timestamp=col("timestamp"), created_at=col("created_at"), user_id=col("user_id"),
        agent_id=col("agent_id"), thread_id=col("thread_id"), role=col("role"),
        expires_at=col("expires_at"), status=col("status"), metadata=col("metadata"),
        vectors=np.stack(col("vector")) if vectors else None,
    )


def _batch(rows: list[dict[str, Any]], *, vectors: bool = True) -> WriteBatch:
    return WriteBatch(add=[
        new(rec(row["record_id"], type=row["record_type"], content=row["content"], user=row["user_id"],
                agent=row["agent_id"], thread=row["thread_id"], role=row["role"], ts=row["timestamp"],
                created=row["created_at"], expires=row["expires_at"], status=row["status"],
                metadata=row["metadata"]), row["vector"] if vectors else None)
        for row in rows
    ])


class BulkAddTests:
    """``bulk_add``: the columnar twin of adding records with ``write``."""

    @clause("spi.bulk_add")
    def test_bulk_add_stores_what_write_stores(self, api: Api, build_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
        """The same rows added with ``bulk_add`` and with ``write`` read back identically: every
        field (times as instants), ``seq`` order, metadata, and vector (and keyword) search results.

        Troubleshooting: override ``_bulk_add`` only with an insert that stores what ``_write``
        stores; the base class's default (the rows as one ``WriteBatch``) is always correct.
        """
        reference = build_store(tmp_path / "by_write")
        rows = _rows()
        thread = dict(rows[0], record_id="@thread:t1", record_type=RecordType.THREAD, content="", user_id="u1",
                      thread_id="t1", metadata={"title": "billing"}, vector=None)
        reference.write(_batch(rows))
        reference.write(_batch([thread], vectors=False))
        assert api.bulk_add(_columns(rows)) == 4
        assert api.bulk_add(_columns([thread], vectors=False)) == 1
        got, want = api.query(), reference.query(RecordFilter())
        assert_same(got, want, what="query() after bulk_add")
        assert [r.seq for r in got] == [1, 2, 3, 4, 5]
        for query in (E1, E2, E1 + E3):
            hits, expected = api.vector_search(query, k=5), reference.vector_search(query, RecordFilter(), 5)
            assert [h.record.record_id for h in hits] == [h.record.record_id for h in expected]
            assert np.allclose([float(h.distance or 0.0) for h in hits], [float(h.distance or 0.0) for h in expected], atol=1e-5)
        if Capability.KEYWORD_SEARCH in api.store.capabilities():
            assert ids(h.record for h in api.keyword_search("invoices order", k=5)) == ids(
                h.record for h in reference.keyword_search("invoices order", RecordFilter(), 5))

    @clause("spi.bulk_add")
    def test_scalar_columns_apply_to_every_row(self, api: Api) -> None:
        """A column given as one value (a scope id, a type, a timestamp) applies to every row;
        ``created_at`` defaults to ``timestamp``.

        Troubleshooting: a column given as one value must be repeated for every row;
        ``created_at`` defaults to ``timestamp``.
        """
        added = api.bulk_add(RecordColumns(
            record_id=["s1", "s2", "s3"], content=["one", "two", "three"], record_type="message", role="user",
            timestamp=T0, user_id="u9", thread_id="t9", vectors=np.stack([E1, E2, E3]),
        ))
        assert added == 3
        got = api.query(RecordFilter(user_id="u9", thread_id="t9"))
        assert ids(got) == ["s1", "s2", "s3"]
        assert all(r.record_type is RecordType.MESSAGE and r.role == "user" and r.created_at == T0 for r in got)
        assert api.bulk_add(RecordColumns(record_id=[], content=[], record_type="memory", timestamp=T0)) == 0

    @clause("spi.bulk_add", "spi.errors")
    @pytest.mark.parametrize(
        ("change", "argument"),
        [
            (dict(record_id=["x1", "x2", "x1"]), "columns.record_id[2]"),
            (dict(user_id=["u1", "u1", " u1"]), "columns.user_id[2]"),
            (dict(agent_id="@reserved"), "columns.agent_id"),
            (dict(content=["a", "  ", "c"]), "columns.content[1]"),
            (dict(content=["a", "b"]), "columns.content"),
            (dict(timestamp=[T0, T0.replace(tzinfo=None), T0]), "columns.timestamp[1]"),
            (dict(record_type="no-such-type"), "columns.record_type"),
            (dict(metadata=[{}, {"$x": 1}, {}]), "columns.metadata[1]"),
            (dict(metadata=[{}, {}, {"v": float("nan")}]), "columns.metadata[2]"),
            (dict(vectors=np.stack([E1, E2])), "columns.vectors"),
            (dict(vectors=np.stack([E1, np.zeros(DIM, dtype=np.float32), E2])), "columns.vectors[1]"),
            (dict(vectors=np.stack([E1, E2, np.full(DIM, np.inf, dtype=np.float32)])), "columns.vectors[2]"),
            (dict(record_id="x1"), "columns.record_id"),
        ],
        ids=["duplicate-id", "scope-id-space", "reserved-agent", "blank-content", "short-column", "naive-time",
             "unknown-type", "reserved-metadata", "nan-metadata", "vector-rows", "zero-vector", "inf-vector",
             "id-not-a-list"],
    )
    def test_bad_row_is_named_and_nothing_is_written(self, api: Api, change: dict[str, Any], argument: str) -> None:
        """A bad value raises ``InvalidArgument`` naming the column and row; no row lands.

        Troubleshooting: let the base class validate the columns before any insert.
        """
        values: dict[str, Any] = dict(record_id=["x1", "x2", "x3"], content=["a", "b", "c"], record_type="memory",
                                      timestamp=T0, vectors=np.stack([E1, E2, E3]))
        values.update(change)
        with pytest.raises(InvalidArgument) as info:
            api.bulk_add(RecordColumns(**values))
        assert info.value.argument == argument
        assert api.count() == 0

    @clause("spi.bulk_add", "spi.errors")
    def test_stored_id_is_a_conflict_and_nothing_is_written(self, api: Api) -> None:
        """An id that is already stored raises ``Conflict`` naming it; the other rows do not land.

        Troubleshooting: insert the rows in one transaction and map the unique-key violation
        to ``Conflict`` naming the id.
        """
        api.write(WriteBatch(add=[new(rec("m1"))]))
        with pytest.raises(Conflict, match="'m1'"):
            api.bulk_add(RecordColumns(record_id=["n1", "m1", "n2"], content=["a", "b", "c"], record_type="memory",
                                       timestamp=T0, vectors=np.stack([E1, E2, E3])))
        assert ids(api.query()) == ["m1"]
        with pytest.raises(InvalidArgument):
            api.bulk_add("not columns")

    @clause("spi.bulk_add", "9.atomic")
    def test_large_batches_are_all_or_nothing(self, api: Api) -> None:
        """5,000 rows with an already-stored id near the end write nothing, through ``bulk_add``
        and through one ``write``; 5,000 good rows all land, with consecutive ``seq`` values in
        row order.

        Troubleshooting: one transaction for the whole call, however the rows are chunked for
        the engine (no commit per chunk, no autocommit inserts).
        """
        api.write(WriteBatch(add=[new(rec("m1", content="the first"), E1)]))
        n = 5_000
        row_ids = [f"bulk{i:04d}" for i in range(n)]
        clashing = row_ids[:4_990] + ["m1"] + row_ids[4_991:]
        vectors = np.tile(np.asarray([E2, E3]), (n // 2, 1))

        def columns(names: list[str]) -> RecordColumns:
            return RecordColumns(record_id=names, content=[f"row {i} text" for i in range(n)], record_type="memory",
                                 timestamp=T0, user_id="bulk-user", vectors=vectors)

        with pytest.raises(Conflict, match="'m1'"):
            api.bulk_add(columns(clashing))
        with pytest.raises(Conflict, match="'m1'"):
            api.write(WriteBatch(add=[new(rec(rid, content="row text", user="bulk-user"), E2) for rid in clashing]))
        assert ids(api.query()) == ["m1"], "a failed large batch left rows behind"
        assert api.count(RecordFilter(user_id="bulk-user")) == 0
        assert ids(api.vector_search(E2, k=5)) == ["m1"]
        assert api.bulk_add(columns(row_ids)) == n
        bulk = RecordFilter(user_id="bulk-user")
        assert api.count(bulk) == n
        [first] = api.query(bulk, limit=1)
        [last] = api.query(bulk, order=Order.SEQ_DESC, limit=1)
        assert (first.record_id, last.record_id) == (row_ids[0], row_ids[-1])
        assert last.seq - first.seq == n - 1, "bulk_add must assign consecutive seq values in row order"
        assert first.seq > api.query(RecordFilter(record_ids=("m1",)))[0].seq
        for offset in (1, 1_234, 2_500, 4_990, 4_998):
            [row] = api.query(bulk, limit=1, offset=offset)
            assert (row.record_id, row.seq) == (row_ids[offset], first.seq + offset), f"row {offset} of the bulk_add"

