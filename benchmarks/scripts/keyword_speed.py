"""Keyword vs vector search latency at scale, side by side in one run (a measurement, not a test).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/keyword_speed.py \
        --n 100000 --backends duckdb,hnswlib [--queries 200] [--keep /tmp/kwbench] [--profile]

Builds a store per backend with ``--n`` chat-like records (bulk_add, precomputed random unit
vectors: no embedder), then, on DuckDB, ``build_indexes()``. Texts: 4–40 words per message, a
third of them stop words, the rest drawn from a 30,000-word synthetic vocabulary with a Zipf
(s = 1.1) distribution, so common words have long posting lists and rare ones short. Scopes:
100 users (lognormal sizes) with 1–20 threads each, one agent. Queries: 1–4 content words drawn
from the same Zipf distribution, plus a stop word half the time.

Prints a table per backend: p50/p95 ms of ``vector_search`` and ``keyword_search`` at k = 10
and 50, for a filter scoped to a user, to a thread (user + thread, as the framework's thread
searches) and unscoped, and each p50 as a ratio to the vector-search p50 in the same scope
and k. ``--json PATH`` writes every number. ``--keep DIR`` keeps the stores (reopened on the
next run with the same ``--n``; ``--rebuild`` starts over).
``--profile`` prints a pyinstrument profile of user-scoped keyword search per backend
(``pip install pyinstrument``).
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
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from agentmemory.analysis import SNOWBALL_ENGLISH_STOP_WORDS
from agentmemory.bulk import RecordColumns
from agentmemory.records import RecordType
from agentmemory.spi import MemoryStore, RecordFilter

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
DIM = 384
VOCAB = 30_000
STOP = [w for w in SNOWBALL_ENGLISH_STOP_WORDS if "'" not in w]


def _vocabulary(rng: np.random.Generator) -> list[str]:
    """``VOCAB`` distinct pronounceable pseudo-words (2–4 syllables), some with digits."""
    onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "th", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "oo", "ou"]
    codas = ["", "", "n", "r", "s", "t", "l", "m", "ck", "nd"]
    words: set[str] = set()
    while len(words) < VOCAB:
        word = "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.integers(2, 5)))
        if rng.random() < 0.03:
            word += str(rng.integers(10, 9999))
        words.add(word)
    return sorted(words)


def _zipf_p(n: int, s: float = 1.1) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def corpus(n: int, seed: int = 0) -> dict[str, Any]:
    """Texts, scopes and unit vectors of ``n`` records, and the query generator's inputs."""
    rng = np.random.default_rng(seed)
    vocab = np.array(_vocabulary(rng))
    rng.shuffle(vocab)
    p = _zipf_p(len(vocab))
    lengths = rng.integers(4, 41, n)
    words = vocab[rng.choice(len(vocab), int(lengths.sum()), p=p)]
    stops = np.array(STOP)[rng.integers(0, len(STOP), int(lengths.sum()))]
    is_stop = rng.random(int(lengths.sum())) < 0.33
    tokens = np.where(is_stop, stops, words)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    texts = [" ".join(tokens[bounds[i]:bounds[i + 1]]) for i in range(n)]
    user_w = rng.lognormal(0, 1, 100)
    users = rng.choice(100, n, p=user_w / user_w.sum())
    threads_per_user = rng.integers(1, 21, 100)
    threads = (rng.random(n) * threads_per_user[users]).astype(int)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return {"texts": texts, "users": users, "threads": threads, "vectors": vectors, "vocab": vocab, "p": p}


def columns(data: dict[str, Any]) -> RecordColumns:
    n = len(data["texts"])
    return RecordColumns(
        record_id=[f"r{i:07d}" for i in range(n)],
        content=data["texts"],
        record_type=RecordType.MESSAGE,
        timestamp=[T0 + timedelta(seconds=i) for i in range(n)],
        user_id=[f"user{u}" for u in data["users"]],
        agent_id="agent",
        thread_id=[f"user{u}-t{t}" for u, t in zip(data["users"], data["threads"])],
        role=["user" if i % 2 else "assistant" for i in range(n)],
        vectors=data["vectors"],
    )


def queries(data: dict[str, Any], count: int, seed: int = 1) -> list[dict[str, Any]]:
    """``count`` queries: text, vector and the scope (user, thread) of a random record."""
    rng = np.random.default_rng(seed)
    n = len(data["texts"])
    out = []
    for _ in range(count):
        words = list(data["vocab"][rng.choice(len(data["vocab"]), rng.integers(1, 5), p=data["p"])])
        if rng.random() < 0.5:
            words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(STOP)))
        vec = rng.standard_normal(DIM).astype(np.float32)
        i = int(rng.integers(0, n))
        u, t = int(data["users"][i]), int(data["threads"][i])
        out.append({"text": " ".join(words), "vector": vec / np.linalg.norm(vec),
                    "user": f"user{u}", "thread": f"user{u}-t{t}"})
    return out


