"""Memory quality: does the evidence a question needs reach a prompt of a given token budget?

Methods compared at budgets of 500/1000/2000/4000 tokens (``agentmemory.tokens.estimate_tokens``):
the last-N-messages window (what trimming middleware keeps), vector, keyword and hybrid search over
the stored messages, and the context card (``Thread.get_context_card(token_budget=...)``) built with
the offline rule-based extractor. Peers plug in as further methods (see ``peers``).

An evidence item counts as found when its answer string appears (whole word, any case) in the
context text handed to the model; the generator guarantees that string occurs nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agentmemory import AgentMemory, Thread
from agentmemory.spi import Capability, MemoryStore
from agentmemory.tokens import estimate_tokens

from .conversations import Conversation, Question, key_in_text
from .progress import Progress

BUDGETS: tuple[int, ...] = (500, 1000, 2000, 4000)
SEARCH_MAX_RESULTS = 300
AGENT = "assistant"


@dataclass
class QuestionScore:
    """How one context fared on one question."""

    found: list[bool]
    stale_only: bool
    tokens: int

    @property
    def recall(self) -> float:
        """Fraction of this question's evidence found."""
        return sum(self.found) / len(self.found) if self.found else 1.0

    @property
    def all_found(self) -> bool:
        """Every evidence item found."""
        return all(self.found)


def score_context(question: Question, context: str) -> QuestionScore:
    """Which of the question's answer strings are in ``context``; whether only a superseded
    value (and not the current one) made it."""
    found = [key_in_text(e.key, context) for e in question.evidence]
    stale = any(key_in_text(k, context) for k in question.stale_keys)
    return QuestionScore(found=found, stale_only=stale and not all(found), tokens=estimate_tokens(context))


def aggregate(scores: Sequence[QuestionScore], questions: Sequence[Question]) -> dict[str, Any]:
    """Evidence recall (found items / all items), all-evidence hit rate (questions with every item
    found), stale-only rate among updated facts, mean context tokens."""
    items = sum(len(s.found) for s in scores)
    updates = [s for s, q in zip(scores, questions) if q.stale_keys]
    return {
        "evidence_recall": sum(sum(s.found) for s in scores) / items if items else None,
        "all_evidence_hit_rate": sum(s.all_found for s in scores) / len(scores) if scores else None,
        "stale_only_rate": sum(s.stale_only for s in updates) / len(updates) if updates else None,
        "mean_tokens": float(np.mean([s.tokens for s in scores])) if scores else None,
        "questions": len(scores),
        "evidence_items": items,
    }


def fit_budget(items: Sequence[str], budget: int, sep: str = "\n") -> str:
    """Join ``items`` in order while the whole text stays within ``budget`` tokens (never splits)."""
    kept: list[str] = []
    for item in items:
        candidate = sep.join([*kept, item])
        if estimate_tokens(candidate) > budget:
            break
        kept.append(item)
    return sep.join(kept)


def line(role: str | None, content: str) -> str:
    """The compact rendering every message-retrieval method shares (window, search, peers), so
    budgets compare what was retrieved, not markup."""
    return f"{role or 'memory'}: {content}"


# ---- methods ------------------------------------------------------------------------------------
ContextFn = Callable[[Conversation, Question, int], str]


@dataclass
class Method:
    """A named way of building the prompt context for a question at a budget."""

    name: str
    context: ContextFn
    latencies: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def window_method() -> Method:
    """The newest messages that fit, oldest first (``role: content`` lines)."""

    def context(conv: Conversation, question: Question, budget: int) -> str:
        lines = [line(m.role, m.content) for m in reversed(conv.messages)]
        kept = fit_budget(lines, budget).split("\n") if lines else []
        return "\n".join(reversed(kept))

    return Method("last-N window", context)


def fitted_card(thread: Thread, budget: int, count: Callable[[str], int] = estimate_tokens) -> str:
    """``thread.get_context_card(token_budget=...)`` (the default card: the budget, not a result
    count, sizes it) with its budget lowered (up to six tries)
    until the card's text fits ``budget`` as ``count`` measures it; returns the last card's text
    (the caller decides what to do if it still does not fit)."""
    relevant_budget = budget
    text = ""
    for _ in range(6):
        card = thread.get_context_card(token_budget=relevant_budget)
        text = card.content
        over = count(text) - budget
        if over <= 0:
            break
        relevant_budget = max(1, relevant_budget - over)
    return text


