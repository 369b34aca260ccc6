"""Every SQL generator, every query shape: text, binds, bind types, and hostile input only in binds."""

from __future__ import annotations

import array
import re
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from agentmemory_oracle import sql as q
from agentmemory_oracle.names import StoreNames

from agentmemory.analysis import Analyzer
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import ANY, Order, RecordFilter, RecordPatch

UTC = timezone.utc


def _where(stmt: q.Statement) -> str:
    return stmt.sql.split(" WHERE ", 1)[1]


# ---- scope: three states per dimension -------------------------------------------------------
@pytest.mark.parametrize("dim", ["user_id", "agent_id", "thread_id"])
def test_scope_three_states(names: StoreNames, h: Any, dim: str) -> None:
    def flt(value: Any) -> RecordFilter:
        kwargs: dict[str, Any] = {dim: value}
        return RecordFilter(**kwargs)

    unconstrained = q.select_records(names, flt(ANY))
    assert dim not in unconstrained.sql.split(" FROM ", 1)[1] and unconstrained.binds == {}
    absent = q.select_records(names, flt(None))
    assert f"r.{dim} IS NULL" in absent.sql and absent.binds == {}
    equal = q.select_records(names, flt(h.HOSTILE[0]))
    assert re.search(rf"r\.{dim} = :b0\b", equal.sql) and equal.binds == {"b0": h.HOSTILE[0]}
    for stmt in (unconstrained, absent, equal):
        h.check_binds(stmt)
    h.assert_no_marker_in_sql([equal])


def test_all_scopes_mixed_states(names: StoreNames, h: Any) -> None:
    stmt = q.count_records(names, RecordFilter(user_id="u", agent_id=None, thread_id=ANY))
    where = _where(stmt)
    assert "r.user_id = :b0" in where and "r.agent_id IS NULL" in where and "thread_id" not in where
    h.check_binds(stmt)


def test_empty_filter_selects_everything(names: StoreNames, h: Any) -> None:
    stmt = q.select_records(names, RecordFilter())
    assert stmt.sql == (
        f"SELECT {', '.join('r.' + c for c in q.RECORD_COLUMNS)} FROM T_STORE_RECORD r WHERE 1 = 1 ORDER BY r.seq ASC"
    )
    h.check_binds(stmt)


