"""The seed documents' scenarios (seeds 001 and 004) run against a scripted model.

The script answers the way a model following the prompt would: it reads the system prompt and
answers differently when the seed's custom instructions are there. So each test proves two
things: the instructions that should apply reached the model (and the others did not), and what
the model answered was stored and is found the way the seed shows.

Every scenario runs twice: with the defaults (one LLM call per ``add_messages``: links and the
summary update decided in the extraction call) and with ``SEPARATE_LLM_CALLS`` (the earlier
extraction, link and summary calls); the outcome must be the same.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentmemory import (
    SEPARATE_LLM_CALLS,
    AgentMemory,
    HashingEmbedder,
    LinkType,
    MemoryExtractionConfig,
    MemoryLinkExtractionMode,
    RecordStatus,
    RecordType,
)
from agentmemory.llm import OpenAICompatibleLlm
from agentmemory.records import MEMORY_TYPES
from agentmemory.spi import RecordFilter
from agentmemory.testing import ScriptedServer

# ---- the seed's texts, verbatim --------------------------------------------------------------------
SUPPORT_INSTRUCTIONS = """
Only extract customer support facts:
- order ids
- return requests
- delivery problems
Ignore greetings, small talk, and one-off troubleshooting text.
""".strip()
BILLING_INSTRUCTIONS = "Only extract billing facts, invoice identifiers, and payment issues."
DEFECT_INSTRUCTIONS = "Only extract product defects and replacement requests."
LINK_INSTRUCTIONS = (
    "Only link a new support fact when it supersedes or refines "
    "an existing support fact. Do not create supports or contradicts links."
)
CARD_INSTRUCTIONS = (
    "Extract restaurant preferences as preference records and assistant "
    "response-style instructions as guideline records."
)
SUPPORT_TURN = [
    {"role": "user", "content": "Hi, order 7421 arrived damaged. I need a return request and a replacement delivery."},
    {"role": "assistant", "content": "I can help start the return request for order 7421."},
]
SUPPORT_FACT = "Customer reported damaged order 7421 and requested a return and replacement delivery."
BROAD_MEMORY = "The user contacted support about order 7421 and discussed a damaged delivery."
BILLING_FACT = "Invoice INV-9310 was paid twice and needs a refund."


# ---- a model that follows its instructions --------------------------------------------------------
def schema_kind(request: dict[str, Any]) -> str:
    props = ((request.get("response_format") or {}).get("json_schema") or {}).get("schema", {}).get("properties", {})
    for key, kind in (("memories", "extraction"), ("links", "links"), ("summary", "summary")):
        if key in props:
            return kind
    return "plain"


def asks_for_summary(request: dict[str, Any]) -> bool:
    """An extraction request whose schema also asks for the updated summary."""
    props = ((request.get("response_format") or {}).get("json_schema") or {}).get("schema", {}).get("properties", {})
    return "memories" in props and "summary" in props


def evidence(request: dict[str, Any]) -> str:
    """The text of the quoted messages (new ones) of an extraction request."""
    root = ET.fromstring(f"<p>{request['messages'][1]['content']}</p>")
    return " ".join(m.findtext("content") or "" for m in root.findall("conversation/message") if m.get("new") == "true")


def ids_in(request: dict[str, Any], block: str) -> list[str]:
    root = ET.fromstring(f"<p>{request['messages'][1]['content']}</p>")
    return [m.findtext("id") or "" for m in root.findall(f"{block}/memory")]


SUMMARY_ANSWER = {"summary": "User is planning dinner recommendations.", "topics": ["pizza planning", "dinner"]}


def link_type(system: str) -> str:
    """The seed's link instructions allow refines only; otherwise the model says supports."""
    return "refines" if "Do not create supports or contradicts links" in system else "supports"


