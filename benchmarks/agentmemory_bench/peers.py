"""Peers run side by side, offline, with the same embedder and data: LangGraph's
``InMemoryStore`` (and ``SqliteStore`` where its vector index can load), LangGraph's
``PostgresStore`` (pgvector HNSW) on the postgres backend's server, and mem0 in no-LLM mode
(``infer=False``) over a local Qdrant. Each peer reports why when it cannot run.

Peers are optional (the ``peers`` extra of ``agentmemory-benchmarks``); nothing here is needed
by the tests.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agentmemory.embedders import Embedder

from .conversations import Conversation, Question
from .data import AGENT_ID, VectorData, row_of
from .measure import dir_size, rss_bytes, settle, timed_loop
from .plan import Cell, K, QueryPlan
from .progress import Progress, note
from .quality import SEARCH_MAX_RESULTS, Method, fit_budget, line
from .raw import _cell_stats

QUALITY_AGENT = "assistant"


class _Lookup:
    """Texts → precomputed vectors (speed suite), falling back to an embedder (quality suite)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.table: dict[str, np.ndarray] = {}
        self.embedder = embedder

    def __call__(self, texts: Sequence[str], is_query: bool = False) -> list[list[float]]:
        out: list[list[float]] = []
        texts = [self._unwrap(t) for t in texts]
        missing = [t for t in texts if t not in self.table]
        if missing:
            if self.embedder is None:
                raise KeyError(f"no vector for {missing[0][:40]!r}")
            for text, vec in zip(missing, self.embedder.embed(missing, is_query=is_query)):
                self.table[text] = vec
        for text in texts:
            out.append(self.table[text].tolist())
        return out


    def _unwrap(self, text: str) -> str:
        """LangGraph's SqliteStore embeds the JSON of the whole value (``{"text": …}``) rather than
        the indexed field; in the speed suite map it back to the field's precomputed vector."""
        if self.embedder is None and text not in self.table and text.startswith("{"):
            try:
                inner = json.loads(text).get("text")
            except (ValueError, AttributeError):
                return text
            if isinstance(inner, str) and inner in self.table:
                return inner
        return text


def _query_key(i: int) -> str:
    return f"__query_{i}__"


# ---- LangGraph ----------------------------------------------------------------------------------
SQLITE_NOTE = (
    "SqliteStore's vector index loads the sqlite-vec extension; this Python's sqlite3 has no "
    "enable_load_extension (built without loadable extensions), so pysqlite3-binary's driver was used"
)


def _sqlite_connect(path: Path) -> tuple[Any, str | None]:
    """A connection that can load extensions: the stdlib's when it can, else pysqlite3's."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3.connect(str(path), check_same_thread=False, isolation_level=None), None
    try:
        import pysqlite3
    except ImportError:
        raise RuntimeError(
            "LangGraph SqliteStore vector search needs sqlite3.Connection.enable_load_extension (to load "
            "sqlite-vec), which this Python's sqlite3 lacks; install pysqlite3-binary to run it"
        ) from None
    return pysqlite3.connect(str(path), check_same_thread=False, isolation_level=None), SQLITE_NOTE


LANGGRAPH_PG_DATABASE = "langgraph_bench"
"""The database LangGraph's ``PostgresStore`` runs in on the postgres backend's server: its tables
(``store``, ``store_vectors`` and two migration tables) have fixed names in the connection's
default schema, so it gets a database of its own, and they are dropped before each run."""
LANGGRAPH_PG_TABLES = "store_vectors, store, store_migrations, vector_migrations"
_OPEN: dict[int, Any] = {}
"""id of an open LangGraph ``PostgresStore`` -> the ``ExitStack`` holding its connection."""
LANGGRAPH_PG_NOTE = (
    "LangGraph PostgresStore: same server as the postgres backend (database langgraph_bench), HNSW cosine "
    "m 16 / ef_construction 64 as the backend; it sets no hnsw.ef_search (pgvector's default 40) and no "
    "iterative scan, and filters a namespace prefix with a LIKE on the joined store table"
)


def langgraph_pg_dsn(dsn: str) -> str:
    """A DSN for ``LANGGRAPH_PG_DATABASE`` on ``dsn``'s server (created, with pgvector, when missing)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with psycopg.connect(dsn, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [LANGGRAPH_PG_DATABASE]).fetchone():
            conn.execute(f"CREATE DATABASE {LANGGRAPH_PG_DATABASE}")
    target = make_conninfo("", **{**conninfo_to_dict(dsn), "dbname": LANGGRAPH_PG_DATABASE})
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f"DROP TABLE IF EXISTS {LANGGRAPH_PG_TABLES} CASCADE")
    return target


