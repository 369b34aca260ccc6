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

from .data import AGENT_ID, VectorData, exact_topk, recall_at_k
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
