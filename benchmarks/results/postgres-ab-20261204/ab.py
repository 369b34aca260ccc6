"""A/B: variants of the postgres backend (package snapshots) side by side with raw pgvector on one
store, queries interleaved (rotating order), p50 per cell and ratio to raw."""
import sys, time, importlib, argparse, statistics, json
sys.path.insert(0, "/tmp/ab")
from common import *
from agentmemory.spi import RecordFilter
sys.path.insert(0, "/work/main/benchmarks")
from agentmemory_bench.raw import _pg_connect
from agentmemory_bench.data import recall_at_k

ap = argparse.ArgumentParser()
ap.add_argument("--n", type=int, default=10000)
ap.add_argument("--q", type=int, default=60)
ap.add_argument("--variants", default="old,new")
ap.add_argument("--rounds", type=int, default=1)
ap.add_argument("--out")
a = ap.parse_args()
data, plan = data_for(a.n, a.q)
schema, raw = f"ab{a.n//1000}k", f"raw{a.n//1000}k"
stores = {}
for v in a.variants.split(","):
    if v == "new":
        mod = importlib.import_module("agentmemory_postgres.store")
    else:
        sys.path.insert(0, f"/tmp/ab/{v}")
        mod = importlib.import_module(f"pg_{v}.store")
    s = mod.PostgresStore(DSN, schema=schema)
    s.open(dimension=data.dim)
    stores[v] = s
conn = _pg_connect(DSN)
conn.execute("SET hnsw.ef_search = 100"); conn.execute("SET hnsw.iterative_scan = relaxed_order")
def raw_q(cell, i):
    scope = cell.scopes[i]; qv = data.queries[cell.query_rows[i]]
    if scope is None:
        rows = conn.execute(f"SELECT id FROM {raw}.items ORDER BY v <=> %s LIMIT 10", [qv]).fetchall()
    else:
        col = "agent_id" if scope == AGENT_ID else "user_id"
        rows = conn.execute(f"SELECT id FROM {raw}.items WHERE {col} = %s ORDER BY v <=> %s LIMIT 10", [scope, qv]).fetchall()
    return [row_of(r) for (r,) in rows]
def store_q(s):
    def f(cell, i):
        hits = s.vector_search(data.queries[cell.query_rows[i]], scope_filter(cell.scopes[i]), K)
        return [row_of(h.record.record_id) for h in hits]
    return f
fns = {"raw": raw_q, **{v: store_q(s) for v, s in stores.items()}}
names = list(fns)
out = {}
for cell in plan.cells:
    lat = {n: [] for n in names}; rec = {n: [] for n in names}
    for n in names: fns[n](cell, 0)  # warm
    for r in range(a.rounds):
        for i in range(len(cell)):
            order = names[i % len(names):] + names[:i % len(names)]
            for n in order:
                t0 = time.perf_counter(); got = fns[n](cell, i); lat[n].append(time.perf_counter() - t0)
                if r == 0: rec[n].append(recall_at_k(got, cell.truth[i]))
    p50 = {n: statistics.median(lat[n]) * 1000 for n in names}
    out[cell.key] = {n: {"p50_ms": p50[n], "x_raw": p50[n] / p50["raw"], "recall": statistics.mean(rec[n])} for n in names}
    print(f"{cell.key:14s} " + "  ".join(f"{n}: {p50[n]:6.2f}ms ({p50[n]/p50['raw']:4.2f}x, r={statistics.mean(rec[n]):.3f})" for n in names), flush=True)
if a.out:
    json.dump({"n": a.n, "q": a.q, "rounds": a.rounds, "cells": out}, open(a.out, "w"), indent=1)