# ---- types, statuses, ids, times, seq --------------------------------------------------------
def test_types_statuses_ids_times_seq(names: StoreNames, h: Any) -> None:
    at = datetime(2025, 3, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    flt = RecordFilter(
        record_ids=(h.HOSTILE[1], h.HOSTILE[2], h.HOSTILE[1]),
        record_types=frozenset({RecordType.FACT, RecordType.MESSAGE}),
        statuses=frozenset({RecordStatus.VALID}),
        alive_at=at,
        expired_at=at,
        min_seq=3,
        max_seq=9,
    )
    stmt = q.select_records(names, flt)
    where = _where(stmt)
    h.check_binds(stmt)
    h.assert_no_marker_in_sql([stmt])
    assert "r.record_id IN (:b0, :b1)" in where  # de-duplicated
    assert "r.record_type IN (:b2, :b3)" in where and stmt.binds["b2"] == "fact" and stmt.binds["b3"] == "message"
    assert "r.status IN (:b4)" in where and stmt.binds["b4"] == "valid"
    assert "(r.expires_at IS NULL OR r.expires_at > :b5)" in where
    assert "(r.expires_at IS NOT NULL AND r.expires_at <= :b6)" in where
    assert "r.seq >= :b7" in where and "r.seq < :b8" in where
    assert stmt.binds["b7"] == 3 and stmt.binds["b8"] == 9
    # times are bound as naive UTC TIMESTAMPs, typed
    assert stmt.binds["b5"] == datetime(2025, 3, 1, 12, 0, 0, 5) and stmt.types["b5"] == "timestamp"
    assert stmt.types == {"b5": "timestamp", "b6": "timestamp"}


def test_empty_sets_match_nothing(names: StoreNames, h: Any) -> None:
    stmt = q.count_records(names, RecordFilter(record_ids=(), record_types=frozenset(), statuses=frozenset()))
    assert _where(stmt) == "1 = 0 AND 1 = 0 AND 1 = 0"
    h.check_binds(stmt)


def test_in_lists_padded_to_buckets_and_split_at_1000(names: StoreNames, h: Any) -> None:
    three = q.select_existing_ids(names, ["a", "b", "c"])
    assert _where(three) == "r.record_id IN (:b0, :b1, :b2, :b3)" and three.binds["b3"] == "c"
    ids = [f"id{i}" for i in range(2100)]
    big = q.select_existing_ids(names, ids)
    lists = re.findall(r"r\.record_id IN \(([^)]*)\)", big.sql)
    assert [len(x.split(", ")) for x in lists] == [1000, 1000, 128]
    assert " OR " in big.sql and set(big.binds.values()) == set(ids)
    h.check_binds(big)
    # same text for every length within a bucket: the statement cache stays small
    assert q.select_existing_ids(names, ["x"] * 1 + ["y", "z"]).sql == three.sql


# ---- metadata filters inside a record filter --------------------------------------------------
def test_metadata_filter_is_bound_json_exists(names: StoreNames, h: Any) -> None:
    flt = RecordFilter(
        user_id=h.HOSTILE[3],
        metadata_filter={
            h.HOSTILE[4]: h.HOSTILE[5],
            "tags": {"$array_contains_any": [h.HOSTILE[6], 7]},
            "n": {"$not": {h.HOSTILE[7]: True}},
        },
    )
    for stmt in (
        q.select_records(names, flt),
        q.count_records(names, flt),
        q.vector_search(names, flt, h.vec(1), 3),
        q.keyword_search(names, flt, "{x}", 3),
        q.count_vector_candidates(names, flt, 10),
    ):
        h.check_binds(stmt)
        h.assert_no_marker_in_sql([stmt])
        assert "JSON_EXISTS(" in stmt.sql and "md_keys, '$.k?(@.string() == $v)' PASSING :b" in stmt.sql
        values = [v for v in h.bind_values(stmt) if isinstance(v, str)]
        assert h.HOSTILE[3] in values  # scope ids are bound as they are
        assert not any(h.MARKER in v for v in values if v != h.HOSTILE[3])  # metadata only hashed


# ---- windows and order ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("order", "limit", "offset", "tail"),
    [
        (Order.SEQ_ASC, None, 0, "ORDER BY r.seq ASC"),
        (Order.SEQ_DESC, None, 0, "ORDER BY r.seq DESC"),
        (Order.SEQ_ASC, 5, 0, "ORDER BY r.seq ASC FETCH NEXT :b0 ROWS ONLY"),
        (Order.SEQ_DESC, None, 7, "ORDER BY r.seq DESC OFFSET :b0 ROWS"),
        (Order.SEQ_ASC, 5, 7, "ORDER BY r.seq ASC OFFSET :b0 ROWS FETCH NEXT :b1 ROWS ONLY"),
        (Order.SEQ_ASC, 0, 0, "ORDER BY r.seq ASC FETCH NEXT :b0 ROWS ONLY"),
    ],
)
def test_windows(names: StoreNames, h: Any, order: Order, limit: int | None, offset: int, tail: str) -> None:
    stmt = q.select_records(names, RecordFilter(), order, limit, offset)
    assert stmt.sql.endswith(tail)
    h.check_binds(stmt)
    expected = [v for v in (offset or None, limit) if v is not None]
    assert list(stmt.binds.values()) == expected


