"""Behaviour added after the first test round: per-call settings, handles that follow
update_thread, windows never hiding new messages, background errors surfacing on close, and the
card of a fresh thread."""

from __future__ import annotations

import pytest

from agentmemory import AgentMemory, HashingEmbedder, MemoryExtractionConfig, ModelError
from agentmemory.extraction.base import Extractor
from agentmemory.extraction.models import ExtractionContext, ExtractionOutput, MemoryCandidate


class Recording(Extractor):
    """Records every context it gets and stores one memory per new user message."""

    name = "recording"

    def __init__(self, fail: bool = False) -> None:
        self.contexts: list[ExtractionContext] = []
        self.fail = fail

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        self.contexts.append(context)
        if self.fail:
            raise ModelError("extractor down")
        return ExtractionOutput(memories=[
            MemoryCandidate(type="memory", content=f"noted: {m.content}")
            for m in context.messages if m.record_id in context.new_message_ids and m.role == "user"
        ])


def make(extractor: Extractor, **config: object) -> AgentMemory:
    return AgentMemory("memory://", embedder=HashingEmbedder(64), extractor=extractor,
                       memory_extraction_config={"enable_context_summary": False, **config})


def test_call_level_config_wins_for_that_call_only() -> None:
    rec = Recording()
    mem = make(rec, memory_extraction_custom_instructions="client")
    thread = mem.create_thread("t", user_id="u", memory_extraction_custom_instructions="thread")
    thread.add_messages([{"role": "user", "content": "one"}], memory_extraction_config={"memory_extraction_custom_instructions": "call"})
    thread.add_messages([{"role": "user", "content": "two"}])
    assert [c.custom_instructions for c in rec.contexts] == ["call", "thread"]


def test_call_level_config_can_switch_extraction_off() -> None:
    rec = Recording()
    mem = make(rec)
    thread = mem.create_thread("t", user_id="u")
    thread.add_messages([{"role": "user", "content": "secret"}], memory_extraction_config=MemoryExtractionConfig(extract_memories=False))
    assert rec.contexts == [] and mem.list_memories(user_id="u") == []


def test_an_existing_handle_follows_update_thread() -> None:
    rec = Recording()
    mem = make(rec)
    thread = mem.create_thread("t", user_id="u")
    mem.update_thread("t", memory_extraction_custom_instructions="only invoices")
    thread.add_messages([{"role": "user", "content": "hello"}])
    assert rec.contexts[-1].custom_instructions == "only invoices"


def test_a_small_window_never_hides_new_messages() -> None:
    rec = Recording()
    mem = make(rec, memory_extraction_frequency=3, memory_extraction_window=1)
    thread = mem.create_thread("t", user_id="u")
    for text in ("a", "b", "c"):
        thread.add_messages([{"role": "user", "content": text}])
    (context,) = rec.contexts
    assert [m.content for m in context.messages] == ["a", "b", "c"]
    assert sorted(m.content for m in mem.list_memories(user_id="u")) == ["noted: a", "noted: b", "noted: c"]


def test_background_failure_surfaces_on_close_when_never_waited_for() -> None:
    mem = make(Recording(fail=True), extraction_mode="background")
    thread = mem.create_thread("t", user_id="u")
    thread.add_messages([{"role": "user", "content": "x"}])
    with pytest.raises(ModelError, match="extractor down"):
        mem.close()
    assert not mem.store.is_open


def test_fresh_thread_card_shows_the_users_newest_memories() -> None:
    mem = make(Recording(), extract_memories=False)
    mem.add_memory("Prefers window seats.", user_id="u", memory_type="preference")
    mem.add_memory("Someone else's secret.", user_id="other")
    card = mem.create_thread("t", user_id="u").get_context_card()
    assert "Prefers window seats." in card.content
    assert "secret" not in card.content
    assert mem.create_thread("t2", user_id="nobody").get_context_card().content == ""


def test_update_memory_sets_a_new_ttl_from_now() -> None:
    from datetime import datetime, timedelta, timezone

    now = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    mem = AgentMemory("memory://", embedder=HashingEmbedder(64), clock=lambda: now[0])
    mid = mem.add_memory("short lived", user_id="u", ttl_days=1)
    now[0] += timedelta(hours=20)
    assert mem.update_memory(mid, ttl_days=2).expires_at == now[0] + timedelta(days=2)
    now[0] += timedelta(days=1)
    assert mem.get_memory(mid).content == "short lived"  # would have expired without the update


def test_a_deleted_thread_takes_no_more_messages() -> None:
    from agentmemory import NotFound

    mem = make(Recording(), extract_memories=False)
    thread = mem.create_thread("t", user_id="u")
    mem.delete_thread("t")
    with pytest.raises(NotFound):
        thread.add_messages([{"role": "user", "content": "orphan"}])
    assert mem.list_messages() == []
