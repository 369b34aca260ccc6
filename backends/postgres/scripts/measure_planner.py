"""Measure the vector planner's two paths by scope size on one server: the exact scan against the
HNSW index (iterative scan), each end to end through ``PostgresStore.vector_search``.

One store of ``--n`` clustered vectors (the speed suite's generator, ``agentmemory_bench.data``)
holds one user per measured scope size (the rest are small tail users). Two store instances over
the same schema differ only in ``exact_max_rows`` (0: always the index; huge: always exact), and
for every size their queries alternate (A B A B …) so load on a shared machine weighs on both
alike. Prints a Markdown table and writes the figures as JSON (``--out``).

    python backends/postgres/scripts/measure_planner.py --n 100000 --out planner.json
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from agentmemory_bench.data import generate_vectors
from agentmemory_postgres import PostgresStore
from agentmemory_postgres import _sql as q
from agentmemory_postgres._server import server_dsn

from agentmemory.records import Record, RecordType
from agentmemory.spi import NewRecord, RecordFilter, WriteBatch

SIZES = (100, 300, 1000, 2000, 3000, 5000, 10000, 20000, 50000)
K = 10
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _users(n: int, sizes: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    labels: list[str] = []
    for size in sizes:
        labels += [f"s{size:06d}"] * size
    if len(labels) > n:
        raise SystemExit(f"--n {n} is smaller than the scopes ({len(labels)} rows)")
    labels += [f"tail{i // 50:05d}" for i in range(n - len(labels))]
    users = np.array(labels, dtype=object)
    rng.shuffle(users)
    return users


def _p(values: list[float], pct: float) -> float:
    return float(np.percentile(np.asarray(values), pct)) * 1000.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=40, help="queries per scope size and path")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))
    data = generate_vectors(args.n, dim=args.dim, n_queries=args.queries * 2, seed=3)
    users = _users(args.n, sizes, np.random.default_rng(4))
    schema = f"am_planner_{secrets.token_hex(3)}"
    dsn = server_dsn()
    build = PostgresStore(dsn, schema=schema, vector_engine="pgvector")
    build.open(dimension=args.dim)
    names = build._names  # noqa: SLF001 - a measurement script of this package
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {names.s}.am_records_hnsw")
    t0 = time.perf_counter()
    for start in range(0, args.n, 5000):
        stop = min(args.n, start + 5000)
        build.write(WriteBatch(add=[
            NewRecord(Record(record_id=f"r{i:07d}", record_type=RecordType.MESSAGE, content=f"m {i}", user_id=str(users[i]),
                             timestamp=T0, created_at=T0), data.vectors[i])
            for i in range(start, stop)
        ]))
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute(q.hnsw_statement(names))
        conn.execute(f"ANALYZE {names.records}")
    index_s = time.perf_counter() - t0
    build.close()
    hnsw = PostgresStore(dsn, schema=schema, exact_max_rows=0, exact_scale=0)
    exact = PostgresStore(dsn, schema=schema, exact_max_rows=10**9, exact_scale=0)
    hnsw.open(dimension=args.dim)
    exact.open(dimension=args.dim)
    rows: list[dict[str, float | int]] = []
    try:
        for size in sizes:
            scope = f"s{size:06d}"
            member = np.flatnonzero(users == scope)
            flt = RecordFilter(user_id=scope)
            lat: dict[str, list[float]] = {"exact": [], "hnsw": []}
            recall: dict[str, list[float]] = {"exact": [], "hnsw": []}
            for j in range(args.queries):
                qv = data.queries[j]
                scores = data.vectors[member] @ qv
                truth = {f"r{int(member[i]):07d}" for i in np.argsort(-scores)[:K]}
                for name, store in (("exact", exact), ("hnsw", hnsw)) if j % 2 == 0 else (("hnsw", hnsw), ("exact", exact)):
                    t = time.perf_counter()
                    hits = store.vector_search(qv, flt, K)
                    lat[name].append(time.perf_counter() - t)
                    recall[name].append(len(truth & {h.record.record_id for h in hits}) / K)
            row: dict[str, float | int] = {"scope_rows": size}
            for name in ("exact", "hnsw"):
                row[f"{name}_p50_ms"] = _p(lat[name][2:], 50)
                row[f"{name}_p95_ms"] = _p(lat[name][2:], 95)
                row[f"{name}_recall"] = float(np.mean(recall[name]))
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        hnsw.close()
        exact.close()
        hnsw.drop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {
        "n": args.n, "dim": args.dim, "queries": args.queries, "k": K, "commit": commit,
        "date": datetime.now(timezone.utc).isoformat(timespec="minutes"), "load_avg": os.getloadavg(),
        "load_s": load_s, "index_build_s": index_s, "rows": rows,
    }
    print(f"\nn = {args.n} x {args.dim}-d, {args.queries} queries per size and path, commit {commit}, {out['date']}")
    print("| scope rows | exact p50 ms | HNSW p50 ms | exact ÷ HNSW | HNSW recall@10 |")
    print("|---|---|---|---|---|")
    for r in rows:
        ratio = float(r["exact_p50_ms"]) / float(r["hnsw_p50_ms"])
        print(f"| {r['scope_rows']:,} | {r['exact_p50_ms']:.2f} | {r['hnsw_p50_ms']:.2f} | {ratio:.2f} | {r['hnsw_recall']:.3f} |")
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