# ---- vector search --------------------------------------------------------------------------------
def test_exact_vector_search(names: StoreNames, h: Any) -> None:
    stmt = q.vector_search(names, RecordFilter(thread_id="t"), h.vec(3, 4), 5)
    h.check_binds(stmt)
    assert stmt.types == {"b0": "vector"}
    qv = stmt.binds["b0"]
    assert isinstance(qv, array.array) and qv.typecode == "f"
    assert np.allclose(np.asarray(qv), [0.6, 0.8, 0, 0])  # unit-normalised float32
    assert "VECTOR_DISTANCE(c.embedding, :b0, COSINE)" in stmt.sql
    assert "APPROX" not in stmt.sql
    assert "FROM T_STORE_RECORD_CHUNK c WHERE c.thread_id = :b1" in stmt.sql
    assert "ORDER BY ROUND(distance, 6), NLSSORT(record_id, 'NLS_SORT=BINARY') FETCH FIRST :b2 ROWS ONLY" in stmt.sql
    assert stmt.binds["b2"] == 5
    assert stmt.sql.endswith("ORDER BY ROUND(h.distance, 6), NLSSORT(h.record_id, 'NLS_SORT=BINARY')")


def test_approximate_vector_search(names: StoreNames, h: Any) -> None:
    stmt = q.vector_search(
        names, RecordFilter(user_id="u"), h.vec(1), 10, approximate=True, candidates=40, target_accuracy=90
    )
    h.check_binds(stmt)
    inner = "ORDER BY VECTOR_DISTANCE(c.embedding, :b0, COSINE) FETCH APPROX FIRST 40 ROWS ONLY WITH TARGET ACCURACY 90"
    assert inner in stmt.sql
    # the approximate candidates are re-ranked exactly with the deterministic tie-break
    assert stmt.sql.index(inner) < stmt.sql.index("ORDER BY ROUND(distance, 6)")
    with pytest.raises(ValueError):
        q.vector_search(names, RecordFilter(), h.vec(1), 3, approximate=True, target_accuracy=0)


def test_vector_candidate_count(names: StoreNames, h: Any) -> None:
    stmt = q.count_vector_candidates(names, RecordFilter(agent_id=None), 1001)
    assert stmt.sql == (
        "SELECT COUNT(*) FROM (SELECT 1 FROM T_STORE_RECORD_CHUNK c WHERE c.agent_id IS NULL FETCH FIRST :b0 ROWS ONLY)"
    )
    assert stmt.binds == {"b0": 1001}


# ---- keyword search ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "{hello} ACCUM {world}"),
        ("a AND b OR near(c)", "{a} ACCUM {and} ACCUM {b} ACCUM {or} ACCUM {near} ACCUM {c}"),
        ("x} OR {y", "{x} ACCUM {or} ACCUM {y}"),
        ("über straße 漢字", "{über} ACCUM {strasse} ACCUM {漢字}"),
        ("repeat repeat REPEAT", "{repeat}"),
        ("!!! --- ;;;", None),
        ("%_$~?=", None),
        ("snake_case_id", "{snake} ACCUM {case} ACCUM {id}"),
    ],
)
def test_text_query_escapes_everything(text: str, expected: str | None) -> None:
    """Language "none" (plain case-folded words): escaping and splitting alone."""
    assert q.text_query(text, Analyzer.for_language("none")) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The runners were RUNNING", "{runner} ACCUM {run}"),
        ("a AND b OR near(c)", "{b} ACCUM {near} ACCUM {c}"),  # stop words: a, and, or
        ("x} OR {y", "{x} ACCUM {y}"),
        ("über straße 漢字", "{über} ACCUM {strass} ACCUM {漢字}"),
        ("the and of", None),  # only stop words: no query, keyword search returns []
        ("snake_case_ids", "{snake} ACCUM {case} ACCUM {id}"),
    ],
)
def test_text_query_uses_the_stores_analyzer(text: str, expected: str | None) -> None:
    """The default (English) analyzer: the same terms ``analysed_text`` writes to ``chunk_text``."""
    assert q.text_query(text) == expected == q.text_query(text, Analyzer.for_language("english"))
    if expected is not None:
        indexed = q.analysed_text(text)
        assert all(t.strip("{}") in re.findall(r"[^\W_]+", indexed) for t in expected.split(" ACCUM "))


