"""The quality evaluator scores a hand-made case exactly."""

from __future__ import annotations

from datetime import datetime, timezone

from agentmemory_bench.conversations import Conversation, Evidence, Message, Question, key_in_text
from agentmemory_bench.quality import aggregate, evaluate, fit_budget, score_context, window_method

from agentmemory.tokens import estimate_tokens

T = datetime(2025, 1, 1, tzinfo=timezone.utc)


def _question(qid: str, keys: list[str], stale: list[str] | None = None, kind: str = "fact") -> Question:
    return Question(qid, "?", kind, [Evidence(f"m{i}", k) for i, k in enumerate(keys)], stale or [])


def test_recall_counts_evidence_items_and_all_hits() -> None:
    both = _question("q1", ["Lisbon", "Biscuit"], kind="multi")
    single = _question("q2", ["TCK-123456"])
    update = _question("q3", ["Gdansk"], stale=["Graz"], kind="update")
    context = "user: we live in Lisbon now\nuser: ticket TCK-123456 is open\nuser: I live in Graz"
    s1, s2, s3 = (score_context(q, context) for q in (both, single, update))
    assert s1.found == [True, False] and s1.recall == 0.5 and not s1.all_found
    assert s2.found == [True] and s2.all_found
    assert s3.found == [False] and s3.stale_only
    agg = aggregate([s1, s2, s3], [both, single, update])
    assert agg["evidence_recall"] == 2 / 4  # items, not questions: Lisbon, TCK found; Biscuit, Gdansk not
    assert agg["all_evidence_hit_rate"] == 1 / 3
    assert agg["stale_only_rate"] == 1.0
    assert agg["mean_tokens"] == estimate_tokens(context)


def test_answer_strings_match_whole_words_only() -> None:
    assert key_in_text("Bob", "hi, I'm bob.")
    assert not key_in_text("Bob", "hi, I'm Bobby")
    assert not key_in_text("4821", "order 148210")
    assert key_in_text("TCK-123456", "ticket TCK-123456.")


def test_fit_budget_never_exceeds_and_never_splits() -> None:
    items = ["a" * 35, "b" * 35, "c" * 35]  # 10 tokens each, 1 more with a separator
    text = fit_budget(items, 21)
    assert text == items[0] + "\n" + items[1]
    assert estimate_tokens(text) <= 21
    assert fit_budget(items, 5) == ""


def test_window_method_keeps_the_newest_messages() -> None:
    msgs = [Message(f"m{i}", 0, "user", f"message number {i} about Lisbon" if i == 0 else f"message number {i}", T) for i in range(20)]
    conv = Conversation("c", "u", [msgs], [])
    q = Question("q", "Where?", "fact", [Evidence("m0", "Lisbon")])
    conv.questions.append(q)
    method = window_method()
    small = method.context(conv, q, 30)
    assert "message number 19" in small and "Lisbon" not in small
    assert estimate_tokens(small) <= 30
    result = evaluate([method], [conv], budgets=[30, 1000])
    assert result["last-N window"]["budgets"]["30"]["evidence_recall"] == 0.0
    assert result["last-N window"]["budgets"]["1000"]["evidence_recall"] == 1.0