def _langgraph_store(
    kind: str, dims: int, embed: Callable[[Sequence[str]], list[list[float]]], workdir: Path, dsn: str | None = None
) -> tuple[Any, str | None]:
    """The store, and a note on how it was built. A ``PostgresStore`` keeps its connection open
    until ``close_langgraph_store``."""
    index: dict[str, Any] = {"dims": dims, "embed": embed, "fields": ["text"]}
    if kind == "InMemoryStore":
        from langgraph.store.memory import InMemoryStore

        return InMemoryStore(index=index), None  # type: ignore[arg-type]
    if kind == "PostgresStore":
        from contextlib import ExitStack

        from langgraph.store.postgres import PostgresStore

        if dsn is None:
            raise RuntimeError("LangGraph PostgresStore needs the postgres backend's server (--backend-uri postgres=URI)")
        index |= {"ann_index_config": {"kind": "hnsw", "m": 16, "ef_construction": 64}, "distance_type": "cosine"}
        stack = ExitStack()
        pg: Any = stack.enter_context(PostgresStore.from_conn_string(langgraph_pg_dsn(dsn), index=index))  # type: ignore[arg-type]
        pg.setup()
        _OPEN[id(pg)] = stack
        return pg, LANGGRAPH_PG_NOTE
    from langgraph.store.sqlite import SqliteStore

    # SqliteStore reads "text_fields" (InMemoryStore reads "fields"); with "fields" alone it embeds
    # the JSON of the whole value
    index["text_fields"] = ["text"]
    path = workdir / "langgraph.sqlite"
    path.unlink(missing_ok=True)
    conn, why = _sqlite_connect(path)
    store = SqliteStore(conn, index=index)  # type: ignore[arg-type]
    store.setup()
    return store, why


def close_langgraph_store(store: Any) -> None:
    """Close what ``_langgraph_store`` opened for ``store`` (a ``PostgresStore``'s connection)."""
    stack = _OPEN.pop(id(store), None)
    if stack is not None:
        stack.close()


def _pg_sizes(store: Any) -> int | None:
    """Bytes of a LangGraph ``PostgresStore``'s tables and indexes."""
    try:
        with store._cursor() as cur:
            cur.execute("SELECT pg_total_relation_size('store') + pg_total_relation_size('store_vectors') AS b")
            row = cur.fetchone()
        return int(row["b"]) if row else None
    except Exception:  # noqa: BLE001 - a size is optional
        return None