class QualityStore:
    """The conversations ingested through the public API (one thread per session), with the
    offline rule-based extractor writing memories as messages arrive."""

    def __init__(self, store: MemoryStore, embedder: Any, conversations: Sequence[Conversation]) -> None:
        self.client = AgentMemory(store=store, embedder=embedder)
        self.threads: dict[str, Thread] = {}
        self.ingest_seconds = 0.0
        self.memories: dict[str, int] = {}
        with Progress("quality ingest (add_messages)", sum(len(c.messages) for c in conversations)) as bar:
            for conv in conversations:
                for index, session in enumerate(conv.sessions):
                    thread = self.client.create_thread(
                        thread_id=f"{conv.conversation_id}-s{index}", user_id=conv.user_id, agent_id=AGENT
                    )
                    for start in range(0, len(session), 2):
                        pair = session[start : start + 2]
                        t0 = time.perf_counter()
                        thread.add_messages(
                            [{"id": m.message_id, "role": m.role, "content": m.content, "timestamp": m.timestamp} for m in pair]
                        )
                        self.ingest_seconds += time.perf_counter() - t0
                        bar.advance(len(pair))
                    self.threads[conv.conversation_id] = thread  # the last session's thread
                self.memories[conv.conversation_id] = len(
                    self.client.list_memories(user_id=conv.user_id, limit=10_000)
                )

    def extractor_coverage(self, conversations: Sequence[Conversation]) -> dict[str, Any]:
        """Which planted facts the rule-based extractor turned into memories: the share of current
        answer strings found in a valid memory (and in any memory), overall and per fact slot."""
        from agentmemory.records import RecordStatus

        hits_valid = hits_any = total = 0
        by_slot: dict[str, list[int]] = {}
        for conv in conversations:
            memories = self.client.list_memories(user_id=conv.user_id, limit=10_000)
            valid = " \n ".join(m.content for m in memories if m.status is RecordStatus.VALID)
            everything = " \n ".join(m.content for m in memories)
            for question in conv.questions:
                if question.kind in ("multi", "multi-hop", "temporal"):  # not fact slots of their own
                    continue
                slot = question.question_id.rsplit("-q-", 1)[-1]
                for ev in question.evidence:
                    total += 1
                    in_valid = key_in_text(ev.key, valid)
                    hits_valid += in_valid
                    hits_any += key_in_text(ev.key, everything)
                    by_slot.setdefault(slot, []).append(int(in_valid))
        return {
            "current": hits_valid / total if total else None,
            "any": hits_any / total if total else None,
            "by_slot": {k: sum(v) / len(v) for k, v in by_slot.items()},
            "facts": total,
        }

    @property
    def keyword(self) -> bool:
        """Whether the store can do keyword (and so hybrid) search."""
        return Capability.KEYWORD_SEARCH in self.client.store.capabilities()

    def search_method(self, strategy: str) -> Method:
        """``client.search`` over the user's messages (all threads), ranked results rendered as
        ``role: content`` lines and cut at the budget."""

        def context(conv: Conversation, question: Question, budget: int) -> str:
            results = self.client.search(
                question.text, user_id=conv.user_id, record_types=["message"], max_results=SEARCH_MAX_RESULTS,
                strategy=strategy,
            )
            return fit_budget([line(r.record.role, r.record.content) for r in results], budget)

        return Method(f"{strategy} search", context)

    def card_method(self) -> Method:
        """The context card of the newest session's thread, with the question as the newest user
        turn; its ``token_budget`` is lowered until the whole card fits the budget."""

        def context(conv: Conversation, question: Question, budget: int) -> str:
            # a handle that does not extract from the question (derived memories would outlive it)
            thread = self.client.get_thread(self.threads[conv.conversation_id].thread_id, extract_memories=False)
            qid = f"{question.question_id}-ask"
            thread.add_messages([{"id": qid, "role": "user", "content": question.text}])
            try:
                text = fitted_card(thread, budget)
                return text if estimate_tokens(text) <= budget else fit_budget(text.split("\n"), budget)
            finally:
                thread.delete_message(qid)

        return Method("context card", context)

    def default_card_tokens(self, conv: Conversation) -> int:
        """Tokens of the card with default settings (question-free: the thread as it stands)."""
        return estimate_tokens(self.threads[conv.conversation_id].get_context_card().content)


def evaluate(
    methods: Sequence[Method], conversations: Sequence[Conversation], budgets: Sequence[int] = BUDGETS
) -> dict[str, Any]:
    """Score every method at every budget on every question."""
    out: dict[str, Any] = {}
    total = len(methods) * len(budgets) * sum(len(c.questions) for c in conversations)
    with Progress("quality evaluate", total) as bar:
        for method in methods:
            per_budget: dict[str, Any] = {}
            for budget in budgets:
                scores: list[QuestionScore] = []
                questions: list[Question] = []
                kinds: dict[str, list[QuestionScore]] = {}
                kind_questions: dict[str, list[Question]] = {}
                for conv in conversations:
                    for question in conv.questions:
                        t0 = time.perf_counter()
                        try:
                            text = method.context(conv, question, budget)
                        except Exception as exc:  # noqa: BLE001 - a failing method is reported, not fatal
                            method.notes.append(f"{type(exc).__name__}: {exc}")
                            text = ""
                        method.latencies.append(time.perf_counter() - t0)
                        score = score_context(question, text)
                        scores.append(score)
                        questions.append(question)
                        kinds.setdefault(question.kind, []).append(score)
                        kind_questions.setdefault(question.kind, []).append(question)
                        bar.advance()
                entry = aggregate(scores, questions)
                entry["by_kind"] = {k: aggregate(v, kind_questions[k]) for k, v in sorted(kinds.items())}
                per_budget[str(budget)] = entry
            lat = sorted(method.latencies)
            out[method.name] = {
                "budgets": per_budget,
                "p50_ms": lat[len(lat) // 2] * 1000 if lat else None,
                "notes": sorted(set(method.notes))[:5],
            }
    return out
