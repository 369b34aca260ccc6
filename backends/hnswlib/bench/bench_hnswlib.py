"""Measure HnswlibStore against raw hnswlib in one run: ingest, unscoped and scoped search
latency and recall@10 by selectivity, close and reopen time.

Usage (single-threaded BLAS keeps latencies honest on a shared machine):

    OPENBLAS_NUM_THREADS=1 python backends/hnswlib/bench/bench_hnswlib.py --n 100000 --out r.json

Data: a mixture of Gaussian clusters in a 64-d latent space mapped to ``--dim`` dimensions with
noise and a shared offset (mean random-pair cosine about 0.1, like sentence embeddings). Scope
fields are drawn independently of the vectors so each filter keeps a known share of the rows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
from agentmemory_hnswlib import HnswlibStore

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, RecordFilter, WriteBatch

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
K = 10


def make_vectors(n: int, dim: int, seed: int = 0, clusters: int = 1000) -> np.ndarray:
    """Clustered unit vectors (see the module docstring)."""
    rng = np.random.default_rng(seed)
    latent = 64
    centres = rng.normal(size=(clusters, latent)).astype(np.float32)
    weights = rng.lognormal(size=clusters)
    which = rng.choice(clusters, size=n, p=weights / weights.sum())
    spread = rng.uniform(0.35, 0.8, size=clusters).astype(np.float32)
    x = centres[which] + rng.normal(size=(n, latent)).astype(np.float32) * spread[which, None]
    mapping = rng.normal(size=(latent, dim)).astype(np.float32) / np.sqrt(latent)
    v = x @ mapping + rng.normal(size=(n, dim)).astype(np.float32) * 0.25 + 0.35
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v.astype(np.float32)


def make_scopes(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Independent scope columns: user (0.1/1/2/5%), agent (10/20%), thread (50%)."""
    rng = np.random.default_rng(seed)
    return {
        "user": rng.choice(["u0.1", "u1", "u2", "u5", "urest"], size=n, p=[0.001, 0.01, 0.02, 0.05, 0.919]),
        "agent": rng.choice(["a10", "a20", "arest"], size=n, p=[0.1, 0.2, 0.7]),
        "thread": rng.choice(["t50", "trest"], size=n, p=[0.5, 0.5]),
    }


SCOPES: dict[str, tuple[RecordFilter, Callable[[dict[str, np.ndarray]], np.ndarray]]] = {
    "0.1%": (RecordFilter(user_id="u0.1"), lambda s: s["user"] == "u0.1"),
    "1%": (RecordFilter(user_id="u1"), lambda s: s["user"] == "u1"),
    "2%": (RecordFilter(user_id="u2"), lambda s: s["user"] == "u2"),
    "5%": (RecordFilter(user_id="u5"), lambda s: s["user"] == "u5"),
    "10%": (RecordFilter(agent_id="a10"), lambda s: s["agent"] == "a10"),
    "20%": (RecordFilter(agent_id="a20"), lambda s: s["agent"] == "a20"),
    "50%": (RecordFilter(thread_id="t50"), lambda s: s["thread"] == "t50"),
    "100% (alive_at)": (RecordFilter(alive_at=T0), lambda s: np.ones(len(s["user"]), bool)),
    "100% (no filter)": (RecordFilter(), lambda s: np.ones(len(s["user"]), bool)),
}


