"""Framework operations on a backend that already holds the speed suite's records: the cost the
core adds on top of the store — ``add_messages`` (with and without rule-based extraction),
context-card builds, client search with hops and budgets — with the embedder's time taken out
(texts are pre-embedded by a caching wrapper; any model time that remains is subtracted and
reported apart). Embedder costs per text are measured separately.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from agentmemory import AgentMemory
from agentmemory.embedders import Embedder, HashingEmbedder
from agentmemory.spi import Capability, MemoryStore, RecordFilter

from .conversations import Conversation, generate_conversation
from .embedding import CachedEmbedder, per_text_cost
from .measure import Latencies
from .progress import Progress

AGENT = "bench-agent"


FLOOR = "SPI vector_search (same scope)"
"""The row each section's ratios divide by: the store's own ``vector_search`` for the user's scope."""


def _round_robin(
    variants: list[tuple[str, Callable[[int], Callable[[], Any]]]],
    embedder: CachedEmbedder,
    *,
    rounds: int,
    seed: int,
    budget_s: float | None,
) -> dict[str, Any]:
    """Time every variant once per round, in an order shuffled each round (seeded), so a cache
    warming up or a busy machine weighs on every row alike; each row gets ``x_floor``, its p50
    over the ``FLOOR`` row's. Stops after ``rounds`` or, given ``budget_s``, once the time is
    spent (at least 3 rounds)."""
    rng = random.Random(seed)
    timings: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, _ in variants}
    order = list(variants)
    start = time.perf_counter()
    for i in range(rounds):
        rng.shuffle(order)
        for label, make in order:
            w, m = _timed(make(i), embedder)
            timings[label][0].append(w)
            timings[label][1].append(m)
        if budget_s is not None and i >= 2 and time.perf_counter() - start > budget_s:
            break
    rows = {label: _summ(*timings[label]) for label, _ in variants}
    floor_ms = rows[FLOOR]["p50_ms"] if FLOOR in rows else 0.0
    for row in rows.values():
        row["x_floor"] = row["p50_ms"] / floor_ms if floor_ms > 0 else None
    return rows


def _timed(fn: Callable[[], Any], embedder: CachedEmbedder) -> tuple[float, float]:
    """(wall seconds, seconds of it spent in the embedding model)."""
    before = embedder.inner_seconds
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return wall, embedder.inner_seconds - before


def _summ(walls: list[float], model: list[float]) -> dict[str, Any]:
    overhead = Latencies([w - m for w, m in zip(walls, model)])
    total = Latencies(walls)
    return {
        "p50_ms": overhead.pct(50),
        "p95_ms": overhead.pct(95),
        "with_embedder_p50_ms": total.pct(50),
        "embedder_ms_total": sum(model) * 1000.0,
        "count": len(walls),
    }