class InstructedModel:
    """Answers extraction by the domain instructions it finds in the system prompt."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def requests(self, kind: str) -> list[dict[str, Any]]:
        return [r for k, r in self.calls if k == kind]

    def systems(self, kind: str = "extraction") -> list[str]:
        return [r["messages"][0]["content"] for r in self.requests(kind)]

    def __call__(self, request: dict[str, Any]) -> Any:
        kind = schema_kind(request)
        self.calls.append((kind, request))
        system = request["messages"][0]["content"]
        if kind == "summary":
            return SUMMARY_ANSWER
        if kind == "links":
            new = ids_in(request, "new_memories")
            old = ids_in(request, "candidates")
            return {"links": [{"source_id": new[0], "target_id": old[0], "link_type": link_type(system)}]}
        answer = self.extract(request, system)
        past = ids_in(request, "past_memories")
        if "add a link from the new memory" in system and answer["memories"] and past:  # links asked in this call
            answer["memories"][0]["links"] = [{"target_id": past[0], "link_type": link_type(system)}]
        if asks_for_summary(request):
            answer["summary"] = SUMMARY_ANSWER
        return answer

    def extract(self, request: dict[str, Any], system: str) -> dict[str, Any]:
        """The memories the domain instructions ask for."""
        text = evidence(request)
        if DEFECT_INSTRUCTIONS in system:
            return {"memories": [{"type": "fact", "content": "Order 7421 has a product defect; a replacement was requested."}] if "7421" in text else []}
        if SUPPORT_INSTRUCTIONS in system:
            if "7421" in text and "damaged" in text:
                return {"memories": [{"type": "fact", "content": SUPPORT_FACT, "entities": ["order 7421"]}]}
            if "7421" in text:
                return {"memories": [{"type": "fact", "content": "Order 7421 replacement delivery was rescheduled to Monday.", "entities": ["order 7421"]}]}
            return {"memories": []}  # greetings and small talk
        if BILLING_INSTRUCTIONS in system:
            return {"memories": [{"type": "fact", "content": BILLING_FACT, "entities": ["INV-9310"]}] if "INV-9310" in text else []}
        if CARD_INSTRUCTIONS in system:
            return {"memories": [
                {"type": "preference", "content": "User prefers vegetarian restaurants."},
                {"type": "guideline", "content": "Offer concise recommendations with clear tradeoffs."},
                {"type": "memory", "content": "User is comparing pizza places for Friday."},
            ]}
        # the default prompt keeps broader conversational memories
        if "7421" in text:
            return {"memories": [{"type": "memory", "content": BROAD_MEMORY}]}
        return {"memories": [{"type": "memory", "content": f"The user said: {text[:100]}"}]} if text.strip() else {"memories": []}


@pytest.fixture
def model(server: ScriptedServer) -> InstructedModel:
    m = InstructedModel()
    server.chat = m
    return m


@pytest.fixture(params=["one_call", "separate_calls"])
def calls(request: pytest.FixtureRequest) -> str:
    """The LLM call layout: the default (one call per turn) or ``SEPARATE_LLM_CALLS``."""
    return str(request.param)


@pytest.fixture
def make_memory(server: ScriptedServer, model: InstructedModel, calls: str) -> Iterator[Callable[..., AgentMemory]]:
    made: list[AgentMemory] = []

    def factory(**kwargs: Any) -> AgentMemory:
        if calls == "separate_calls":  # the client's own settings, over the earlier call layout
            given = MemoryExtractionConfig.from_any(kwargs.get("memory_extraction_config")).set_fields()
            kwargs["memory_extraction_config"] = {**SEPARATE_LLM_CALLS.set_fields(), **given}
        llm = OpenAICompatibleLlm("YOUR_MEMORY_LLM", base_url=server.base_url, backoff_s=0.01, max_retries=1)
        client = AgentMemory("memory://", embedder=HashingEmbedder(128), llm=llm, **kwargs)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close(timeout=5)


def support_memory(make_memory: Callable[..., AgentMemory]) -> AgentMemory:
    """Seed 001's client: support-focused extraction instructions at client level."""
    return make_memory(memory_extraction_config=MemoryExtractionConfig(memory_extraction_custom_instructions=SUPPORT_INSTRUCTIONS))


