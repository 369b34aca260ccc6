"""Operation plans driven with scripted results: statement order, batch semantics, schema
policies, the exact/approximate planner — the logic a server would otherwise be needed for."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np
import oracledb
import pytest
from agentmemory_oracle import ddl, plans
from agentmemory_oracle import sql as q
from agentmemory_oracle.errors import map_error
from agentmemory_oracle.names import StoreNames
from oracledb.errors import _Error

from agentmemory.errors import BackendError, BackendUnavailable, Conflict, NotFound
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import NewRecord, Order, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

NOW = datetime(2025, 1, 1, tzinfo=timezone.utc)


def ora(code: str, text: str = "error") -> Exception:
    """A real python-oracledb exception for ``code``, mapped as the drivers map it."""
    return map_error(oracledb.DatabaseError(_Error(message=f"{code}: {text}")))


def responder(h: Any, *rules: tuple[str, Any]) -> Any:
    def answer(stmt: q.Statement) -> Any:
        for fragment, result in rules:
            if fragment in stmt.sql:
                if isinstance(result, Exception):
                    raise result
                return result(stmt) if callable(result) else result
        return h.default_responder(stmt)

    return answer


def kinds(stmts: list[q.Statement]) -> list[str]:
    """A readable trace: the SQL verb and table of each statement."""
    out = []
    for s in stmts:
        words = s.sql.split()
        verb = words[0]
        table = next((w.split(".")[0] for w in words if w.startswith("T_STORE_")), "")
        if verb == "SELECT" and "NEXTVAL" in s.sql:
            verb = "NEXTVAL"
        out.append(f"{verb} {table}".strip())
    return out


# ---- writes ----------------------------------------------------------------------------------------
def test_full_batch_runs_in_spi_order(names: StoreNames, h: Any) -> None:
    batch = WriteBatch(
        add=[NewRecord(h.rec("a"), h.vec(1)), NewRecord(h.rec("b"), None), NewRecord(h.rec("c"), h.vec(0, 1))],
        patch=[RecordPatch("a", status=RecordStatus.INVALID)],
        delete_links=["old"],
        add_links=[h.link("l1", "a", "c")],
        delete=["b"],
    )
    result, stmts = h.run_plan(
        plans.write_plan(names, batch),
        responder(
            h,
            ("NEXTVAL", [(12,), (10,), (11,)]),
            ("SELECT r.record_id FROM T_STORE_RECORD r WHERE r.record_id IN (:b0, :b1)", [("a",), ("c",)]),
        ),
    )
    assert kinds(stmts) == [
        "SELECT T_STORE_RECORD",  # existing ids → none
        "NEXTVAL T_STORE_RECORD_SEQ",
        "INSERT T_STORE_RECORD",
        "INSERT T_STORE_RECORD_CHUNK",
        "UPDATE T_STORE_RECORD",
        "UPDATE T_STORE_RECORD_CHUNK",
        "DELETE T_STORE_MEMORY_LINK",
        "SELECT T_STORE_RECORD",  # link endpoints exist
        "SELECT T_STORE_MEMORY_LINK",  # clashes
        "INSERT T_STORE_MEMORY_LINK",
        "DELETE T_STORE_RECORD",
    ]
    assert [(r.record_id, r.seq) for r in result] == [("a", 10), ("b", 11), ("c", 12)]
    inserted = stmts[2]
    assert isinstance(inserted, q.ExecuteMany) and [r["seq"] for r in inserted.rows] == [10, 11, 12]
    chunks = stmts[3]
    assert isinstance(chunks, q.ExecuteMany) and [r["record_id"] for r in chunks.rows] == ["a", "c"]


def test_add_existing_id_is_conflict_before_any_insert(names: StoreNames, h: Any) -> None:
    batch = WriteBatch(add=[NewRecord(h.rec("new")), NewRecord(h.rec("dup"))])
    with pytest.raises(Conflict, match="'dup'"):
        h.run_plan(plans.write_plan(names, batch), responder(h, ("r.record_id IN", [("dup",)])))


def test_sequence_shortfall_is_a_backend_error(names: StoreNames, h: Any) -> None:
    with pytest.raises(BackendError):
        h.run_plan(plans.write_plan(names, WriteBatch(add=[NewRecord(h.rec("a"))])), responder(h, ("NEXTVAL", [])))


def test_first_missing_patch_raises_not_found(names: StoreNames, h: Any) -> None:
    batch = WriteBatch(patch=[RecordPatch("a", content="x"), RecordPatch("gone", content="y")])
    with pytest.raises(NotFound) as info:
        h.run_plan(plans.write_plan(names, batch), responder(h, ("UPDATE T_STORE_RECORD SET", [1, 0])))
    assert (info.value.kind, info.value.identifier) == ("record", "gone")


def test_patches_grouped_only_when_consecutive(names: StoreNames, h: Any) -> None:
    same = [RecordPatch("a", content="1"), RecordPatch("b", content="2")]
    _, stmts = h.run_plan(plans.write_plan(names, WriteBatch(patch=same)), h.default_responder)
    assert kinds(stmts) == ["UPDATE T_STORE_RECORD", "UPDATE T_STORE_RECORD_CHUNK"]
    assert [r["content"] for r in stmts[0].rows] == ["1", "2"]
    interleaved = [
        RecordPatch("a", content="1"),
        RecordPatch("a", content="2", status=RecordStatus.INVALID),
        RecordPatch("a", content="3"),
    ]
    _, stmts = h.run_plan(plans.write_plan(names, WriteBatch(patch=interleaved)), h.default_responder)
    updates = [s for s in stmts if s.sql.startswith("UPDATE T_STORE_RECORD SET")]
    # three groups in order, so the last write wins as in sequential application
    assert [[r["content"] for r in s.rows] for s in updates] == [["1"], ["2"], ["3"]]


def test_vector_only_patches(names: StoreNames, h: Any) -> None:
    batch = WriteBatch(patch=[RecordPatch("a", vector=h.vec(1)), RecordPatch("b", vector=None)])
    _, stmts = h.run_plan(
        plans.write_plan(names, batch),
        responder(
            h,
            ("r.index_text FROM", lambda s: [(v, "The runners were running", None) for v in s.binds.values()]),
            ("r.record_id IN", lambda s: [(v,) for v in s.binds.values()]),
        ),
    )
    assert kinds(stmts) == [
        "SELECT T_STORE_RECORD",
        "SELECT T_STORE_RECORD",  # the indexed text, for a chunk the MERGE may create
        "MERGE T_STORE_RECORD_CHUNK",
        "SELECT T_STORE_RECORD",
        "DELETE T_STORE_RECORD_CHUNK",
    ]
    assert stmts[2].rows[0]["chunk_text"] == "runner run"  # analysed, not the raw content
    with pytest.raises(NotFound):
        h.run_plan(plans.write_plan(names, batch), responder(h, ("r.record_id IN", [])))


def test_index_text_patches_reindex_the_chunk(names: StoreNames, h: Any) -> None:
    """A content patch resets ``index_text`` (bound NULL) and indexes the new content; an
    ``index_text`` patch indexes it; a reset alone reads the stored content after its UPDATE."""
    batch = WriteBatch(patch=[
        RecordPatch("a", content="Runners ran"),
        RecordPatch("b", index_text="glaciers"),
        RecordPatch("c", index_text=None),
        RecordPatch("d", index_text="hiking", vector=h.vec(1)),
    ])
    _, stmts = h.run_plan(
        plans.write_plan(names, batch),
        responder(h, ("r.index_text FROM", lambda s: [(v, "Frozen lakes", None) for v in s.binds.values()])),
    )
    assert kinds(stmts) == [
        "UPDATE T_STORE_RECORD",  # a: content + index_text
        "UPDATE T_STORE_RECORD_CHUNK",
        "UPDATE T_STORE_RECORD",  # b, c: index_text
        "SELECT T_STORE_RECORD",  # c's stored content
        "UPDATE T_STORE_RECORD_CHUNK",
        "UPDATE T_STORE_RECORD",  # d: index_text, then the vector (no read: the patch tells)
        "UPDATE T_STORE_RECORD_CHUNK",
        "MERGE T_STORE_RECORD_CHUNK",
    ]
    assert stmts[0].rows == [{"record_id": "a", "content": "Runners ran", "index_text": None}]
    assert [r["chunk_text"] for r in stmts[1].rows] == ["runner ran"]
    assert [r["index_text"] for r in stmts[2].rows] == ["glaciers", None]
    assert set(stmts[3].binds.values()) == {"c"}
    assert [r["chunk_text"] for r in stmts[4].rows] == ["glacier", "frozen lake"]
    assert stmts[7].rows[0]["chunk_text"] == "hike"


def test_patch_with_fields_and_vector(names: StoreNames, h: Any) -> None:
    batch = WriteBatch(patch=[RecordPatch("a", content="new", vector=h.vec(0, 1))])
    _, stmts = h.run_plan(plans.write_plan(names, batch), h.default_responder)
    assert kinds(stmts) == ["UPDATE T_STORE_RECORD", "UPDATE T_STORE_RECORD_CHUNK", "MERGE T_STORE_RECORD_CHUNK"]


def test_missing_link_and_record_deletes(names: StoreNames, h: Any) -> None:
    with pytest.raises(NotFound) as info:
        h.run_plan(plans.write_plan(names, WriteBatch(delete_links=["x", "y"])), responder(h, ("DELETE", [1, 0])))
    assert (info.value.kind, info.value.identifier) == ("link", "y")
    with pytest.raises(NotFound) as info:
        h.run_plan(plans.write_plan(names, WriteBatch(delete=["r"])), responder(h, ("DELETE", [0])))
    assert (info.value.kind, info.value.identifier) == ("record", "r")
    with pytest.raises(BackendError):  # a driver that loses row counts must not pass silently
        h.run_plan(plans.write_plan(names, WriteBatch(delete=["r", "s"])), responder(h, ("DELETE", [1])))


@pytest.mark.parametrize(
    ("links", "existing_records", "clashes", "error"),
    [
        ([("l1", "a", "missing")], ["a"], [], (NotFound, "missing")),
        ([("l1", "a", "b")], ["a", "b"], [("l1", "x", "y")], (Conflict, "link id 'l1'")),
        ([("l2", "b", "a")], ["a", "b"], [("l1", "a", "b")], (Conflict, "already linked")),
        ([("l2", "a", "b"), ("l3", "b", "a")], ["a", "b"], [], (Conflict, "already linked")),
        ([("l2", "a", "b"), ("l2", "c", "d")], ["a", "b", "c", "d"], [], (Conflict, "link id 'l2'")),
        ([("l2", "a", "b"), ("l3", "c", "gone")], ["a", "b", "c"], [("l9", "a", "b")], (Conflict, "already linked")),
    ],
)
def test_link_add_errors_follow_batch_order(
    names: StoreNames,
    h: Any,
    links: list[tuple[str, str, str]],
    existing_records: list[str],
    clashes: list[Any],
    error: Any,
) -> None:
    batch = WriteBatch(add_links=[h.link(*x) for x in links])
    script = responder(
        h,
        ("FROM T_STORE_MEMORY_LINK", clashes),
        ("r.record_id IN", [(r,) for r in existing_records]),
    )
    with pytest.raises(error[0], match=error[1]):
        h.run_plan(plans.write_plan(names, batch), script)


def test_hostile_batch_never_reaches_sql_text(names: StoreNames, h: Any) -> None:
    hx = h.HOSTILE
    batch = WriteBatch(
        add=[
            NewRecord(
                h.rec(hx[0], content=hx[1], user=hx[2], agent=hx[3], thread=hx[4], metadata={hx[5]: {hx[6]: [hx[7]]}}),
                h.vec(1),
            ),
            NewRecord(h.rec(hx[8], type=RecordType.MESSAGE, content=hx[9]), None),
        ],
        patch=[RecordPatch(hx[0], content=hx[10], metadata={hx[11]: hx[0]}), RecordPatch(hx[8], vector=h.vec(0, 1))],
        delete_links=[hx[1]],
        add_links=[h.link(hx[2], hx[0], hx[8])],
        delete=[hx[3]],
    )
    calls = {"n": 0}

    def existing(stmt: q.Statement) -> list[tuple[str]]:
        calls["n"] += 1  # the first lookup is the duplicate check of the adds: none exist yet
        return [] if calls["n"] == 1 else [(v,) for v in h.bind_values(stmt)]

    def contents(stmt: q.Statement) -> list[tuple[str, str, None]]:
        return [(v, hx[9], None) for v in h.bind_values(stmt)]

    _, stmts = h.run_plan(
        plans.write_plan(names, batch),
        responder(h, ("NEXTVAL", [(1,), (2,)]), ("r.index_text FROM", contents), ("r.record_id IN", existing)),
    )
    assert len(stmts) >= 10 and calls["n"] == 3
    h.assert_no_marker_in_sql(stmts)


# ---- reads -----------------------------------------------------------------------------------------
def _row(h: Any, rid: str, extra: Any) -> tuple[Any, ...]:
    row = q.record_row(h.rec(rid), 1)
    return tuple(row[c] if c != "seq" else 1 for c in q.RECORD_COLUMNS) + (extra,)


def test_query_count_links_plans(names: StoreNames, h: Any) -> None:
    rows, stmts = h.run_plan(plans.query_plan(names, RecordFilter(), Order.SEQ_ASC, 0, 0), h.default_responder)
    assert rows == [] and stmts == []  # limit 0 never asks the server
    rows, _ = h.run_plan(
        plans.query_plan(names, RecordFilter(), Order.SEQ_DESC, 5, 1),
        responder(h, ("SELECT", [_row(h, "a", None)[:-1]])),
    )
    assert [r.record_id for r in rows] == ["a"]
    count, _ = h.run_plan(plans.count_plan(names, RecordFilter()), responder(h, ("COUNT", [(7,)])))
    assert count == 7
    link_rows = [
        ("l2", "a", "b", "supports", "{}", datetime(2025, 1, 1)),
        ("l10", "a", "c", "refines", '{"w":1}', datetime(2025, 1, 1)),
    ]
    links, _ = h.run_plan(plans.links_plan(names, ["a"], None), responder(h, ("SELECT", link_rows)))
    assert [x.link_id for x in links] == ["l10", "l2"]  # code point order, whatever the server sorted
    assert links[0].metadata == {"w": 1} and links[0].created_at.tzinfo is not None


def test_vectors_plan_reads_the_chunk_embedding(names: StoreNames, h: Any) -> None:
    import array

    rows = [("a", array.array("f", [0.6, 0.8]))]
    vectors, stmts = h.run_plan(plans.vectors_plan(names, ["a", "missing"]), responder(h, ("SELECT", rows)))
    assert len(stmts) == 1 and names.chunk in stmts[0].sql and "chunk_seq = 1" in stmts[0].sql
    assert set(stmts[0].binds.values()) == {"a", "missing"}  # ids are bound, never inlined
    assert list(vectors) == ["a"] and vectors["a"].dtype == np.float32
    np.testing.assert_allclose(vectors["a"], [0.6, 0.8], rtol=1e-6)


@pytest.mark.parametrize(
    ("index", "count", "expect_kinds", "approx"),
    [
        (False, None, ["exact"], False),
        (True, 0, ["count"], None),
        (True, 5, ["count", "exact"], False),
        (True, 1000, ["count", "exact"], False),
        (True, 1001, ["count", "approx"], True),
    ],
)
def test_vector_planner(
    names: StoreNames, h: Any, index: bool, count: int | None, expect_kinds: list[str], approx: bool | None
) -> None:
    planner = plans.VectorPlanner(index_available=index, exact_threshold=1000, target_accuracy=90)
    rows = [_row(h, "b", 0.1000004), _row(h, "a", 0.1000001), _row(h, "c", 0.05), _row(h, "d", float("nan"))]
    hits, stmts = h.run_plan(
        plans.vector_plan(names, h.vec(1), RecordFilter(user_id="u"), 2, planner),
        responder(h, ("SELECT COUNT(*)", [(count,)]), ("VECTOR_DISTANCE", rows)),
    )
    seen = ["count" if "COUNT(*)" in s.sql else ("approx" if "APPROX" in s.sql else "exact") for s in stmts]
    assert seen == expect_kinds
    if approx is None:
        assert hits == []
        return
    assert [x.record.record_id for x in hits] == ["c", "a"]  # NaN dropped; ties at 6 places by id
    assert stmts[0].binds.get("b1") == 1001 or not index
    if approx:
        assert "FETCH APPROX FIRST 22 ROWS ONLY WITH TARGET ACCURACY 90" in stmts[-1].sql


def test_planner_candidates() -> None:
    p = plans.VectorPlanner()
    assert p.candidates(1) == 21 and p.candidates(10) == 30 and p.candidates(100) == 200
    assert p.max_candidates == q.APPROX_MAX_CANDIDATES == 1000
    assert p.candidates(600) == 1000 and p.candidates(1000) == 1000  # capped, never below k
    assert p.candidates(1001) is None and p.candidates(10_000) is None  # past the cap: exact
    with pytest.raises(ValueError):
        q.vector_search(StoreNames.for_store("s"), RecordFilter(), np.ones(4), 5, approximate=True, candidates=1001)


@pytest.mark.parametrize("k", [1001, 5000])
def test_k_past_the_approximate_cap_is_ranked_exactly(names: StoreNames, h: Any, k: int) -> None:
    """Issue #20, item 5: FETCH APPROX with a large K fails with ORA-51966; such searches are
    ranked exactly even when the scope is large enough for the index."""
    planner = plans.VectorPlanner(exact_threshold=10)
    _, stmts = h.run_plan(
        plans.vector_plan(names, h.vec(1), RecordFilter(), k, planner),
        responder(h, ("SELECT COUNT(*)", [(11,)]), ("VECTOR_DISTANCE", [_row(h, "a", 0.5)])),
    )
    assert len(stmts) == 2 and "APPROX" not in stmts[1].sql and "FETCH FIRST :b" in stmts[1].sql
    assert stmts[1].binds[max(stmts[1].binds, key=lambda b: int(b[1:]))] == k


def test_approximate_query_refused_for_its_k_falls_back_to_exact(names: StoreNames, h: Any) -> None:
    planner = plans.VectorPlanner(exact_threshold=10)

    def vectors(stmt: q.Statement) -> Any:
        if "APPROX" in stmt.sql:
            raise ora("ORA-51966", "TopK RowIDs HNSW memory allocation is failing.")
        return [_row(h, "a", 0.5)]

    hits, stmts = h.run_plan(
        plans.vector_plan(names, h.vec(1), RecordFilter(), 500, planner),
        responder(h, ("SELECT COUNT(*)", [(11,)]), ("VECTOR_DISTANCE", vectors)),
    )
    assert ["APPROX" in s.sql for s in stmts[1:]] == [True, False]
    assert "FETCH APPROX FIRST 1000 ROWS ONLY" in stmts[1].sql and [x.record.record_id for x in hits] == ["a"]
    with pytest.raises(BackendError, match="ORA-51962"):  # other errors are not swallowed
        h.run_plan(
            plans.vector_plan(names, h.vec(1), RecordFilter(), 5, planner),
            responder(h, ("SELECT COUNT(*)", [(11,)]), ("APPROX", ora("ORA-51962", "vector memory"))),
        )


def test_keyword_plan(names: StoreNames, h: Any) -> None:
    hits, stmts = h.run_plan(plans.keyword_plan(names, "?!", RecordFilter(), 5), h.default_responder)
    assert hits == [] and stmts == []
    rows = [_row(h, "b", 40), _row(h, "a", 40), _row(h, "c", 90)]
    hits, stmts = h.run_plan(
        plans.keyword_plan(names, "hello world", RecordFilter(), 2), responder(h, ("CONTAINS", rows))
    )
    assert [(x.record.record_id, x.score) for x in hits] == [("c", 90.0), ("a", 40.0)]
    assert stmts[0].binds["b0"] == "{hello} ACCUM {world}"


# ---- schema policies ---------------------------------------------------------------------------------
ALL_INDEXES = [
    (n, "VALID", "VALID")
    for n in ("T_STORE_RECORD_CHUNK_EMBEDDING_VEC_I", "T_STORE_RECORD_CHUNK_TEXT_TXT_I", "T_STORE_RECORD_MDKEYS_MVI")
]


def _objects(names: StoreNames, dim: int = 4, optional: bool = True) -> list[tuple[str, str]]:
    steps = [s for s in ddl.schema_steps(names, dim) if optional or not s.optional]
    return [(names.meta, "TABLE"), *((s.name, "X") for s in steps)]


def _open(
    names: StoreNames, h: Any, policy: SchemaPolicy, *rules: tuple[str, Any], **kw: Any
) -> tuple[Any, list[q.Statement]]:
    return h.run_plan(plans.open_plan(names, 4, policy, ddl.IndexOptions(), NOW, **kw), responder(h, *rules))


class MetaRows:
    """The version row appears once it has been inserted."""

    def __init__(self, row: tuple[int, int] | None = None) -> None:
        self.row = row

    def insert(self, stmt: q.Statement) -> int:
        assert isinstance(stmt, q.Execute)
        self.row = (stmt.binds["version"], stmt.binds["dimension"])
        return 1

    def select(self, stmt: q.Statement) -> list[tuple[int, int]]:
        return [self.row] if self.row else []


def test_create_if_necessary_on_empty_schema_creates_everything(names: StoreNames, h: Any) -> None:
    meta = MetaRows()
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", []),
        ("INSERT INTO T_STORE_STORE_META", meta.insert),
        ("SELECT schema_version", meta.select),
        ("FROM user_indexes", ALL_INDEXES),
    )
    created = [
        s.sql.split()[2] if s.sql.split()[1] in ("TABLE", "INDEX", "SEQUENCE") else s.sql.split()[3]
        for s in stmts
        if s.sql.startswith("CREATE")
    ]
    assert created == [names.meta, *(x.name for x in ddl.schema_steps(names, 4))]
    assert result.features == {"vector_index", "text_index", "metadata_index"} and not result.warnings
    assert meta.row == (ddl.SCHEMA_VERSION, 4)
    insert = next(s for s in stmts if s.sql.startswith("INSERT"))
    assert isinstance(insert, q.Execute) and insert.types == {"now": "timestamp"} and insert.binds["now"].tzinfo is None


def test_existing_complete_store_runs_no_ddl(names: StoreNames, h: Any) -> None:
    for policy in (SchemaPolicy.CREATE_IF_NECESSARY, SchemaPolicy.REQUIRE_EXISTING):
        result, stmts = _open(
            names,
            h,
            policy,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
            ("FROM user_indexes", ALL_INDEXES[:1]),
        )
        assert not any(s.sql.startswith(("CREATE", "DROP", "INSERT", "ALTER")) for s in stmts)
        assert result.features == {"vector_index"}


def test_require_existing_never_creates(names: StoreNames, h: Any) -> None:
    with pytest.raises(BackendUnavailable, match="does not exist"):
        _open(names, h, SchemaPolicy.REQUIRE_EXISTING, ("FROM user_objects", []))
    with pytest.raises(BackendUnavailable, match="no schema version row"):
        _open(
            names,
            h,
            SchemaPolicy.REQUIRE_EXISTING,
            ("FROM user_objects", [(names.meta, "TABLE")]),
            ("SELECT schema_version", []),
        )
    with pytest.raises(BackendUnavailable, match="incomplete"):
        _open(
            names,
            h,
            SchemaPolicy.REQUIRE_EXISTING,
            ("FROM user_objects", [(names.meta, "TABLE"), (names.record, "TABLE")]),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        )
    # optional indexes missing is fine: fewer features, no DDL
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.REQUIRE_EXISTING,
        ("FROM user_objects", _objects(names, optional=False)),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("FROM user_indexes", []),
    )
    assert result.features == set() and not any(s.sql.startswith("CREATE") for s in stmts)


def test_dimension_and_version_checks(names: StoreNames, h: Any) -> None:
    with pytest.raises(Conflict, match="holds 8-d vectors, not 4-d"):
        _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(1, 8)]),
        )
    with pytest.raises(BackendUnavailable, match="newer"):
        _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(99, 4)]),
        )
    with pytest.raises(BackendUnavailable, match="needs an upgrade"):
        _open(
            names,
            h,
            SchemaPolicy.REQUIRE_EXISTING,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(0, 4)]),
        )
    with pytest.raises(BackendUnavailable, match="cannot be upgraded"):
        _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(0, 4)]),
        )


def test_migrations_run_then_version_is_recorded(names: StoreNames, h: Any) -> None:
    _, stmts = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", _objects(names)),
        ("SELECT schema_version", [(0, 4)]),
        ("FROM user_indexes", ALL_INDEXES),
        migration_steps={**ddl.migrations(names), 0: [f"ALTER TABLE {names.record} ADD (x NUMBER)"]},
    )
    texts = [s.sql for s in stmts]
    alter = texts.index(f"ALTER TABLE {names.record} ADD (x NUMBER)")
    assert texts[alter + 1] == ddl.migrations(names)[1][0]  # 1 -> 2: the analyzer columns
    to_text = ddl.migrations(names)[2]  # 2 -> 3: metadata as JSON text
    assert texts[alter + 2 : alter + 2 + len(to_text)] == to_text
    after = alter + 2 + len(to_text)
    assert texts[after] == f"ALTER TABLE {names.record} ADD (index_text CLOB)"  # 3 -> 4: index_text
    after += 1
    assert texts[after].startswith(f"UPDATE {names.meta} SET schema_version = :version")
    update = stmts[after]
    assert isinstance(update, q.Execute) and update.binds["version"] == ddl.SCHEMA_VERSION


def test_version_3_store_gets_index_text_and_a_repeated_add_is_tolerated(names: StoreNames, h: Any) -> None:
    """3 -> 4 (SPI 1.1): one ADD of the record's ``index_text``, then the version row; the
    chunks are not rewritten. An ADD whose column is already there (ORA-01430: an earlier open
    added it but did not record the version, or a concurrent opener) is tolerated; other
    failures are not."""
    from agentmemory.analysis import Analyzer

    stored = ("english", Analyzer.for_language("english").fingerprint)
    add = f"ALTER TABLE {names.record} ADD (index_text CLOB)"
    for answer in (0, ora("ORA-01430", "column being added already exists in table")):
        result, stmts = _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(3, 4)]),
            ("SELECT analyzer_language", [stored]),
            (add, answer),
            ("FROM user_indexes", ALL_INDEXES),
        )
        texts = [s.sql for s in stmts]
        assert [t for t in texts if t.startswith("ALTER")] == [add]
        assert texts[texts.index(add) + 1].startswith(f"UPDATE {names.meta} SET schema_version")
        assert stmts[texts.index(add) + 1].binds["version"] == 4 == result.schema_version
        assert not any("chunk_text" in t for t in texts)
    with pytest.raises(BackendError, match="ORA-01031"):
        _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(3, 4)]),
            (add, ora("ORA-01031", "insufficient privileges")),
        )


def test_version_1_store_is_reanalysed_on_open(names: StoreNames, h: Any) -> None:
    """A version-1 store (raw content in ``chunk_text``, no analyzer recorded): the open adds
    the analyzer columns, rewrites every ``chunk_text`` with analysed terms and records the
    fingerprint; a store already at the fingerprint in force is left alone."""
    from agentmemory.analysis import Analyzer

    english = Analyzer.for_language("english")
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", _objects(names)),
        ("SELECT schema_version", [(1, 4)]),
        ("SELECT analyzer_language", [(None, None)]),
        ("SELECT c.record_id, r.content", [("a", "She runs daily", None), ("b", None, None), ("c", "Yes, twice!", "hiking trips")]),
        ("FROM user_indexes", ALL_INDEXES),
    )
    texts = [s.sql for s in stmts]
    assert texts.index(ddl.migrations(names)[1][0]) < texts.index(ddl.select_meta_analyzer(names))
    (rewrite,) = [s for s in stmts if s.sql.startswith(f"UPDATE {names.chunk} SET chunk_text")]
    assert rewrite.rows == [
        {"record_id": "a", "chunk_text": "run daili"},
        {"record_id": "b", "chunk_text": ""},
        {"record_id": "c", "chunk_text": "hike trip"},  # re-analysed from the index text, not the content
    ]
    (record,) = [s for s in stmts if s.sql == ddl.update_meta_analyzer(names)]
    assert isinstance(record, q.Execute)
    assert record.binds["language"] == "english" and record.binds["fingerprint"] == english.fingerprint
    assert result.language == "english"
    assert texts.index(ddl.select_meta_analyzer(names)) < texts.index(rewrite.sql) < texts.index(record.sql)

    for language, stored, rewrites in (("none", ("english", english.fingerprint), True), (None, ("english", english.fingerprint), False)):
        result, stmts = _open(
            names,
            h,
            SchemaPolicy.REQUIRE_EXISTING,
            ("FROM user_objects", _objects(names)),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
            ("SELECT analyzer_language", [stored]),
            ("SELECT c.record_id, r.content", [("a", "The Runs", None)]),
            ("FROM user_indexes", ALL_INDEXES),
            language=language,
        )
        rewritten = [s for s in stmts if s.sql.startswith(f"UPDATE {names.chunk} SET chunk_text")]
        assert bool(rewritten) == rewrites, language
        assert result.language == (language or "english")
        if rewrites:
            assert rewritten[0].rows == [{"record_id": "a", "chunk_text": "the runs"}]


def test_optional_index_failures_degrade_with_warnings(names: StoreNames, h: Any) -> None:
    present = _objects(names, optional=False)
    result, _ = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", present),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("CREATE VECTOR INDEX", ora("ORA-51962", "The vector memory area is out of space")),
        ("CTXSYS.CONTEXT", ora("ORA-29833", "indextype does not exist")),
        ("FROM user_indexes", [ALL_INDEXES[2]]),
    )
    assert result.features == {"metadata_index"}
    assert len(result.warnings) == 2 and "vector_index is not available" in result.warnings[0]
    assert "ORA-51962" in result.warnings[0]


def test_required_ddl_failure_raises_but_already_exists_is_tolerated(names: StoreNames, h: Any) -> None:
    with pytest.raises(BackendUnavailable):
        _open(
            names,
            h,
            SchemaPolicy.CREATE_IF_NECESSARY,
            ("FROM user_objects", []),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
            (f"CREATE TABLE {names.record} ", ora("ORA-01031", "insufficient privileges")),
        )
    result, _ = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", []),
        ("CREATE", ora("ORA-00955", "name is already used")),
        ("INSERT INTO", ora("ORA-00001", "unique constraint violated")),  # a concurrent opener won
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("FROM user_indexes", ALL_INDEXES),
    )
    assert result.created == [] and result.features == {"vector_index", "text_index", "metadata_index"}


def test_recreate_drops_existing_objects_first(names: StoreNames, h: Any) -> None:
    meta = MetaRows()
    state = {"dropped": False}

    def objects(stmt: q.Statement) -> list[tuple[str, str]]:
        return [] if state["dropped"] else [(names.link, "TABLE"), (names.record, "TABLE"), (names.seq, "SEQUENCE")]

    def drop(stmt: q.Statement) -> int:
        state["dropped"] = True
        return 0

    _, stmts = _open(
        names,
        h,
        SchemaPolicy.RECREATE,
        ("FROM user_objects", objects),
        ("DROP ", drop),
        ("INSERT INTO T_STORE_STORE_META", meta.insert),
        ("SELECT schema_version", meta.select),
        ("FROM user_indexes", ALL_INDEXES),
    )
    drops = [s.sql for s in stmts if s.sql.startswith("DROP")]
    assert drops == [
        f"DROP TABLE {names.link} CASCADE CONSTRAINTS PURGE",
        f"DROP TABLE {names.record} CASCADE CONSTRAINTS PURGE",
        f"DROP SEQUENCE {names.seq}",
    ]
    first_create = next(i for i, s in enumerate(stmts) if s.sql.startswith("CREATE"))
    assert max(i for i, s in enumerate(stmts) if s.sql.startswith("DROP")) < first_create


def test_drop_plan_tolerates_vanished_objects(names: StoreNames, h: Any) -> None:
    dropped, _ = h.run_plan(
        plans.drop_plan(names),
        responder(
            h, ("FROM user_objects", [(names.chunk, "TABLE")]), ("DROP", ora("ORA-00942", "table does not exist"))
        ),
    )
    assert dropped == [names.chunk]
    with pytest.raises(BackendError):
        h.run_plan(
            plans.drop_plan(names),
            responder(h, ("FROM user_objects", [(names.chunk, "TABLE")]), ("DROP", ora("ORA-00054", "busy"))),
        )


# ---- broken optional indexes (issue #20, item 2) -------------------------------------------------------
VEC_I, TEXT_I, MVI = (x[0] for x in ALL_INDEXES)


class IndexStates:
    """``user_indexes`` rows that change with the DDL the plan sends (drop, then create)."""

    def __init__(self, states: dict[str, tuple[str, str, str]]) -> None:
        self.states = dict(states)

    def select(self, stmt: q.Statement) -> list[tuple[str, str, str, str]]:
        return [(name, *state) for name, state in self.states.items()]

    def ddl(self, stmt: q.Statement) -> int:
        name = stmt.sql.split()[2] if stmt.sql.startswith("DROP") else stmt.sql.split(" ON ")[0].split()[-1]
        if stmt.sql.startswith("DROP"):
            self.states.pop(name)
        else:
            self.states[name] = ("VALID", "VALID", "VALID")
        return 0


def test_failed_optional_index_build_is_dropped_at_once(names: StoreNames, h: Any) -> None:
    """A failed Oracle Text build leaves a FAILED domain index that blocks DML on the chunk
    table (ORA-29861): it is dropped with FORCE right away; other indexes without FORCE
    (ORA-29862 forbids it for non-domain indexes)."""
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", _objects(names, optional=False)),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("CREATE VECTOR INDEX", ora("ORA-51962", "The vector memory area is out of space")),
        ("CTXSYS.CONTEXT", ora("ORA-29855", "error occurred in the execution of ODCIINDEXCREATE routine")),
        (f"DROP INDEX {VEC_I}", ora("ORA-01418", "specified index does not exist")),
        ("FROM user_indexes", [(MVI, "VALID", "VALID", "VALID")]),
    )
    texts = [s.sql for s in stmts]
    assert texts[texts.index(next(t for t in texts if "CTXSYS.CONTEXT" in t)) + 1] == f"DROP INDEX {TEXT_I} FORCE"
    assert texts[texts.index(next(t for t in texts if t.startswith("CREATE VECTOR INDEX"))) + 1] == f"DROP INDEX {VEC_I}"
    assert result.features == {"metadata_index"}
    assert [w.split(" is not available")[0] for w in result.warnings] == ["vector_index", "text_index"]
    assert "ORA-29855" in result.warnings[1] and "failed too" not in result.warnings[1]


@pytest.mark.parametrize(
    ("index", "state", "drop", "create"),
    [
        (TEXT_I, ("VALID", "FAILED", "VALID"), f"DROP INDEX {TEXT_I} FORCE", "CTXSYS.CONTEXT"),
        (TEXT_I, ("UNUSABLE", "VALID", "VALID"), f"DROP INDEX {TEXT_I} FORCE", "CTXSYS.CONTEXT"),
        (VEC_I, ("UNUSABLE", "VALID", "VALID"), f"DROP INDEX {VEC_I}", "CREATE VECTOR INDEX"),
        (MVI, ("UNUSABLE", "VALID", "VALID"), f"DROP INDEX {MVI}", "CREATE MULTIVALUE INDEX"),
    ],
)
def test_broken_index_found_at_open_is_dropped_and_rebuilt(
    names: StoreNames, h: Any, index: str, state: tuple[str, str, str], drop: str, create: str
) -> None:
    valid = ("VALID", "VALID", "VALID")
    indexes = IndexStates({TEXT_I: valid, VEC_I: valid, MVI: valid} | {index: state})
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", _objects(names)),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("FROM user_indexes", indexes.select),
        ("DROP INDEX", indexes.ddl),
        ("CREATE", indexes.ddl),
    )
    ddl_sent = [s.sql for s in stmts if s.sql.startswith(("DROP", "CREATE"))]
    assert len(ddl_sent) == 2 and ddl_sent[0] == drop and create in ddl_sent[1]
    assert result.features == {"vector_index", "text_index", "metadata_index"}
    assert len(result.warnings) == 1 and index in result.warnings[0] and "dropped it" in result.warnings[0]
    assert result.warnings[0].endswith("to build it again")
    assert "/".join(s for s in state if s != "VALID") in result.warnings[0]


def test_broken_index_under_require_existing_only_warns(names: StoreNames, h: Any) -> None:
    result, stmts = _open(
        names,
        h,
        SchemaPolicy.REQUIRE_EXISTING,
        ("FROM user_objects", _objects(names)),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("FROM user_indexes", [(TEXT_I, "VALID", "FAILED", "VALID"), (VEC_I, "VALID", "VALID", "VALID")]),
    )
    assert not any(s.sql.startswith(("DROP", "CREATE")) for s in stmts)
    assert result.features == {"vector_index"}
    (warning,) = result.warnings
    assert "ORA-29861" in warning and f"DROP INDEX {TEXT_I} FORCE" in warning


def test_index_that_cannot_be_dropped_is_reported(names: StoreNames, h: Any) -> None:
    result, _ = _open(
        names,
        h,
        SchemaPolicy.CREATE_IF_NECESSARY,
        ("FROM user_objects", _objects(names)),
        ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
        ("FROM user_indexes", [(TEXT_I, "VALID", "FAILED", "VALID")]),
        ("DROP INDEX", ora("ORA-00054", "resource busy")),
        ("CTXSYS.CONTEXT", ora("ORA-00955", "name is already used")),
    )
    assert "text_index" not in result.features
    assert any("could not drop it" in w and "ORA-00054" in w for w in result.warnings)


def test_broken_index_the_options_disabled_is_dropped_not_rebuilt(names: StoreNames, h: Any) -> None:
    """A FAILED Oracle Text index blocks writes even when this store was opened without
    keyword search: it is dropped, and nothing is built in its place."""
    options = ddl.IndexOptions(text_index=False)
    present = [(names.meta, "TABLE"), *((s.name, "X") for s in ddl.schema_steps(names, 4, options)), (TEXT_I, "X")]
    result, stmts = h.run_plan(
        plans.open_plan(names, 4, SchemaPolicy.CREATE_IF_NECESSARY, options, NOW),
        responder(
            h,
            ("FROM user_objects", present),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, 4)]),
            ("FROM user_indexes", [(TEXT_I, "VALID", "FAILED", "VALID"), (VEC_I, "VALID", "VALID", "VALID")]),
        ),
    )
    assert [s.sql for s in stmts if s.sql.startswith(("DROP", "CREATE"))] == [f"DROP INDEX {TEXT_I} FORCE"]
    (warning,) = result.warnings
    assert warning.startswith("text_index:") and "dropped it" in warning and "build" not in warning
