"""What one ``add_messages`` turn spends in each store call, on a DuckDB store of ``--size``
messages (a measurement, not a test; issue #31).

    nice -n 5 .venv/bin/python benchmarks/scripts/turn_calls.py --size 100000 [--turn plain|extracting]

Builds the store through the public API (threads of 100 messages over 50 users, hashing
embedder, ``auto_index=false``), then times 100 turns of 2 messages in one thread of user
``u1``: ``plain`` (a question and a reply: the rule-based extractor finds nothing) or
``extracting`` (a preference the extractor turns into a memory). Prints the turn's p50 and, per
SPI method, calls per turn and their time. To compare two commits, run it once per checkout
with ``PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb`` (a ``git worktree``): the backend comes
from that path then.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

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
    args = ap.parse_args()
    path = tempfile.mkdtemp()
    client = AgentMemory(f"duckdb://{path}/store.duckdb?auto_index=false", embedder=HashingEmbedder(384))
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
    user, reply = TURNS[args.turn]
    turns = []
    for i in range(args.calls):
        start = time.perf_counter()
        hot.add_messages([{"role": "user", "content": user.format(i=i)}, {"role": "assistant", "content": reply}])
        turns.append(time.perf_counter() - start)
    turns.sort()
    print(f"{args.turn} turn p50 {turns[len(turns) // 2] * 1000:.2f} ms")
    for name, times in spent.items():
        times.sort()
        print(f"  {name}: {len(times) / args.calls:.1f} per turn, p50 {times[len(times) // 2] * 1000:.2f} ms, "
              f"{sum(times) / args.calls * 1000:.2f} ms per turn")
    client.close()


if __name__ == "__main__":
    main()
