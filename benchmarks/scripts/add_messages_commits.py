"""``add_messages`` of 2 messages (rule-based extraction) on a store of ``--size`` records, with the
core of two commits side by side, and one raw inserting DuckDB commit of the same rows (a
measurement, not a test; issue #31).

    git worktree add /tmp/am-old <old commit>; git worktree add /tmp/am-new <new commit>
    nice -n 5 .venv/bin/python benchmarks/scripts/add_messages_commits.py \\
        --old /tmp/am-old --new /tmp/am-new --size 100000 [--backends duckdb,hnswlib] [--json PATH]

For each backend it builds one store (``bulk_add`` of chat-like messages with 384-d vectors,
100 per thread, and one memory per 50 messages; with the ``--old`` checkout's code, so both
sides can open it) and copies it for each side, then times ``thread.add_messages`` of a
2-message turn (a user message the rule-based extractor turns into a memory, and a reply) in
child processes that import the core and the backend from ``--old`` or ``--new`` (its
``backends/<name>`` folder; ``--installed-backends`` keeps the installed ones, as before
2026-12-06), alternating old and new ``--rounds`` times, each side on its copy of the store, each child on
threads of its own; the embedder is the hashing one (~0.1 ms a text, included). On DuckDB each
round also times bare ``BEGIN; INSERT 3 rows (2 messages + 1 memory); COMMIT`` on a copy of the store,
two ways: through Arrow (``register``, ``INSERT … SELECT``, ``unregister``: how the store inserted
them before 2026-12-06) and as one ``INSERT … VALUES`` of literals (how it inserts a few rows
since), each its own transaction; the ratios use the faster of the two. DuckDB is opened with ``auto_index=false`` so no background
index build competes (the turn's searches are scoped to one user and answered exactly). Prints
p50 ms per side and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384

CHILD = r"""
import json, sys, time
import agentmemory
from agentmemory import AgentMemory, HashingEmbedder

uri, tag, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
memory = AgentMemory(uri, embedder=HashingEmbedder(384))
walls = []
spent = {}  # store method -> seconds of each call made inside the timed add_messages calls
timing = [False]
for name in ("query", "write", "vector_search", "keyword_search"):
    method = getattr(memory.store, name)

    def timed(*a, _method=method, _name=name, **k):
        start = time.perf_counter()
        try:
            return _method(*a, **k)
        finally:
            if timing[0]:
                spent.setdefault(_name, []).append(time.perf_counter() - start)

    setattr(memory.store, name, timed)
for t in range(turns):
    thread = memory.create_thread(thread_id=f"{tag}-t{t}", user_id=f"{tag}-u{t % 4}", agent_id="bench")
    for k in range(3):  # a few turns per thread: the extraction state is read and written each time
        msgs = [
            {"role": "user", "content": f"Order {1000 * t + k} arrived damaged and I need a return."},
            {"role": "assistant", "content": "Sorry to hear that, I have opened a return for you."},
        ]
        timing[0] = True
        t0 = time.perf_counter()
        thread.add_messages(msgs)
        walls.append((time.perf_counter() - t0) * 1000)
        timing[0] = False
memory.close()
spi = {name: {"per_call": len(times) / len(walls), "ms": [round(x * 1000, 3) for x in times]} for name, times in spent.items()}
print(json.dumps({"core": agentmemory.__file__, "ms": walls, "spi": spi}))
"""

RAW = r"""
import json, sys, time
import duckdb
import pyarrow as pa

path, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])  # this scripts directory
from raw_commit import raw_insert
con = duckdb.connect(path, config={"disabled_compression_methods": "alp,alprd,chimp,patas", "checkpoint_threshold": "256MB"})
rows = pa.concat_tables([  # the rows of one turn: 2 messages and the memory extracted from them
    con.execute("SELECT * FROM am_records WHERE rtype = 'message' LIMIT 2").fetch_arrow_table(),
    con.execute("SELECT * FROM am_records WHERE rtype = 'fact' LIMIT 1").fetch_arrow_table(),
])
top = con.execute("SELECT max(seq) FROM am_records").fetchone()[0]
walls = {"arrow": [], "values": []}
for r in range(rounds):
    for way in walls:
        ids = pa.array([f"raw-{way}-{r}-{i}" for i in range(3)])
        seqs = pa.array([top + 1 + 3 * (2 * r + (way == "values")) + i for i in range(3)], pa.int64())
        table = rows.set_column(rows.schema.get_field_index("rid"), "rid", ids)
        table = table.set_column(table.schema.get_field_index("seq"), "seq", seqs)
        t0 = time.perf_counter()
        raw_insert(con, table, way)
        walls[way].append((time.perf_counter() - t0) * 1000)
