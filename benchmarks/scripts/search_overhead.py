"""What a plain ``search`` (and the card) costs above the store's own ``vector_search`` for the
same scope (issue #31, item 4: vector search <= 2x the SPI floor, the hnswlib card <= 8x). A
measurement, not a test.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/search_overhead.py build \\
        --n 100000 --backend hnswlib --dir /tmp/so-hnswlib
    OPENBLAS_NUM_THREADS=1 .venv/bin/python benchmarks/scripts/search_overhead.py measure \\
        --backend hnswlib --dir /tmp/so-hnswlib [--rounds 200] [--profile vector|card|hybrid]

``build``: ``bulk_add`` of the speed suite's ``--n`` records (its seeded vectors, texts and
users), then the framework suite's user: one conversation of 4 sessions x 25 turn pairs through
``AgentMemory`` (rule-based extraction on, the hashing embedder behind the bench's caching
wrapper), ``settle()``, ``close()``. ``measure`` (run it once per checkout, with
``PYTHONPATH=CHECKOUT:CHECKOUT/backends/duckdb:CHECKOUT/backends/hnswlib`` from a directory
outside any checkout, to compare commits on the same built store): reopens the store, then times, round robin (in a shuffled order each
round) so a busy machine weighs on every row alike, the rows below with the query vectors
already embedded (the bench's caching embedder: what is left is a dict lookup):

- ``SPI vector_search (bench filter)``: ``store.vector_search(v, RecordFilter(user_id=user), 10)``,
  the bench's floor row;
- ``SPI vector_search (search's filter)``: the same call with the filter ``client.search`` builds
  (user scope, searchable types, alive now), built per call (``build_search`` is in this row);
- ``client.search vector`` / ``thread.search vector`` / ``client.search hybrid`` (10 results);
- ``thread.get_context_card()`` and ``SPI floor x5`` (the store calls a card makes are ~5 searches).

Prints p50s in ms and each row's ratio to the bench floor. ``--card-split`` times the card and the
floor alternated, with every store call inside the card timed apart (its store time and the rest).
``--profile ROW`` prints a cProfile of
that row instead (top functions by own time). ``--pairs N`` times ``client.search`` and the floor
alternated call by call instead (N pairs after 500 of warm-up), with the store call inside each
search timed apart. ``--bench`` runs the bench's own framework suite on a copy of the built store
instead (its rows: the cards, then the searches, each set in a shuffled round robin with the
floor timed inside it).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
USER = "so-fw-user"
THREAD = "so-x-s3"
AGENT = "bench-agent"


def uri_of(backend: str, where: str) -> str:
    if backend == "duckdb":
        return f"duckdb://{where}/store.duckdb?auto_index=false"
    return f"hnswlib://{where}/hnswlib"


def build(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent))
    from agentmemory_bench.conversations import generate_conversation
    from agentmemory_bench.data import generate_vectors, make_records
    from agentmemory_bench.embedding import CachedEmbedder
    from agentmemory_bench.speed import record_columns

    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.spi import SchemaPolicy

    Path(args.dir).mkdir(parents=True, exist_ok=True)
    uri = uri_of(args.backend, args.dir)
    from agentmemory.plugins import get_plugin_manager

    cls = get_plugin_manager().load("backends", args.backend)
    store = cls.from_uri(uri)
    data = generate_vectors(args.n, dim=384)
    t0 = time.perf_counter()
    store.open(dimension=384, schema_policy=SchemaPolicy.RECREATE)
    store.bulk_add(record_columns(make_records(data)))
    print(f"bulk_add {args.n}: {time.perf_counter() - t0:.1f} s", flush=True)
    conv = generate_conversation(0, seed=0, sessions=4, turns_per_session=25)
    embedder = CachedEmbedder(HashingEmbedder(384))
    client = AgentMemory(store=store, embedder=embedder)
    for index, session in enumerate(conv.sessions):
        thread = client.create_thread(thread_id=f"so-x-s{index}", user_id=USER, agent_id=AGENT)
        for start in range(0, len(session), 2):
            thread.add_messages([{"role": m.role, "content": m.content} for m in session[start : start + 2]])
    store.settle()
    print(f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    client.close()


def measure(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(HERE.parent))
    from agentmemory_bench.conversations import generate_conversation
    from agentmemory_bench.embedding import CachedEmbedder

    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.operations.search import build_search
    from agentmemory.spi import RecordFilter

    embedder = CachedEmbedder(HashingEmbedder(384))
    conv = generate_conversation(0, seed=0, sessions=4, turns_per_session=25)
    questions = [q.text for q in conv.questions]
    embedder.warm(questions, is_query=True)
    embedder.warm([m.content for m in conv.messages])
    client = AgentMemory(uri_of(args.backend, args.dir), embedder=embedder)
    store: Any = client.store
    thread = client.get_thread(THREAD)
    vectors = embedder.embed(questions, is_query=True)
    bench_flt = RecordFilter(user_id=USER)

    def search_flt() -> RecordFilter:
        return build_search(client.context(), "q", {"user_id": USER}).filter

    rows: dict[str, Any] = {
        "SPI vector_search (bench filter)": lambda i: store.vector_search(vectors[i], bench_flt, 10),
        "SPI vector_search (search's filter)": lambda i: store.vector_search(vectors[i], search_flt(), 10),
        "client.search vector": lambda i: client.search(questions[i], user_id=USER, strategy="vector"),
        "thread.search vector": lambda i: thread.search(questions[i], strategy="vector"),
        "client.search hybrid": lambda i: client.search(questions[i], user_id=USER, strategy="hybrid"),
        "card": lambda i: thread.get_context_card(),
        "SPI floor x5": lambda i: [store.vector_search(vectors[(i + j) % len(vectors)], bench_flt, 10) for j in range(5)],
    }
    if args.pairs:
        pairs(client, store, questions, vectors, bench_flt, args.pairs)
        return
    if args.card_split:
        card_split(store, thread, rows["SPI vector_search (bench filter)"], args.rounds)
        client.close()
        return
    if args.profile:
        name = {"vector": "thread.search vector", "card": "card", "hybrid": "client.search hybrid", "client": "client.search vector"}[args.profile]
        fn = rows[name]
        for i in range(50):
            fn(i % len(questions))
        prof = cProfile.Profile()
        prof.enable()
        for i in range(args.rounds):
            fn(i % len(questions))
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats(args.sort).print_stats(45)
        print(text.getvalue())
        client.close()
        return
    for i in range(20):  # warm every row (scope masks, caches)
        for fn in rows.values():
            fn(i % len(questions))
    times: dict[str, list[float]] = {name: [] for name in rows}
    gc.collect()
    rng = random.Random(0)
    names = list(rows)
    for i in range(args.rounds):
        rng.shuffle(names)  # no row always follows the same one (the one before warms the caches)
        for name in names:
            fn = rows[name]
            q = i % len(questions)
            t0 = time.perf_counter()
            fn(q)
            times[name].append(time.perf_counter() - t0)
    floor = statistics.median(times["SPI vector_search (bench filter)"])
    print(f"{args.backend} {args.dir}: {args.rounds} rounds, p50 ms (x the bench floor)")
    for name, values in times.items():
        p50 = statistics.median(values)
        print(f"  {name:38s} {p50 * 1000:8.3f}  {p50 / floor:6.2f}x")
    client.close()


def bench_rows(args: argparse.Namespace) -> None:
    """The bench's own framework suite (``agentmemory_bench.framework.run_framework``) on a copy
    of the built store: its search rows and floor as the bench report prints them."""
    import shutil

    from agentmemory_bench.framework import run_framework

    from agentmemory.plugins import get_plugin_manager

    copy = f"{args.dir.rstrip('/')}-framework-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(args.dir, copy)
    store = get_plugin_manager().load("backends", args.backend).from_uri(uri_of(args.backend, copy))
    store.open(dimension=384)
    try:
        out = run_framework(store, seed=0, user_prefix="so-bench", budget_s=20.0)
    finally:
        store.close()
        shutil.rmtree(copy, ignore_errors=True)
    print(f"{args.backend} {args.dir}: the bench's framework rows, p50 ms (x the floor of its own round robin)")
    for section in ("search", "context_card"):
        for name, row in out[section].items():
            print(f"  {section:12s} {name:38s} {row['p50_ms']:8.3f}  {row['x_floor']:6.2f}x")


def pairs(client: Any, store: Any, questions: list[str], vectors: Any, flt: Any, count: int) -> None:
    """``client.search`` (vector) and the floor alternated call by call, with the store call
    inside each search timed apart: what the search adds, on the same caches as the floor."""
    inner: list[float] = []
    plain = store.vector_search

    def timed(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return plain(*a, **k)
        finally:
            inner.append(time.perf_counter() - start)

    store.vector_search = timed
    total, floor = [], []
    for i in range(count + 500):
        q = i % len(questions)
        t0 = time.perf_counter()
        client.search(questions[q], user_id=USER, strategy="vector")
        t1 = time.perf_counter()
        plain(vectors[q], flt, 10)
        t2 = time.perf_counter()
        total.append(t1 - t0)
        floor.append(t2 - t1)
    store.vector_search = plain
    total, floor, inner = total[500:], floor[500:], inner[500:]  # the first 500: warm-up
    rest = [t - s for t, s in zip(total, inner)]
    p50 = statistics.median
    print(f"pairs x{count}: client.search vector {p50(total) * 1e6:.1f} us, its store call {p50(inner) * 1e6:.1f}, "
          f"the rest {p50(rest) * 1e6:.1f}; floor {p50(floor) * 1e6:.1f} us; search / floor {p50(total) / p50(floor):.2f}x")
    client.close()


def card_split(store: Any, thread: Any, floor: Any, rounds: int) -> None:
    """The card and the floor alternated, with each store call inside the card timed apart: p50
    per call kind, and per card the p50 of its store time and of the rest (the card's own work)."""
    plain = {name: getattr(store, name) for name in ("query", "vector_search", "keyword_search")}
    calls: dict[str, list[float]] = {name: [] for name in plain}
    spent = [0.0]

    def timed(name: str) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            start = time.perf_counter()
            try:
                return plain[name](*a, **k)
            finally:
                took = time.perf_counter() - start
                calls[name].append(took)
                spent[0] += took
        return call

    for name in plain:
        setattr(store, name, timed(name))
    cards, stores, floors = [], [], []
    for i in range(rounds + 50):
        spent[0] = 0.0
        t0 = time.perf_counter()
        thread.get_context_card()
        t1 = time.perf_counter()
        floor(i % 10)  # the floor row calls store.vector_search: counted out below
        t2 = time.perf_counter()
        if i >= 50:  # the first 50: warm-up
            cards.append(t1 - t0)
            stores.append(spent[0] - (t2 - t1))
            floors.append(t2 - t1)
    for name, fn in plain.items():
        setattr(store, name, fn)
    p50 = statistics.median
    fl = p50(floors)
    print(f"card x{rounds}, alternated with the floor: card {p50(cards) * 1e3:.3f} ms ({p50(cards) / fl:.2f}x), "
          f"floor {fl * 1e3:.3f} ms")
    print(f"  store calls in the card {p50(stores) * 1e3:.3f} ms ({p50(stores) / fl:.2f}x), "
          f"the rest {p50([c - s for c, s in zip(cards, stores)]) * 1e3:.3f} ms")
    per_card = {name: len(values) / (rounds + 50) for name, values in calls.items()}
    for name, values in calls.items():
        count = per_card[name] - (1 if name == "vector_search" else 0)  # the floor's own call
        if count > 0:
            print(f"  {name:15s} {count:.0f} per card, p50 {p50(values) * 1e6:.0f} us a call (the floor's calls included)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("build", "measure"))
    ap.add_argument("--backend", choices=("duckdb", "hnswlib"), default="hnswlib")
    ap.add_argument("--dir", required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--profile", choices=("vector", "card", "hybrid", "client"))
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--pairs", type=int, default=0, help="time client.search and the floor alternated, N pairs")
    ap.add_argument("--bench", action="store_true", help="run the bench's framework suite on a copy of the store")
    ap.add_argument("--card-split", action="store_true",
                    help="time the card alternated with the floor, its store calls apart (--rounds cards)")
    args = ap.parse_args()
    if args.mode == "build":
        build(args)
    elif args.bench:
        sys.path.insert(0, str(HERE.parent))
        bench_rows(args)
    else:
        measure(args)


if __name__ == "__main__":
    main()
