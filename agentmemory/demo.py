"""The demo: the seed scenarios played through the public API with the bundled local embedder
and no LLM (the offline rule-based extractor), then the shell commands that show what it stored.

    agentmemory demo                    # into the default store, the one AgentMemory() opens
    agentmemory demo --store URI        # into another store

Where it writes, and why that is safe: the demo plays into the store ``AgentMemory()`` and the
``agentmemory`` inspect commands open by default (``AGENTMEMORY_STORE``, else
``~/.agentmemory/memory.duckdb``), so ``agentmemory memories --user maya`` and
``agentmemory card demo-maya`` show its records without a ``--store``. That store may hold a
user's own data, so the demo never recreates it and touches only its own three threads,
``demo-maya``, ``demo-bob`` and ``demo-support-7421``:

- each is created with ``{"agentmemory_demo": true}`` in its metadata and with link extraction
  off, so extraction never links to, supersedes or invalidates a record outside those threads;
- a rerun first removes the previous run's threads with ``delete_thread`` (messages, memories,
  summaries, and their links, restoring anything a removed link had invalidated) and checks
  that no record scoped to them is left;
- a thread with one of these ids that the demo did not mark is someone else's: the demo leaves
  the store untouched and stops with an error naming it (play elsewhere with ``--store``).

The demo users (maya, bob, customer_123) get no profile and nothing outside those threads.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
import time

from .card_model import ContextCard
from .client import AgentMemory
from .errors import AgentMemoryError, NotFound
from .plugins import get_plugin_manager
from .registry import build_embedder, default_store_uri
from .spi import RecordFilter
from .thread import Thread

WIDTH = 100
DEMO_MARKER = "agentmemory_demo"
"""Thread metadata key that marks the demo's own threads (the only ones a rerun removes)."""
DEMO_THREADS = ("demo-maya", "demo-bob", "demo-support-7421")
DEMO_CONFIG = {"memory_link_extraction_mode": "disabled"}
"""Extraction settings of the demo threads: no links, so nothing outside them changes."""


class ForeignThread(AgentMemoryError):
    """A thread with a demo id exists but was not written by the demo."""


def _title(text: str) -> None:
    print("\n" + "=" * WIDTH + f"\n{text}\n" + "=" * WIDTH)


def _section(text: str) -> None:
    print(f"\n--- {text} " + "-" * max(0, WIDTH - len(text) - 5))


def _show_memories(memory: AgentMemory, thread_id: str) -> None:
    rows = memory.list_memories(thread_id=thread_id)
    if not rows:
        print("  (none)")
    for rec in rows:
        status = "" if rec.status.value == "valid" else f"  [{rec.status.value}]"
        print(f"  [{rec.record_type.value:10}] {rec.content}{status}")


def _show_card(card: ContextCard) -> None:
    print(textwrap.indent(card.content or "(empty card)", "  "))
    if card.is_transcript:
        print(f"\n  the transcript itself, sent in place of a card: {card.tokens} tokens ({card.token_counter})")
        return
    stands_for = "" if card.transcript_tokens is None else f"   the transcript it stands for: {card.transcript_tokens} tokens"
    print(f"\n  card: {card.tokens} tokens ({card.token_counter}){stands_for}")
    if card.note:
        print(textwrap.fill(f"({card.note})", 98, initial_indent="  ", subsequent_indent="   "))


def _demo_thread(memory: AgentMemory, thread_id: str, user_id: str, agent_id: str) -> Thread:
    """One of the demo's threads, marked as the demo's and with link extraction off."""
    return memory.create_thread(
        thread_id, user_id=user_id, agent_id=agent_id, metadata={DEMO_MARKER: True}, memory_extraction_config=DEMO_CONFIG
    )


