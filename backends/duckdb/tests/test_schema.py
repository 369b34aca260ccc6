"""Opening: schema policies, dimension checks, migrations, read-only mode, URIs, options and
the plugin registration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore, _schema

from agentmemory.errors import BackendUnavailable, Conflict, InvalidArgument
from agentmemory.plugins import PluginManager
from agentmemory.registry import resolve_store
from agentmemory.spi import Capability, RecordFilter, SchemaPolicy, WriteBatch

V = np.array([1.0, 2.0, 3.0, 4.0], dtype=np.float32)


def _tables(path: Path) -> set[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


def test_require_existing_on_a_missing_file_creates_nothing(db_path: Path) -> None:
    store = DuckDBStore(db_path)
    with pytest.raises(BackendUnavailable, match="create_if_necessary"):
        store.open(dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    assert not db_path.exists()
    assert not store.is_open


def test_require_existing_on_a_foreign_duckdb_file(db_path: Path) -> None:
    con = duckdb.connect(str(db_path))
    con.execute("CREATE TABLE mine (x INT)")
    con.close()
    with pytest.raises(BackendUnavailable, match="no agentmemory schema"):
        DuckDBStore(db_path).open(dimension=4, schema_policy="require_existing")  # type: ignore[arg-type]
    assert _tables(db_path) == {"mine"}


def test_create_then_require_existing_and_reopen(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path)
    store.write(WriteBatch(add=[h.new("a", V, "hello", metadata={"k": [1, {"x": None}]}, user_id="u")]))
    before = store.query(RecordFilter())
    store.close()
    again = DuckDBStore(db_path)
    again.open(dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    try:
        assert again.query(RecordFilter()) == before
        assert again.query(RecordFilter())[0].timestamp == h.T0  # microseconds and offset kept
        assert Capability.PERSISTENCE in again.capabilities()
    finally:
        again.close()


def test_parent_directories_are_created(tmp_path: Path, h: Any) -> None:
    path = tmp_path / "deep" / "er" / "memory.duckdb"
    h.open_store(path).close()
    assert path.exists()


def test_other_dimension_is_a_conflict_unless_recreated(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path)
    store.write(WriteBatch(add=[h.new("a", V)]))
    store.close()
    with pytest.raises(Conflict, match="4-dimensional"):
        DuckDBStore(db_path).open(dimension=8)
    store = DuckDBStore(db_path)
    store.open(dimension=8, schema_policy=SchemaPolicy.RECREATE)
    try:
        assert store.count(RecordFilter()) == 0
        store.write(WriteBatch(add=[h.new("b", np.ones(8))]))
        assert store.vector_search(np.ones(8), RecordFilter(), 1)[0].record.record_id == "b"
    finally:
        store.close()


def test_recreate_leaves_foreign_tables_alone_and_drops_indexes(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path, auto_index=False)
    store.write(WriteBatch(add=[h.new(f"r{i}", V + i, f"word{i}") for i in range(5)]))
    store.build_indexes()
    store._conn().execute("CREATE TABLE user_table AS SELECT 42 AS answer")
    store.close()
    store = DuckDBStore(db_path)
    store.open(dimension=4, schema_policy=SchemaPolicy.RECREATE)
    store.close()
    assert _tables(db_path) == {"user_table", "am_meta", "am_migrations", "am_records", "am_links", "am_stale"}


def test_newer_schema_is_refused(db_path: Path, h: Any) -> None:
    h.open_store(db_path).close()
    con = duckdb.connect(str(db_path))
    con.execute("UPDATE am_meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(BackendUnavailable, match="newer"):
        DuckDBStore(db_path).open(dimension=4)


def test_older_schema_is_migrated(db_path: Path, h: Any) -> None:
    """A file at schema version 0 (the bare skeleton) is brought to the current version."""
    con = duckdb.connect(str(db_path))
    _schema.create_base(con, 4)
    con.close()
    store = h.open_store(db_path)
    try:
        store.write(WriteBatch(add=[h.new("a", V)]))
        versions = store._conn().execute("SELECT version FROM am_migrations ORDER BY version").fetchall()
        assert [v for (v,) in versions] == list(range(1, _schema.SCHEMA_VERSION + 1))
        (version,) = store._conn().execute("SELECT value FROM am_meta WHERE key = 'schema_version'").fetchone()
        assert int(version) == _schema.SCHEMA_VERSION
    finally:
        store.close()


def test_read_only_reads_and_refuses_writes(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path)
    store.write(WriteBatch(add=[h.new("a", V, "hello there")]))
    store.close()
    ro = DuckDBStore(db_path, read_only=True)
    ro.open(dimension=4)
    try:
        assert [r.record_id for r in ro.query(RecordFilter())] == ["a"]
        assert ro.vector_search(V, RecordFilter(), 1)[0].record.record_id == "a"
        assert ro.keyword_search("hello", RecordFilter(), 1)[0].record.record_id == "a"
        with pytest.raises(BackendUnavailable, match="read_only"):
            ro.write(WriteBatch(add=[h.new("b", V)]))
    finally:
        ro.close()
    with pytest.raises(BackendUnavailable):
        DuckDBStore(db_path.with_name("missing.duckdb"), read_only=True).open(dimension=4)


def test_not_a_database_file(db_path: Path) -> None:
    db_path.write_text("this is not a database")
    with pytest.raises(BackendUnavailable, match="cannot open"):
        DuckDBStore(db_path).open(dimension=4)


def test_orphan_snapshot_tables_are_dropped_on_open(db_path: Path, h: Any) -> None:
    h.open_store(db_path).close()
    con = duckdb.connect(str(db_path))
    con.execute("CREATE TABLE am_vidx_deadbeef0000 AS SELECT 1 AS x")
    con.close()
    h.open_store(db_path).close()
    assert "am_vidx_deadbeef0000" not in _tables(db_path)


def test_index_survives_reopen(db_path: Path, h: Any) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((600, 4)).astype(np.float32)
    store = h.open_store(db_path, auto_index=False)
    store.write(WriteBatch(add=[h.new(f"r{i:03d}", vectors[i]) for i in range(600)]))
    store.build_indexes()
    store.close()
    store = h.open_store(db_path, auto_index=False, planner="index", exact_max_rows=0)
    try:
        assert store.info().extra["vector_index"] == {"rows": 600, "watermark": 600}
        assert store.vector_search(vectors[5], RecordFilter(), 1)[0].record.record_id == "r005"
        assert store.last_plan is not None and store.last_plan.strategy == "index"
        plan = store._conn().execute(
            f"EXPLAIN SELECT rid FROM {store._vidx.table} ORDER BY array_cosine_distance(vec, [1,0,0,0]::FLOAT[4]) LIMIT 3"  # type: ignore[union-attr]
        ).fetchall()[0][1]
        assert "HNSW" in plan
    finally:
        store.close()


def test_in_memory_store(h: Any) -> None:
    store = DuckDBStore(":memory:")
    store.open(dimension=4)
    try:
        store.write(WriteBatch(add=[h.new("a", V, "x")]))
        assert store.count(RecordFilter()) == 1
        assert Capability.PERSISTENCE not in store.capabilities()
        store.build_indexes()
        assert store.vector_search(V, RecordFilter(), 1)[0].record.record_id == "a"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("duckdb:///abs/dir/memory.duckdb", "/abs/dir/memory.duckdb"),
        ("duckdb://relative.duckdb", str(Path("relative.duckdb").absolute())),
        ("duckdb://rel/dir/x.db", str(Path("rel/dir/x.db").absolute())),
        ("duckdb:///with%20space/m.db", "/with space/m.db"),
    ],
)
def test_from_uri_paths(uri: str, expected: str) -> None:
    store = DuckDBStore.from_uri(uri)
    assert str(store._path) == expected


def test_from_uri_options_and_errors() -> None:
    store = DuckDBStore.from_uri("duckdb:///x/m.db?read_only=true&threads=2&exact_max_rows=5")
    assert store._read_only and store._threads == 2 and store._exact_max_rows == 5
    assert DuckDBStore.from_uri("duckdb://:memory:")._memory
    with pytest.raises(InvalidArgument):
        DuckDBStore.from_uri("duckdb://")
    with pytest.raises(InvalidArgument, match="unknown option"):
        DuckDBStore.from_uri("duckdb:///x.db?colour=blue")
    with pytest.raises(InvalidArgument, match="read_only"):
        DuckDBStore.from_uri("duckdb:///x.db?read_only=maybe")
    with pytest.raises(InvalidArgument, match="threads"):
        DuckDBStore("x.db", threads=0)
    with pytest.raises(InvalidArgument, match="path"):
        DuckDBStore("")
    with pytest.raises(InvalidArgument, match="checkpoint_threshold"):
        DuckDBStore("x.db", checkpoint_threshold="lots")


def test_checkpoint_threshold_reaches_duckdb(tmp_path: Path) -> None:
    store = DuckDBStore.from_uri(f"duckdb://{tmp_path}/m.db?checkpoint_threshold=32MB")
    store.open(dimension=4)
    try:
        assert store._conn().execute("SELECT current_setting('checkpoint_threshold')").fetchone() == ("30.5 MiB",)
    finally:
        store.close()


def test_plugin_registers_the_backend(tmp_path: Path) -> None:
    plugins = PluginManager()
    assert "duckdb" in plugins.names("backends")
    registration = plugins.get("backends", "duckdb")
    assert registration.target == "agentmemory_duckdb.store:DuckDBStore" or registration.target is DuckDBStore
    assert registration.details["install_hint"] == "pip install agentmemory-duckdb"
    store = resolve_store(f"duckdb://{tmp_path}/m.duckdb", plugins)
    assert isinstance(store, DuckDBStore) and str(store._path) == f"{tmp_path}/m.duckdb"


def test_plugin_module_is_import_light() -> None:
    import subprocess
    import sys

    code = "import sys, agentmemory_duckdb.plugin; print('duckdb' in sys.modules, 'pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
    assert out == "False False"


def test_equal_instants_keep_their_own_utc_offsets(tmp_path: Path) -> None:
    """Timestamps are stored as ISO text with the caller's offset, also when one batch holds the
    same instant in two zones (the per-batch text cache must not merge them)."""
    from datetime import datetime, timedelta, timezone

    import numpy as np

    from agentmemory.bulk import RecordColumns
    from agentmemory.records import Record
    from agentmemory.spi import NewRecord, RecordFilter, WriteBatch

    utc = datetime(2025, 3, 1, 8, 0, tzinfo=timezone.utc)
    plus2 = utc.astimezone(timezone(timedelta(hours=2)))
    store = DuckDBStore(tmp_path / "m.db")
    store.open(dimension=2)
    try:
        store.write(WriteBatch(add=[
            NewRecord(Record(record_id=rid, record_type="memory", content="x", timestamp=ts, created_at=ts), None)
            for rid, ts in (("w1", utc), ("w2", plus2))
        ]))
        store.bulk_add(RecordColumns(record_id=["b1", "b2"], content=["x", "y"], record_type="memory",
                                     timestamp=[plus2, utc], vectors=np.eye(2, dtype=np.float32)))
        got = {r.record_id: r.timestamp.utcoffset() for r in store.query(RecordFilter())}
        assert got == {"w1": timedelta(0), "w2": timedelta(hours=2), "b1": timedelta(hours=2), "b2": timedelta(0)}
    finally:
        store.close()
