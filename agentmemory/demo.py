"""The demo: the seed scenarios played through the public API on the embedded default store
with the bundled local embedder and no LLM (the offline rule-based extractor).

    agentmemory demo            # a fresh demo store under ~/.agentmemory/demo/ (recreated each run)
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time
from pathlib import Path

from .client import AgentMemory
from .client import AgentMemory as _Client
from .registry import HOME_ENV, STORE_ENV
from .spi import SchemaPolicy
from .tokens import estimate_tokens

WIDTH = 100


def _title(text: str) -> None:
    print("\n" + "=" * WIDTH + f"\n{text}\n" + "=" * WIDTH)


def _section(text: str) -> None:
    print(f"\n--- {text} " + "-" * max(0, WIDTH - len(text) - 5))


def _show_memories(memory: _Client, user_id: str) -> None:
    rows = memory.list_memories(user_id=user_id)
    if not rows:
        print("  (none)")
    for rec in rows:
        status = "" if rec.status.value == "valid" else f"  [{rec.status.value}]"
        print(f"  [{rec.record_type.value:10}] {rec.content}{status}")


def _show_card(content: str, transcript_tokens: int) -> None:
    print(textwrap.indent(content or "(empty card)", "  "))
    print(f"\n  card: {estimate_tokens(content)} tokens   full transcript: {transcript_tokens} tokens")


def _store_uri() -> str:
    if os.environ.get(STORE_ENV):
        return os.environ[STORE_ENV]
    home = Path(os.environ.get(HOME_ENV) or Path.home() / ".agentmemory")
    from .plugins import get_plugin_manager

    if "duckdb" in get_plugin_manager().names("backends"):
        (home / "demo").mkdir(parents=True, exist_ok=True)
        return f"duckdb://{(home / 'demo' / 'demo.duckdb').resolve()}"
    print("note: agentmemory-duckdb is not installed, the demo runs on the in-process store", file=sys.stderr)
    return "memory://"


def maya(memory: _Client) -> None:
    """Seed 000: Maya migrates invoice reconciliation; the card answers who/what/which step."""
    _title("1. Maya migrates invoice reconciliation (seed 000): short-term memory and the context card")
    thread = memory.create_thread("demo-maya", user_id="maya", agent_id="ops-assistant")
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
    transcript = sum(estimate_tokens(c) for _, c in turns)
    _section("memories extracted offline (rule-based extractor, no LLM)")
    _show_memories(memory, "maya")
    _section('search: "which step fails in the reconciliation job?"')
    for result in thread.search("which step fails in the reconciliation job?", max_results=3):
        print(f"  {result.score:.3f}  [{result.record_type.value}] {result.content}")
    _section("context card, external-tail pattern (the caller appends the newest turn raw)")
    card = thread.get_context_card(except_last_messages=1, max_recent_messages=0)
    _show_card(card.content, transcript)


def bob(memory: _Client) -> None:
    """Seed 002: the name that LangChain's summarization lost survives compaction here."""
    _title("2. Bob's name survives compaction (seed 002)")
    thread = memory.create_thread("demo-bob", user_id="bob", agent_id="poet")
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
    transcript = sum(estimate_tokens(c) for _, c in turns)
    _section("memories")
    _show_memories(memory, "bob")
    _section("self-contained card with the last 2 messages inside (compaction keeps 'Bob')")
    card = thread.get_context_card(except_last_messages=2, max_recent_messages=2, max_relevant_results=3)
    _show_card(card.content, transcript)
    print(f"\n  'Bob' in the compacted prompt: {'Bob' in card.content}")


def support(memory: _Client) -> None:
    """Seed 001: a support ticket; the order fact is stored and found."""
    _title("3. Support ticket 7421 (seed 001): facts from a support chat")
    thread = memory.create_thread("demo-support-7421", user_id="customer_123", agent_id="support-bot")
    thread.add_messages(
        [
            {"role": "user", "content": "Hi, order 7421 arrived damaged. I need a return request and a replacement delivery."},
            {"role": "assistant", "content": "I can help start the return request for order 7421."},
            {"role": "user", "content": "Thanks! Please always email me instead of calling."},
        ]
    )
    _section("memories")
    _show_memories(memory, "customer_123")
    _section('thread.search("return request order 7421", record_types=["fact"])')
    for result in thread.search("return request order 7421", max_results=5, record_types=["fact"]):
        print(f"  - [{result.record_type.value}] {result.content}")
    _section("card with reserved slots: min_relevant_results_by_type={fact:1, guideline:1, message:1}")
    card = thread.get_context_card(min_relevant_results_by_type={"fact": 1, "guideline": 1, "message": 1})
    print(textwrap.indent(card.content, "  "))


def main(argv: list[str] | None = None) -> int:
    """Run every scenario; print what a person wants to see."""
    parser = argparse.ArgumentParser(prog="agentmemory demo", description="Play the seed scenarios offline.")
    parser.parse_args(argv if argv is not None else sys.argv[2:])
    uri = _store_uri()
    started = time.perf_counter()
    with AgentMemory(uri, schema_policy=SchemaPolicy.RECREATE) as memory:
        print(f"store: {uri}   backend: {memory.store.name}   embedder: {memory.embedder.name} ({memory.embedder.dimension}-d)   llm: none (rule-based extraction)")
        maya(memory)
        bob(memory)
        support(memory)
    print(f"\ndone in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