def langgraph_speed(
    kind: str, data: VectorData, texts: Sequence[str], plan: QueryPlan, workdir: Path, *, budget_s: float, dsn: str | None = None
) -> dict[str, Any]:
    """Ingest (``batch`` of ``PutOp``) and namespace-scoped ``search`` with a text query whose
    vector is precomputed (the embed function is a lookup, so no model time is measured)."""
    try:
        from langgraph.store.base import PutOp
    except ImportError as exc:
        return {"peer": f"langgraph {kind}", "available": False, "reason": f"langgraph not installed ({exc})"}
    lookup = _Lookup()
    for i, text in enumerate(texts):
        lookup.table[text] = data.vectors[i]
    for i in range(data.queries.shape[0]):
        lookup.table[_query_key(i)] = data.queries[i]
    before = settle()
    try:
        store, why = _langgraph_store(kind, data.dim, lambda t: lookup(t), workdir, dsn)
    except Exception as exc:  # noqa: BLE001 - reported
        return {"peer": f"langgraph {kind}", "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    seconds = 0.0
    with Progress(f"peer langgraph {kind} ingest", data.n) as bar:
        for start in range(0, data.n, 1000):
            ops = [
                PutOp(namespace=(AGENT_ID, str(data.users[i]), "messages"), key=f"r{i:07d}", value={"text": texts[i]})
                for i in range(start, min(data.n, start + 1000))
            ]
            t0 = time.perf_counter()
            store.batch(ops)
            seconds += time.perf_counter() - t0
            bar.advance(len(ops))

    def query(cell: Cell, i: int) -> list[int]:
        scope = cell.scopes[i]
        prefix: tuple[str, ...] = () if scope is None else (AGENT_ID,) if scope == AGENT_ID else (AGENT_ID, scope)
        items = store.search(prefix, query=_query_key(cell.query_rows[i]), limit=K)
        return [row_of(item.key) for item in items]

    cells: dict[str, Any] = {}
    with Progress(f"peer langgraph {kind} search", len(plan.cells)) as bar:
        for cell in plan.cells:
            lat, found = timed_loop(partial(query, cell), len(cell), budget_s=budget_s)
            cells[cell.key] = _cell_stats(lat, found, cell)
            bar.advance()
    result = {
        "peer": f"langgraph {kind}",
        "available": True,
        "n": data.n,
        "ingest": {"seconds": seconds, "rows_per_s": data.n / seconds if seconds else None},
        "cells": cells,
        "rss_delta_bytes": rss_bytes() - before,
        "file_bytes": _pg_sizes(store) if kind == "PostgresStore" else dir_size(workdir / "langgraph.sqlite") if kind != "InMemoryStore" else None,
        "notes": [why] if why else [],
    }
    close_langgraph_store(store)
    store = None  # release before the next peer
    return result


def langgraph_quality(
    kind: str, embedder: Embedder, conversations: Sequence[Conversation], workdir: Path, dsn: str | None = None
) -> Method | str:
    """A quality method over LangGraph's store (messages as items, ``search`` with the question);
    a string says why it cannot run."""
    try:
        from langgraph.store.base import PutOp

        lookup = _Lookup(embedder)
        store, _why = _langgraph_store(kind, embedder.dimension, lambda t: lookup(t), workdir, dsn)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"
    # one put per message: InMemoryStore.batch() fails ("Number of embeddings (N) does not match
    # number of indices (M)") when two items of one batch share a text, as chat messages do
    try:
        for conv in conversations:
            for m in conv.messages:
                store.batch([PutOp(namespace=(conv.user_id, "messages"), key=m.message_id, value={"text": m.content, "role": m.role})])
    except Exception as exc:  # noqa: BLE001
        return f"ingest failed: {type(exc).__name__}: {exc}"

    def query_embed(texts: Sequence[str]) -> list[list[float]]:
        return lookup(texts, is_query=True)

    # LangGraph embeds the query with the same function as documents: give it the query side
    if hasattr(store, "embeddings"):
        store.embeddings = _wrap_langchain_embeddings(lookup)

    def context(conv: Conversation, question: Question, budget: int) -> str:
        items = store.search((conv.user_id,), query=question.text, limit=SEARCH_MAX_RESULTS)
        return fit_budget([line(it.value.get("role"), it.value["text"]) for it in items], budget)

    return Method(f"langgraph {kind}", context)


def _wrap_langchain_embeddings(lookup: _Lookup) -> Any:
    """A LangChain ``Embeddings`` that embeds documents as passages and queries as queries."""
    from langchain_core.embeddings import Embeddings

    class _Emb(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return lookup(texts, is_query=False)

        def embed_query(self, text: str) -> list[float]:
            return lookup([text], is_query=True)[0]

    return _Emb()


# ---- mem0 ---------------------------------------------------------------------------------------
MEM0_PG_COLLECTION = "mem0_bench"
"""mem0's pgvector table, in ``LANGGRAPH_PG_DATABASE`` on the postgres backend's server."""


def _mem0(embedder_fn: Callable[[str, bool], list[float]], dims: int, workdir: Path, pg_dsn: str | None = None) -> Any:
    """mem0 ``Memory`` over a local Qdrant, or over pgvector on ``pg_dsn``'s server (HNSW, the
    table dropped first)."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", str(workdir / "mem0_home"))
    from mem0 import Memory
    from mem0.embeddings.base import EmbeddingBase

    class _Embedding(EmbeddingBase):
        def __init__(self) -> None:
            super().__init__(None)

        def embed(self, text: Any, memory_action: Any = None) -> list[float]:
            return embedder_fn(str(text), memory_action == "search")

    path = Path(tempfile.mkdtemp(prefix="mem0-", dir=workdir))
    store: dict[str, Any] = {"provider": "qdrant", "config": {"collection_name": "bench", "embedding_model_dims": dims, "path": str(path / "qdrant"), "on_disk": True}}
    if pg_dsn is not None:
        import psycopg

        target = langgraph_pg_dsn(pg_dsn)
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {MEM0_PG_COLLECTION} CASCADE")
        store = {"provider": "pgvector", "config": {"collection_name": MEM0_PG_COLLECTION, "embedding_model_dims": dims,
                                                    "connection_string": target, "hnsw": True}}
    config = {
        "vector_store": store,
        # an LLM client must be configured to construct Memory; infer=False never calls it
        "llm": {"provider": "openai", "config": {"api_key": "offline-not-used"}},
        "embedder": {"provider": "openai", "config": {"api_key": "offline-not-used", "embedding_dims": dims}},
        "history_db_path": str(path / "history.db"),
    }
    memory = Memory.from_config(config)
    memory.embedding_model = _Embedding()
    return memory, path


def mem0_speed(
    data: VectorData, texts: Sequence[str], plan: QueryPlan, workdir: Path, *, budget_s: float, max_rows: int,
    pg_dsn: str | None = None,
) -> dict[str, Any]:
    """mem0 ``add(..., infer=False)`` one message per call (its only write path) and
    ``search`` with a user/agent filter; vectors are looked up, not computed. Over a local
    Qdrant, or over pgvector on ``pg_dsn``'s server."""
    name = "mem0" if pg_dsn is None else "mem0 pgvector"
    n = min(data.n, max_rows)
    table: dict[str, np.ndarray] = {texts[i]: data.vectors[i] for i in range(n)}
    for i in range(data.queries.shape[0]):
        table[_query_key(i)] = data.queries[i]
    before = settle()
    try:
        memory, path = _mem0(lambda text, _q: table[text].tolist(), data.dim, workdir, pg_dsn)
    except Exception as exc:  # noqa: BLE001
        return {"peer": name, "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    seconds = 0.0
    id_to_row: dict[str, int] = {}
    with Progress(f"peer {name} ingest (add, infer=False)", n) as bar:
        for i in range(n):
            t0 = time.perf_counter()
            res = memory.add([{"role": "user", "content": texts[i]}], user_id=str(data.users[i]), agent_id=AGENT_ID, infer=False)
            seconds += time.perf_counter() - t0
            for item in res.get("results", []):
                id_to_row[item["id"]] = i
            bar.advance()

    def query(cell: Cell, i: int) -> list[int]:
        scope = cell.scopes[i]
        filters = {"agent_id": AGENT_ID} if scope in (None, AGENT_ID) else {"user_id": scope}
        res = memory.search(_query_key(cell.query_rows[i]), filters=filters, top_k=K, threshold=0.0)
        return [id_to_row.get(r["id"], -1) for r in res.get("results", [])]

    cells: dict[str, Any] = {}
    sub = _restrict_plan(plan, data, n)
    with Progress(f"peer {name} search", len(sub.cells)) as bar:
        for cell in sub.cells:
            lat, found = timed_loop(partial(query, cell), len(cell), budget_s=budget_s)
            cells[cell.key] = _cell_stats(lat, found, cell)
            bar.advance()
    notes = [
        "mem0 has no scope-free search: unscoped = the shared agent_id filter",
        "search threshold=0.0 (its minimum): hits with negative cosine are dropped, which costs recall in small scopes",
        "no bulk write API: one add(infer=False) per record",
    ]
    if pg_dsn is not None:
        notes.append(
            f"pgvector store on the postgres backend's server (database {LANGGRAPH_PG_DATABASE}, table "
            f"{MEM0_PG_COLLECTION}, mem0's HNSW index); its filters are JSON payload conditions, and it sets no "
            "hnsw.ef_search or iterative scan"
        )
    return {
        "peer": name,
        "available": True,
        "n": n,
        "ingest": {"seconds": seconds, "rows_per_s": n / seconds if seconds else None},
        "cells": cells,
        "rss_delta_bytes": rss_bytes() - before,
        "file_bytes": dir_size(path) if pg_dsn is None else None,
        "notes": notes,
    }


def _restrict_plan(plan: QueryPlan, data: VectorData, n: int) -> QueryPlan:
    """The plan's queries with ground truth recomputed over the first ``n`` rows only."""
    if n >= data.n:
        return plan
    from .data import exact_topk

    cells = []
    for cell in plan.cells:
        new = Cell(cell.key, cell.selectivity, cell.scoped, list(cell.scopes), list(cell.query_rows))
        for scope, qi in zip(cell.scopes, cell.query_rows):
            rows = np.arange(n) if scope in (None, AGENT_ID) else data.rows_of(scope)
            rows = rows[rows < n]
            new.rows_by_scope[str(scope)] = rows
            new.truth.append(exact_topk(data.vectors, data.queries[qi], K, rows))
        cells.append(new)
    return QueryPlan(cells)


def mem0_quality(embedder: Embedder, conversations: Sequence[Conversation], workdir: Path) -> Method | str:
    """A quality method over mem0 (messages added with ``infer=False``, ``search`` with the question)."""
    cache: dict[tuple[str, bool], list[float]] = {}

    def embed(text: str, is_query: bool) -> list[float]:
        key = (text, is_query)
        if key not in cache:
            cache[key] = embedder.embed([text], is_query=is_query)[0].tolist()
        return cache[key]

    try:
        memory, _path = _mem0(embed, embedder.dimension, workdir)
        with Progress("peer mem0 quality ingest", sum(len(c.messages) for c in conversations)) as bar:
            for conv in conversations:
                for m in conv.messages:
                    memory.add([{"role": m.role, "content": m.content}], user_id=conv.user_id, agent_id=QUALITY_AGENT, infer=False)
                    bar.advance()
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {exc}"

    def context(conv: Conversation, question: Question, budget: int) -> str:
        res = memory.search(question.text, filters={"user_id": conv.user_id}, top_k=SEARCH_MAX_RESULTS, threshold=0.0)
        return fit_budget([line(r.get("role"), r["memory"]) for r in res.get("results", [])], budget)

    return Method("mem0 (infer=False)", context)


def describe_failure(name: str, reason: str) -> dict[str, Any]:
    """A peer that could not run, with the reason."""
    note(f"peer {name}: not run ({reason})")
    return {"peer": name, "available": False, "reason": reason}
