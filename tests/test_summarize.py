"""The offline extractive summary: salient sentences kept, near-duplicates dropped, budget
respected, chronological order, deterministic."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from agentmemory.records import Record, RecordType
from agentmemory.summarize import extractive_summary
from agentmemory.tokens import estimate_tokens

T0 = datetime(2025, 5, 1, 9, tzinfo=timezone.utc)


def msgs(*turns: tuple[str, str]) -> list[Record]:
    return [
        Record(record_id=f"m{i}", record_type=RecordType.MESSAGE, role=role, content=text, seq=i,
               timestamp=T0 + timedelta(minutes=i), created_at=T0 + timedelta(minutes=i))
        for i, (role, text) in enumerate(turns)
    ]


CHAT = msgs(
    ("user", "Hi there!"),
    ("assistant", "Hello! How can I help you today?"),
    ("user", "The nightly deploy of the billing service fails with a database migration error."),
    ("assistant", "Which migration fails? The billing service deploy log should name the migration."),
    ("user", "Migration 0042 fails on the invoices table in the billing database, it adds a non-null column."),
    ("assistant", "Thanks."),
    ("user", "lol ok"),
    ("assistant", "A non-null column on the invoices table needs a default, so migration 0042 fails on existing rows."),
    ("user", "The nightly deploy of the billing service fails with a database migration error."),
    ("user", "Cool, I'll add a default to migration 0042 and rerun the billing deploy tonight."),
    ("assistant", "Sounds good. Have a nice day!"),
)


def test_empty_input_and_budget() -> None:
    assert extractive_summary([], 100) == ""
    assert extractive_summary(msgs(("user", "   ")), 100) == ""
    assert extractive_summary(CHAT, 0) == ""


def test_salient_sentences_are_kept_and_small_talk_is_not() -> None:
    summary = extractive_summary(CHAT, 80)
    assert "0042" in summary and "billing" in summary
    for chatter in ("Hi there", "lol ok", "Have a nice day", "Thanks."):
        assert chatter not in summary


def test_near_duplicates_are_dropped() -> None:
    summary = extractive_summary(CHAT, 10_000)
    assert "lol ok" not in summary and "Thanks." not in summary  # content-free, even with room
    assert summary.count("The nightly deploy of the billing service fails") == 1
    near = msgs(
        ("user", "My flight to Oslo leaves on Friday at 7am from gate B12."),
        ("user", "Reminder: my flight to Oslo leaves Friday at 7am, gate B12."),
        ("user", "I still need to book a hotel near the harbour for three nights."),
    )
    out = extractive_summary(near, 10_000)
    assert out.count("Oslo") == 1 and "hotel" in out


def test_a_clause_repeated_in_one_message_is_summarised_once() -> None:
    """A verse repeats its line, semicolon after semicolon, in one message without a full stop:
    the summary shows the line once (seed 002's poem once filled the summary six times)."""
    line = "Soft paws on the windowsill, a tail that flicks the evening still;"
    out = extractive_summary(msgs(("user", "write a short poem about cats"), ("assistant", " ".join([line] * 6))), 10_000)
    assert out.count("Soft paws on the windowsill") == 1
    assert "poem about cats" in out


@pytest.mark.parametrize("budget", [1, 5, 12, 30, 60, 120, 400])
def test_the_budget_is_respected(budget: int) -> None:
    summary = extractive_summary(CHAT, budget)
    assert estimate_tokens(summary) <= budget
    if budget >= 5:  # below that not even "user: …" fits
        assert summary  # a tiny budget gives the best sentence, clipped


def test_chronological_order_and_role_lines() -> None:
    summary = extractive_summary(CHAT, 10_000)
    lines = summary.split("\n")
    assert all(line.split(": ", 1)[0] in {"user", "assistant"} for line in lines)
    order = [next(i for i, m in enumerate(CHAT) if line.split(": ", 1)[1].split(" … ")[0] in m.content) for line in lines]
    assert order == sorted(order)


def test_deterministic() -> None:
    assert extractive_summary(CHAT, 50) == extractive_summary(list(CHAT), 50)


def test_the_same_messages_are_summarised_once() -> None:
    """A card built again on an unchanged thread reuses the summary: the result depends only on
    roles, texts, budget and counter, and is remembered."""
    from agentmemory.summarize import _remembered_summary

    before = _remembered_summary.cache_info()
    first = extractive_summary(CHAT, 4321)
    again = extractive_summary(list(CHAT), 4321)
    after = _remembered_summary.cache_info()
    assert first == again
    assert (after.hits, after.misses) == (before.hits + 1, before.misses + 1)
    extractive_summary(CHAT, 4322)  # another budget is another summary
    assert _remembered_summary.cache_info().misses == after.misses + 1