def test_text_query_stays_a_varchar2_bind() -> None:
    """Item 4 of issue #20: the bound query never exceeds 4,000 bytes (thin mode would send it as
    LONG, which CONTAINS rejects under MAX_STRING_SIZE=STANDARD), however many or long the terms."""
    none = Analyzer.for_language("none")
    for width in (1, 10, 60, 64, 66, 200, 300):  # 4 + 60 = 64 bytes: 64 such terms made 4,665 bytes
        words = " ".join(f"{i:04d}" + "x" * width for i in range(400))
        query = q.text_query(words, none)
        assert query is not None and len(query.encode("utf-8")) <= q.TEXT_QUERY_MAX_BYTES
        assert len(query.encode("utf-8")) > q.TEXT_QUERY_MAX_BYTES - 300  # filled, not cut short early
    wide = " ".join(f"{i:03d}" + "漢" * 100 for i in range(100))  # 303-byte tokens, 3 bytes a character
    assert len(str(q.text_query(wide, none)).encode("utf-8")) <= q.TEXT_QUERY_MAX_BYTES
    many = " ".join(f"w{i}" for i in range(500))
    assert 300 < str(q.text_query(many, none)).count("{") < 500


def test_text_query_keeps_long_tokens() -> None:
    """Oracle Text indexes tokens up to 255 bytes: a 100-byte term is searched as it is, a
    longer one as its first 255 bytes (cut at a character boundary), like the index stores it."""
    none = Analyzer.for_language("none")
    assert q.text_query("a" * 100 + " ok", none) == "{" + "a" * 100 + "} ACCUM {ok}"
    assert q.text_query("b" * 300, none) == "{" + "b" * 255 + "}"
    cut = str(q.text_query("é" * 200, none))  # 2 bytes a character: 127 fit in 255 bytes
    assert cut == "{" + "é" * 127 + "}"
    assert q.text_query("c" * 300 + " " + "c" * 301, none) == "{" + "c" * 255 + "}"  # same indexed prefix
    long_first = " ".join([f"{i:02d}" + "d" * 253 for i in range(20)] + ["tail"])
    query = str(q.text_query(long_first, none))
    assert query.count("d" * 253) == 15 and query.endswith("ACCUM {tail}")  # a short term still fits


def test_keyword_search(names: StoreNames, h: Any) -> None:
    query = q.text_query(h.HOSTILE[9])
    stmt = q.keyword_search(names, RecordFilter(record_types=frozenset({RecordType.FACT})), query or "", 4)
    h.check_binds(stmt)
    h.assert_no_marker_in_sql([stmt])
    assert "CONTAINS(c.chunk_text, :b0, 1) > 0" in stmt.sql and stmt.binds["b0"] == query
    assert "SCORE(1) AS score" in stmt.sql
    assert "ORDER BY score DESC, NLSSORT(record_id, 'NLS_SORT=BINARY') FETCH FIRST :b2 ROWS ONLY" in stmt.sql


# ---- links -----------------------------------------------------------------------------------------
def test_links_queries(names: StoreNames, h: Any) -> None:
    both = q.select_links(names, [h.HOSTILE[0]], [h.HOSTILE[1], h.HOSTILE[2]])
    h.check_binds(both)
    h.assert_no_marker_in_sql([both])
    assert "(l.source_id IN (:b0) OR l.target_id IN (:b1)) AND l.link_id IN (:b2, :b3)" in both.sql
    assert both.sql.endswith("ORDER BY NLSSORT(l.link_id, 'NLS_SORT=BINARY')")
    everything = q.select_links(names, None, None)
    assert " WHERE 1 = 1 " in everything.sql and everything.binds == {}
    none = q.select_links(names, [], None)
    assert "(1 = 0 OR 1 = 0)" in none.sql
    clash = q.select_link_conflicts(names, [h.link("l1", "b", "a"), h.link(h.HOSTILE[3], "c", "d")])
    h.check_binds(clash)
    h.assert_no_marker_in_sql([clash])
    assert list(clash.binds.values()) == ["l1", h.HOSTILE[3], "a", "c"]  # ids, then pair_lo values