con.execute("DELETE FROM am_records WHERE rid LIKE 'raw-%'")
con.close()
print(json.dumps(walls))
"""


def build(backend: str, location: Path, size: int) -> str:
    """A store of ``size`` records (messages, and a memory every 50); returns its URI."""
    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.bulk import RecordColumns

    uri = f"duckdb://{location}.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{location}"
    memory = AgentMemory(uri, embedder=HashingEmbedder(DIM), memory_extraction_config={"extract_memories": False})
    rng = np.random.default_rng(0)
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    chunk = 10_000
    with memory.store.deferring_indexes():
        for start in range(0, size, chunk):
            n = min(chunk, size - start)
            idx = range(start, start + n)
            vectors = rng.standard_normal((n, DIM)).astype(np.float32)
            memory.store.bulk_add(RecordColumns(
                record_id=[f"r{i}" for i in idx],
                content=[f"Fact {i}: the user mentioned topic {i % 997}." if i % 50 == 0 else f"message {i} about topic {i % 997}" for i in idx],
                record_type=["fact" if i % 50 == 0 else "message" for i in idx],
                timestamp=[t0 + timedelta(seconds=i) for i in idx],
                user_id=[f"user{i // 1000}" for i in idx],
                agent_id="bench",
                thread_id=[None if i % 50 == 0 else f"thread{i // 100}" for i in idx],
                role=[None if i % 50 == 0 else ("user" if i % 2 else "assistant") for i in idx],
                vectors=vectors,
            ))
    memory.close()
    return uri


BUILD = r"""
import json, sys
from pathlib import Path
import agentmemory
sys.path.insert(0, sys.argv[1])
from add_messages_commits import build
print(json.dumps({"core": agentmemory.__file__, "uri": build(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))}))
"""


def copy_store(uri: str, name: str) -> str:
    """A copy of the closed store at ``uri`` beside it, named ``name``; returns its URI."""
    location = uri.split("://", 1)[1].split("?")[0]
    source = Path(location)
    if source.is_dir():  # hnswlib: a directory
        target = source.with_name(name)
        shutil.copytree(source, target)
    else:  # duckdb: the file and what is kept beside it (<file>.keyword.npz)
        target = source.with_name(f"{name}{source.suffix}")
        for part in source.parent.glob(source.name + "*"):
            shutil.copy(part, target.with_name(target.name + part.name[len(source.name):]))
    return uri.replace(location, str(target), 1)


def run_child(code: str, core: Path | None, *args: str, backend: str | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if core is not None:
        env["PYTHONPATH"] = str(core) if backend is None else f"{core}{os.pathsep}{core / 'backends' / backend}"
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False, cwd=core or None)
    if out.returncode:
        raise SystemExit(f"child failed: {out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if core is not None and not str(result["core"]).startswith(str(core)):
        raise SystemExit(f"child imported the core from {result['core']}, not {core}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="checkout of the core before (two commits per call)")
    ap.add_argument("--new", type=Path, required=True, help="checkout of the core after (one commit)")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--backends", default="duckdb,hnswlib")
    ap.add_argument("--turns", type=int, default=20, help="threads per child (3 calls each)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--installed-backends", action="store_true", help="children use the installed backends, not the checkouts'")
    args = ap.parse_args()
    report: dict[str, Any] = {"size": args.size, "turn": "add_messages of 2 messages, rule-based extraction"}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in args.backends.split(","):
            t0 = time.perf_counter()
            if args.installed_backends:
                built = build(backend, Path(tmp) / backend, args.size)
            else:  # with the old checkout's backend: a newer one opens (and migrates) an older file, not the reverse
                scripts = str(Path(__file__).resolve().parent)
                built = run_child(BUILD, args.old.resolve(), scripts, backend, str(Path(tmp) / backend), str(args.size), backend=backend)["uri"]
            print(f"{backend}: built {args.size} records in {time.perf_counter() - t0:.0f} s", flush=True)
            # each side (and the raw commits) on a copy of its own: the new code may migrate its file
            uris = {name: copy_store(built, f"{backend}-{name}") for name in ("old", "new", "raw")}
            side: dict[str, list[float]] = {"old": [], "new": []}
            per_child: dict[str, list[float]] = {"old": [], "new": []}
            spi: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
            raw: dict[str, list[float]] = {"arrow": [], "values": []}
            loads = []
            for r in range(args.rounds):
                for name, core in (("old", args.old), ("new", args.new)):
                    loads.append(os.getloadavg()[0])
                    child_backend = None if args.installed_backends else backend
                    child = run_child(CHILD, core.resolve(), uris[name], f"{name}{r}", str(args.turns), backend=child_backend)
                    ms = child["ms"]
                    for method, calls in child.get("spi", {}).items():
                        spi[name].setdefault(method, []).extend(calls["ms"])
                    side[name] += ms
                    per_child[name].append(round(statistics.median(ms), 2))
                if backend == "duckdb":  # the raw commits between the rounds, on a copy of the same file
                    path = uris["raw"].removeprefix("duckdb://").split("?")[0]
                    for way, ms in run_child(RAW, None, path, "20", str(Path(__file__).resolve().parent)).items():
                        raw[way] += ms
            row: dict[str, Any] = {name: statistics.median(ms) for name, ms in side.items()}
            row["calls"] = len(side["new"])
            row["p50 per child"] = per_child
            row["new/old"] = row["new"] / row["old"]
            row["store calls per add_messages (count, p50 ms)"] = {
                name: {method: [round(len(times) / len(side[name]), 2), round(statistics.median(times), 2)] for method, times in calls.items()}
                for name, calls in spi.items()
            }
            row["load 1-min, min-max"] = f"{min(loads):.1f}-{max(loads):.1f}"
            if backend == "duckdb":
                row["raw_commit_arrow"] = statistics.median(raw["arrow"])
                row["raw_commit_values"] = statistics.median(raw["values"])
                row["raw_commit"] = min(row["raw_commit_arrow"], row["raw_commit_values"])
                row["old/raw"] = row["old"] / row["raw_commit"]
                row["new/raw"] = row["new"] / row["raw_commit"]
            report[backend] = row
            print(f"{backend}: " + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
