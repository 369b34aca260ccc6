"""Store naming, DDL per options, drop order and migration planning."""

from __future__ import annotations

import re
from typing import Any

import pytest
from agentmemory_oracle import ddl
from agentmemory_oracle.names import DEFAULT_STORE_ID, StoreNames, validate_store_id

from agentmemory.errors import InvalidArgument


@pytest.mark.parametrize("good", ["a", "T_CARD_CONTENT", "mem_01", "X" * 16, "t_mem_extraction"])
def test_valid_store_ids_are_upper_cased(good: str) -> None:
    assert validate_store_id(good) == good.upper()
    names = StoreNames.for_store(good)
    assert names.record == f"{good.upper()}_RECORD"


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "1abc",
        "_abc",
        "a-b",
        "a b",
        "a;DROP",
        'a"b',
        "a'b",
        "X" * 17,
        "é",
        "ａ",  # full-width letter: not ASCII
        "a\x00",
        "a--",
        "a/*",
        12,
        b"abc",
    ],
)
def test_invalid_store_ids_are_rejected_naming_the_argument(bad: Any) -> None:
    with pytest.raises(InvalidArgument) as info:
        StoreNames.for_store(bad)
    assert info.value.argument == "memory_store_id"


def test_default_store_and_lower_case_names_rejected() -> None:
    assert StoreNames.for_store(None).store_id == DEFAULT_STORE_ID
    with pytest.raises(InvalidArgument):
        StoreNames("lower")


def test_every_identifier_in_ddl_comes_from_the_prefix() -> None:
    names = StoreNames.for_store("Demo")
    steps = [ddl.meta_table(names), *ddl.schema_steps(names, 384)]
    pattern = re.compile(r"CREATE (?:MULTIVALUE |VECTOR )?(?:TABLE|INDEX|SEQUENCE) (\w+)")
    created = [m.group(1) for m in (pattern.search(s.sql) for s in steps) if m]
    assert created == [s.name for s in steps]
    assert all(name.startswith("DEMO_") for name in created)
    assert len(set(created)) == len(created)
    constraints = re.findall(r"CONSTRAINT (\w+)", " ".join(s.sql for s in steps))
    assert constraints and all(c.startswith("DEMO_") for c in constraints)
    assert len(set(constraints)) == len(constraints)
    assert all(len(n) <= 128 for n in created + constraints)


def test_schema_shape() -> None:
    names = StoreNames.for_store("s")
    by_name = {s.name: s for s in ddl.schema_steps(names, 384)}
    chunk = by_name["S_RECORD_CHUNK"].sql
    assert "embedding VECTOR(384, FLOAT32) NOT NULL" in chunk
    assert "FOREIGN KEY (record_id) REFERENCES S_RECORD (record_id) ON DELETE CASCADE" in chunk
    record = by_name["S_RECORD"].sql
    # metadata is JSON text (native JSON would turn floats into Oracle NUMBERs); md_keys stays
    # native JSON for the multivalue index (it holds only strings)
    assert "metadata CLOB NOT NULL" in record and "md_keys JSON NOT NULL" in record
    assert "CONSTRAINT S_RECORD_MD_CK CHECK (metadata IS JSON)" in record
    assert "metadata JSON" not in record
    assert (
        "CHECK (record_type IN ('message', 'memory', 'fact', 'guideline', 'preference', 'user', 'agent', 'thread', 'summary'))"
        in record
    )
    assert "UNIQUE (seq)" in record
    link = by_name["S_MEMORY_LINK"].sql
    assert "metadata CLOB NOT NULL" in link and "CONSTRAINT S_MEMORY_LINK_MD_CK CHECK (metadata IS JSON)" in link
    assert "UNIQUE (pair_lo, pair_hi)" in link and "CHECK (source_id <> target_id)" in link
    assert link.count("ON DELETE CASCADE") == 2
    assert by_name["S_RECORD_SEQ"].sql.endswith("ORDER NOCYCLE")
    vec = by_name[names.vector_index]
    assert vec.optional and vec.feature == "vector_index"
    assert vec.sql == (
        "CREATE VECTOR INDEX S_RECORD_CHUNK_EMBEDDING_VEC_I ON S_RECORD_CHUNK (embedding) "
        "ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE COSINE WITH TARGET ACCURACY 95 "
        "PARAMETERS (TYPE HNSW, NEIGHBORS 16, EFCONSTRUCTION 200)"
    )
    txt = by_name[names.text_index]
    assert txt.optional and "INDEXTYPE IS CTXSYS.CONTEXT" in txt.sql
    assert "STOPLIST CTXSYS.EMPTY_STOPLIST SYNC (ON COMMIT)" in txt.sql
    mvi = by_name[names.metadata_index]
    assert mvi.sql == 'CREATE MULTIVALUE INDEX S_RECORD_MDKEYS_MVI ON S_RECORD t (t.md_keys."k".string())'
    # tables come before their indexes
    order = [s.name for s in ddl.schema_steps(names, 8)]
    assert order.index("S_RECORD") < order.index("S_RECORD_THREAD_I") < order.index("S_RECORD_CHUNK")
    assert order.index("S_RECORD_CHUNK") < order.index(names.vector_index)
    assert sum(not s.optional for s in ddl.schema_steps(names, 8)) == len(order) - 3


