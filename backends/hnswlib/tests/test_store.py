"""Construction, URIs, the plugin entry point, schema policies and dimension rules."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from agentmemory_hnswlib import HnswlibStore
from hnswlib_testutil import make_record

from agentmemory.errors import BackendUnavailable, Conflict, InvalidArgument
from agentmemory.plugins import get_plugin_manager
from agentmemory.registry import resolve_store
from agentmemory.spi import Capability, NewRecord, RecordFilter, SchemaPolicy, WriteBatch


def test_registered_through_the_entry_point(tmp_path: Path) -> None:
    pm = get_plugin_manager()
    assert "hnswlib" in pm.names("backends")
    store = resolve_store(f"hnswlib://{tmp_path}/mem?ef_search=32&exact_threshold=0", pm)
    assert isinstance(store, HnswlibStore)
    assert store.path == (tmp_path / "mem").resolve()
    assert store._ef_search == 32 and store._exact_threshold == 0


def test_plugin_module_is_import_light() -> None:
    import subprocess
    import sys

    code = "import sys, agentmemory_hnswlib.plugin; print('hnswlib' in sys.modules, 'agentmemory_hnswlib.store' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


@pytest.mark.parametrize(
    ("uri", "argument"),
    [
        ("hnswlib://", "store"),
        ("hnswlib:///", "store"),
        ("duckdb:///x", "store"),
        ("hnswlib:///x?colour=red", "store"),
        ("hnswlib:///x?M=1", "M"),
        ("hnswlib:///x?ef_search=many", "ef_search"),
        ("hnswlib:///x?synchronous=sometimes", "synchronous"),
        ("hnswlib:///x?overfetch=0.5", "overfetch"),
    ],
)
def test_bad_uris_name_the_argument(uri: str, argument: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        HnswlibStore.from_uri(uri)
    assert err.value.argument == argument


def test_bad_constructor_options(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as err:
        HnswlibStore("")
    assert err.value.argument == "path"
    with pytest.raises(InvalidArgument, match="num_threads"):
        HnswlibStore(tmp_path, num_threads=0)
    with pytest.raises(InvalidArgument, match="checkpoint_min"):
        HnswlibStore(tmp_path, checkpoint_min=0)


def test_location_is_path_and_directory_a_deprecated_alias(tmp_path: Path) -> None:
    """One name for a backend's location: ``path`` (as DuckDB's); ``directory=`` still works,
    with a DeprecationWarning."""
    assert HnswlibStore(path=tmp_path / "a").path == (tmp_path / "a").resolve()
    with pytest.warns(DeprecationWarning, match="path"):
        old = HnswlibStore(directory=tmp_path / "b")
    assert old.path == (tmp_path / "b").resolve()
    with pytest.warns(DeprecationWarning):
        assert old.directory == old.path
    with pytest.raises(InvalidArgument) as err:
        HnswlibStore(tmp_path / "c", directory=tmp_path / "d")
    assert err.value.argument == "directory"
    with pytest.raises(InvalidArgument) as err:
        HnswlibStore()
    assert err.value.argument == "path"
    assert HnswlibStore.in_directory(tmp_path / "e", ef_search=32).path == (tmp_path / "e").resolve()


def test_capabilities_and_info(open_store: Callable[..., HnswlibStore]) -> None:
    store = open_store(dimension=4)
    assert store.capabilities() == {
        Capability.KEYWORD_SEARCH, Capability.PERSISTENCE, Capability.APPROXIMATE_SEARCH,
        Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS,
    }
    store.write(WriteBatch(add=[NewRecord(make_record("a"), np.ones(4, np.float32)), NewRecord(make_record("t"), None)]))
    info = store.info()
    assert (info.name, info.dimension, info.path) == ("hnswlib", 4, str(store.path))
    assert info.extra["records"] == 2 and info.extra["vectors"] == 1


def test_require_existing_on_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable, match="require_existing"):
        HnswlibStore(tmp_path / "none").open(dimension=4, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    assert not (tmp_path / "none").exists()


def test_recreate_wipes_records_and_index(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    store.write(WriteBatch(add=[NewRecord(make_record("a"), np.ones(4, np.float32))]))
    store.close()
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4, schema_policy=SchemaPolicy.RECREATE)
    try:
        assert store.count(RecordFilter()) == 0
        assert store.vector_search(np.ones(4, np.float32), RecordFilter(), 5) == []
        added = store.write(WriteBatch(add=[NewRecord(make_record("a"), np.ones(4, np.float32))]))
        assert added[0].seq == 1
    finally:
        store.close()


def test_dimension_rules(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    store.write(WriteBatch(add=[NewRecord(make_record("t"), None)]))
    store.close()
    store.open(dimension=8)  # no vectors yet: the dimension may change
    store.write(WriteBatch(add=[NewRecord(make_record("a"), np.ones(8, np.float32))]))
    store.close()
    with pytest.raises(Conflict, match="8-d"):
        HnswlibStore(tmp_path / "db").open(dimension=4)
    again = HnswlibStore(tmp_path / "db")
    again.open(dimension=8, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
    assert again.vector_search(np.ones(8, np.float32), RecordFilter(), 1)[0].record.record_id == "a"
    again.close()


def test_foreign_sqlite_file_is_not_touched(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    con = sqlite3.connect(tmp_path / "db" / "records.sqlite3")
    con.execute("CREATE TABLE precious (x)")
    con.commit()
    con.close()
    with pytest.raises(Conflict, match="something else"):
        HnswlibStore(tmp_path / "db").open(dimension=4)
    con = sqlite3.connect(tmp_path / "db" / "records.sqlite3")
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["precious"]
    con.close()


def test_closed_store_refuses_work(tmp_path: Path) -> None:
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    store.close()
    with pytest.raises(BackendUnavailable):
        store.count(RecordFilter())
    with pytest.raises(BackendUnavailable):
        store.checkpoint()


def test_search_breadth_grows_with_the_index_unless_set(tmp_path: Path) -> None:
    """Unset ``ef_search`` follows the index size (64 / 128 / 256 at ≤200k / ≤1M / more
    vectors: the measured recall@10 of each); a given value is kept whatever the size."""
    from types import SimpleNamespace

    auto, fixed = HnswlibStore(tmp_path / "a"), HnswlibStore(tmp_path / "b", ef_search=100)
    floors = []
    for n in (0, 200_000, 200_001, 1_000_000, 1_000_001):
        auto._cols = fixed._cols = SimpleNamespace(n=n)  # type: ignore[assignment]
        floors.append((auto._ef_floor(), fixed._ef_floor()))
    assert floors == [(64, 100), (64, 100), (128, 100), (128, 100), (256, 100)]
    auto._cols = fixed._cols = None
    assert auto._ef_for(200) == 400  # scoped ANN fetches widen the search beyond the floor
    auto.open(dimension=4)
    try:
        assert auto.info().extra["ef_search"] == "auto (64)"
    finally:
        auto.close()


def test_close_forgets_the_scope_masks(tmp_path: Path) -> None:
    """Masks of the old columns must not outlive ``close`` (each is stamped with its columns'
    own number and version, so a reopened store's new columns never match them either):
    otherwise a filtered search after a reopen (another writer having changed the records
    meanwhile) could use a stale mask."""
    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    vectors = np.eye(4, dtype=np.float32)
    store.write(WriteBatch(add=[
        NewRecord(make_record(f"r{i}", user="u1" if i % 2 else "u2"), vectors[i]) for i in range(4)
    ]))
    scope = RecordFilter(user_id="u1")
    assert {h.record.record_id for h in store.vector_search(vectors[0], scope, 4)} == {"r1", "r3"}
    assert store._masks, "the filtered search memoised its scope mask"
    store.close()
    assert not store._masks
    other = HnswlibStore(tmp_path / "db")
    other.open(dimension=4)
    other.write(WriteBatch(add=[NewRecord(make_record("r4", user="u1"), vectors[0])]))
    other.close()
    store.open(dimension=4)
    try:
        assert {h.record.record_id for h in store.vector_search(vectors[0], scope, 4)} == {"r1", "r3", "r4"}
    finally:
        store.close()


def test_decoded_records_equal_model_construct() -> None:
    """``_sql.row_to_record`` fills the model directly: the result must be what
    ``Record.model_construct`` of the same values gives, in every observable way."""
    import json
    import pickle
    from datetime import datetime

    import pydantic
    from agentmemory_hnswlib import _sql

    from agentmemory.records import Record, RecordStatus, RecordType

    assert _sql._DIRECT
    rows = [
        ("a", "memory", "text", "u", None, "t", None, 3, "2025-01-01T12:00:00.123456+00:00",
         "2025-01-01T12:00:00+00:00", None, "valid", "{}", None),
        ("b", "message", "hi", None, "ag", None, "user", 9, "2025-01-01T12:00:00+00:00",
         "2025-01-02T12:00:00+00:00", "2026-01-01T00:00:00+00:00", "invalid", '{"k":[1,"x"],"n":{"a":1.5}}',
         "1 January 2025\nuser: hi"),
    ]
    for row in rows:
        got = _sql.row_to_record(row)
        names = ("record_id", "record_type", "content", "user_id", "agent_id", "thread_id", "role", "seq",
                 "timestamp", "created_at", "expires_at", "status", "metadata", "index_text")
        values = dict(zip(names, row))
        values.update(
            record_type=RecordType(values["record_type"]), status=RecordStatus(values["status"]),
            timestamp=datetime.fromisoformat(values["timestamp"]),
            created_at=datetime.fromisoformat(values["created_at"]),
            expires_at=None if values["expires_at"] is None else datetime.fromisoformat(values["expires_at"]),
            metadata=json.loads(values["metadata"]),
        )
        want = Record.model_construct(**values)
        assert got == want and repr(got) == repr(want)
        assert got.model_fields_set == want.model_fields_set
        assert got.model_dump() == want.model_dump() and list(got.__dict__) == list(want.__dict__)
        assert got.__pydantic_extra__ is None and got.__pydantic_private__ is None
        assert pickle.loads(pickle.dumps(got)) == want
        assert got.model_copy(update={"seq": 1}).seq == 1
        with pytest.raises(pydantic.ValidationError):  # still frozen
            got.content = "changed"  # type: ignore[misc]


def test_memoised_masks_equal_columns_mask(tmp_path: Path) -> None:
    """``_mask`` builds an ``alive_at`` scope from the memoised mask of the rest of the scope
    and keeps it while no record of the scope expires in between: the same slots (and count)
    as ``Columns.mask`` of the whole filter, at instants either side of an expiry, in either
    order, before and after writes."""
    from datetime import timedelta

    from hnswlib_testutil import T0

    from agentmemory.records import RecordStatus, RecordType
    from agentmemory.spi import ANY, RecordPatch

    store = HnswlibStore(tmp_path / "db")
    store.open(dimension=4)
    try:
        rng = np.random.default_rng(2)
        store.write(WriteBatch(add=[
            NewRecord(make_record(f"r{i}", user=f"u{i % 3}", thread=None if i % 4 else "t",
                                  expires=None if i % 5 else T0 + timedelta(days=i)),
                      rng.normal(size=4).astype(np.float32))
            for i in range(60)
        ]))
        filters = []
        for user in (ANY, "u1", "nobody", None):
            for thread in (ANY, "t", None):
                for alive in (None, T0, T0 + timedelta(days=20), T0 + timedelta(days=90),
                              T0 + timedelta(days=5), T0 + timedelta(days=5, microseconds=-1),
                              T0 + timedelta(days=10, microseconds=1)):  # at an expiry, either side
                    filters.append(RecordFilter(user_id=user, thread_id=thread, alive_at=alive))
                    filters.append(RecordFilter(user_id=user, thread_id=thread, alive_at=alive,
                                                record_types=frozenset({RecordType.MEMORY}),
                                                statuses=frozenset({RecordStatus.VALID})))
        for _ in range(2):
            cols = store._cols
            assert cols is not None
            for flt in filters + filters[::-1]:  # instants forwards, then backwards
                got, want = store._mask(cols, flt), cols.mask(flt)
                if want is None:
                    assert got is None
                elif got is None:  # every slot: the scope's other conditions kept them all
                    assert want.all(), flt
                else:
                    assert np.array_equal(got, want), flt
                slots = np.arange(cols.n) if want is None else np.flatnonzero(want)
                scope = store._scope(cols, flt)
                assert scope.count == len(slots) and np.array_equal(scope.slots(), slots), flt
            store.write(WriteBatch(patch=[RecordPatch("r5", expires_at=T0 + timedelta(days=1)),
                                          RecordPatch("r6", status=RecordStatus.INVALID)]))
    finally:
        store.close()
