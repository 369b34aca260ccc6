"""The record table's layout: vectors stay in their rows (``_sql.INLINE_EMBEDDING``), and a
store of schema version 1 (vectors stored ``EXTERNAL``, out of line) is migrated on open."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import psycopg
import pytest
from agentmemory_postgres import _sql as q

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, RecordFilter, SchemaPolicy, WriteBatch

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
DIM = 384


def _storage(dsn: str, schema: str) -> tuple[str, int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT a.attstorage, m.schema_version FROM pg_attribute a, " + f"{schema}.am_meta m "
            "WHERE a.attrelid = %s::regclass AND a.attname = 'embedding'",
            [f"{schema}.am_records"],
        ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def _records(n: int) -> list[NewRecord]:
    rng = np.random.default_rng(0)
    words = " ".join(f"word{i}" for i in range(60))  # a row past the 2 kB TOAST threshold
    return [
        NewRecord(
            record=Record(record_id=f"r{i:03d}", record_type=RecordType.MESSAGE, content=f"{words} {i}", user_id="u",
                          timestamp=T0, created_at=T0),
            vector=rng.standard_normal(DIM).astype(np.float32),
        )
        for i in range(n)
    ]


def test_vectors_stay_in_their_rows(make_pg_store: Any, pg_dsn: str) -> None:
    store = make_pg_store()
    store.open(dimension=DIM)
    store.write(WriteBatch(add=_records(20)))
    assert _storage(pg_dsn, store._names.schema) == ("m", q.SCHEMA_VERSION)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        sizes = conn.execute(f"SELECT min(pg_column_size(embedding)), max(pg_column_size(r.*)) FROM {store._names.schema}.am_records r").fetchone()
    assert sizes is not None
    assert sizes[1] > 2032  # the row is past the threshold, and still holds its vector
    assert sizes[0] >= 4 * DIM  # uncompressed, in line (a TOAST pointer is 18 bytes)
    store.close()


def test_version_1_store_is_migrated_on_open(make_pg_store: Any, pg_dsn: str) -> None:
    store = make_pg_store()
    store.open(dimension=DIM)
    store.write(WriteBatch(add=_records(5)))
    schema = store._names.schema
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # back to the version-1 layout
        conn.execute(f"ALTER TABLE {schema}.am_records ALTER COLUMN embedding SET STORAGE EXTERNAL")
        conn.execute(f"UPDATE {schema}.am_meta SET schema_version = 1")
    assert _storage(pg_dsn, schema) == ("e", 1)
    again = make_pg_store(schema=schema)
    again.open(dimension=DIM, schema_policy=SchemaPolicy.CREATE_IF_NECESSARY)
    assert _storage(pg_dsn, schema) == ("m", 2)
    assert again.count(RecordFilter()) == 5
    again.close()


def test_large_first_batch_rebuilds_the_index(make_pg_store: Any, pg_engine: str, monkeypatch: Any) -> None:
    """A batch at least ``REBUILD_MIN_ROWS`` long into a store holding fewer vectors drops the
    HNSW index and builds it after the COPY, in the same transaction; later small batches go
    into the index as usual, and searches through it find what an exact scan finds."""
    from agentmemory_postgres import _plans as plans

    if pg_engine == "client":
        pytest.skip("the client vector engine has no HNSW index (pgvector cannot run on this CPU)")
    monkeypatch.setattr(plans, "REBUILD_MIN_ROWS", 50)
    store = make_pg_store(exact_max_rows=0, exact_scale=0)
    store.open(dimension=DIM)
    recs = _records(120)
    statements: list[str] = []
    original = plans.write_plan

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = original(*args, **kwargs)
        result: Any = None
        while True:
            try:
                stmt = plan.send(result)
            except StopIteration as stop:
                return stop.value
            statements.append(getattr(stmt, "sql", ""))
            result = yield stmt

    monkeypatch.setattr(plans, "write_plan", spy)
    store.write(WriteBatch(add=recs[:100]))
    assert any(s.startswith("DROP INDEX") for s in statements) and any("USING hnsw" in s for s in statements)
    statements.clear()
    store.write(WriteBatch(add=recs[100:]))  # 20 < 50: into the index
    assert not any(s.startswith("DROP INDEX") for s in statements)
    query = recs[7].vector
    assert query is not None
    trace = store.explain_vector_search(query, RecordFilter(), 5)
    assert trace.path == "hnsw" and trace.index_used
    assert trace.hits[0].record.record_id == "r007"
    assert store.count(RecordFilter()) == 120
    store.close()
