"""LangChain chat models and embeddings as agentmemory's LLM and embedder: LangChain's own fake
models, and ``langchain-openai``'s ``ChatOpenAI`` / ``OpenAIEmbeddings`` driven over real HTTP by
the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from agentmemory import AgentMemory, InvalidArgument, ModelError
from agentmemory.embedders import HashingEmbedder, as_embedder
from agentmemory.integrations.langchain import LangChainEmbedder, LangChainLlm
from agentmemory.llm import as_llm
from agentmemory.testing import ScriptedServer

FACT = "Maya's failing step is ledger enrichment after reconciliation."
TURNS = [
    {"role": "user", "content": "I'm Maya. I'm migrating our nightly invoice reconciliation to LangGraph."},
    {"role": "user", "content": "The failing step right now is ledger enrichment after reconciliation."},
]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def answer_for(schema: dict[str, Any]) -> dict[str, Any]:
    """A valid answer to whichever agentmemory schema is asked (extraction, summary, links)."""
    out: dict[str, Any] = {}
    for name in schema.get("required", list(schema.get("properties", {}))):
        if name == "memories":
            out[name] = [{"type": "fact", "content": FACT, "entities": ["Maya"], "valid_until": None, "links": [], "slot": None}]
        elif name == "summary":
            out[name] = {"summary": "Maya is moving invoice reconciliation to LangGraph.", "topics": ["ledger"]}
            if schema["properties"][name].get("type") == "string":
                out[name] = "Maya is moving invoice reconciliation to LangGraph."
        elif name in ("links", "topics"):
            out[name] = []
        else:
            out[name] = "ok"
    return out


class ToolCallingFake(BaseChatModel):
    """A chat model with tool calling (so ``with_structured_output`` works), recording each call
    as ``(sync|async, messages, kwargs)``."""

    calls: list[tuple[str, list[BaseMessage], dict[str, Any]]] = Field(default_factory=list)
    fail: bool = False

    @property
    def _llm_type(self) -> str:
        return "tool-calling-fake"

    def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=tool_choice, **kwargs)

    def _answer(self, mode: str, messages: list[BaseMessage], kwargs: dict[str, Any]) -> ChatResult:
        self.calls.append((mode, list(messages), kwargs))
        if self.fail:
            raise RuntimeError("provider is down")
        usage = {"input_tokens": 11, "output_tokens": 7, "total_tokens": 18}
        tools = kwargs.get("tools")
        if tools:
            function = tools[0]["function"]
            call = {"name": function["name"], "args": answer_for(function["parameters"]), "id": "call-1"}
            message = AIMessage(content="", tool_calls=[call], usage_metadata=usage)
        else:
            message = AIMessage(content="plain answer", usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> ChatResult:
        return self._answer("sync", messages, kwargs)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return self._answer("async", messages, kwargs)


class RecordingEmbeddings(DeterministicFakeEmbedding):
    """LangChain's deterministic fake embeddings, recording which entry point was used."""

    used: list[str] = Field(default_factory=list)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.used.append("embed_documents")
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.used.append("embed_query")
        return super().embed_query(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.used.append("aembed_documents")
        return super().embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        self.used.append("aembed_query")
        return super().embed_query(text)


def memory_with(llm: Any, embedder: Any) -> AgentMemory:
    return AgentMemory("memory://", llm=llm, embedder=embedder, memory_extraction_config={"enable_context_summary": False})


def test_langchain_objects_are_wrapped_and_extract_through_structured_output() -> None:
    chat = ToolCallingFake()
    embeddings = RecordingEmbeddings(size=48)
    memory = memory_with(chat, embeddings)
    assert isinstance(memory.llm, LangChainLlm) and memory.llm.chat_model is chat
    assert isinstance(memory.embedder, LangChainEmbedder) and memory.embedder.dimension == 48

    thread = memory.create_thread(user_id="maya")
    thread.add_messages(TURNS)

    facts = [m.content for m in memory.list_memories(user_id="maya")]
    assert FACT in facts
    mode, prompt, kwargs = chat.calls[0]
    assert mode == "sync"
    assert kwargs["tool_choice"] == "any" and kwargs["tools"]  # the model's own structured output
    assert any("ledger enrichment" in str(m.content) for m in prompt)
    assert memory.llm.usage_total["total_tokens"] == 18 * len(chat.calls)
    assert thread.search("which step fails?", max_results=1)[0].content
    assert "embed_query" in embeddings.used and "embed_documents" in embeddings.used


async def test_async_paths_use_ainvoke_and_aembed() -> None:
    chat = ToolCallingFake()
    embeddings = RecordingEmbeddings(size=32)
    memory = memory_with(chat, embeddings)
    embeddings.used.clear()

    thread = await memory.create_thread_async(user_id="maya")
    await thread.add_messages_async(TURNS)
    results = await thread.search_async("which step fails?", max_results=2)

    assert results
    assert chat.calls and {mode for mode, _, _ in chat.calls} == {"async"}
    assert set(embeddings.used) == {"aembed_documents", "aembed_query"}
    assert FACT in [m.content for m in await memory.list_memories_async(user_id="maya")]


def test_model_without_structured_output_answers_json_as_text() -> None:
    chat = GenericFakeChatModel(messages=iter(['```json\n{"answer": "from text"}\n```', "no json here"]))
    llm = LangChainLlm(chat)

    result = llm.generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)
    assert result.json == {"answer": "from text"}
    with pytest.raises(ModelError, match="not valid JSON"):
        llm.generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)
    plain = LangChainLlm(GenericFakeChatModel(messages=iter(["hello"]))).generate([{"role": "user", "content": "hi"}])
    assert (plain.text, plain.json) == ("hello", None)


