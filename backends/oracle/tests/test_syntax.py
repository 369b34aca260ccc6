"""Every generated statement parses as Oracle SQL (sqlglot's Oracle dialect).

No server runs here, so this is the closest check of the SQL text itself: it catches unbalanced
parentheses, missing commas, misplaced clauses. sqlglot does not know a few 23ai constructs; they
are rewritten to their pre-23ai equivalents first (``FETCH APPROX FIRST`` → ``FETCH FIRST``,
dropping ``WITH TARGET ACCURACY n``, ``VECTOR(n, FLOAT32)`` → ``VARCHAR2(n)``, and
``JSON_SERIALIZE(x RETURNING CLOB)`` → ``JSON_SERIALIZE(x)``), and the three index DDLs, the
``CTX_DDL.SYNC_INDEX`` block and ``ALTER TABLE … MODIFY (column NOT NULL)`` that sqlglot cannot
parse at all are only checked for balanced parentheses and quotes.
Needs the ``test`` extra (``pip install -e 'backends/oracle[test]'``).
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pytest
from agentmemory_oracle import ddl
from agentmemory_oracle import sql as q
from agentmemory_oracle.names import StoreNames

from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, Order, RecordFilter, RecordPatch

sqlglot = pytest.importorskip("sqlglot", reason="install the test extra: pip install -e 'backends/oracle[test]'")

T = datetime(2025, 1, 1, tzinfo=timezone.utc)
N = StoreNames.for_store("s")
V = np.ones(8, dtype=np.float32)
UNPARSEABLE_DDL = (
    "CREATE VECTOR INDEX",
    "INDEXTYPE IS CTXSYS.CONTEXT",
    "CREATE MULTIVALUE INDEX",
    "CTX_DDL.SYNC_INDEX",
    " MODIFY (",
)

FILTERS = [
    RecordFilter(),
    RecordFilter(user_id="u", agent_id=None, thread_id=ANY),
    RecordFilter(
        record_ids=tuple(f"id{i}" for i in range(1500)),
        record_types=frozenset({RecordType.FACT, RecordType.MESSAGE}),
        statuses=frozenset({RecordStatus.VALID}),
        alive_at=T,
        expired_at=T,
        min_seq=1,
        max_seq=9,
        metadata_filter={
            "a": {"$not": {"$array_contains_any": [1, "x"]}},
            "b": {"c": {"$not": {"$not": True}}},
            "tags": {"$array_contains": []},
        },
    ),
    RecordFilter(record_ids=(), record_types=frozenset()),
]


def _statements() -> list[tuple[str, str]]:
    record = Record(record_id="r", record_type=RecordType.MESSAGE, content="x", role="user", timestamp=T, created_at=T)
    row = q.record_row(record, 1)
    patch = RecordPatch("r", content="y", metadata={"k": 1}, status=RecordStatus.INVALID, timestamp=T, expires_at=None)
    fields = q.patch_shape(patch)[0]
    link = Link(link_id="l", source_id="a", target_id="b", link_type=LinkType.SUPPORTS, created_at=T)
    out: list[tuple[str, str]] = []
    for i, flt in enumerate(FILTERS):
        for order, limit, offset in ((Order.SEQ_ASC, None, 0), (Order.SEQ_DESC, 5, 2), (Order.SEQ_ASC, None, 3)):
            out.append((f"select[{i}]", q.select_records(N, flt, order, limit, offset).sql))
        out += [
            (f"count[{i}]", q.count_records(N, flt).sql),
            (f"vector_count[{i}]", q.count_vector_candidates(N, flt, 10).sql),
            (f"vector_exact[{i}]", q.vector_search(N, flt, V, 3).sql),
            (f"vector_approx[{i}]", q.vector_search(N, flt, V, 3, approximate=True, candidates=30).sql),
            (f"keyword[{i}]", q.keyword_search(N, flt, "{a} ACCUM {b}", 3).sql),
        ]
    update_chunks = q.update_chunks(N, fields, [q.patch_row(patch)])
    assert update_chunks is not None
    index_patch = RecordPatch("r", index_text="i")
    index_fields = q.patch_shape(index_patch)[0]
    update_index_chunks = q.update_chunks(N, index_fields, [q.patch_row(index_patch)])
    assert update_index_chunks is not None
    out += [
        ("existing", q.select_existing_ids(N, ["a", "b", "c"]).sql),
        ("links", q.select_links(N, ["a"], ["l"]).sql),
        ("links_all", q.select_links(N, None, None).sql),
        ("link_clash", q.select_link_conflicts(N, [link]).sql),
        ("nextval", q.next_seqs(N, 3).sql),
        ("insert_records", q.insert_records(N, [row]).sql),
        ("insert_chunks", q.insert_chunks(N, [q.chunk_row(row, V)]).sql),
        ("update_records", q.update_records(N, fields, [q.patch_row(patch)]).sql),
        ("update_chunks", update_chunks.sql),
        ("update_records_index_text", q.update_records(N, index_fields, [q.patch_row(index_patch)]).sql),
        ("update_chunks_index_text", update_index_chunks.sql),
        ("merge_vectors", q.upsert_chunk_vectors(N, [q.vector_row("r", V)]).sql),
        ("delete_records", q.delete_records(N, ["r"]).sql),
        ("delete_links", q.delete_links(N, ["l"]).sql),
        ("delete_chunks", q.delete_chunks(N, ["r"]).sql),
        ("insert_links", q.insert_links(N, [q.link_row(link)]).sql),
        ("meta_table", ddl.meta_table(N).sql),
        ("select_meta", ddl.select_meta(N)),
        ("insert_meta", ddl.insert_meta(N)),
        ("update_meta", ddl.update_meta_version(N)),
        ("select_meta_analyzer", ddl.select_meta_analyzer(N)),
        ("update_meta_analyzer", ddl.update_meta_analyzer(N)),
        ("select_contents", q.select_contents(N, ["a", "b"]).sql),
        ("select_chunk_contents", q.select_chunk_contents(N).sql),
        ("update_chunk_texts", q.update_chunk_texts(N, [{"record_id": "r", "chunk_text": "t"}]).sql),
        *((f"migration:{v}", sql) for v, sqls in ddl.migrations(N).items() for sql in sqls),
        ("objects", ddl.select_objects(N, ["A", "B"])[0]),
        ("indexes", ddl.select_indexes(N)[0]),
        ("drop_text_index", ddl.drop_index(N.text_index, domain=True)),
        ("drop_vector_index", ddl.drop_index(N.vector_index, domain=False)),
        ("sync_text_index", ddl.sync_text_index(N)[0]),
    ]
    out += [(f"ddl:{s.name}", s.sql) for s in ddl.schema_steps(N, 8)]
    out += [(f"drop:{name}", sql) for name, sql in ddl.drop_statements(N)]
    return out


STATEMENTS = _statements()


def _to_pre_23ai(sql: str) -> str:
    sql = sql.replace("FETCH APPROX FIRST", "FETCH FIRST")
    sql = re.sub(r" WITH TARGET ACCURACY \d+", "", sql)
    sql = sql.replace(" RETURNING CLOB)", ")")
    return re.sub(r"VECTOR\((\d+), FLOAT32\)", r"VARCHAR2(\1)", sql)


def _balanced(sql: str) -> bool:
    depth = 0
    for ch in re.sub(r"'(?:[^']|'')*'|\"[^\"]*\"", "", sql):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0 and sql.count("'") % 2 == 0


@pytest.mark.parametrize(("label", "sql"), STATEMENTS, ids=[label for label, _ in STATEMENTS])
def test_statement_parses_as_oracle_sql(label: str, sql: str, caplog: Any) -> None:
    assert _balanced(sql), f"{label}: unbalanced parentheses or quotes"
    if any(marker in sql for marker in UNPARSEABLE_DDL):
        return
    with caplog.at_level(logging.ERROR, logger="sqlglot"):  # sqlglot warns about JSON path literals
        tree = sqlglot.parse_one(_to_pre_23ai(sql), read="oracle")
    assert not isinstance(tree, sqlglot.exp.Command), f"{label}: sqlglot fell back to an opaque command"
    # round trip: what sqlglot understood still names every table we wrote
    tables = set(re.findall(r"\bS_[A-Z_]+\b", sql)) - {"S_RECORD_SEQ"}
    rendered = tree.sql(dialect="oracle")
    assert all(t in rendered for t in tables), f"{label}: lost a table in parsing"


def test_every_shape_is_covered() -> None:
    labels = {label.split("[")[0].split(":")[0] for label, _ in STATEMENTS}
    assert {"select", "count", "vector_exact", "vector_approx", "keyword", "merge_vectors", "ddl", "drop"} <= labels