def forget_previous_run(memory: AgentMemory) -> int:
    """Delete what an earlier demo run wrote (its marked threads and everything scoped to them);
    return how many records went. ``ForeignThread`` (before deleting anything) when a demo id
    belongs to a thread the demo did not write."""
    ours = []
    for thread_id in DEMO_THREADS:
        try:
            thread = memory.get_thread(thread_id)
        except NotFound:
            continue
        if thread.metadata.get(DEMO_MARKER) is not True:
            raise ForeignThread(
                f"thread {thread_id!r} in this store was not written by the demo; leaving the store as it is "
                "(play the demo elsewhere: agentmemory demo --store URI)"
            )
        ours.append(thread_id)
    removed = sum(memory.delete_thread(thread_id) for thread_id in ours)
    left = [t for t in DEMO_THREADS if memory.store.count(RecordFilter(thread_id=t))]
    if left:
        raise AgentMemoryError(f"records of demo thread(s) {', '.join(left)} are still in the store after deleting them")
    return removed
def maya(memory: AgentMemory) -> None:
    """Seed 000: Maya migrates invoice reconciliation; the card answers who/what/which step."""
    _title("1. Maya migrates invoice reconciliation (seed 000): short-term memory and the context card")
    thread = _demo_thread(memory, "demo-maya", "maya", "ops-assistant")
    turns = [
        ("user", "I'm Maya. I'm migrating our nightly invoice reconciliation workflow from cron jobs to LangGraph."),
        ("assistant", "Nice project. LangGraph gives you retries and checkpoints per step. Which steps does the nightly job run?"),
        ("user", "It pulls bank statements, matches them against open invoices, then runs ledger enrichment and posts the journal."),
        ("assistant", "Good. We can model each of those as a node and keep the cron trigger until parity is proven."),
        ("user", "The failing step right now is ledger enrichment after reconciliation."),
        ("assistant", "Understood. Let's look at the enrichment node's inputs first; which error do you see?"),
        ("user", "It times out when the FX rate service is slow. I prefer fixes that keep the job idempotent."),
        ("assistant", "Then we add a bounded retry with a cached FX snapshot so reruns produce the same journal."),
        ("user", "Where should the FX snapshot live?"),
        ("assistant", "Store it next to the run's checkpoint: the LangGraph checkpointer already persists state per "
         "thread, so a retried run reads the same snapshot. Key it by business date, keep the last 30 days, and make the "
         "enrichment node read only from the snapshot, never from the live service, once the snapshot exists. That "
         "gives you deterministic reruns and a clear audit trail of which rates were used for which journal."),
        ("user", "And how do I test parity with the cron job?"),
        ("assistant", "Run both pipelines for a week on the same inputs, write both journals to separate tables, and "
         "diff them nightly: count of lines, totals per account and currency, and the set of matched invoice ids. Only "
         "when a full week is identical do you switch the trigger. Keep the cron job as a fallback for one more week."),
        ("user", "What workflow am I migrating, which step is failing, and who am I?"),
    ]
    for role, content in turns:
        thread.add_messages([{"role": role, "content": content}])
    _section("memories extracted offline (rule-based extractor, no LLM)")
    _show_memories(memory, "demo-maya")
    _section('search: "which step fails in the reconciliation job?"')
    for result in thread.search("which step fails in the reconciliation job?", max_results=3):
        print(f"  {result.score:.3f}  [{result.record_type.value}] {result.content}")
    _section("context card, external-tail pattern (the caller appends the newest turn raw)")
    card = thread.get_context_card(except_last_messages=1, max_recent_messages=0)
    _show_card(card)


def bob(memory: AgentMemory) -> None:
    """Seed 002: the name that LangChain's summarization lost survives compaction here."""
    _title("2. Bob's name survives compaction (seed 002)")
    thread = _demo_thread(memory, "demo-bob", "bob", "poet")
    cats = "Soft paws on the windowsill, a tail that flicks the evening still; " * 6
    dogs = "A wagging tail, a muddy paw, the happiest bark you ever saw; " * 6
    turns = [
        ("user", "hi, my name is bob"),
        ("assistant", "Hi Bob! It's nice to meet you. How can I help you today?"),
        ("user", "write a short poem about cats"),
        ("assistant", cats.strip()),
        ("user", "now do the same but for dogs"),
        ("assistant", dogs.strip()),
        ("user", "what's my name?"),
    ]
    thread.add_messages([{"role": r, "content": c} for r, c in turns])
    _section("memories")
    _show_memories(memory, "demo-bob")
    _section("self-contained card with the last 2 messages inside (compaction keeps 'Bob')")
    card = thread.get_context_card(except_last_messages=2, max_recent_messages=2, max_relevant_results=3)
    _show_card(card)
    print(f"\n  'Bob' in the compacted prompt: {'Bob' in card.content}")