def stored_memories(client: AgentMemory) -> list[Any]:
    return client.store.query(RecordFilter(record_types=MEMORY_TYPES))


# ---- seed 001: customising extraction --------------------------------------------------------------
def test_support_ticket_with_instructions_yields_a_fact(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    support_thread = memory.create_thread(
        thread_id="support_ticket_7421", user_id="customer_123",
        memory_extraction_config=MemoryExtractionConfig(memory_extraction_frequency=1),
    )

    support_thread.add_messages(SUPPORT_TURN)

    [system] = model.systems()
    assert SUPPORT_INSTRUCTIONS in system  # the client's instructions reached the model
    results = support_thread.search("return request order 7421", max_results=5, record_types=["fact"])
    assert [(r.record.record_type, r.content) for r in results] == [(RecordType.FACT, SUPPORT_FACT)]
    assert [m.record_type for m in stored_memories(memory)] == [RecordType.FACT]  # nothing broader kept


def test_support_ticket_without_instructions_keeps_a_broader_memory(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = make_memory()
    support_thread = memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1)

    support_thread.add_messages(SUPPORT_TURN)

    assert all("Domain instructions" not in s and SUPPORT_INSTRUCTIONS not in s for s in model.systems())
    assert support_thread.search("return request order 7421", max_results=5, record_types=["fact"]) == []
    broad = support_thread.search("return request order 7421", max_results=5, record_types=["memory"])
    assert [(r.record.record_type, r.content) for r in broad] == [(RecordType.MEMORY, BROAD_MEMORY)]


def test_support_search_prints_like_the_seed(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    thread = memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1)
    thread.add_messages(SUPPORT_TURN)
    lines = [f"- [{result.record.record_type}] {result.content}" for result in thread.search("return request order 7421", max_results=5, record_types=["fact"])]
    assert lines == [f"- [fact] {SUPPORT_FACT}"]


def test_seed_link_settings_post_extraction_refines_the_support_fact(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1).add_messages(SUPPORT_TURN)
    [first] = stored_memories(memory)

    memory.update_thread(
        "support_ticket_7421",
        memory_extraction_config=MemoryExtractionConfig(
            memory_link_extraction_mode=MemoryLinkExtractionMode.POST_EXTRACTION,
            memory_link_extraction_custom_instructions=LINK_INSTRUCTIONS,
            memory_link_extraction_token_limit=8_000,
        ),
    )
    thread = memory.get_thread("support_ticket_7421")
    assert thread.extraction_config().memory_extraction_frequency == 1  # the earlier setting is kept
    thread.add_messages([{"role": "user", "content": "The replacement delivery for order 7421 moved to Monday."}])

    [link_system] = model.systems("links")
    assert LINK_INSTRUCTIONS in link_system
    assert first.record_id in ids_in(model.requests("links")[0], "candidates")
    [link] = memory.store.links()
    assert link.link_type is LinkType.REFINES and link.target_id == first.record_id
    assert memory.get_memory(first.record_id).status is RecordStatus.INVALID  # refines keeps it as history


def test_seed_link_instructions_refine_the_support_fact_in_either_call_layout(
    make_memory: Callable[..., AgentMemory], model: InstructedModel, calls: str
) -> None:
    """Seed 001's link settings without naming a link mode: the defaults decide the link in the
    extraction call (one call for the turn, summary included), ``SEPARATE_LLM_CALLS`` in a link
    call of its own; the stored link and invalidation are the same."""
    memory = support_memory(make_memory)
    memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1).add_messages(SUPPORT_TURN)
    [first] = stored_memories(memory)
    memory.update_thread("support_ticket_7421", memory_link_extraction_custom_instructions=LINK_INSTRUCTIONS)
    before = len(model.calls)

    memory.get_thread("support_ticket_7421").add_messages([{"role": "user", "content": "The replacement delivery for order 7421 moved to Monday."}])

    turn = model.calls[before:]
    if calls == "one_call":
        assert [kind for kind, _ in turn] == ["extraction"]
        [(_, request)] = turn
        assert LINK_INSTRUCTIONS in request["messages"][0]["content"] and asks_for_summary(request)
        assert first.record_id in ids_in(request, "past_memories")
    else:
        assert [kind for kind, _ in turn] == ["extraction", "links", "summary"]
        assert LINK_INSTRUCTIONS in model.systems("links")[-1]
        assert LINK_INSTRUCTIONS not in model.systems()[-1]
    [link] = memory.store.links()
    assert link.link_type is LinkType.REFINES and link.target_id == first.record_id
    assert memory.get_memory(first.record_id).status is RecordStatus.INVALID
    assert memory.get_thread("support_ticket_7421").get_summary().content == SUMMARY_ANSWER["summary"]