# ---- writes ------------------------------------------------------------------------------------------
def test_record_and_chunk_inserts(names: StoreNames, h: Any) -> None:
    record = h.rec(
        h.HOSTILE[0],
        type=RecordType.MESSAGE,
        content=h.HOSTILE[1],
        user=h.HOSTILE[2],
        thread="t",
        metadata={h.HOSTILE[3]: [h.HOSTILE[4]]},
        expires=datetime(2030, 1, 1, tzinfo=UTC),
    )
    row = q.record_row(record, 42)
    ins = q.insert_records(names, [row])
    h.check_binds(ins)
    h.assert_no_marker_in_sql([ins])
    assert ins.types == {
        "record_ts": "timestamp",
        "created_at": "timestamp",
        "expires_at": "timestamp",
        "md_keys": "json",
    }
    assert row["seq"] == 42 and row["message_role"] == "user"
    assert isinstance(row["metadata"], str) and q.read_json_object(row["metadata"]) == record.metadata
    assert row["record_ts"] == datetime(2025, 1, 1, 12, 0, 0, 123456) and row["record_ts"].tzinfo is None
    assert h.MARKER not in str(row["md_keys"])
    chunk = q.insert_chunks(names, [q.chunk_row(row, h.vec(0, 2))])
    h.check_binds(chunk)
    assert chunk.sql.startswith("INSERT INTO T_STORE_RECORD_CHUNK (record_id, record_type, seq, user_id")
    assert chunk.sql.endswith(", 1)") and "chunk_seq" in chunk.sql
    crow = chunk.rows[0]
    assert crow["chunk_text"] == q.analysed_text(h.HOSTILE[1]) and crow["md_keys"] == row["md_keys"]
    assert q.chunk_row({**row, "content": "The Runners"}, h.vec(0, 2))["chunk_text"] == "runner"
    none = Analyzer.for_language("none")
    assert q.chunk_row({**row, "content": "The Runners"}, h.vec(0, 2), none)["chunk_text"] == "the runners"
    assert list(crow["embedding"]) == [0.0, 1.0, 0.0, 0.0]
    assert chunk.types == {"expires_at": "timestamp", "md_keys": "json", "embedding": "vector"}


def test_patch_statements_per_shape(names: StoreNames, h: Any) -> None:
    full = RecordPatch(
        h.HOSTILE[0],
        content=h.HOSTILE[1],
        metadata={h.HOSTILE[2]: 1},
        status=RecordStatus.INVALID,
        timestamp=datetime(2025, 1, 2, tzinfo=UTC),
        expires_at=None,
        vector=h.vec(1),
    )
    assert q.patch_shape(full) == (("content", "index_text", "metadata", "status", "timestamp", "expires_at"), "set")
    row = q.patch_row(full)
    upd = q.update_records(names, q.patch_shape(full)[0], [row])
    h.check_binds(upd)
    h.assert_no_marker_in_sql([upd])
    assert upd.rowcounts and upd.sql == (
        "UPDATE T_STORE_RECORD SET content = :content, index_text = :index_text, metadata = :metadata, md_keys = :md_keys, "
        "status = :status, record_ts = :record_ts, expires_at = :expires_at WHERE record_id = :record_id"
    )
    chunk = q.update_chunks(names, q.patch_shape(full)[0], [row])
    assert chunk is not None
    h.check_binds(chunk)
    assert chunk.sql == (
        "UPDATE T_STORE_RECORD_CHUNK SET chunk_text = :chunk_text, md_keys = :md_keys, status = :status, "
        "expires_at = :expires_at WHERE record_id = :record_id"
    )
    assert chunk.rows[0]["chunk_text"] == q.analysed_text(h.HOSTILE[1]) and "content" not in chunk.rows[0]
    ts_only = RecordPatch("r", timestamp=datetime(2025, 1, 2, tzinfo=UTC))
    assert q.patch_shape(ts_only) == (("timestamp",), "keep")
    assert q.update_chunks(names, ("timestamp",), [q.patch_row(ts_only)]) is None  # not denormalised
    assert q.patch_shape(RecordPatch("r", vector=None)) == ((), "drop")
    with pytest.raises(ValueError):
        q.update_records(names, (), [{"record_id": "r"}])
    merge = q.upsert_chunk_vectors(names, [q.vector_row(h.HOSTILE[0], h.vec(0, 0, 5))])
    h.check_binds(merge)
    h.assert_no_marker_in_sql([merge])
    assert merge.sql.startswith("MERGE INTO T_STORE_RECORD_CHUNK c USING (SELECT")
    assert "WHEN MATCHED THEN UPDATE SET c.embedding = :embedding" in merge.sql
    assert "WHEN NOT MATCHED THEN INSERT" in merge.sql and merge.types == {"embedding": "vector"}