def ground_truth(vectors: np.ndarray, queries: np.ndarray, mask: np.ndarray) -> list[set[int]]:
    """Exact filtered top-10 row numbers per query."""
    rows = np.flatnonzero(mask)
    out: list[set[int]] = []
    for start in range(0, len(queries), 100):
        sims = queries[start : start + 100] @ vectors[rows].T
        k = min(K, len(rows))
        top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        out.extend({int(rows[j]) for j in row} for row in top)
    return out


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e3, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--batch", type=int, default=1000, help="records per write batch")
    parser.add_argument("--M", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=200)
    parser.add_argument("--ef", type=int, default=128, help="ef_search for both raw hnswlib and the store")
    parser.add_argument("--dir", type=Path, default=None, help="where the store lives (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    n, dim = args.n, args.dim
    result: dict[str, Any] = {
        "n": n, "dim": dim, "queries": args.queries, "M": args.M, "ef_construction": args.ef_construction,
        "ef_search": args.ef, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
        "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
    }
    data = make_vectors(n + args.queries, dim)
    vectors, queries = data[:n], data[n:]
    scopes = make_scopes(n)
    log = lambda *a: print(*a, file=sys.stderr, flush=True)  # noqa: E731

    # ---- ingest: raw hnswlib and the store, batch by batch, interleaved --------------------
    # Interleaving makes the ratio robust to load changes on a shared machine: both see the
    # same conditions. Raw = add_items of the same batches into a plain index.
    path = args.dir or Path(tempfile.mkdtemp(prefix="hnswbench-")) / "store"
    if path.exists():
        shutil.rmtree(path)
    t = time.perf_counter()
    records = [
        Record(
            record_id=f"r{i:07d}", record_type=RecordType.MEMORY, content=f"memory number {i} about topic {i % 97}",
            user_id=str(scopes["user"][i]), agent_id=str(scopes["agent"][i]), thread_id=str(scopes["thread"][i]),
            timestamp=T0, created_at=T0,
        )
        for i in range(n)
    ]
    result["build_records_s"] = round(time.perf_counter() - t, 3)
    raw = hnswlib.Index(space="cosine", dim=dim)
    raw.init_index(max_elements=n, M=args.M, ef_construction=args.ef_construction)
    store = HnswlibStore(path, M=args.M, ef_construction=args.ef_construction, ef_search=args.ef)
    store.open(dimension=dim)
    raw_s = store_s = 0.0
    for start in range(0, n, args.batch):
        stop = min(n, start + args.batch)
        t = time.perf_counter()
        raw.add_items(vectors[start:stop], np.arange(start, stop))
        raw_s += time.perf_counter() - t
        batch = WriteBatch(add=[NewRecord(records[i], vectors[i]) for i in range(start, stop)])
        t = time.perf_counter()
        store.write(batch)
        store_s += time.perf_counter() - t
    result["raw_add_items_s"] = round(raw_s, 3)
    result["store_ingest_s"] = round(store_s, 3)
    result["ingest_ratio_vs_raw"] = round(store_s / raw_s, 3)
    log("ingest raw", raw_s, "store", store_s, "ratio", result["ingest_ratio_vs_raw"])
    raw.set_ef(args.ef)
    truth_all = ground_truth(vectors, queries, np.ones(n, bool))
    lat, found = [], 0
    for i, q in enumerate(queries):
        t = time.perf_counter()
        labels, _ = raw.knn_query(q, k=K, num_threads=1)
        lat.append(time.perf_counter() - t)
        found += len(truth_all[i] & set(labels[0].tolist()))
    result["raw_knn_p50_ms"] = p50_ms(lat)
    result["raw_recall_at_10"] = round(found / (K * len(queries)), 4)
    del raw

    # ---- the store: search by selectivity ---------------------------------------------------
    by_scope: dict[str, Any] = {}
    for name, (flt, select) in SCOPES.items():
        mask = select(scopes)
        truth = truth_all if mask.all() else ground_truth(vectors, queries, mask)
        store.plan_counts.clear()
        lat, found, total = [], 0, 0
        for i, q in enumerate(queries):
            t = time.perf_counter()
            hits = store.vector_search(q, flt, K)
            lat.append(time.perf_counter() - t)
            got = {int(h.record.record_id[1:]) for h in hits}
            found += len(truth[i] & got)
            total += len(truth[i])
        by_scope[name] = {
            "rows": int(mask.sum()), "p50_ms": p50_ms(lat), "p95_ms": round(float(np.percentile(lat, 95)) * 1e3, 4),
            "recall_at_10": round(found / total, 4), "plans": dict(store.plan_counts),
        }
        log(name, by_scope[name])
    result["scoped"] = by_scope
    result["unscoped_ratio_vs_raw_knn"] = round(by_scope["100% (no filter)"]["p50_ms"] / result["raw_knn_p50_ms"], 3)
    result["unscoped_alive_at_ratio_vs_raw_knn"] = round(by_scope["100% (alive_at)"]["p50_ms"] / result["raw_knn_p50_ms"], 3)

    # ---- keyword search ---------------------------------------------------------------------
    lat = []
    for i in range(50):
        t = time.perf_counter()
        store.keyword_search(f"topic {i % 97}", RecordFilter(user_id="u1"), K)
        lat.append(time.perf_counter() - t)
    result["keyword_p50_ms"] = p50_ms(lat)

    # ---- close and reopen -------------------------------------------------------------------
    t = time.perf_counter()
    store.close()
    result["close_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    store = HnswlibStore(path, M=args.M, ef_construction=args.ef_construction, ef_search=args.ef)
    store.open(dimension=dim)
    result["reopen_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    store.vector_search(queries[0], RecordFilter(user_id="u1"), K)
    result["first_query_after_reopen_ms"] = round((time.perf_counter() - t) * 1e3, 3)
    result["reopen_reconcile"] = vars(store.last_reconcile)
    store.close()
    result["files_mb"] = {f.name: round(f.stat().st_size / 1e6, 1) for f in sorted(path.iterdir())}
    result["loadavg_end"] = os.getloadavg()
    if args.dir is None:
        shutil.rmtree(path.parent)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