def test_plain_generation_reports_usage_in_openai_names() -> None:
    result = LangChainLlm(ToolCallingFake()).generate([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert result.text == "plain answer"
    assert result.usage == {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def test_provider_errors_are_model_errors() -> None:
    llm = LangChainLlm(ToolCallingFake(fail=True))
    with pytest.raises(ModelError, match="provider is down") as info:
        llm.generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)
    assert isinstance(info.value.__cause__, RuntimeError)


class WrongDimension(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 2.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 2.0, 3.0]


def test_embeddings_answering_the_wrong_shape_are_model_errors() -> None:
    embedder = as_embedder(WrongDimension())
    assert embedder.dimension == 3  # probed with one query
    with pytest.raises(ModelError, match="2-d vectors, its dimension is 3"):
        embedder.embed(["a passage"])
    rows = embedder.embed(["q"], is_query=True)
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0)


def test_detection_leaves_agentmemory_objects_alone() -> None:
    hashing = HashingEmbedder(16)
    assert as_embedder(hashing) is hashing
    assert as_llm(None) is None
    wrapped = LangChainLlm(ToolCallingFake())
    assert as_llm(wrapped) is wrapped
    with pytest.raises(InvalidArgument, match="expected a LangChain chat model"):
        LangChainLlm("gpt-4o")  # type: ignore[arg-type]


# ---- langchain-openai against the scripted server ------------------------------------------------

@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    """The scripted server answering any agentmemory schema (``langchain-openai`` required)."""
    pytest.importorskip("langchain_openai")

    def chat(request: dict[str, Any]) -> Any:
        fmt = request.get("response_format") or {}
        if fmt.get("type") == "json_schema":
            return answer_for(fmt["json_schema"]["schema"])
        return "plain"

    def embed(texts: list[str]) -> list[list[float]]:
        return [[float(len(t) % 7) + 1.0, float(sum(map(ord, t)) % 11), 1.0, 0.5] for t in texts]

    with ScriptedServer(chat=chat, embed=embed) as srv:
        yield srv


def openai_models(server: ScriptedServer) -> tuple[Any, Any]:
    import langchain_openai

    chat = langchain_openai.ChatOpenAI(model="scripted-chat", base_url=server.base_url, api_key="sk-test", max_retries=0)
    embeddings = langchain_openai.OpenAIEmbeddings(
        model="scripted-embed", base_url=server.base_url, api_key="sk-test", check_embedding_ctx_length=False, max_retries=0
    )
    return chat, embeddings


def test_chat_openai_and_openai_embeddings_against_the_scripted_server(server: ScriptedServer) -> None:
    server.requests.clear()
    chat, embeddings = openai_models(server)
    memory = memory_with(chat, embeddings)
    assert memory.embedder.dimension == 4 and memory.embedder.model == "scripted-embed"

    thread = memory.create_thread(user_id="maya")
    thread.add_messages(TURNS)

    assert FACT in [m.content for m in memory.list_memories(user_id="maya")]
    bodies = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert bodies and bodies[0]["model"] == "scripted-chat"
    assert bodies[0]["response_format"]["type"] == "json_schema"  # ChatOpenAI's structured output
    assert "memories" in bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert memory.llm.usage_total["total_tokens"] > 0


async def test_chat_openai_async_against_the_scripted_server(server: ScriptedServer) -> None:
    chat, embeddings = openai_models(server)
    llm = as_llm(chat)
    result = await llm.agenerate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)
    assert result.json == {"answer": "ok"}
    assert json.loads(result.text) == {"answer": "ok"}
    vectors = await as_embedder(embeddings).aembed(["a", "bb"], is_query=False)
    assert vectors.shape == (2, 4)


# ---- the LangGraph middleware defaults to the agent's own model ---------------------------------