def test_billing_thread_instructions_override_the_clients(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    billing_thread = memory.create_thread(
        thread_id="billing_ticket_9310", user_id="customer_123",
        memory_extraction_config=MemoryExtractionConfig(memory_extraction_frequency=1, memory_extraction_custom_instructions=BILLING_INSTRUCTIONS),
    )

    billing_thread.add_messages([{"role": "user", "content": "Invoice INV-9310 was paid twice and needs a refund."}])

    [system] = model.systems()
    assert BILLING_INSTRUCTIONS in system and SUPPORT_INSTRUCTIONS not in system
    hits = billing_thread.search("invoice paid twice refund", record_types=["fact"], max_results=3)
    assert [h.content for h in hits] == [BILLING_FACT]
    # persisted with the thread: a later handle still uses the billing instructions
    memory.get_thread("billing_ticket_9310").add_messages([{"role": "user", "content": "INV-9310 refund still pending."}])
    assert BILLING_INSTRUCTIONS in model.systems()[-1] and SUPPORT_INSTRUCTIONS not in model.systems()[-1]


def test_updating_then_clearing_thread_instructions_restores_the_clients(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1)

    memory.update_thread("support_ticket_7421", memory_extraction_config=MemoryExtractionConfig(memory_extraction_custom_instructions=DEFECT_INSTRUCTIONS))
    memory.get_thread("support_ticket_7421").add_messages([{"role": "user", "content": "Order 7421: the screen is cracked, please replace it."}])
    assert DEFECT_INSTRUCTIONS in model.systems()[-1] and SUPPORT_INSTRUCTIONS not in model.systems()[-1]

    memory.update_thread("support_ticket_7421", memory_extraction_config=MemoryExtractionConfig(memory_extraction_custom_instructions=None))
    thread = memory.get_thread("support_ticket_7421")
    thread.add_messages(SUPPORT_TURN)

    assert SUPPORT_INSTRUCTIONS in model.systems()[-1] and DEFECT_INSTRUCTIONS not in model.systems()[-1]
    assert thread.extraction_config().memory_extraction_frequency == 1
    facts = [h.content for h in thread.search("return request order 7421", record_types=["fact"], max_results=5)]
    assert SUPPORT_FACT in facts


def test_live_handle_instructions_are_not_persisted(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory = support_memory(make_memory)
    memory.create_thread(thread_id="support_ticket_7421", user_id="customer_123", memory_extraction_frequency=1)
    live = memory.get_thread(
        "support_ticket_7421",
        memory_extraction_config=MemoryExtractionConfig(memory_extraction_custom_instructions=DEFECT_INSTRUCTIONS),
    )
    live.add_messages([{"role": "user", "content": "Order 7421 is defective."}])
    memory.get_thread("support_ticket_7421").add_messages([{"role": "user", "content": "Order 7421 is defective, again."}])
    first, second = model.systems()
    assert DEFECT_INSTRUCTIONS in first
    assert SUPPORT_INSTRUCTIONS in second and DEFECT_INSTRUCTIONS not in second


# ---- seed 004: customising the context card --------------------------------------------------------
def card_demo(make_memory: Callable[..., AgentMemory]) -> tuple[AgentMemory, Any]:
    memory = make_memory()
    thread = memory.create_thread(
        thread_id="context_card_customization_demo", user_id="user_123", agent_id="assistant_456",
        memory_extraction_config=MemoryExtractionConfig(memory_extraction_custom_instructions=CARD_INSTRUCTIONS),
    )
    thread.add_messages([
        {"role": "user", "content": "I need vegetarian dinner recommendations for Friday."},
        {"role": "assistant", "content": "I can compare concise options and tradeoffs."},
    ])
    return memory, thread


CARD_MINS = {"preference": 1, "guideline": 1, "message": 1}


def test_card_customization_returns_each_requested_type(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory, thread = card_demo(make_memory)
    assert CARD_INSTRUCTIONS in model.systems()[0]

    card = thread.get_context_card(max_relevant_results=6, min_relevant_results_by_type=CARD_MINS)

    prompt_context = card.content
    root = ET.fromstring(prompt_context)
    info = root.find("relevant_information")
    assert info is not None
    items = list(info)
    tags = [el.tag for el in items]
    assert tags.count("preference") >= 1 and tags.count("guideline") >= 1 and tags.count("message") >= 1
    assert len(tags) <= 6
    assert root.findtext("summary") == "User is planning dinner recommendations."
    assert [t.text for t in root.findall("topics/topic")] == ["pizza planning", "dinner"]
    assert "User prefers vegetarian restaurants." in [el.text for el in items if el.tag == "preference"]
    messages = [m for m in card.relevant if m.record.record_type is RecordType.MESSAGE]
    assert all(m.record.thread_id == "context_card_customization_demo" for m in messages)


def test_card_demo_turn_costs_one_call_by_default_and_two_when_separate(
    make_memory: Callable[..., AgentMemory], model: InstructedModel, calls: str
) -> None:
    memory, thread = card_demo(make_memory)
    expected = ["extraction"] if calls == "one_call" else ["extraction", "summary"]  # nothing to link yet
    assert [kind for kind, _ in model.calls] == expected
    assert thread.get_summary().topics == ("pizza planning", "dinner")


def test_card_customization_with_lower_type_search_concurrency(make_memory: Callable[..., AgentMemory], model: InstructedModel) -> None:
    memory, thread = card_demo(make_memory)
    expected = thread.get_context_card(max_relevant_results=6, min_relevant_results_by_type=CARD_MINS).content

    thread = memory.get_thread("context_card_customization_demo", context_card_type_search_concurrency=2)
    card = thread.get_context_card(max_relevant_results=6, min_relevant_results_by_type=CARD_MINS)

    assert thread.context_card_type_search_concurrency == 2
    assert card.content == expected


def test_card_customization_minimums_bring_back_crowded_out_types(
    make_memory: Callable[..., AgentMemory], model: InstructedModel
) -> None:
    memory, thread = card_demo(make_memory)
    for i in range(6):
        memory.add_memory(f"The user looked at vegetarian pizza place number {i} for Friday dinner.",
                          user_id="user_123", agent_id="assistant_456", memory_type="fact")
    plain = thread.get_context_card(max_relevant_results=3)
    reserved = thread.get_context_card(max_relevant_results=3, min_relevant_results_by_type=CARD_MINS)
    requested = {RecordType.PREFERENCE, RecordType.GUIDELINE, RecordType.MESSAGE}
    assert not requested <= {r.record.record_type for r in plain.relevant}  # similar facts crowd some out
    assert {r.record.record_type for r in reserved.relevant} == requested
