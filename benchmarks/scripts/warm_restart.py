"""The first context card and keyword search after reopening a store vs warm ones (issue #31,
item 2: the first card after a reopen must cost <= 2x a warm card). A measurement, not a test.

    nice -n 5 OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/warm_restart.py \\
        --n 100000 [--backends hnswlib,duckdb] [--keep /tmp/warm] [--profile] [--json PATH]

Build (once per backend and ``--n``; kept with ``--keep``): ``bulk_add`` of ``--n`` chat-like
records (the keyword-speed corpus: Zipf words over a 30k vocabulary, 100 users, random unit
vectors, no embedder), then a thread of 40 messages added through ``AgentMemory`` with the
hashing embedder (rule-based extraction on), ``settle()`` (DuckDB: its snapshot indexes; hnswlib:
its keyword postings and index snapshot) and ``close()``.

Measure: each reopen runs in a fresh interpreter (nothing cached in the process; the OS page
cache stays warm, as it does for an agent restarting on the same machine), with the packages'
bytecode compiled first, as an installed package has it (this machine sets
``PYTHONDONTWRITEBYTECODE``, so otherwise every lazily imported module would be compiled from
source inside the first card). One child opens an ``AgentMemory`` on the store and times
``open``, the first ``thread.get_context_card()`` and then the median of ``--warm`` more cards
of the same thread ("warm": no write between them, so in-process memos of the card's pure text
work serve them), then the first card of a second thread of the same user that this process has
not read yet ("first": everything a restart loses is warm, the thread's own card work is not);
another opens the store alone and times the first user-scoped ``keyword_search`` and the median
of warm ones (different queries each time). Reported: seconds, cold ÷ warm and cold ÷ first.
The second thread is added after the store is settled (so a store kept from an older build gets
it the same way): on DuckDB its rows are in the keyword delta, not the snapshot. ``--profile``
prints a cProfile of the cold card (top functions by cumulative time) from a third child.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
THREAD, OTHER, USER = "warm-thread", "warm-thread-b", "user0"

CHILD = r"""
import cProfile, io, json, pstats, statistics, sys, time
sys.path.insert(0, sys.argv[1])
import keyword_speed as ks
from agentmemory.spi import RecordFilter

mode, backend, where, warm = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
uri = f"duckdb://{where}/store.duckdb?auto_index=false" if backend == "duckdb" else f"hnswlib://{where}/hnswlib?synchronous=normal"
out = {}
if mode in ("card", "profile"):
    from agentmemory import AgentMemory, HashingEmbedder
    t = time.perf_counter()
    memory = AgentMemory(uri, embedder=HashingEmbedder(ks.DIM))
    thread = memory.get_thread(sys.argv[6])
    out["open_s"] = time.perf_counter() - t
    if mode == "profile":
        prof = cProfile.Profile()
        prof.enable()
        thread.get_context_card()
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
        print(text.getvalue(), file=sys.stderr)
    else:
        t = time.perf_counter()
        thread.get_context_card()
        out["cold_s"] = time.perf_counter() - t
        times = []
        for _ in range(warm):
            t = time.perf_counter()
            thread.get_context_card()
            times.append(time.perf_counter() - t)
        out["warm_s"] = statistics.median(times)
        other = memory.get_thread(sys.argv[7])
        t = time.perf_counter()
        other.get_context_card()
        out["first_s"] = time.perf_counter() - t
    memory.close()
else:
    if backend == "duckdb":
        from agentmemory_duckdb import DuckDBStore
        store = DuckDBStore(f"{where}/store.duckdb", auto_index=False)
    else:
        from agentmemory_hnswlib import HnswlibStore
        store = HnswlibStore(f"{where}/hnswlib", synchronous="normal")
    t = time.perf_counter()
    store.open(dimension=ks.DIM)
    out["open_s"] = time.perf_counter() - t
    qs = ks.queries(ks.corpus(200), warm + 1, seed=7)  # the corpus's vocabulary (the same for any n)
    flt = [RecordFilter(user_id=f"user{u}") for u in range(1, warm + 2)]
    t = time.perf_counter()
    store.keyword_search(qs[0]["text"], flt[0], 10)
    out["cold_s"] = time.perf_counter() - t
    times = []
    for q, f in zip(qs[1:], flt[1:]):
        t = time.perf_counter()
        store.keyword_search(q["text"], f, 10)
        times.append(time.perf_counter() - t)
    out["warm_s"] = statistics.median(times)
    store.close()