def test_deletes_and_links(names: StoreNames, h: Any) -> None:
    for stmt in (
        q.delete_records(names, [h.HOSTILE[0]]),
        q.delete_links(names, [h.HOSTILE[1]]),
        q.delete_chunks(names, [h.HOSTILE[2]]),
        q.insert_links(names, [q.link_row(h.link(h.HOSTILE[3], h.HOSTILE[5], h.HOSTILE[4]))]),
        q.next_seqs(names, 3),
    ):
        h.check_binds(stmt)
        h.assert_no_marker_in_sql([stmt])
    assert q.delete_records(names, ["a"]).rowcounts and q.delete_links(names, ["a"]).rowcounts
    row = q.link_row(h.link("l", "z", "a"))
    assert (row["pair_lo"], row["pair_hi"]) == ("a", "z") and row["opposite_link_type"] == "is_supported_by"
    assert q.next_seqs(names, 3).sql == "SELECT T_STORE_RECORD_SEQ.NEXTVAL FROM DUAL CONNECT BY LEVEL <= :b0"


# ---- row mapping ---------------------------------------------------------------------------------------
def test_record_from_row_round_trip(h: Any) -> None:
    from decimal import Decimal

    record = h.rec("r1", type=RecordType.MESSAGE, content="", metadata={"a": [1, {"b": 0.5}]})
    row = q.record_row(record, 7)
    fetched = (
        row["record_id"],
        Decimal(7),
        row["record_type"],
        None,  # Oracle returns '' as NULL
        None,
        None,
        None,
        row["message_role"],
        row["record_ts"],
        row["created_at"],
        None,
        row["status"],
        '{"a":[1,{"b":0.5}]}',  # the CLOB, fetched as text
        None,  # index_text NULL: indexed by the content
        0.25,  # trailing distance column is ignored
    )
    back = q.record_from_row(fetched)
    assert back == record.model_copy(update={"seq": 7})
    assert back.timestamp.tzinfo is not None and type(back.metadata["a"][0]) is int
    assert q.read_json_object('{"x": 1}') == {"x": 1} and q.read_json_object(None) == {}
    with pytest.raises(ValueError):
        q.read_json_object("[1]")


