"""Measure the DuckDB backend against raw DuckDB in the same run (not a test; see README).

    python backends/duckdb/scripts/measure.py --n 10000 [--dim 384] [--queries 50]

Prints JSON: ingest rows/s (``write`` and ``bulk_add`` vs raw Arrow inserts of the same rows),
index build seconds, vector search
p50 ms and recall@10 per selectivity (store vs raw DuckDB HNSW / exact), keyword search p50 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from agentmemory_duckdb import DuckDBStore
from agentmemory_duckdb._sql import vector_literal

from agentmemory.bulk import RecordColumns
from agentmemory.records import Record, RecordType
from agentmemory.spi import ANY, NewRecord, RecordFilter, WriteBatch

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
WORDS = [f"w{i}" for i in range(3000)]


def data(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Clustered unit vectors (1,000 clusters in a 64-d latent space mapped to ``dim``)."""
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((1000, 64)).astype(np.float32)
    weights = rng.lognormal(0, 1, 1000)
    labels = rng.choice(1000, n, p=weights / weights.sum())
    z = latent[labels] + rng.uniform(0.35, 0.8, (n, 1)).astype(np.float32) * rng.standard_normal((n, 64)).astype(np.float32)
    x = z @ rng.standard_normal((64, dim)).astype(np.float32) + 0.25 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def raw_inserts(con: Any, base: np.ndarray, users: np.ndarray, batch: int) -> dict[str, int]:
    """Raw DuckDB Arrow inserts on the store's connection (same settings), rows/s: the same
    rows the store wrote (every column, read back as one Arrow table, so building it costs the
    raw side nothing) into a plain table without constraints, in one INSERT and in ``batch``-row
    INSERTs; and a minimal (id, user, vector) table ``raw`` in one INSERT (kept for the exact
    scoped-search baseline)."""
    n, dim = base.shape
    same = con.execute("SELECT * FROM am_records ORDER BY seq").fetch_arrow_table()
    minimal = pa.table({"rid": [f"r{i:07d}" for i in range(n)], "u": users,
                        "vec": pa.FixedSizeListArray.from_arrays(pa.array(base.ravel()), dim)})
    result: dict[str, int] = {}
    for label, table, name, ddl, step in (
        ("same_rows_one_insert", same, "raw_same", "AS SELECT * FROM am_records LIMIT 0", n),
        ("same_rows_batched", same, "raw_same_batched", "AS SELECT * FROM am_records LIMIT 0", batch),
        ("id_user_vector_one_insert", minimal, "raw", f"(rid VARCHAR, u BIGINT, vec FLOAT[{dim}])", n),
    ):
        con.execute(f"CREATE TABLE {name} {ddl}")
        t = time.perf_counter()
        for start in range(0, n, step):
            con.register("raw_arrow", table.slice(start, step))
            con.execute(f"INSERT INTO {name} SELECT * FROM raw_arrow")
            con.unregister("raw_arrow")
        result[label] = round(n / (time.perf_counter() - t))
    con.execute("DROP TABLE raw_same")
    con.execute("DROP TABLE raw_same_batched")
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--batch", type=int, default=10_000, help="records per write() call")
    args = ap.parse_args()
    n, dim = args.n, args.dim
    rng = np.random.default_rng(1)
    vectors = data(n + args.queries, dim)
    base, queries = vectors[:n], vectors[n:]
    users = rng.integers(0, 1000, n)  # user_id = "u<k>": 0.1% each
    zipf = rng.zipf(1.3, (n, 12)) % len(WORDS)
    texts = [" ".join(WORDS[j] for j in row) for row in zipf]
    records = [
        NewRecord(Record(record_id=f"r{i:07d}", content=texts[i], user_id=f"u{users[i]:03d}",
                         agent_id=f"a{users[i] % 100:02d}", thread_id=f"t{users[i] % 10}", timestamp=T0, created_at=T0,
                         metadata={"g": int(users[i] % 20)}, record_type=RecordType.FACT if users[i] % 4 == 1 else RecordType.MEMORY), base[i])
        for i in range(n)
    ]
    out: dict[str, Any] = {"n": n, "dim": dim}
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = DuckDBStore(Path(tmp) / "m.duckdb", auto_index=False)
        store.open(dimension=dim)
        t = time.perf_counter()
        for start in range(0, n, args.batch):
            store.write(WriteBatch(add=records[start:start + args.batch]))
        out["ingest_rows_per_s"] = round(n / (time.perf_counter() - t))
        out["ingest_batch"] = args.batch
        columns = [
            RecordColumns(
                record_id=[item.record.record_id for item in records[start:start + args.batch]],
                content=[item.record.content for item in records[start:start + args.batch]],
                record_type=[item.record.record_type for item in records[start:start + args.batch]],
                timestamp=T0,
                user_id=[item.record.user_id for item in records[start:start + args.batch]],
                agent_id=[item.record.agent_id for item in records[start:start + args.batch]],
                thread_id=[item.record.thread_id for item in records[start:start + args.batch]],
                metadata=[item.record.metadata for item in records[start:start + args.batch]],
                vectors=base[start:start + args.batch],
            )
            for start in range(0, n, args.batch)
        ]
        bulk = DuckDBStore(Path(tmp) / "bulk.duckdb", auto_index=False)
        bulk.open(dimension=dim)
        t = time.perf_counter()
        for cols in columns:
            bulk.bulk_add(cols)
        out["bulk_add_rows_per_s"] = round(n / (time.perf_counter() - t))
        bulk.close()
        con = store._conn()
        raw = out["raw_arrow_insert"] = raw_inserts(con, base, users, args.batch)
        out["ratios"] = {
            "write_vs_same_rows_batched": round(raw["same_rows_batched"] / out["ingest_rows_per_s"], 2),
            "write_vs_same_rows_one_insert": round(raw["same_rows_one_insert"] / out["ingest_rows_per_s"], 2),
            "bulk_add_vs_same_rows_one_insert": round(raw["same_rows_one_insert"] / out["bulk_add_rows_per_s"], 2),
            "bulk_add_vs_same_rows_batched": round(raw["same_rows_batched"] / out["bulk_add_rows_per_s"], 2),
        }
        t = time.perf_counter()
        store.build_indexes()
        out["build_indexes_s"] = round(time.perf_counter() - t, 2)
        assert store._vidx is not None
        table = store._vidx.table

        def p50(fn: Any) -> float:
            times = []
            for q in queries:
                t0 = time.perf_counter()
                fn(q)
                times.append((time.perf_counter() - t0) * 1000)
            return round(statistics.median(times), 2)

        def truth(mask: np.ndarray, q: np.ndarray) -> set[int]:
            idx = np.flatnonzero(mask)
            return set(idx[np.argsort(1 - base[idx] @ q, kind="stable")[:10]].tolist())

        cases = {
            "0.1%": (RecordFilter(user_id="u007"), users == 7),
            "1%": (RecordFilter(agent_id="a07"), users % 100 == 7),
            "5%": (RecordFilter(agent_id=ANY, metadata_filter={"g": 3}), users % 20 == 3),
            "10%": (RecordFilter(thread_id="t7"), users % 10 == 7),
            "25%": (RecordFilter(record_types=frozenset({RecordType.FACT})), users % 4 == 1),
            "100%": (RecordFilter(), np.ones(n, dtype=bool)),
        }
        search: dict[str, Any] = {}
        for label, (flt, mask) in cases.items():
            store.vector_search(queries[0], flt, 10)
            ms = p50(lambda q, flt=flt: store.vector_search(q, flt, 10))
            found = sum(len({int(h.record.record_id[1:]) for h in store.vector_search(q, flt, 10)} & truth(mask, q)) for q in queries)
            wanted = sum(len(truth(mask, q)) for q in queries)
            plan = store.last_plan
            search[label] = {"p50_ms": ms, "recall@10": round(found / wanted, 4), "strategy": plan.strategy if plan else None,
                             "matching": plan.matching if plan else None, "fetch": plan.fetch if plan else None}
            for forced in ("exact", "index"):  # both strategies, for the planner's cost model
                store._planner, store._max_fetch, store._exact_max_rows = forced, 10_000_000, 0
                search[label][f"{forced}_p50_ms"] = p50(lambda q, flt=flt: store.vector_search(q, flt, 10))
                search[label][f"{forced}_recall@10"] = round(sum(
                    len({int(h.record.record_id[1:]) for h in store.vector_search(q, flt, 10)} & truth(mask, q)) for q in queries
                ) / wanted, 4)
                search[label][f"{forced}_used"] = store.last_plan.strategy if store.last_plan else None
            store._planner, store._max_fetch, store._exact_max_rows = "auto", 4_000, 2_000
        con.execute("SET hnsw_ef_search = 64")
        store._ef_current = 64  # the raw query below runs at DuckDB's default ef
        raw_ms = p50(lambda q: con.execute(f"SELECT rid FROM {table} ORDER BY array_cosine_distance(vec, ?::FLOAT[{dim}]) LIMIT 10", [vector_literal(q)]).fetchall())
        raw_found = sum(
            len({int(r[1:]) for (r,) in con.execute(f"SELECT rid FROM {table} ORDER BY array_cosine_distance(vec, ?::FLOAT[{dim}]) LIMIT 10", [vector_literal(q)]).fetchall()} & truth(np.ones(n, dtype=bool), q))
            for q in queries
        )
        search["raw_hnsw_ef64_unfiltered"] = {"p50_ms": raw_ms, "recall@10": round(raw_found / (10 * len(queries)), 4)}
        search["raw_exact_0.1%"] = {"p50_ms": p50(lambda q: con.execute(f"SELECT rid FROM raw WHERE u = 7 ORDER BY array_cosine_distance(vec, ?::FLOAT[{dim}]) LIMIT 10", [vector_literal(q)]).fetchall())}
        out["vector_search"] = search
        kw = [" ".join(WORDS[j] for j in rng.integers(20, 400, 2)) for _ in range(args.queries)]
        it = iter(kw * 2)
        out["keyword_p50_ms"] = {
            "unscoped": p50(lambda q: store.keyword_search(next(it), RecordFilter(), 10)),
            "scoped_0.1%": p50(lambda q: store.keyword_search(next(it), RecordFilter(user_id="u007"), 10)),
        }
        store.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
