"""The dates extractor: relative expressions resolved against each message's timestamp, alone and
chained after the built-in extractor, stored as filterable metadata and in the memory text."""

from __future__ import annotations

import importlib.metadata
from datetime import date, datetime, timezone
from typing import Any

import pytest
from agentmemory_conformance import ExtractorConformance
from agentmemory_dates import DatesExtractor, find_dates

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.plugins import PluginManager

FRI = datetime(2024, 5, 10, 15, 30, tzinfo=timezone.utc)  # a Friday


@pytest.mark.parametrize(("text", "iso", "period"), [
    ("I went to the dentist yesterday", "2024-05-09", "day"),
    ("We met last Friday", "2024-05-03", "day"),
    ("It broke two weeks ago", "2024-04-26", "week"),
    ("I move next month", "2024-06", "month"),
    ("the day before yesterday was rainy", "2024-05-08", "day"),
    ("see you tomorrow", "2024-05-11", "day"),
    ("the release is in 3 days", "2024-05-13", "day"),
    ("we married 5 years ago", "2019", "year"),
    ("Next Monday is the deadline", "2024-05-13", "day"),
])
def test_expressions_resolve_against_the_message_time(text: str, iso: str, period: str) -> None:
    [found] = find_dates(text, FRI)
    assert (found.iso, found.period) == (iso, period)


def test_the_time_zone_decides_the_day() -> None:
    late = datetime(2024, 5, 10, 23, 30, tzinfo=timezone.utc)  # already 11 May in Tokyo
    assert find_dates("yesterday", late)[0].iso == "2024-05-09"
    from zoneinfo import ZoneInfo

    assert find_dates("yesterday", late, ZoneInfo("Asia/Tokyo"))[0].iso == "2024-05-10"


def test_words_that_look_like_dates_are_not_taken() -> None:
    assert find_dates("You may march on; I said it in a week-long rant", FRI) == []


def client(**kwargs: Any) -> AgentMemory:
    kwargs.setdefault("memory_extraction_config", {"enable_context_summary": False})
    return AgentMemory("memory://", embedder=HashingEmbedder(64), plugin_manager=PluginManager(), **kwargs)


def test_alone_it_writes_dated_memories_filterable_by_day_and_month() -> None:
    with client(extractor="dates") as c:
        thread = c.create_thread(user_id="u1")
        thread.add_messages([
            {"role": "user", "content": "Hello! I went to the dentist yesterday. It hurt.", "timestamp": FRI},
            {"role": "user", "content": "My sister visits next month.", "timestamp": FRI},
            {"role": "user", "content": "No dates here.", "timestamp": FRI},
        ])
        memories = {m.content: m for m in c.list_memories(user_id="u1")}
        assert set(memories) == {
            "User on 10 May 2024: I went to the dentist yesterday (9 May 2024).",
            "User on 10 May 2024: My sister visits next month (June 2024).",
        }
        dentist = next(m for m in memories.values() if "dentist" in m.content)
        assert dentist.metadata["dates"] == ["2024-05-09"] and dentist.metadata["months"] == ["2024-05"]
        hits = c.search("dentist", user_id="u1", metadata_filter={"dates": {"$array_contains": "2024-05-09"}})
        assert [h.record.record_id for h in hits] == [dentist.record_id]
        june = c.search("visit", user_id="u1", metadata_filter={"months": {"$array_contains": "2024-06"}})
        assert [h.record.content for h in june] == ["User on 10 May 2024: My sister visits next month (June 2024)."]


def test_chained_after_the_builtin_rules_it_adds_and_keeps_theirs() -> None:
    with client(extractor=[None, "dates"]) as c:
        c.create_thread(user_id="u1").add_messages([
            {"role": "user", "content": "My name is Bob. I started the new job last Monday.", "timestamp": FRI},
        ])
        alone = client(extractor="rules")
        alone.create_thread(user_id="u1").add_messages([{"role": "user", "content": "My name is Bob. I started the new job last Monday.", "timestamp": FRI}])
        rules_only = {m.content for m in alone.list_memories(user_id="u1")}
        alone.close()
        contents = {m.content for m in c.list_memories(user_id="u1")}
        assert rules_only and rules_only <= contents  # the built-in's memories are kept
        assert "User on 10 May 2024: I started the new job last Monday (6 May 2024)." in contents
        extractors = {m.metadata["$agent_memory"]["extractor"] for m in c.list_memories(user_id="u1")}
        assert extractors == {"rules+dates"}


def test_in_a_chain_it_dates_the_earlier_extractors_candidates() -> None:
    from agentmemory_conformance.plugin_suite import record

    from agentmemory import RecordType
    from agentmemory.extraction.models import ExtractionContext, MemoryCandidate

    msgs = [record(0, "Ugh, I had a flat tyre yesterday.", record_type=RecordType.MESSAGE, role="user")]
    earlier = [MemoryCandidate(type="memory", content="Maya had a flat tyre yesterday", metadata={"source": "llm"}),
               MemoryCandidate(type="preference", content="Maya prefers tea")]
    ctx = ExtractionContext(messages=msgs, new_message_ids=frozenset({msgs[0].record_id}), candidates=tuple(earlier))
    out = DatesExtractor().compose(ctx)
    assert [c.content for c in out] == ["Maya had a flat tyre yesterday (9 May 2024)", "Maya prefers tea"]
    assert out[0].metadata == {"source": "llm", "dates": ["2024-05-09"], "months": ["2024-05"]}


def test_entry_point_and_bad_settings() -> None:
    eps = [ep for ep in importlib.metadata.entry_points(group="agentmemory") if ep.name == "dates"]
    assert eps and eps[0].value == "agentmemory_dates.plugin"
    assert "dates" in PluginManager().names("extractors")
    with pytest.raises(InvalidArgument) as info:
        DatesExtractor(timezone="Mars/Olympus")
    assert info.value.argument == "timezone"
    with pytest.raises(InvalidArgument):
        DatesExtractor(roles="user")


def test_resolved_dates_are_dates() -> None:
    assert find_dates("yesterday", FRI)[0].day == date(2024, 5, 9)


class TestConformance(ExtractorConformance):
    def make_extractor(self, llm: Any) -> DatesExtractor:
        return DatesExtractor()


class TestConformanceChained(ExtractorConformance):
    """Chained after the LLM extractor, as a team would run it in production."""

    def make_extractor(self, llm: Any) -> Any:
        from agentmemory.extraction.base import ExtractorChain
        from agentmemory.extraction.llm_extractor import LlmExtractor

        return ExtractorChain([LlmExtractor(llm), DatesExtractor()])