def run_framework(store: MemoryStore, *, seed: int, user_prefix: str, budget_s: float = 20.0) -> dict[str, Any]:
    """Measure the framework operations on ``store`` (already open; it is left open)."""
    conv = generate_conversation(0, seed=seed, sessions=4, turns_per_session=25)
    embedder = CachedEmbedder(HashingEmbedder(store.dimension))
    embedder.warm([m.content for m in conv.messages])
    embedder.warm([q.text for q in conv.questions], is_query=True)
    out: dict[str, Any] = {"conversation_messages": len(conv.messages)}
    off = AgentMemory(store=store, embedder=embedder, memory_extraction_config={"extract_memories": False, "enable_context_summary": False})
    on = AgentMemory(store=store, embedder=embedder)
    user = f"{user_prefix}-fw-user"
    for label, client in (("add_messages (no extraction)", off), ("add_messages (rule-based extraction)", on)):
        walls: list[float] = []
        model: list[float] = []
        with Progress(f"framework {label}", len(conv.messages)) as bar:
            for index, session in enumerate(conv.sessions):
                thread = client.create_thread(
                    thread_id=f"{user_prefix}-{'x' if client is on else 'n'}-s{index}", user_id=user if client is on else f"{user}-n", agent_id=AGENT
                )
                for start in range(0, len(session), 2):
                    pair = session[start : start + 2]
                    msgs = [{"id": f"{m.message_id}-{'x' if client is on else 'n'}", "role": m.role, "content": m.content} for m in pair]
                    w, m = _timed(partial(thread.add_messages, msgs), embedder)
                    walls.append(w)
                    model.append(m)
                    bar.advance(len(pair))
        out[label] = {**_summ(walls, model), "messages_per_call": 2}
    thread = on.get_thread(f"{user_prefix}-x-s{len(conv.sessions) - 1}")
    out["memories_extracted"] = len(on.list_memories(user_id=user, limit=10_000))
    # link the extracted memories in a chain so hops have something to walk
    memories = on.list_memories(user_id=user, limit=10_000)
    links = 0
    for a, b in zip(memories, memories[1:]):
        try:
            on.link_records(a.record_id, b.record_id, "supports")
            links += 1
        except Exception:  # noqa: BLE001 - already linked or not linkable: hops still measured
            pass
    out["links_created"] = links
    questions = [q.text for q in conv.questions]
    vectors = embedder.embed(questions, is_query=True)
    flt = RecordFilter(user_id=user)

    def floor(i: int) -> Callable[[], Any]:
        return partial(store.vector_search, vectors[i % len(questions)], flt, 10)

    # the floor (the same scoped query straight through the SPI: what the pipeline adds on top)
    # is timed inside every round robin, beside the rows it is the floor of, so a ratio compares
    # calls made under the same caches and the same load
    card_variants: list[tuple[str, Callable[[int], Callable[[], Any]]]] = [
        (FLOOR, floor),
        ("card (defaults)", lambda i: thread.get_context_card),
        ("card (token_budget=1000, 20 results)", lambda i: partial(thread.get_context_card, token_budget=1000, max_relevant_results=20)),
        (
            "card (min by type, tail of 4)",
            lambda i: partial(
                thread.get_context_card, min_relevant_results_by_type={"preference": 1, "fact": 2, "message": 2}, except_last_messages=4
            ),
        ),
    ]
    out["context_card"] = _round_robin(card_variants, embedder, rounds=30, seed=seed, budget_s=budget_s)
    keyword = Capability.KEYWORD_SEARCH in store.capabilities()
    variants: list[tuple[str, dict[str, Any]]] = [
        ("default strategy, 10 results", {}),
        ("vector, 10 results", {"strategy": "vector"}),
        ("vector, num_hops=2", {"strategy": "vector", "num_hops": 2}),
        ("vector, token_budget=500", {"strategy": "vector", "token_budget": 500, "max_results": 50}),
        ("vector, memories only", {"strategy": "vector", "record_types": ["memory", "fact", "preference", "guideline"]}),
    ]
    if keyword:
        variants += [("keyword", {"strategy": "keyword"}), ("hybrid", {"strategy": "hybrid"})]
    search_variants: list[tuple[str, Callable[[int], Callable[[], Any]]]] = [(FLOOR, floor)]

    def searcher(kwargs: dict[str, Any]) -> Callable[[int], Callable[[], Any]]:
        return lambda i: partial(on.search, questions[i % len(questions)], user_id=user, **kwargs)

    search_variants += [(label, searcher(kwargs)) for label, kwargs in variants]
    searches = _round_robin(search_variants, embedder, rounds=40, seed=seed + 1, budget_s=None)
    out["search"] = searches
    out["turn"] = _turns(on, conv, user, user_prefix, embedder)
    return out


def _turns(client: AgentMemory, conv: Conversation, user: str, user_prefix: str, embedder: CachedEmbedder) -> dict[str, Any]:
    """An agent's turn as it happens: ``add_messages`` (2 messages, rule-based extraction), then
    the card. Unlike the card rows above (cards repeated on an unchanged store), every card here
    follows a write, so nothing a store memoises between writes is reused from the previous
    card. Runs last, on a new thread of the same user, so it changes nothing measured above."""
    thread = client.create_thread(thread_id=f"{user_prefix}-turns", user_id=user, agent_id=AGENT)
    session = conv.sessions[0]
    adds: tuple[list[float], list[float]] = ([], [])
    cards: tuple[list[float], list[float]] = ([], [])
    for start in range(0, len(session) - 1, 2):
        msgs = [{"id": f"{m.message_id}-t", "role": m.role, "content": m.content} for m in session[start : start + 2]]
        for (walls, model), fn in ((adds, partial(thread.add_messages, msgs)), (cards, thread.get_context_card)):
            w, m = _timed(fn, embedder)
            walls.append(w)
            model.append(m)
    return {
        "add_messages (rule-based extraction)": _summ(*adds),
        "card after the write": _summ(*cards),
        "turn (both)": _summ([a + c for a, c in zip(adds[0], cards[0])], [a + c for a, c in zip(adds[1], cards[1])]),
    }


def embedder_costs(texts: list[str], extra: dict[str, Embedder]) -> dict[str, Any]:
    """Per-text cost of each embedder at batch sizes 1 and 32."""
    out: dict[str, Any] = {}
    for name, emb in extra.items():
        out[name] = {
            "batch_1": per_text_cost(emb, texts[:12], batch=1),
            "batch_32": per_text_cost(emb, texts[:64], batch=32),
            "dimension": emb.dimension,
        }
    return out


def conversation_texts(seed: int) -> list[str]:
    """Realistic message texts for embedder timing."""
    conv: Conversation = generate_conversation(1, seed=seed, sessions=3, turns_per_session=20)
    return [m.content for m in conv.messages]
