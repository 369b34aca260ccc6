"""Speed and scale of one backend through the store SPI: bulk ingest, search latency and recall
per scope selectivity, keyword search, reopen, file size and memory.

Backends are found through the plugin registry (``agentmemory.plugins``), built with their
``from_uri`` like any user would, and driven only through public ``MemoryStore`` methods.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentmemory.bulk import RecordColumns
from agentmemory.plugins import get_plugin_manager
from agentmemory.spi import Capability, MemoryStore, NewRecord, RecordFilter, SchemaPolicy, WriteBatch

from .data import AGENT_ID, VectorData, batches, keyword_queries, row_of
from .measure import dir_size, rss_bytes, settle, timed_loop
from .plan import Cell, K, QueryPlan
from .progress import Progress, note
from .raw import _cell_stats

BULK_LOAD_OPTIONS = {"duckdb": "auto_index=false"}
"""URI options that tell a backend a bulk load is running: index builds deferred to an explicit
``build_indexes()`` after the ingest (timed apart), as its README recommends, instead of
background builds competing with the ingest for the CPU."""

RAW_ENGINE_OF = {"duckdb": "duckdb", "hnswlib": "hnswlib", "memory": "numpy", "postgres": "pgvector", "postgresql": "pgvector"}
"""The raw engine each backend is compared with (others: numpy exact)."""


def installed_backends() -> list[str]:
    """Backend names registered through the plugin manager (entry points included), each store
    class once: a second name for the same class (``postgresql`` beside ``postgres``) is an alias."""
    pm = get_plugin_manager()
    seen: set[str] = set()
    names = []
    for name in pm.names("backends"):
        target = repr(pm.get("backends", name).target)  # a dotted path, or the registered object
        if target not in seen:
            seen.add(target)
            names.append(name)
    return names


def backend_uri(name: str, workdir: Path) -> str:
    """The URI a backend is opened at inside ``workdir`` (``name:///abs/dir/memory.name``)."""
    return f"{name}://{(workdir / name / f'memory.{name}').resolve()}"


def make_store(name: str, workdir: Path, uri: str | None = None) -> tuple[MemoryStore, str | None]:
    """Build backend ``name`` (loaded from the registry) at a fresh location under ``workdir``."""
    cls = get_plugin_manager().load("backends", name)
    if name == "memory":
        return cls(), None
    target = uri or backend_uri(name, workdir)
    store = cls.from_uri(target)
    (workdir / name).mkdir(parents=True, exist_ok=True)
    return store, target


def reopen_store(name: str, uri: str | None, workdir: Path) -> MemoryStore:
    """A second instance over the same location."""
    cls = get_plugin_manager().load("backends", name)
    return cls.from_uri(uri) if uri else cls()


def bulk_load_uri(name: str, workdir: Path) -> str | None:
    """The backend's URI under ``workdir`` with its bulk-load options; None when it has none."""
    return f"{backend_uri(name, workdir)}?{BULK_LOAD_OPTIONS[name]}" if name in BULK_LOAD_OPTIONS else None


def record_columns(records: Sequence[NewRecord]) -> RecordColumns:
    """``records`` as the columns ``bulk_add`` takes (every record has a vector here)."""
    recs = [item.record for item in records]
    return RecordColumns(
        record_id=[r.record_id for r in recs], content=[r.content for r in recs],
        record_type=[r.record_type for r in recs], timestamp=[r.timestamp for r in recs],
        created_at=[r.created_at for r in recs], user_id=[r.user_id for r in recs],
        agent_id=[r.agent_id for r in recs], thread_id=[r.thread_id for r in recs], role=[r.role for r in recs],
        metadata=[r.metadata for r in recs], vectors=np.stack([np.asarray(item.vector) for item in records]),
    )


def bulk_ingest(
    name: str, records: Sequence[NewRecord], dim: int, workdir: Path, batch_size: int, uri: str | None
) -> dict[str, Any]:
    """Ingest of the same records through ``bulk_add`` (columns built before timing; the run
    passes all records in one call, a bulk import's natural use) into a store of its own,
    dropped afterwards (a server URI is recreated by the main run)."""
    store, _ = make_store(name, workdir / "bulk_add", uri or bulk_load_uri(name, workdir / "bulk_add"))
    chunks = [record_columns(chunk) for chunk in batches(records, batch_size)]
    seconds = 0.0
    store.open(dimension=dim, schema_policy=SchemaPolicy.RECREATE)
    try:
        with Progress(f"{name} ingest (bulk_add x{batch_size})", len(records)) as bar:
            for columns in chunks:
                t0 = time.perf_counter()
                store.bulk_add(columns)
                seconds += time.perf_counter() - t0
                bar.advance(len(columns.record_id))
    finally:
        store.close()
        shutil.rmtree(workdir / "bulk_add", ignore_errors=True)
    n = len(records)
    return {"seconds": seconds, "rows_per_s": n / seconds if seconds else None, "batch_size": batch_size}


def scope_filter(scope: str | None) -> RecordFilter:
    """The SPI filter of a plan scope (user id, the shared agent, or none)."""
    if scope is None:
        return RecordFilter()
    if scope == AGENT_ID:
        return RecordFilter(agent_id=AGENT_ID)
    return RecordFilter(user_id=scope)


def search_cells(store: MemoryStore, data: VectorData, plan: QueryPlan, label: str, budget_s: float) -> dict[str, Any]:
    """Latency and recall@10 of ``store.vector_search`` in every cell of the plan."""
    out: dict[str, Any] = {}
    with Progress(label, len(plan.cells)) as bar:
        for cell in plan.cells:

            def query(i: int, c: Cell = cell) -> list[int]:
                hits = store.vector_search(data.queries[c.query_rows[i]], scope_filter(c.scopes[i]), K)
                return [row_of(h.record.record_id) for h in hits]

            lat, found = timed_loop(query, len(cell), budget_s=budget_s)
            out[cell.key] = _cell_stats(lat, found, cell)
            bar.advance()
    return out


def run_backend(
    name: str,
    data: VectorData,
    records: Sequence[NewRecord],
    plan: QueryPlan,
    workdir: Path,
    *,
    batch_size: int,
    budget_s: float,
    uri: str | None = None,
    keep_open: bool = False,
) -> tuple[dict[str, Any], MemoryStore | None]:
    """Measure one backend; returns (result, the reopened store when ``keep_open``)."""
    result: dict[str, Any] = {"backend": name, "raw_engine": RAW_ENGINE_OF.get(name, "numpy")}
    if (workdir / name).exists():
        shutil.rmtree(workdir / name)
    try:
        store, location = make_store(name, workdir, uri or bulk_load_uri(name, workdir))
    except Exception as exc:  # noqa: BLE001 - an uninstallable backend is reported, not fatal
        hint = "" if uri else f"; a server backend needs --backend-uri {name}=URI"
        result.update(available=False, reason=f"{type(exc).__name__}: {exc}{hint}")
        note(f"backend {name}: unavailable ({result['reason']})")
        return result, None
    result["uri"] = location
    n, dim = data.vectors.shape
    result["ingest_bulk_add"] = bulk_ingest(name, records, dim, workdir, len(records), uri)
    before = settle()
    t0 = time.perf_counter()
    store.open(dimension=dim, schema_policy=SchemaPolicy.RECREATE)
    result["open_s"] = time.perf_counter() - t0
    caps = store.capabilities()
    result["capabilities"] = sorted(c.value for c in caps)
    result["min_recall_at_10"] = store.min_recall_at_10
    seconds = 0.0
    with Progress(f"{name} ingest (WriteBatch x{batch_size})", n) as bar:
        for chunk in batches(records, batch_size):
            batch = WriteBatch(add=list(chunk))
            t0 = time.perf_counter()
            store.write(batch)
            seconds += time.perf_counter() - t0
            bar.advance(len(chunk))
    result["ingest"] = {"seconds": seconds, "rows_per_s": n / seconds if seconds else None, "batch_size": batch_size}
    # deferred or background index builds: search cells measure the settled store
    settle_indexes = getattr(store, "build_indexes", None) or getattr(store, "wait_for_indexes", None)
    if callable(settle_indexes):
        t0 = time.perf_counter()
        settle_indexes()
        result["index_wait_s"] = time.perf_counter() - t0
    # the first queries pay for deferred work (index builds, caches)
    t0 = time.perf_counter()
    store.vector_search(data.queries[0], RecordFilter(), K)
    result["first_query_s"] = time.perf_counter() - t0
    scoped_one = next(c for c in plan.cells if c.scoped)
    t0 = time.perf_counter()
    store.vector_search(data.queries[1], scope_filter(scoped_one.scopes[0]), K)
    result["first_scoped_query_s"] = time.perf_counter() - t0
    result["cells"] = search_cells(store, data, plan, f"{name} vector_search", budget_s)
    if Capability.KEYWORD_SEARCH in caps:
        result["keyword"] = keyword_cells(store, data, plan, budget_s=min(budget_s, 5.0))
    result["rss_delta_bytes"] = rss_bytes() - before
    result["count_ok"] = store.count(RecordFilter()) == n
    store.close()
    result["file_bytes"] = dir_size(workdir / name) if location else None
    if Capability.PERSISTENCE in caps and location:
        settle()
        again = reopen_store(name, location, workdir)
        t0 = time.perf_counter()
        again.open(dimension=dim, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
        open_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        again.vector_search(data.queries[2], RecordFilter(), K)
        first_s = time.perf_counter() - t0
        lat, _ = timed_loop(
            lambda i: again.vector_search(data.queries[3 + i % 50], RecordFilter(), K), 20, budget_s=2.0, warmup=0
        )
        result["reopen"] = {
            "open_s": open_s,
            "first_query_s": first_s,
            "after_reopen_p50_ms": lat.pct(50),
            "count_ok": again.count(RecordFilter()) == n,
        }
        if keep_open:
            return result, again
        again.close()
        return result, None
    result["reopen"] = None
    if keep_open:
        store.open(dimension=dim)
        return result, store
    return result, None


def keyword_cells(store: MemoryStore, data: VectorData, plan: QueryPlan, *, budget_s: float) -> dict[str, Any]:
    """BM25-style ``keyword_search`` latency: unscoped and at 1 % selectivity (2–3 mid-frequency terms)."""
    texts = keyword_queries(50, data.seed)
    out: dict[str, Any] = {}
    cells = {c.key: c for c in plan.cells}
    for key in ("scoped_1%", "unscoped"):
        cell = cells.get(key)
        if cell is None:
            continue

        def query(i: int, c: Cell = cell) -> int:
            return len(store.keyword_search(texts[i % len(texts)], scope_filter(c.scopes[i]), K))

        lat, counts = timed_loop(query, min(len(cell), 50), budget_s=budget_s)
        out[key] = {**lat.summary(), "mean_hits": float(np.mean(counts)) if counts else None}
    return out