def support(memory: AgentMemory) -> None:
    """Seed 001: a support ticket; the order fact is stored and found."""
    _title("3. Support ticket 7421 (seed 001): facts from a support chat")
    thread = _demo_thread(memory, "demo-support-7421", "customer_123", "support-bot")
    thread.add_messages(
        [
            {"role": "user", "content": "Hi, order 7421 arrived damaged. I need a return request and a replacement delivery."},
            {"role": "assistant", "content": "I can help start the return request for order 7421."},
            {"role": "user", "content": "Thanks! Please always email me instead of calling."},
        ]
    )
    _section("memories")
    _show_memories(memory, "demo-support-7421")
    _section('thread.search("return request order 7421", record_types=["fact"])')
    for result in thread.search("return request order 7421", max_results=5, record_types=["fact"]):
        print(f"  - [{result.record_type.value}] {result.content}")
    _section("card with reserved slots: min_relevant_results_by_type={fact:1, guideline:1, message:1}")
    card = thread.get_context_card(min_relevant_results_by_type={"fact": 1, "guideline": 1, "message": 1})
    _show_card(card)
    _section("the same card with short_thread='transcript': a thread this short is sent as it is")
    _show_card(thread.get_context_card(min_relevant_results_by_type={"fact": 1, "guideline": 1, "message": 1}, short_thread="transcript"))


def inspect_commands(uri: str, explicit_store: bool, embedder: str | None) -> list[str]:
    """The shell commands that show what the demo stored (with ``--store``/``--embedder`` when
    the demo was not played on the defaults)."""
    extra = (f" --store {shlex.quote(uri)}" if explicit_store else "") + (f" --embedder {shlex.quote(embedder)}" if embedder else "")
    return [
        f"agentmemory memories --user maya{extra}",
        f"agentmemory card demo-maya{extra}",
        f"agentmemory messages demo-bob --last 3{extra}",
        f"agentmemory search 'order 7421' --user customer_123{extra}",
        f"agentmemory threads --user maya --json{extra}",
        f"agentmemory stats{extra}",
    ]


def main(argv: list[str] | None = None) -> int:
    """Run every scenario; print what a person wants to see and how to inspect it afterwards."""
    parser = argparse.ArgumentParser(prog="agentmemory demo", description="Play the seed scenarios offline.")
    parser.add_argument("--store", help="store URI (default: the one AgentMemory() opens: $AGENTMEMORY_STORE, else ~/.agentmemory/memory.duckdb)")
    parser.add_argument("--embedder", help="registered embedder name (default: the bundled local model)")
    args = parser.parse_args(argv if argv is not None else sys.argv[2:])
    plugins = get_plugin_manager()
    uri = args.store or default_store_uri(plugins)
    started = time.perf_counter()
    try:
        embedder = build_embedder(args.embedder or None, plugins)
        with AgentMemory(uri, embedder=embedder, plugin_manager=plugins) as memory:
            removed = forget_previous_run(memory)
            print(f"store: {uri}   backend: {memory.store.name}   embedder: {memory.embedder.name} ({memory.embedder.dimension}-d)   llm: none (rule-based extraction)")
            if removed:
                print(f"(removed the previous demo run: {removed} records of threads {', '.join(DEMO_THREADS)})")
            maya(memory)
            bob(memory)
            support(memory)
    except AgentMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"\ndone in {time.perf_counter() - started:.1f}s")
    if uri.startswith("memory://"):
        print("the in-process store (memory://) is gone now; install agentmemory-duckdb or pass --store to keep the demo's records")
        return 0
    print(f"\nwhat the demo stored is in {uri}; look at it from the shell:")
    for command in inspect_commands(uri, args.store is not None, args.embedder):
        print(f"  {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