SCOPES: dict[str, Callable[[dict[str, Any]], RecordFilter]] = {
    "user": lambda q: RecordFilter(user_id=q["user"]),
    "thread": lambda q: RecordFilter(user_id=q["user"], thread_id=q["thread"]),
    "unscoped": lambda q: RecordFilter(),
}


def open_store(backend: str, path: Path, fresh: bool) -> MemoryStore:
    if backend == "duckdb":
        from agentmemory_duckdb import DuckDBStore

        store: MemoryStore = DuckDBStore(path / "store.duckdb", auto_index=False)
    elif backend == "hnswlib":
        from agentmemory_hnswlib import HnswlibStore

        store = HnswlibStore(path / "hnswlib", synchronous="normal")
    else:
        raise SystemExit(f"unknown backend {backend!r}")
    store.open(dimension=DIM, schema_policy="recreate" if fresh else "create_if_necessary")
    return store


def time_calls(call: Callable[[dict[str, Any]], Any], qs: list[dict[str, Any]]) -> dict[str, float]:
    for q in qs[:5]:  # warm-up
        call(q)
    times = []
    for q in qs:
        t = time.perf_counter()
        call(q)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return {"p50": statistics.median(times), "p95": times[int(0.95 * (len(times) - 1))]}


def measure(backend: str, data: dict[str, Any], qs: list[dict[str, Any]], root: Path, rebuild: bool, profile: bool) -> dict[str, Any]:
    path = root / backend
    n = len(data["texts"])
    stamp = path / f"built-{n}"
    fresh = rebuild or not stamp.exists()
    if fresh and path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    store = open_store(backend, path, fresh)
    result: dict[str, Any] = {"backend": backend, "n": n}
    try:
        if fresh:
            store.bulk_add(columns(data))
            result["ingest_s"] = round(time.perf_counter() - t, 2)
        if backend == "duckdb":
            t = time.perf_counter()
            store.build_indexes(force=fresh)  # type: ignore[attr-defined]
            result["build_indexes_s"] = round(time.perf_counter() - t, 2)
        stamp.touch()
        rows: dict[str, Any] = {}
        for scope, flt in SCOPES.items():
            for k in (10, 50):
                vec = time_calls(lambda q, f=flt, k=k: store.vector_search(q["vector"], f(q), k), qs)
                kw = time_calls(lambda q, f=flt, k=k: store.keyword_search(q["text"], f(q), k), qs)
                rows[f"{scope} k={k}"] = {"vector": vec, "keyword": kw, "ratio": kw["p50"] / vec["p50"]}
        result["rows"] = rows
        # hits per query (user scope, k=50): how much work a query has
        result["mean_hits_user_k50"] = statistics.mean(len(store.keyword_search(q["text"], RecordFilter(user_id=q["user"]), 50)) for q in qs)
        if profile:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0002)
            profiler.start()
            for _ in range(3):
                for q in qs:
                    store.keyword_search(q["text"], RecordFilter(user_id=q["user"]), 10)
            profiler.stop()
            print(profiler.output_text(unicode=False, color=False, show_all=False), file=sys.stderr)
    finally:
        store.close()
    return result


def table(result: dict[str, Any]) -> str:
    lines = [f"### {result['backend']} — {result['n']:,} records",
             "", "| scope, k | vector p50 / p95 ms | keyword p50 / p95 ms | keyword p50 ÷ vector p50 |",
             "|---|---|---|---|"]
    for name, row in result["rows"].items():
        v, kw = row["vector"], row["keyword"]
        lines.append(f"| {name} | {v['p50']:.2f} / {v['p95']:.2f} | {kw['p50']:.2f} / {kw['p95']:.2f} | {row['ratio']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--backends", default="duckdb,hnswlib")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="directory to keep (and reuse) the stores in")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    t = time.perf_counter()
    data = corpus(args.n)
    qs = queries(data, args.queries)
    print(f"corpus: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    root = args.keep or Path(tempfile.mkdtemp(prefix="kwbench-"))
    results = []
    try:
        for backend in args.backends.split(","):
            result = measure(backend.strip(), data, qs, root, args.rebuild, args.profile)
            results.append(result)
            print(table(result), "\n", flush=True)
            print({k: v for k, v in result.items() if k not in ("rows",)}, "\n", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main()