def test_index_options() -> None:
    names = StoreNames.for_store("s")
    bare = ddl.schema_steps(names, 8, ddl.IndexOptions(vector_index=False, text_index=False, metadata_index=False))
    assert not any(s.optional for s in bare)
    tuned = ddl.schema_steps(names, 8, ddl.IndexOptions(hnsw_neighbors=32, hnsw_efconstruction=400, target_accuracy=90))
    assert "WITH TARGET ACCURACY 90 PARAMETERS (TYPE HNSW, NEIGHBORS 32, EFCONSTRUCTION 400)" in tuned[-3].sql
    bads: tuple[dict[str, Any], ...] = ({"hnsw_neighbors": 1}, {"hnsw_efconstruction": 0}, {"target_accuracy": 101})
    for bad in bads:
        with pytest.raises(ValueError):
            ddl.IndexOptions(**bad)
    for dim in (0, 70000):
        with pytest.raises(ValueError):
            ddl.schema_steps(names, dim)


def test_drop_order_children_first() -> None:
    names = StoreNames.for_store("s")
    drops = ddl.drop_statements(names)
    assert [n for n, _ in drops] == ["S_MEMORY_LINK", "S_RECORD_CHUNK", "S_RECORD", "S_STORE_META", "S_RECORD_SEQ"]
    assert drops[0][1] == "DROP TABLE S_MEMORY_LINK CASCADE CONSTRAINTS PURGE"
    assert drops[-1][1] == "DROP SEQUENCE S_RECORD_SEQ"


def test_dictionary_lookups_bind_names() -> None:
    names = StoreNames.for_store("s")
    sql, binds = ddl.select_objects(names, ["S_RECORD", "S_RECORD_SEQ"])
    assert sql.endswith("WHERE object_name IN (:n0, :n1)") and binds == {"n0": "S_RECORD", "n1": "S_RECORD_SEQ"}
    sql, binds = ddl.select_indexes(names)
    assert set(binds.values()) == {names.vector_index, names.text_index, names.metadata_index}
    assert ":now" in ddl.insert_meta(names) and ":version" in ddl.update_meta_version(names)


def test_metadata_migration_turns_native_json_into_text() -> None:
    """2 -> 3: each table's native JSON metadata becomes JSON text in a checked CLOB."""
    names = StoreNames.for_store("s")
    for table in (names.record, names.link):
        steps = [sql for sql in ddl.migrations(names)[2] if f" {table} " in sql]
        assert steps == [
            f"ALTER TABLE {table} ADD (metadata_text CLOB)",
            f"UPDATE {table} SET metadata_text = JSON_SERIALIZE(metadata RETURNING CLOB)",
            f"ALTER TABLE {table} DROP COLUMN metadata",
            f"ALTER TABLE {table} RENAME COLUMN metadata_text TO metadata",
            f"ALTER TABLE {table} MODIFY (metadata NOT NULL)",
            f"ALTER TABLE {table} ADD CONSTRAINT {table}_MD_CK CHECK (metadata IS JSON)",
        ]
    assert [v for v, _ in ddl.migration_plan(names, 1)] == [1] + [2] * 12 + [3]


def test_index_text_column_and_its_migration() -> None:
    """SPI 1.1 (schema 4): the record table has a nullable ``index_text`` CLOB beside the
    content; 3 -> 4 adds it to an existing store (NULL = the content, so the chunks' analysed
    terms stay right and nothing is rewritten)."""
    names = StoreNames.for_store("s")
    assert ddl.SCHEMA_VERSION == 4
    record = {s.name: s for s in ddl.schema_steps(names, 8)}[names.record].sql
    assert "content CLOB, " in record and "index_text CLOB, " in record
    assert "index_text CLOB NOT NULL" not in record
    assert ddl.migrations(names)[3] == [f"ALTER TABLE {names.record} ADD (index_text CLOB)"]
    assert ddl.migration_plan(names, 3) == [(3, f"ALTER TABLE {names.record} ADD (index_text CLOB)")]
    assert max(ddl.migrations(names)) == ddl.SCHEMA_VERSION - 1  # every version has its step


def test_migration_plan() -> None:
    names = StoreNames.for_store("s")
    assert ddl.migration_plan(names, ddl.SCHEMA_VERSION) == []
    steps = {1: ["ALTER 1a", "ALTER 1b"], 2: ["ALTER 2"]}
    assert ddl.migration_plan(names, 1, 3, steps) == [(1, "ALTER 1a"), (1, "ALTER 1b"), (2, "ALTER 2")]
    assert ddl.migration_plan(names, 2, 3, steps) == [(2, "ALTER 2")]
    with pytest.raises(ValueError, match="no migration from schema version 3"):
        ddl.migration_plan(names, 3, 4, steps)
