"""LLM calls per ``add_messages``, counted by the scripted OpenAI-compatible server (it sees every
request): one by default (links and a due summary update decided in the extraction call), up to
three with ``SEPARATE_LLM_CALLS``; the combined answer validated and retried like any other; the
rule-based path untouched."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agentmemory import (
    SEPARATE_LLM_CALLS,
    AgentMemory,
    ContextSummaryUpdateMode,
    HashingEmbedder,
    LinkType,
    MemoryExtractionConfig,
    MemoryLinkExtractionMode,
    ModelError,
    RecordStatus,
)
from agentmemory.effects import run_sync
from agentmemory.llm import OpenAICompatibleLlm
from agentmemory.operations.extraction import past_memories_op
from agentmemory.operations.lookup import stored_summary_op
from agentmemory.records import MEMORY_TYPES
from agentmemory.spi import RecordFilter
from agentmemory.testing import ScriptedServer


def props(request: dict[str, Any]) -> dict[str, Any]:
    return dict(((request.get("response_format") or {}).get("json_schema") or {}).get("schema", {}).get("properties", {}))


def kind(request: dict[str, Any]) -> str:
    """extraction, extraction+summary, links or summary: by the schema asked for."""
    p = props(request)
    if "memories" in p:
        return "extraction+summary" if "summary" in p else "extraction"
    return "links" if "links" in p else "summary"


def prompt(request: dict[str, Any]) -> ET.Element:
    return ET.fromstring(f"<p>{request['messages'][1]['content']}</p>")


class Model:
    """Stores each new user message as a fact; an "actually" message supersedes the first past
    memory shown (in the extraction call or the link call, whichever is asked); summaries list
    what they took in."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.override: Callable[[dict[str, Any]], Any] | None = None

    def kinds(self) -> list[str]:
        return [kind(r) for r in self.requests]

    def __call__(self, request: dict[str, Any]) -> Any:
        self.requests.append(request)
        if self.override is not None:
            return self.override(request)
        root = prompt(request)
        k = kind(request)
        if k == "summary":
            new = [m.findtext("content") or "" for m in root.findall("new_messages/message")]
            return summary_of(root.findtext("previous_summary/content") or "", new)
        if k == "links":
            fresh = [(m.findtext("id"), m.findtext("content") or "") for m in root.findall("new_memories/memory")]
            old = [m.findtext("id") for m in root.findall("candidates/memory")]
            return {"links": [{"source_id": i, "target_id": old[0], "link_type": "supersedes"} for i, c in fresh if "actually" in c.lower()]}
        quoted = [(m.findtext("role"), m.findtext("content") or "") for m in root.findall("conversation/message") if m.get("new") == "true"]
        past = [m.findtext("id") for m in root.findall("past_memories/memory")]
        asked_links = "add a link from the new memory" in request["messages"][0]["content"]
        memories = [
            {"type": "fact", "content": f"User: {c}",
             "links": [{"target_id": past[0], "link_type": "supersedes"}] if asked_links and past and "actually" in c.lower() else []}
            for role, c in quoted if role == "user"
        ]
        answer: dict[str, Any] = {"memories": memories}
        if k == "extraction+summary":
            answer["summary"] = summary_of(root.findtext("summary/content") or "", [c for _, c in quoted])
        return answer


def summary_of(previous: str, new: list[str]) -> dict[str, Any]:
    return {"summary": " | ".join([p for p in [previous] if p] + new), "topics": ["chat"]}


@pytest.fixture
def model(server: ScriptedServer) -> Model:
    m = Model()
    server.chat = m
    return m


@pytest.fixture
def make(server: ScriptedServer, model: Model) -> Iterator[Callable[..., AgentMemory]]:
    made: list[AgentMemory] = []

    def factory(**kwargs: Any) -> AgentMemory:
        kwargs.setdefault("llm", OpenAICompatibleLlm("scripted", base_url=server.base_url, backoff_s=0.01, max_retries=1, timeout_s=10))
        client = AgentMemory("memory://", embedder=HashingEmbedder(128), **kwargs)
        made.append(client)
        return client

    yield factory
    for client in made:
        client.close(timeout=5)


def chat_requests(server: ScriptedServer) -> int:
    """Chat-completion requests the server has seen so far."""
    return sum(1 for r in server.requests if r["path"].endswith("/chat/completions"))


