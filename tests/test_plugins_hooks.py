"""Extractors, rerankers and card renderers are pluggy hooks: a test plugin registered on a fresh
``PluginManager`` replaces each default and its effect shows; the built-in MMR and recency
rerankers reorder results as documented."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument, Record, RecordType, SearchResult, hookimpl
from agentmemory.card_model import CardParts
from agentmemory.extraction.base import Extractor
from agentmemory.extraction.models import ExtractionContext, ExtractionOutput, MemoryCandidate
from agentmemory.plugins import PluginManager
from agentmemory.records import MEMORY_TYPES
from agentmemory.rerankers import MmrReranker, RecencyReranker
from agentmemory.spi import RecordFilter

T0 = datetime(2024, 6, 1, tzinfo=timezone.utc)


# ---- the test plugin -----------------------------------------------------------------------------
class ShoutExtractor(Extractor):
    """Keeps every new user message, upper-cased, as a fact (visibly not the built-in rules)."""

    name = "shout"

    def extract(self, context: ExtractionContext) -> ExtractionOutput:
        return ExtractionOutput(memories=[
            MemoryCandidate(type="fact", content=m.content.upper())
            for m in context.messages if m.record_id in context.new_message_ids and m.role == "user"
        ])


class ReverseReranker:
    """Reverses the order it is given (and drops nothing)."""

    def __init__(self, keep: int | None = None) -> None:
        self.keep = keep
        self.queries: list[str] = []

    def __call__(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        self.queries.append(query)
        out = list(reversed(results))
        return out if self.keep is None else out[: self.keep]


class PlainRenderer:
    """One ``TYPE: content`` line per item; "" when empty."""

    name = "plain"

    def item(self, record: Record) -> str:
        return f"{record.record_type.value.upper()}: {record.content}"

    def __call__(self, parts: CardParts) -> str:
        if parts.is_empty():
            return ""
        lines = [f"SUMMARY: {parts.summary}"] if parts.summary else []
        lines += [self.item(r.record) for r in parts.relevant]
        lines += [f"RECENT {m.role}: {m.content}" for m in parts.recent_messages]
        return "\n".join(lines)


class TestPlugin:
    """Registers one of each, under new names and (to replace them) under the default names."""

    @hookimpl
    def agentmemory_register_extractors(self, register: Any) -> None:
        register("shout", ShoutExtractor, description="test")
        register("rules", ShoutExtractor, description="replaces the built-in offline extractor")

    @hookimpl
    def agentmemory_register_rerankers(self, register: Any) -> None:
        register("reverse", ReverseReranker)
        register("lazy-mmr", "agentmemory.rerankers:MmrReranker")

    @hookimpl
    def agentmemory_register_card_renderers(self, register: Any) -> None:
        register("plain", PlainRenderer)
        register("xml", PlainRenderer)


class BrokenPlugin:
    @hookimpl
    def agentmemory_register_rerankers(self, register: Any) -> None:
        raise RuntimeError("this plugin is broken")


class LazyRendererPlugin:
    """Registers ``PlainRenderer`` by its dotted path (imported on first use)."""

    @hookimpl
    def agentmemory_register_card_renderers(self, register: Any) -> None:
        register("lazy", f"{__name__}:PlainRenderer")


@pytest.fixture
def pm() -> PluginManager:
    manager = PluginManager(load_entrypoints=False)
    manager.register(TestPlugin(), name="test-plugin")
    return manager


@pytest.fixture
def made() -> Iterator[list[AgentMemory]]:
    clients: list[AgentMemory] = []
    yield clients
    for client in clients:
        client.close(timeout=5)


def client_with(made: list[AgentMemory], pm: PluginManager | None = None, **kwargs: Any) -> AgentMemory:
    kwargs.setdefault("memory_extraction_config", {"enable_context_summary": False})
    client = AgentMemory("memory://", embedder=HashingEmbedder(128), plugin_manager=pm or PluginManager(load_entrypoints=False), **kwargs)
    made.append(client)
    return client


def memory_contents(client: AgentMemory) -> list[str]:
    return [r.content for r in client.store.query(RecordFilter(record_types=MEMORY_TYPES))]


# ---- extractor hook ------------------------------------------------------------------------------
def test_plugin_extractor_by_name(pm: PluginManager, made: list[AgentMemory]) -> None:
    client = client_with(made, pm, extractor="shout")
    client.create_thread(thread_id="t", user_id="u").add_messages([
        {"role": "user", "content": "my name is bob"}, {"role": "assistant", "content": "hi bob"}])
    assert memory_contents(client) == ["MY NAME IS BOB"]
    assert client.store.query(RecordFilter(record_types=MEMORY_TYPES))[0].metadata["$agent_memory"]["extractor"] == "shout"


async def test_plugin_extractor_from_async_code(pm: PluginManager, made: list[AgentMemory]) -> None:
    client = client_with(made, pm, extractor="shout")
    thread = await client.create_thread_async(thread_id="t", user_id="u")
    await thread.add_messages_async([{"role": "user", "content": "order 55 is late"}])
    assert memory_contents(client) == ["ORDER 55 IS LATE"]


def test_extractor_object_is_used_directly(made: list[AgentMemory]) -> None:
    client = client_with(made, extractor=ShoutExtractor())
    client.create_thread(thread_id="t", user_id="u").add_messages([{"role": "user", "content": "quiet words"}])
    assert memory_contents(client) == ["QUIET WORDS"]


def test_without_the_plugin_the_builtin_rules_run(made: list[AgentMemory]) -> None:
    client = client_with(made)
    client.create_thread(thread_id="t", user_id="u").add_messages([{"role": "user", "content": "my name is bob"}])
    assert memory_contents(client) == ["The user's name is Bob."]


def test_plugin_replaces_the_default_extractor_and_renderer(pm: PluginManager, made: list[AgentMemory]) -> None:
    assert pm.get("extractors", "rules").plugin == "test-plugin"
    client = client_with(made, pm)  # defaults: extractor "rules" (no LLM), renderer "xml"
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages([{"role": "user", "content": "my name is bob"}])
    assert memory_contents(client) == ["MY NAME IS BOB"]
    assert not thread.get_context_card().content.startswith("<context_card>")


def test_unknown_plugin_names_are_clear_errors(pm: PluginManager, made: list[AgentMemory]) -> None:
    client = client_with(made, pm, extractor="nope", card_renderer="nope")
    thread = client.create_thread(thread_id="t", user_id="u")
    with pytest.raises(InvalidArgument, match="installed: .*shout") as info:
        thread.add_messages([{"role": "user", "content": "hello"}])
    assert info.value.argument == "extractor"
    with pytest.raises(InvalidArgument, match="plain") as info:
        thread.get_context_card()
    assert info.value.argument == "card_renderer"


def test_a_broken_plugin_is_reported_and_does_not_hide_the_others(pm: PluginManager) -> None:
    pm.register(BrokenPlugin(), name="broken-plugin")
    assert {"reverse", "mmr", "recency", "lazy-mmr"} <= set(pm.names("rerankers"))
    assert [b.name for b in pm.broken] == ["broken-plugin"]
    assert "this plugin is broken" in pm.broken[0].error
    report = pm.report()
    assert report["rerankers"]["reverse"]["plugin"] == "test-plugin"
    assert report["broken"][0]["name"] == "broken-plugin"


# ---- reranker hook -------------------------------------------------------------------------------
def test_plugin_reranker_changes_search_and_card_order(pm: PluginManager, made: list[AgentMemory]) -> None:
    reverse = pm.load("rerankers", "reverse")()
    assert isinstance(reverse, ReverseReranker)
    plain = client_with(made, pm, memory_extraction_config={"extract_memories": False})
    reranked = client_with(made, pm, rerankers=[reverse], memory_extraction_config={"extract_memories": False})
    for client in (plain, reranked):
        for text in ("tea with milk", "green tea", "coffee beans", "tea leaves and tea cups"):
            client.add_memory(text, user_id="u", memory_id=text.replace(" ", "-"))

    before = [r.record.record_id for r in plain.search("tea", user_id="u", max_results=4)]
    after = [r.record.record_id for r in reranked.search("tea", user_id="u", max_results=4)]

    assert after == list(reversed(before))
    assert reverse.queries[-1] == "tea"
    # per-call rerankers replace the client's
    assert [r.record.record_id for r in reranked.search("tea", user_id="u", max_results=4, rerankers=[])] == before

    plain_thread = plain.create_thread(thread_id="t", user_id="u")
    reranked_thread = reranked.create_thread(thread_id="t", user_id="u")
    for thread in (plain_thread, reranked_thread):
        thread.add_messages([{"role": "user", "content": "Which tea should I buy?"}])
    card_before = [r.record.record_id for r in plain_thread.get_context_card(max_relevant_results=4).relevant]
    card_after = [r.record.record_id for r in reranked_thread.get_context_card(max_relevant_results=4).relevant]
    assert card_before and card_after != card_before
    assert sorted(card_after) == sorted(card_before)


def test_lazy_reranker_path_is_imported_on_use(pm: PluginManager) -> None:
    assert pm.get("rerankers", "lazy-mmr").target == "agentmemory.rerankers:MmrReranker"
    assert pm.load("rerankers", "lazy-mmr") is MmrReranker
    assert isinstance(pm.load("rerankers", "mmr")(lambda_=0.5), MmrReranker)


def test_reranker_cannot_invent_results(made: list[AgentMemory]) -> None:
    def inventor(query: str, results: list[SearchResult]) -> list[SearchResult]:
        fake = results[0].model_copy(update={"record": results[0].record.model_copy(update={"record_id": "invented"})})
        return [fake, *results]

    client = client_with(made, rerankers=[inventor], memory_extraction_config={"extract_memories": False})
    client.add_memory("real memory", user_id="u")
    assert [r.record.content for r in client.search("real", user_id="u")] == ["real memory"]


# ---- card renderer hook ----------------------------------------------------------------------------
def test_plugin_card_renderer_by_name(pm: PluginManager, made: list[AgentMemory]) -> None:
    client = client_with(made, pm, card_renderer="plain", memory_extraction_config={"extract_memories": False})
    client.add_memory("The user likes green tea.", user_id="u", memory_type="preference")
    thread = client.create_thread(thread_id="t", user_id="u")
    assert "green tea" in thread.get_context_card().content  # a fresh thread shows the user's newest memories
    thread.add_messages([{"role": "user", "content": "What tea do I like?"}, {"role": "assistant", "content": "Let me see."}])

    card = thread.get_context_card(except_last_messages=1, max_recent_messages=1)

    lines = card.content.splitlines()
    assert lines[0] == "SUMMARY: user: What tea do I like?"
    assert "PREFERENCE: The user likes green tea." in lines
    assert lines[-1] == "RECENT assistant: Let me see."
    assert [r.formatted_content for r in card.relevant] == [PlainRenderer().item(r.record) for r in card.relevant]


def test_a_named_renderer_is_imported_with_the_client_not_in_the_first_card(pm: PluginManager, made: list[AgentMemory]) -> None:
    # the first card after a restart must not import its renderer (issue #31: warm restarts)
    pm.register(LazyRendererPlugin(), name="lazy-renderer")
    assert isinstance(pm.get("card_renderers", "lazy").target, str)
    client_with(made, pm, card_renderer="lazy")
    assert pm.get("card_renderers", "lazy").target is PlainRenderer
    client_with(made, pm, card_renderer="not-registered")  # still reported by the card, as above


def test_renderer_object_is_used_directly(made: list[AgentMemory]) -> None:
    client = client_with(made, card_renderer=PlainRenderer(), memory_extraction_config={"extract_memories": False})
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages([{"role": "user", "content": "hello, my parcel never arrived"}])
    assert thread.get_context_card().content.startswith("SUMMARY: user: hello, my parcel never arrived")


# ---- MMR ------------------------------------------------------------------------------------------
def result(record_id: str, content: str, score: float, when: datetime = T0) -> SearchResult:
    record = Record(record_id=record_id, record_type=RecordType.MEMORY, content=content, timestamp=when, created_at=when)
    return SearchResult(record=record, score=score, formatted_content=content)


def order(results: list[SearchResult]) -> list[str]:
    return [r.record.record_id for r in results]


NEAR_DUPES = [
    result("a", "pizza places downtown for friday dinner", 0.90),
    result("a2", "pizza places downtown for friday dinner again", 0.89),
    result("a3", "downtown pizza places for friday dinner", 0.88),
    result("b", "the user is vegetarian", 0.60),
]


def test_mmr_promotes_diverse_results_over_near_duplicates() -> None:
    reranked = MmrReranker(lambda_=0.3)("pizza", list(NEAR_DUPES))
    assert order(reranked)[:2] == ["a", "b"]
    assert sorted(order(reranked)) == sorted(order(NEAR_DUPES))


def test_mmr_lambda_one_keeps_the_relevance_order() -> None:
    assert order(MmrReranker(lambda_=1.0)("pizza", list(NEAR_DUPES))) == ["a", "a2", "a3", "b"]


def test_mmr_leaves_short_lists_alone_and_validates_lambda() -> None:
    two = NEAR_DUPES[:2]
    assert order(MmrReranker(0.1)("q", list(two))) == ["a", "a2"]
    with pytest.raises(ValueError, match="lambda_"):
        MmrReranker(1.5)


def test_mmr_in_search_brings_a_different_memory_into_the_top_results(made: list[AgentMemory]) -> None:
    plain = client_with(made, memory_extraction_config={"extract_memories": False})
    mmr = client_with(made, rerankers=[MmrReranker(lambda_=0.3)], memory_extraction_config={"extract_memories": False})
    for client in (plain, mmr):
        for i in range(4):
            client.add_memory(f"The user booked a pizza table downtown on friday number {i}.", user_id="u", memory_id=f"dup{i}")
        client.add_memory("The user wants a pizza place with vegan cheese.", user_id="u", memory_id="vegan")
    query = "pizza table downtown friday"
    assert "vegan" not in order(plain.search(query, user_id="u", max_results=2))
    assert "vegan" in order(mmr.search(query, user_id="u", max_results=2))


# ---- recency --------------------------------------------------------------------------------------
NOW = T0 + timedelta(days=100)
OLD = result("old", "the user lives in Paris", 0.80, when=T0)
NEW = result("new", "the user lives in Lyon", 0.78, when=NOW - timedelta(days=1))


def test_recency_breaks_close_calls_in_favour_of_newer_records() -> None:
    unrelated = result("far", "the user owns a bicycle", 0.20, when=T0)
    reranker = RecencyReranker(half_life_days=30, weight=0.3, clock=lambda: NOW)
    assert order(reranker("where", [OLD, NEW, unrelated])) == ["new", "old", "far"]
    assert order(RecencyReranker(weight=0.0, clock=lambda: NOW)("where", [OLD, NEW, unrelated])) == ["old", "new", "far"]


def test_recency_breaks_a_close_call_between_two_results() -> None:
    reranker = RecencyReranker(half_life_days=30, weight=0.3, clock=lambda: NOW)
    assert order(reranker("where", [OLD, NEW])) == ["new", "old"]


def test_recency_does_not_override_a_large_relevance_gap() -> None:
    now = T0 + timedelta(days=100)
    strong_old = result("old", "x", 0.95, when=T0)
    medium = result("mid", "y", 0.60, when=now - timedelta(days=50))
    weak_new = result("new", "z", 0.10, when=now)
    reranked = RecencyReranker(half_life_days=30, weight=0.3, clock=lambda: now)("q", [strong_old, medium, weak_new])
    assert order(reranked)[0] == "old"
    assert order(RecencyReranker(weight=0.3)("q", [])) == []
