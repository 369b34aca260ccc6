"""The rule-based extractor's personal-fact patterns: each phrasing yields the fact with its
slot, other people's facts yield nothing, and a new value supersedes the old one."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentmemory import AgentMemory, HashingEmbedder, RecordStatus
from agentmemory.extraction.models import ExtractionContext
from agentmemory.extraction.rules import RuleBasedExtractor
from agentmemory.records import Record, RecordType

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def extract(text: str) -> list[tuple[str, str, str | None]]:
    msg = Record(record_id="m", record_type=RecordType.MESSAGE, content=text, role="user", timestamp=NOW, created_at=NOW)
    out = RuleBasedExtractor().extract(ExtractionContext(messages=[msg], new_message_ids=frozenset({"m"})))
    return [(m.type, m.content, m.slot) for m in out.memories]


@pytest.mark.parametrize(("text", "content", "slot"), [
    ("I live in Lisbon with my partner.", "The user lives in Lisbon.", "user.city"),
    ("It's raining again here in Porto, where I live.", "The user lives in Porto.", "user.city"),
    ("Update: I relocated to Vienna last month.", "The user lives in Vienna.", "user.city"),
    ("I work at Acme Corp as a data engineer.", "The user works at Acme Corp.", "user.employer"),
    ("My employer is Initech, mostly backend work.", "The user works at Initech.", "user.employer"),
    ("I switched jobs, I'm at Globex now.", "The user works at Globex.", "user.employer"),
    ("I report to Sven, my manager.", "The user's manager is Sven.", "user.manager"),
    ("My manager is Priya, she is very supportive.", "The user's manager is Priya.", "user.manager"),
    ("My dog is called Rex.", "The user's dog is called Rex.", "user.dog_name"),
    ("Sorry, Bella, my dog, needed a walk.", "The user's dog is called Bella.", "user.dog_name"),
    ("My weekly sync with my manager is on Tuesday.", "The user's recurring sync is on Tuesday.", "user.sync_day"),
    ("Heads up: the weekly sync moved to Friday.", "The user's recurring sync is on Friday.", "user.sync_day"),
    ("Please always message me on Signal, I don't check email.", "The user wants to be contacted on Signal.", "user.contact_channel"),
    ("Just so you know, I'm allergic to peanuts.", "The user is allergic to peanuts.", None),
])
def test_personal_fact_phrasings(text: str, content: str, slot: str | None) -> None:
    assert any(c == content and s == slot for _, c, s in extract(text)), extract(text)


@pytest.mark.parametrize("text", [
    "My colleague Tom just moved to Berlin, lucky them.",
    "My sister's dog is called Rex and it is a nightmare on walks.",
    "A friend of mine works at Umbrella and keeps complaining about the commute.",
    "Anna told me the team sync at their company is on Mondays.",
    "Hello there, how are you today?",
])
def test_other_peoples_facts_and_small_talk_yield_nothing(text: str) -> None:
    assert extract(text) == []


def test_a_new_city_supersedes_the_old_one_across_threads() -> None:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(128),
                      memory_extraction_config={"enable_context_summary": False})
    mem.create_thread("s1", user_id="u").add_messages([{"role": "user", "content": "I live in Lisbon with my partner."}])
    mem.create_thread("s2", user_id="u").add_messages([{"role": "user", "content": "Big news: we moved, I live in Oslo now."}])
    by_content = {m.content: m.status for m in mem.list_memories(user_id="u")}
    assert by_content == {"The user lives in Lisbon.": RecordStatus.INVALID, "The user lives in Oslo.": RecordStatus.VALID}


@pytest.mark.parametrize("text", [
    "My neighbour Bob swears by chai but I never tried it.",  # "never" mid-sentence is no instruction
    "Who is my manager and on which day is our weekly sync?",  # questions state nothing
])
def test_no_memories_from_asides_and_questions(text: str) -> None:
    assert extract(text) == []


def test_instructions_open_their_sentence() -> None:
    assert extract("I prefer short answers. From now on, answer in German please.") == [
        ("preference", "The user prefers short answers.", None),
        ("guideline", "User instruction: From now on, answer in German please.", None),
    ]


def test_memories_carry_the_time_of_their_message() -> None:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(64), memory_extraction_config={"enable_context_summary": False})
    thread = mem.create_thread("t", user_id="u")
    thread.add_messages([{"role": "user", "content": "I live in Lisbon.", "timestamp": "2025-03-04T10:00:00Z"}])
    (memory,) = mem.list_memories(user_id="u")
    assert memory.timestamp == datetime(2025, 3, 4, 10, tzinfo=timezone.utc)