print(json.dumps(out))
"""


def build(backend: str, n: int, where: Path) -> dict[str, Any]:
    """A store of ``n`` bulk records plus a 40-message thread, settled and closed."""
    sys.path.insert(0, str(HERE))
    import keyword_speed as ks

    from agentmemory import AgentMemory, HashingEmbedder

    t = time.perf_counter()
    data = ks.corpus(n)
    store = ks.open_store(backend, where, fresh=True)
    store.bulk_add(ks.columns(data))
    memory = AgentMemory(store, embedder=HashingEmbedder(ks.DIM))
    topics = ["my sister's wedding in June", "the garden behind the house", "a trip to Lisbon", "learning the cello"]
    converse(memory, THREAD, [
        (f"I keep thinking about {topics[i % 4]}; I prefer mornings for it (note {i}).",
         f"Noted: {topics[i % 4]}, mornings. Anything else about it? ({i})")
        for i in range(20)
    ])
    store.settle()
    memory.close()
    return {"build_s": round(time.perf_counter() - t, 1)}


def add_second_thread(backend: str, where: Path) -> None:
    """The second thread (``OTHER``) of the same user, 40 messages on other topics, added after
    the store was settled and closed (what ``first_s`` reads)."""
    sys.path.insert(0, str(HERE))
    import keyword_speed as ks

    from agentmemory import AgentMemory, HashingEmbedder

    memory = AgentMemory(ks.open_store(backend, where, fresh=False), embedder=HashingEmbedder(ks.DIM))
    topics = ["the bakery on the corner", "my knee after running", "a new job in Utrecht", "the kids' school play"]
    converse(memory, OTHER, [
        (f"Lately I think a lot about {topics[i % 4]}; evenings suit me best (item {i}).",
         f"Understood: {topics[i % 4]}, evenings. Shall we plan something? ({i})")
        for i in range(20)
    ])
    memory.close()


def converse(memory: Any, thread_id: str, turns: list[tuple[str, str]]) -> None:
    """A new thread of ``USER`` with ``turns`` of (user, assistant) messages, one call each."""
    thread = memory.create_thread(thread_id=thread_id, user_id=USER, agent_id="agent")
    for user, assistant in turns:
        thread.add_messages([{"role": "user", "content": user}, {"role": "assistant", "content": assistant}])


def compile_bytecode(env: dict[str, str]) -> None:
    """Compile the imported packages' modules (as pip does at install), in the interpreter and
    with the path the children use."""
    code = ("import compileall, importlib, os, sys\n"
            "for name in ('agentmemory', 'agentmemory_duckdb', 'agentmemory_hnswlib'):\n"
            "    compileall.compile_dir(os.path.dirname(importlib.import_module(name).__file__), quiet=1)")
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


def child_env() -> dict[str, str]:
    return {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


def child(mode: str, backend: str, where: Path, warm: int) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(HERE), mode, backend, str(where), str(warm), THREAD, OTHER],
                          capture_output=True, text=True, env=child_env(), check=False)
    if proc.returncode:
        raise SystemExit(f"child {mode} failed:\n{proc.stderr[-4000:]}")
    if mode == "profile":
        print(proc.stderr, file=sys.stderr)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--backends", default="hnswlib,duckdb")
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=2, help="cold reopens per measurement (median reported)")
    ap.add_argument("--keep", type=Path, default=None)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="warm-"))
    report: list[dict[str, Any]] = []
    compile_bytecode(child_env())
    try:
        for backend in args.backends.split(","):
            where = root / f"{backend}-{args.n}"
            row: dict[str, Any] = {"backend": backend, "n": args.n}
            if not (where / "built").exists():
                shutil.rmtree(where, ignore_errors=True)
                where.mkdir(parents=True)
                row.update(build(backend, args.n, where))
                (where / "built").touch()
            if not (where / "second-thread").exists():
                add_second_thread(backend, where)
                (where / "second-thread").touch()
            for mode in ("card", "keyword"):
                runs = [child(mode, backend, where, args.warm) for _ in range(args.repeat)]
                runs.sort(key=lambda r: r["cold_s"])
                mid = runs[len(runs) // 2]
                row[mode] = {key: round(value, 4) for key, value in mid.items()}
                row[mode]["cold_over_warm"] = round(mid["cold_s"] / mid["warm_s"], 2)
                if "first_s" in mid:
                    row[mode]["cold_over_first"] = round(mid["cold_s"] / mid["first_s"], 2)
            if args.profile:
                child("profile", backend, where, args.warm)
            report.append(row)
            print(json.dumps(row), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