def _agent(memory: AgentMemory, model: Any, **options: Any) -> Any:
    from langchain.agents import create_agent

    from agentmemory.integrations.langgraph import AgentMemoryMiddleware

    middleware = AgentMemoryMiddleware(memory, thread_id="t-1", user_id="maya", trigger=None, **options)
    return create_agent(model=model, tools=[], middleware=[middleware]), middleware


def _structured_calls(chat: ToolCallingFake) -> list[tuple[str, list[BaseMessage], dict[str, Any]]]:
    return [c for c in chat.calls if c[2].get("tools")]


def test_middleware_extracts_with_the_agent_model_by_default() -> None:
    chat = ToolCallingFake()
    memory = AgentMemory("memory://", embedder=HashingEmbedder(64), memory_extraction_config={"enable_context_summary": False})
    agent, middleware = _agent(memory, chat)

    agent.invoke({"messages": [{"role": "user", "content": TURNS[0]["content"]}]})
    agent.invoke({"messages": [{"role": "user", "content": TURNS[1]["content"]}]})

    structured = _structured_calls(chat)
    assert structured, "the agent's model was never asked to extract"
    assert isinstance(middleware.memory_llm, LangChainLlm) and middleware.memory_llm.chat_model is chat
    first_prompt = " ".join(str(m.content) for m in structured[0][1])
    assert "I'm Maya" in first_prompt  # the turn written before the model was known waited for it
    assert [m.content for m in memory.list_memories(user_id="maya")] == [FACT]  # no rule-based memories


def test_middleware_leaves_a_memory_with_its_own_llm_alone() -> None:
    agent_model, memory_model = ToolCallingFake(), ToolCallingFake()
    memory = memory_with(memory_model, HashingEmbedder(64))
    agent, middleware = _agent(memory, agent_model)
    agent.invoke({"messages": [{"role": "user", "content": TURNS[0]["content"]}]})
    assert not _structured_calls(agent_model) and _structured_calls(memory_model)
    assert middleware.memory_llm is None


def test_middleware_llm_none_keeps_offline_extraction_and_a_given_model_is_used() -> None:
    chat, extractor = ToolCallingFake(), ToolCallingFake()
    memory = AgentMemory("memory://", embedder=HashingEmbedder(64))
    agent, _ = _agent(memory, chat, llm=None)
    agent.invoke({"messages": [{"role": "user", "content": TURNS[0]["content"]}]})
    assert not _structured_calls(chat)
    assert FACT not in [m.content for m in memory.list_memories(user_id="maya")]

    other = AgentMemory("memory://", embedder=HashingEmbedder(64), memory_extraction_config={"enable_context_summary": False})
    agent, _ = _agent(other, chat, llm=extractor)
    agent.invoke({"messages": [{"role": "user", "content": TURNS[0]["content"]}]})
    assert _structured_calls(extractor) and not _structured_calls(chat)

    from agentmemory import InvalidArgument

    with pytest.raises(InvalidArgument) as err:
        _agent(memory, chat, llm="gpt-4o")
    assert err.value.argument == "llm"


async def test_middleware_async_agent_extracts_through_ainvoke() -> None:
    chat = ToolCallingFake()
    memory = AgentMemory("memory://", embedder=HashingEmbedder(64), memory_extraction_config={"enable_context_summary": False})
    agent, _ = _agent(memory, chat)
    await agent.ainvoke({"messages": [{"role": "user", "content": TURNS[1]["content"]}]})
    assert _structured_calls(chat) and {mode for mode, _, _ in chat.calls} == {"async"}
    assert FACT in [m.content for m in await memory.list_memories_async(user_id="maya")]


def test_middleware_work_is_in_the_agent_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentmemory import observability

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(observability, "_tracer", lambda: provider.get_tracer("agentmemory"))
    memory = AgentMemory("memory://", embedder=HashingEmbedder(64), memory_extraction_config={"enable_context_summary": False})
    agent, _ = _agent(memory, ToolCallingFake())

    with provider.get_tracer("app").start_as_current_span("agent run") as run:
        agent.invoke({"messages": [{"role": "user", "content": TURNS[1]["content"]}]})

    spans = list(exporter.get_finished_spans())
    names = [s.name for s in spans]
    assert "agentmemory.middleware.before_model" in names and "agentmemory.middleware.after_model" in names
    assert {s.context.trace_id for s in spans} == {run.get_span_context().trace_id}  # one trace: the agent's
    by_id = {s.context.span_id: s for s in spans}
    extraction = next(s for s in spans if s.name == "agentmemory.llm.extraction")
    chain = []
    node: Any = extraction
    while node.parent is not None and node.parent.span_id in by_id:
        node = by_id[node.parent.span_id]
        chain.append(node.name)
    assert "agentmemory.middleware.after_model" in chain and chain[-1] == "agent run"
    assert extraction.attributes["gen_ai.usage.input_tokens"] == 11
    provider.shutdown()
