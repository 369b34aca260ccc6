"""Extractors compose: ``AgentMemory(extractor=[...])`` runs them in order as one chain, each
seeing what the earlier ones found; candidate metadata lands on the memories (filterable) and an
LLM answer cannot set it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.extraction.base import Extractor, ExtractorChain
from agentmemory.extraction.models import ExtractionContext, ExtractionOutput, MemoryCandidate
from agentmemory.plugins import PluginManager


class Fixed(Extractor):
    """Returns fixed candidates and records the candidates it was shown."""

    def __init__(self, name: str, *contents: str, metadata: dict[str, Any] | None = None) -> None:
        self.name = name
        self.contents = contents
        self.metadata = metadata or {}
        self.seen: list[tuple[str, ...]] = []

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        self.seen.append(tuple(c.content for c in context.candidates))
        return ExtractionOutput(memories=[MemoryCandidate(type="fact", content=c, metadata=self.metadata) for c in self.contents])


class Upper(Extractor):
    """Revises the earlier candidates instead of adding (overrides ``chain_op``)."""

    name = "upper"

    def chain_op(self, context: ExtractionContext) -> Any:
        return ExtractionOutput(memories=[c.model_copy(update={"content": c.content.upper()}) for c in context.candidates])
        yield  # pragma: no cover - makes this a generator


@pytest.fixture
def made() -> Iterator[list[AgentMemory]]:
    clients: list[AgentMemory] = []
    yield clients
    for client in clients:
        client.close(timeout=5)


def client(made: list[AgentMemory], extractor: Any) -> AgentMemory:
    c = AgentMemory("memory://", embedder=HashingEmbedder(64), plugin_manager=PluginManager(load_entrypoints=False),
                    extractor=extractor, memory_extraction_config={"enable_context_summary": False})
    made.append(c)
    return c


def test_chain_keeps_every_extractor_in_order_and_drops_duplicates(made: list[AgentMemory]) -> None:
    a, b = Fixed("a", "Order 1 shipped", "Maya likes tea"), Fixed("b", "maya  LIKES tea", "Bob is 40")
    c = client(made, [a, b])
    thread = c.create_thread(user_id="u1")
    thread.add_messages([{"role": "user", "content": "hello"}])
    memories = c.list_memories(user_id="u1")
    assert sorted(m.content for m in memories) == ["Bob is 40", "Maya likes tea", "Order 1 shipped"]
    assert a.seen == [()] and b.seen == [("Order 1 shipped", "Maya likes tea")]
    assert {m.metadata["$agent_memory"]["extractor"] for m in memories} == {"a+b"}


def test_a_later_extractor_may_revise_earlier_candidates(made: list[AgentMemory]) -> None:
    c = client(made, [Fixed("a", "maya likes tea"), Upper()])
    c.create_thread(user_id="u1").add_messages([{"role": "user", "content": "hi"}])
    assert [m.content for m in c.list_memories(user_id="u1")] == ["MAYA LIKES TEA"]


def test_names_and_none_mix_in_a_chain(made: list[AgentMemory]) -> None:
    c = client(made, [None, Fixed("x", "Extra fact")])
    c.create_thread(user_id="u1").add_messages([{"role": "user", "content": "My name is Bob."}])
    contents = [m.content for m in c.list_memories(user_id="u1")]
    assert "Extra fact" in contents and any("Bob" in x for x in contents if x != "Extra fact")


def test_candidate_metadata_is_written_and_filterable(made: list[AgentMemory]) -> None:
    c = client(made, [Fixed("d", "Dentist visit", metadata={"dates": ["2024-05-09"]}), Fixed("e", "Other")])
    c.create_thread(user_id="u1").add_messages([{"role": "user", "content": "hi"}])
    hits = c.search("visit", user_id="u1", metadata_filter={"dates": {"$array_contains": "2024-05-09"}})
    assert [h.record.content for h in hits] == ["Dentist visit"]


def test_bad_chain_items_and_metadata_are_typed_errors(made: list[AgentMemory]) -> None:
    c = client(made, [None, 42])
    with pytest.raises(InvalidArgument, match="extractor"):
        c.create_thread(user_id="u1").add_messages([{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidArgument):
        ExtractorChain([])
    with pytest.raises(ValueError, match="reserved|\\$"):
        MemoryCandidate(type="fact", content="x", metadata={"$agent_memory": {}})


def test_metadata_is_not_in_the_llm_schema() -> None:
    from agentmemory.extraction.models import json_schema

    props = json_schema(ExtractionOutput)["$defs"]["MemoryCandidate"]["properties"]
    assert "metadata" not in props
