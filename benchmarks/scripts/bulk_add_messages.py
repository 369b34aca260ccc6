"""One ``add_messages`` of N messages against ten calls of N/10 into the same thread, on a fresh
store each time (a measurement, not a test; issue #31: one call must cost ≤ 1.2× the ten).

    nice -n 5 .venv/bin/python benchmarks/scripts/bulk_add_messages.py \\
        --sizes 10000,100000 [--backends hnswlib,duckdb] [--extraction on,off] [--json PATH]

Each run is a child process (a fresh interpreter, so one run's memory does not slow the next),
with the hashing embedder (384-d; its time is included: it is linear) and chat-like messages.
Reports CPU seconds of the whole process (every thread: hnswlib builds its graph on all
cores) and wall seconds, and the ratio one call ÷ ten calls. Both shapes build the same graph
from the same vectors, so the ratio isolates what a single large call costs beyond the work
itself. ``--extraction on`` is the default configuration (rule-based extraction; a call over
``ONE_COMMIT_LIMIT`` messages commits them first, then extracts); ``off`` measures the write path
alone.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

CHILD = r"""
import json, sys, tempfile, time
from agentmemory import AgentMemory, HashingEmbedder

backend, n, calls, extraction = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "on"
folder = tempfile.mkdtemp()
uri = f"duckdb://{folder}/s.duckdb" if backend == "duckdb" else f"hnswlib://{folder}/s"
cfg = None if extraction else {"extract_memories": False, "enable_context_summary": False}
memory = AgentMemory(uri, embedder=HashingEmbedder(384), memory_extraction_config=cfg)
thread = memory.create_thread(thread_id="t", user_id="u")
msgs = [
    {"role": "user" if i % 2 == 0 else "assistant",
     "content": f"message {i}: order {i % 9973} for the user in town {i % 31}, about topic {i % 997}"}
    for i in range(n)
]
per = n // calls
cpu, wall = time.process_time(), time.perf_counter()
for c in range(calls):
    thread.add_messages(msgs[c * per:(c + 1) * per])
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
memory.close()
print(json.dumps({"cpu_s": cpu, "wall_s": wall}))
"""


def run(backend: str, n: int, calls: int, extraction: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, backend, str(n), str(calls), extraction], capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"child failed: {out.stderr[-2000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--backends", default="hnswlib")
    ap.add_argument("--extraction", default="off,on")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report: list[dict[str, Any]] = []
    for backend in args.backends.split(","):
        for extraction in args.extraction.split(","):
            for n in (int(s) for s in args.sizes.split(",")):
                one = run(backend, n, 1, extraction)
                ten = run(backend, n, 10, extraction)
                row = {
                    "backend": backend, "extraction": extraction, "messages": n,
                    "one_call_cpu_s": round(one["cpu_s"], 2), "ten_calls_cpu_s": round(ten["cpu_s"], 2),
                    "one_call_wall_s": round(one["wall_s"], 2), "ten_calls_wall_s": round(ten["wall_s"], 2),
                    "ratio_cpu": round(one["cpu_s"] / ten["cpu_s"], 3), "ratio_wall": round(one["wall_s"] / ten["wall_s"], 3),
                }
                report.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