def turn(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


TURNS = [
    "My favourite colour is blue.",
    "I work at Orchard Robotics.",
    "What a nice day.",
    "Actually my favourite colour is green now.",
    "My dog is called Rex.",
    "Actually I work at Kestrel Health since May.",
]


def run_turns(server: ScriptedServer, client: AgentMemory) -> list[int]:
    """Chat requests per add_messages over ``TURNS`` in one thread."""
    thread = client.create_thread(thread_id="t", user_id="u")
    counts = []
    for text in TURNS:
        before = chat_requests(server)
        thread.add_messages(turn(text))
        counts.append(chat_requests(server) - before)
    return counts


# ---- calls per add_messages, exact ------------------------------------------------------------------
def test_default_is_one_call_per_add_messages_with_links_and_summary(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make()
    assert run_turns(server, client) == [1] * len(TURNS)
    assert set(model.kinds()) == {"extraction+summary"}
    supersedes = [link for link in client.store.links() if link.link_type is LinkType.SUPERSEDES]
    assert len(supersedes) == 2  # both "actually" turns linked inside the extraction call
    assert all(client.get_memory(link.target_id).status is RecordStatus.INVALID for link in supersedes)
    summary = client.get_thread("t").get_summary()
    assert summary.revision == len(TURNS) and TURNS[0] in summary.content and TURNS[-1] in summary.content
    assert summary.topics == ("chat",)


def test_separate_llm_calls_is_the_old_three_call_layout(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config=SEPARATE_LLM_CALLS)
    # the first turn has nothing to link to; every later one has candidates and a new memory,
    # except the small-talk turn, whose user message still becomes a memory in this script
    assert run_turns(server, client) == [2] + [3] * (len(TURNS) - 1)
    assert model.kinds()[:5] == ["extraction", "summary", "extraction", "links", "summary"]
    assert len([link for link in client.store.links() if link.link_type is LinkType.SUPERSEDES]) == 2
    assert client.get_thread("t").get_summary().revision == len(TURNS)


def test_both_layouts_store_the_same_memories_links_and_summary(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    def outcome(client: AgentMemory) -> tuple[Any, ...]:
        run_turns(server, client)
        by_id = {m.record_id: m.content for m in client.store.query(RecordFilter(record_types=MEMORY_TYPES))}
        links = sorted((by_id[link.source_id], by_id[link.target_id], link.link_type.value) for link in client.store.links())
        valid = sorted(m.content for m in client.store.query(RecordFilter(record_types=MEMORY_TYPES, statuses=frozenset({RecordStatus.VALID}))))
        summary = client.get_thread("t").get_summary()
        return sorted(by_id.values()), links, valid, summary.content, summary.topics

    assert outcome(make()) == outcome(make(memory_extraction_config=SEPARATE_LLM_CALLS))


def test_each_setting_is_resolved_call_thread_client_default(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config={"context_summary_update_mode": "separate_call"})
    thread = client.create_thread(thread_id="t", user_id="u", context_summary_update_mode=ContextSummaryUpdateMode.DURING_EXTRACTION)
    assert client.create_thread(thread_id="other", user_id="u").extraction_config().context_summary_update_mode is ContextSummaryUpdateMode.SEPARATE_CALL
    thread.add_messages(turn("My dog is called Rex."))
    assert model.kinds() == ["extraction+summary"]  # the thread's value beats the client's
    thread.add_messages(turn("My cat is called Tom."), memory_extraction_config=SEPARATE_LLM_CALLS)
    assert model.kinds()[1:] == ["extraction", "links", "summary"]  # the call's values beat the thread's
    cfg = AgentMemory("memory://", embedder=HashingEmbedder(16)).create_thread(thread_id="d").extraction_config()
    assert cfg.context_summary_update_mode is ContextSummaryUpdateMode.DURING_EXTRACTION  # defaults
    assert cfg.memory_link_extraction_mode is MemoryLinkExtractionMode.DURING_EXTRACTION


def test_a_summary_due_over_other_messages_than_the_extraction_gets_its_own_call(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config={"context_summary_update_frequency": 4})
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(turn("one"))
    assert model.kinds() == ["extraction"]  # the summary is not due yet: not asked for
    thread.add_messages(turn("two"))
    assert model.kinds()[1:] == ["extraction", "summary"]  # due over four messages, extraction over two
    assert thread.get_summary().content == "one | Noted. | two | Noted."


def test_summary_only_turns_and_disabled_summaries(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config={"extract_memories": False})
    client.create_thread(thread_id="t", user_id="u").add_messages(turn("hello"))
    assert model.kinds() == ["summary"]
    client = make(memory_extraction_config={"enable_context_summary": False})
    client.create_thread(thread_id="t", user_id="u").add_messages(turn("hello"))
    assert model.kinds()[1:] == ["extraction"] and "summary" not in props(model.requests[-1])


# ---- the combined answer is validated and retried like any other ------------------------------------
def test_a_combined_answer_without_its_summary_is_retried(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    answers = [{"memories": [{"type": "fact", "content": "User: I like tea."}]},
               {"memories": [{"type": "fact", "content": "User: I like tea."}], "summary": {"summary": "Tea talk.", "topics": ["tea"]}}]
    model.override = lambda req: answers.pop(0)
    client = make()
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(turn("I like tea."))

    assert model.kinds() == ["extraction+summary"] * 2
    retry = model.requests[1]["messages"]
    assert "That answer was invalid" in retry[-1]["content"] and "summary" in retry[-1]["content"]
    assert [m.content for m in client.list_memories(user_id="u")] == ["User: I like tea."]
    assert (thread.get_summary().content, thread.get_summary().topics) == ("Tea talk.", ("tea",))


def test_a_combined_answer_invalid_every_time_writes_nothing_and_both_stay_pending(
    server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]
) -> None:
    model.override = lambda req: {"memories": [{"type": "opinion", "content": "x"}], "summary": {"summary": "s"}}
    client = make()
    thread = client.create_thread(thread_id="t", user_id="u")
    with pytest.raises(ModelError, match="ExtractionWithSummaryOutput: no valid answer after 3 attempts"):
        thread.add_messages(turn("I like tea."))
    assert model.kinds() == ["extraction+summary"] * 3
    assert client.list_memories(user_id="u") == [] and run_sync(stored_summary_op(client.context(), "t")) is None

    model.override = None
    thread.add_messages(turn("I like coffee too."))
    [(last)] = model.requests[3:]
    new = [m.findtext("content") for m in prompt(last).findall("conversation/message") if m.get("new") == "true"]
    assert new == ["I like tea.", "Noted.", "I like coffee too.", "Noted."]  # extracted and summarised together
    assert sorted(m.content for m in client.list_memories(user_id="u")) == ["User: I like coffee too.", "User: I like tea."]
    assert thread.get_summary().content == "I like tea. | Noted. | I like coffee too. | Noted."


def test_the_previous_summary_reaches_the_combined_call(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    thread = make().create_thread(thread_id="t", user_id="u")
    thread.add_messages(turn("first"))
    thread.add_messages(turn("second"))
    assert prompt(model.requests[-1]).findtext("summary/content") == "first | Noted."
    assert thread.get_summary().content == "first | Noted. | second | Noted."


# ---- links decided in the extraction call see per-message candidates --------------------------------
def test_link_candidates_include_memories_close_to_each_new_message(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config={"enable_context_summary": False})
    for i in range(10):
        client.add_memory(f"The user drinks green tea number {i} with jasmine every morning.", user_id="u")
    bike = client.add_memory("The user's bicycle is red.", user_id="u")
    thread = client.create_thread(thread_id="t", user_id="u")
    messages = [{"role": "user", "content": "Green tea with jasmine every morning, number one, number two, tea tea tea."},
                {"role": "user", "content": "Actually my bicycle is blue now."}]
    joined = "\n".join(m["content"] for m in messages)
    assert bike not in [r.record_id for r in run_sync(past_memories_op(client.context(), thread.scope(), joined))]  # one query misses it

    thread.add_messages(messages)

    past = [m.findtext("id") for m in prompt(model.requests[-1]).findall("past_memories/memory")]
    assert bike in past and len(past) <= 14


# ---- paths without an LLM extraction call ------------------------------------------------------------
def test_rule_based_extraction_makes_no_llm_call(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(llm=None)
    client.create_thread(thread_id="t", user_id="u").add_messages(turn("Hi, my name is Bob. I prefer tea over coffee."))
    assert model.requests == []
    assert sorted(m.content for m in client.list_memories(user_id="u")) == ["The user prefers tea over coffee.", "The user's name is Bob."]


def test_rules_extractor_with_an_llm_keeps_the_summary_call(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(extractor="rules")
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(turn("My name is Bob."))
    assert model.kinds() == ["summary"]  # a rule extractor cannot fold the summary in
    assert [m.content for m in client.list_memories(user_id="u")] == ["The user's name is Bob."]
    assert thread.get_summary().content == "My name is Bob. | Noted."


def test_a_chain_with_the_llm_extractor_folds_the_summary_once(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(extractor=["rules", "llm"])
    thread = client.create_thread(thread_id="t", user_id="u")
    thread.add_messages(turn("My name is Bob."))
    assert model.kinds() == ["extraction+summary"]
    assert sorted(m.content for m in client.list_memories(user_id="u")) == ["The user's name is Bob.", "User: My name is Bob."]
    assert thread.get_summary().content == "My name is Bob. | Noted."


def test_background_mode_is_one_call_per_add_messages_too(server: ScriptedServer, model: Model, make: Callable[..., AgentMemory]) -> None:
    client = make(memory_extraction_config=MemoryExtractionConfig(extraction_mode="background"))  # type: ignore[arg-type]  # strings are accepted
    thread = client.create_thread(thread_id="t", user_id="u")
    for text in TURNS[:3]:
        thread.add_messages(turn(text))
        assert client.wait_for_memory_extraction(timeout=10) is True
    assert model.kinds() == ["extraction+summary"] * 3
