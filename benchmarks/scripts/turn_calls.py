"""What one ``add_messages`` turn spends in each store call, on a DuckDB store of ``--size``
messages (a measurement, not a test; issue #31).

    nice -n 5 .venv/bin/python benchmarks/scripts/turn_calls.py --size 100000 [--turn plain|extracting]

Builds the store through the public API (threads of 100 messages over 50 users, hashing
embedder, ``auto_index=false``), then times 100 turns of 2 messages in one thread of user
``u1``: ``plain`` (a question and a reply: the rule-based extractor finds nothing) or
``extracting`` (a preference the extractor turns into a memory). Prints the turn's p50 and, per
SPI method, calls per turn and their time. To compare two commits, run it once per checkout
with ``PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb`` (a ``git worktree``): the backend comes
from that path then. With ``--store PATH`` the built store is kept there (built when missing)
and each run times its turns on a fresh copy of it, so runs of two checkouts (two cores) can
alternate on the same store without building it again; each prints the 1-minute load.

``--old-backend CHECKOUT`` compares two DuckDB backends in one process, turn by turn (on a
shared machine the load drifts between runs; here both sides see the same moments): the store
is built once, copied, and the copy is opened with the backend of ``CHECKOUT`` (its
``backends/duckdb``, loaded as ``agentmemory_duckdb_old``; the core is the one imported). The
turns alternate old and new, and after each pair a third copy of the file takes the raw
commits of the same rows (2 messages for ``plain``, + 1 memory for ``extracting``):
``BEGIN; INSERT; COMMIT`` through Arrow (``register``, ``INSERT … SELECT``, ``unregister``) and
as one ``INSERT … VALUES`` of literals. Prints p50s, the ratios, and the 1-minute load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from raw_commit import raw_insert  # this scripts directory

from agentmemory import AgentMemory, HashingEmbedder

TURNS = {
    "plain": ("What time is it in Lisbon on day {i}?", "Around noon."),
    "extracting": ("I prefer cycling to work, day {i}.", "Good to know."),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--turn", choices=sorted(TURNS), default="plain")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--old-backend", type=Path, help="a checkout whose DuckDB backend runs beside this one, turn by turn")
    ap.add_argument("--store", type=Path, help="the built store's file, kept for the next run (built when missing; only copies are written)")
    args = ap.parse_args()
    if args.store is not None and args.store.exists():
        if args.old_backend is not None:
            side_by_side(str(args.store), args.old_backend, args.turn, args.calls)
        else:
            on_copy(args.store, args.turn, args.calls)
        return
    built = args.store or Path(tempfile.mkdtemp()) / "store.duckdb"
    client = AgentMemory(f"duckdb://{built}?auto_index=false", embedder=HashingEmbedder(384))
    t0 = time.perf_counter()
    for t in range(args.size // 100):
        thread = client.create_thread(thread_id=f"t{t}", user_id=f"u{t % 50}", extract_memories=False, enable_context_summary=False)
        thread.add_messages([
            {"role": "user" if i % 2 else "assistant", "content": f"message {i} about topic {t} and word{i * 7 % 97}"}
            for i in range(100)
        ])
    print(f"built {args.size} messages in {time.perf_counter() - t0:.1f} s", flush=True)
    hot = client.create_thread(thread_id="hot", user_id="u1")
    for i in range(10):  # the user's memories, and a warm thread
        hot.add_messages([{"role": "user", "content": f"I like green tea number {i}."}, {"role": "assistant", "content": "Noted."}])
    if args.old_backend is not None:
        client.close()
        side_by_side(str(built), args.old_backend, args.turn, args.calls)
        return
    if args.store is not None:
        client.close()
        on_copy(args.store, args.turn, args.calls)
        return
    time_turns(client, args.turn, args.calls)


def on_copy(built: Path, turn: str, calls: int) -> None:
    """``time_turns`` on a copy of the store file ``built`` (which stays as it is)."""
    work = Path(tempfile.mkdtemp())
    shutil.copy(built, work / "store.duckdb")
    client = AgentMemory(f"duckdb://{work / 'store.duckdb'}?auto_index=false", embedder=HashingEmbedder(384))
    try:
        time_turns(client, turn, calls)
    finally:
        shutil.rmtree(work)


def time_turns(client: AgentMemory, turn: str, calls: int) -> None:
    """``calls`` turns in the ``hot`` thread, timed, with each SPI method's calls; closes ``client``."""
    import agentmemory

    hot = client.get_thread("hot")
    store: Any = client.store
    spent: dict[str, list[float]] = {}
    for name in ("query", "write", "vector_search", "keyword_search"):
        method = getattr(store, name)

        def timed(*a: Any, _method: Any = method, _name: str = name, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return _method(*a, **k)
            finally:
                spent.setdefault(_name, []).append(time.perf_counter() - start)

        setattr(store, name, timed)
    user, reply = TURNS[turn]
    turns = []
    loads = []
    for i in range(calls):
        start = time.perf_counter()
        hot.add_messages([{"role": "user", "content": user.format(i=i)}, {"role": "assistant", "content": reply}])
        turns.append(time.perf_counter() - start)
        if i % 10 == 0:
            loads.append(os.getloadavg()[0])
    turns.sort()
    print(f"{turn} turn p50 {turns[len(turns) // 2] * 1000:.2f} ms (core {Path(agentmemory.__file__).parent.parent}, load {min(loads):.1f}-{max(loads):.1f})")
    for name, times in spent.items():
        times.sort()
        print(f"  {name}: {len(times) / calls:.1f} per turn, p50 {times[len(times) // 2] * 1000:.2f} ms, "
              f"{sum(times) / calls * 1000:.2f} ms per turn")
    client.close()


def _old_backend(checkout: Path) -> Any:
    """The ``agentmemory_duckdb`` package of ``checkout``, imported as ``agentmemory_duckdb_old``."""
    package = checkout.resolve() / "backends" / "duckdb" / "agentmemory_duckdb"
    spec = importlib.util.spec_from_file_location(
        "agentmemory_duckdb_old", package / "__init__.py", submodule_search_locations=[str(package)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


RAW_ARROW = "BEGIN; INSERT INTO am_records SELECT * FROM raw_rows; COMMIT"


def side_by_side(built: str, old_checkout: Path, turn: str, calls: int) -> None:
    """Old and new backends turn by turn on two copies of ``built``, and the raw commits on a
    third (see the module's docstring)."""
    import duckdb
    import pyarrow as pa
    from agentmemory_duckdb import DuckDBStore

    old_module = _old_backend(old_checkout)
    base = Path(built)
    work = Path(tempfile.mkdtemp())
    copies = {name: work / f"{name}.duckdb" for name in ("old", "new", "raw")}
    for target in copies.values():
        shutil.copy(base, target)
    clients = {
        "old": AgentMemory(old_module.DuckDBStore(copies["old"], auto_index=False), embedder=HashingEmbedder(384)),
        "new": AgentMemory(DuckDBStore(copies["new"], auto_index=False), embedder=HashingEmbedder(384)),
    }
    spent: dict[str, dict[str, list[float]]] = {name: {} for name in clients}
    threads = {}
    for name, client in clients.items():
        store: Any = client.store
        for method_name in ("query", "write", "vector_search"):
            method = getattr(store, method_name)

            def timed(*a: Any, _method: Any = method, _name: str = method_name, _side: str = name, **k: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _method(*a, **k)
                finally:
                    spent[_side].setdefault(_name, []).append(time.perf_counter() - start)

            setattr(store, method_name, timed)
        threads[name] = client.get_thread("hot")
    raw = duckdb.connect(str(copies["raw"]), config={"disabled_compression_methods": "alp,alprd,chimp,patas", "checkpoint_threshold": "256MB"})
    n_rows = 3 if turn == "extracting" else 2
    template = pa.concat_tables([
        raw.execute("SELECT * FROM am_records WHERE rtype = 'message' ORDER BY seq DESC LIMIT 2").fetch_arrow_table(),
        raw.execute("SELECT * FROM am_records WHERE rtype <> 'message' AND rtype <> 'thread' LIMIT 1").fetch_arrow_table(),
    ]).slice(0, n_rows)
    names = template.column_names
    top = raw.execute("SELECT max(seq) FROM am_records").fetchone()[0]  # type: ignore[index]

    def raw_commit(way: str, i: int) -> float:
        table = template.set_column(names.index("rid"), "rid", pa.array([f"raw-{way}-{i}-{j}" for j in range(n_rows)]))
        seqs = [top + 1 + 2 * n_rows * i + n_rows * (way == "values") + j for j in range(n_rows)]
        table = table.set_column(names.index("seq"), "seq", pa.array(seqs, pa.int64()))
        start = time.perf_counter()
        raw_insert(raw, table, way)
        return time.perf_counter() - start

    user, reply = TURNS[turn]
    turns: dict[str, list[float]] = {name: [] for name in clients}
    raws: dict[str, list[float]] = {"arrow": [], "values": []}
    loads = []
    for i in range(-5, calls):  # five warm-up pairs
        order = ("old", "new") if i % 2 else ("new", "old")
        for name in order:
            start = time.perf_counter()
            threads[name].add_messages([{"role": "user", "content": user.format(i=i)}, {"role": "assistant", "content": reply}])
            if i >= 0:
                turns[name].append(time.perf_counter() - start)
        for way in raws:
            wall = raw_commit(way, i + 5)
            if i >= 0:
                raws[way].append(wall)
        if i < 0:
            for side in spent.values():
                side.clear()
        elif i % 10 == 0:
            loads.append(os.getloadavg()[0])
    ms = {name: statistics.median(t) * 1000 for name, t in turns.items()}
    raw_ms = {way: statistics.median(t) * 1000 for way, t in raws.items()}
    floor = min(raw_ms.values())
    print(f"{turn} turn, {calls} pairs, load {min(loads):.1f}-{max(loads):.1f}")
    print(f"  raw commit of {n_rows} rows: arrow p50 {raw_ms['arrow']:.2f} ms, values p50 {raw_ms['values']:.2f} ms")
    for name in ("old", "new"):
        print(f"  {name}: turn p50 {ms[name]:.2f} ms = {ms[name] / floor:.2f}x the faster raw commit "
              f"({ms[name] / raw_ms['arrow']:.2f}x the Arrow one)")
        for method_name, times in spent[name].items():
            print(f"    {method_name}: {len(times) / calls:.1f} per turn, p50 {statistics.median(times) * 1000:.2f} ms")
    print(f"  new / old: {ms['new'] / ms['old']:.2f}")
    for client in clients.values():
        client.close()
    raw.close()
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