def test_index_text_columns_rows_and_chunk_text(names: StoreNames, h: Any) -> None:
    """SPI 1.1: ``index_text`` is selected, inserted and patched like the content; the chunk's
    terms come from ``indexed_text`` (the index text when set, else the content)."""
    assert q.RECORD_COLUMNS[-1] == "index_text"
    assert ", r.index_text FROM T_STORE_RECORD r" in q.select_records(names, RecordFilter()).sql
    assert "r.index_text, h.score FROM" in q.keyword_search(names, RecordFilter(), "{a}", 3).sql
    assert "r.index_text, h.distance FROM" in q.vector_search(names, RecordFilter(), h.vec(1), 3).sql
    record = h.rec("r", content="Yes, twice!").model_copy(update={"index_text": h.HOSTILE[1] + " hiking"})
    row = q.record_row(record, 3)
    assert row["index_text"] == record.index_text and row["content"] == "Yes, twice!"
    ins = q.insert_records(names, [row, q.record_row(h.rec("s"), 4)])
    h.check_binds(ins)
    h.assert_no_marker_in_sql([ins])
    assert ", md_keys, index_text) VALUES (" in ins.sql and ins.rows[1]["index_text"] is None
    assert "index_text" not in ins.types  # a plain string (CLOB) bind; None binds NULL
    chunk = q.chunk_row(row, h.vec(1))
    assert chunk["chunk_text"] == q.analysed_text(record.index_text) and "twice" not in chunk["chunk_text"]
    assert "hike" in chunk["chunk_text"].split()
    assert q.chunk_row(q.record_row(h.rec("s", content="Runners"), 4), h.vec(1))["chunk_text"] == "runner"
    assert q.indexed_text("c", None) == "c" and q.indexed_text("c", "i") == "i"

    fetched = tuple(row[c] for c in q.RECORD_COLUMNS)
    back = q.record_from_row(fetched)
    assert back.index_text == record.index_text and back.indexed_text == record.index_text
    assert q.record_from_row((*fetched[:-1], None)).index_text is None

    assert q.select_contents(names, ["a"]).sql.startswith("SELECT r.record_id, r.content, r.index_text FROM")
    assert q.select_chunk_contents(names).sql.startswith("SELECT c.record_id, r.content, r.index_text FROM")


def test_patches_of_index_text(names: StoreNames, h: Any) -> None:
    content = RecordPatch("r", content="Only to the river.")
    assert q.patch_shape(content) == (("content", "index_text"), "keep")
    assert q.patch_row(content) == {"record_id": "r", "content": "Only to the river.", "index_text": None}
    both = RecordPatch("r", content="Yes.", index_text="hiked to the lake")
    assert q.patch_shape(both) == q.patch_shape(content)  # one array DML for both
    assert q.patch_row(both)["index_text"] == "hiked to the lake"
    only = RecordPatch("r", index_text="the glacier")
    assert q.patch_shape(only) == (("index_text",), "keep") and q.patch_row(only) == {"record_id": "r", "index_text": "the glacier"}
    reset = RecordPatch("r", index_text=None)
    assert q.patch_shape(reset) == (("index_text",), "keep") and q.patch_row(reset) == {"record_id": "r", "index_text": None}
    assert "index_text" not in q.patch_row(RecordPatch("r", status=RecordStatus.INVALID))

    upd = q.update_records(names, ("index_text",), [q.patch_row(only), q.patch_row(reset)])
    h.check_binds(upd)
    assert upd.sql == "UPDATE T_STORE_RECORD SET index_text = :index_text WHERE record_id = :record_id"
    rows = [q.patch_row(content), q.patch_row(both)]
    chunk = q.update_chunks(names, ("content", "index_text"), rows)
    assert chunk is not None
    h.check_binds(chunk)
    assert chunk.sql == "UPDATE T_STORE_RECORD_CHUNK SET chunk_text = :chunk_text WHERE record_id = :record_id"
    assert [r["chunk_text"] for r in chunk.rows] == ["river", "hike lake"]  # content; else the index text
    # a reset without new content is indexed by the stored content, which the plan reads
    assert q.needs_stored_content(q.patch_row(reset)) and not q.needs_stored_content(q.patch_row(only))
    assert not q.needs_stored_content(q.patch_row(content))
    with pytest.raises(ValueError, match="stored content"):
        q.update_chunks(names, ("index_text",), [q.patch_row(reset)])
    chunk = q.update_chunks(names, ("index_text",), [q.patch_row(only), q.patch_row(reset)], None, {"r": "Frozen lakes"})
    assert chunk is not None and [r["chunk_text"] for r in chunk.rows] == ["glacier", "frozen lake"]
    h.check_binds(chunk)


def test_time_conversion() -> None:
    aware = datetime(2025, 6, 1, 3, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert q.to_db_time(aware) == datetime(2025, 6, 1, 8, 0)
    assert q.to_db_time(datetime(2025, 6, 1)) == datetime(2025, 6, 1)
    assert q.from_db_time(datetime(2025, 6, 1, 8, 0)) == aware
    assert q.to_db_time(None) is None and q.from_db_time(None) is None
