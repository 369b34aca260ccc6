"""OpenTelemetry spans through the real SDK (in-memory exporter): operations, store, embedder and
LLM calls with token usage, nesting under the caller's span (sync, async, the card's parallel
searches), errors, and no tracing at all without ``opentelemetry-api``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agentmemory import AgentMemory, NotFound, observability
from agentmemory.effects import Call, Gather, run_async, run_sync
from agentmemory.embedders import HashingEmbedder
from agentmemory.llm import OpenAICompatibleLlm
from agentmemory.testing import ScriptedServer

TURNS = [
    {"role": "user", "content": "I'm Maya. I'm migrating our nightly invoice reconciliation to LangGraph."},
    {"role": "user", "content": "The failing step right now is ledger enrichment after reconciliation."},
]


class Spans:
    """The spans exported so far, with the tracer the library uses during the test."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    @property
    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, (name, [s.name for s in self.all])
        return found[0]

    def children(self, parent: ReadableSpan) -> list[str]:
        assert parent.context is not None
        return [s.name for s in self.all if s.parent is not None and s.parent.span_id == parent.context.span_id]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    """A private SDK tracer provider for agentmemory's spans (the global one is left alone)."""
    recorder = Spans()
    monkeypatch.setattr(observability, "_tracer", lambda: recorder.provider.get_tracer("agentmemory"))
    yield recorder
    recorder.provider.shutdown()


@pytest.fixture
def memory() -> Iterator[AgentMemory]:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(64))
    yield mem
    mem.close()


def test_operations_and_their_store_and_embedder_calls_are_nested_spans(spans: Spans, memory: AgentMemory) -> None:
    with spans.tracer.start_as_current_span("request") as request:
        thread = memory.create_thread(user_id="maya")
        thread.add_messages(TURNS)
        thread.search("which step fails?", max_results=2)

    add = spans.one("agentmemory.add_messages")
    assert {"agentmemory.embed", "agentmemory.store.write"} <= set(spans.children(add))
    embed = next(s for s in spans.named("agentmemory.embed") if s.parent and s.parent.span_id == add.context.span_id)
    assert embed.attributes["agentmemory.embed.texts"] == 2
    assert embed.attributes["agentmemory.embed.is_query"] is False
    write = next(s for s in spans.named("agentmemory.store.write") if s.parent and s.parent.span_id == add.context.span_id)
    assert write.attributes["agentmemory.store.backend"]
    search = spans.one("agentmemory.search")
    assert "agentmemory.embed" in spans.children(search)
    assert any(n.startswith("agentmemory.store.") for n in spans.children(search))
    query_embed = next(s for s in spans.named("agentmemory.embed") if s.parent and s.parent.span_id == search.context.span_id)
    assert query_embed.attributes["agentmemory.embed.is_query"] is True
    trace_id = request.get_span_context().trace_id
    assert {s.context.trace_id for s in spans.all if s.name.startswith("agentmemory.")} == {trace_id}
    top = {s.name for s in spans.all if s.parent is not None and s.parent.span_id == request.get_span_context().span_id}
    assert {"agentmemory.create_thread", "agentmemory.add_messages", "agentmemory.search"} <= top


def test_card_searches_stay_in_the_card_span(spans: Spans, memory: AgentMemory) -> None:
    thread = memory.create_thread(user_id="maya")
    thread.add_messages(TURNS * 3)
    spans.clear()

    thread.get_context_card()

    card = spans.one("agentmemory.context_card")
    ids = {s.context.span_id: s for s in spans.all}
    assert all(s.context.trace_id == card.context.trace_id for s in spans.all)

    def under_card(span: ReadableSpan) -> bool:
        while span.parent is not None:
            if span.parent.span_id == card.context.span_id:
                return True
            span = ids[span.parent.span_id]
        return False

    searches = [s for s in spans.all if s is not card and s.name.startswith("agentmemory.store.")]
    assert searches and all(under_card(s) for s in searches)


class Worker:
    trace_name = "worker"

    def work(self, n: int) -> int:
        return n * 2

    async def awork(self, n: int) -> int:
        return n * 2


def _one(n: int) -> Any:
    return (yield Call(Worker(), "work", (n,)))


def _fan_out_op() -> Any:
    return (yield Gather(tuple(_one(n) for n in range(4)), limit=4))


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_parallel_sub_operations_nest_under_their_parent(spans: Spans, driver: str) -> None:
    """``Gather`` runs sub-operations on worker threads (sync) or tasks (async): their spans
    still hang under the operation that gathered them."""
    with spans.tracer.start_as_current_span("request"):
        result = run_sync(_fan_out_op()) if driver == "sync" else asyncio.run(run_async(_fan_out_op()))
    assert result == [0, 2, 4, 6]
    parent = spans.one("agentmemory.fan_out")
    subs = spans.named("agentmemory.one")
    assert len(subs) == 4 and all(s.parent is not None and s.parent.span_id == parent.context.span_id for s in subs)
    calls = spans.named("agentmemory.worker.work")
    assert len(calls) == 4 and {c.parent.span_id for c in calls if c.parent} == {s.context.span_id for s in subs}


async def test_async_operations_are_traced_alike(spans: Spans, memory: AgentMemory) -> None:
    with spans.tracer.start_as_current_span("request"):
        thread = await memory.create_thread_async(user_id="maya")
        await thread.add_messages_async(TURNS)
        await thread.get_context_card_async()

    add = spans.one("agentmemory.add_messages")
    assert {"agentmemory.embed", "agentmemory.store.write"} <= set(spans.children(add))
    card = spans.one("agentmemory.context_card")
    assert card.parent is not None and spans.children(card)


def test_a_failed_call_is_an_error_span(spans: Spans, memory: AgentMemory) -> None:
    with pytest.raises(NotFound):
        memory.get_memory("missing")
    op = spans.one("agentmemory.get")
    assert op.status.status_code is StatusCode.ERROR
    assert any(e.name == "exception" for e in op.events)


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    def chat(request: dict[str, Any]) -> Any:
        fmt = request.get("response_format") or {}
        schema = fmt.get("json_schema", {}).get("schema", {})
        if "memories" in schema.get("properties", {}):
            out: dict[str, Any] = {"memories": [{"type": "fact", "content": "Maya's failing step is ledger enrichment.",
                                                 "entities": [], "valid_until": None, "links": [], "slot": None}]}
            if "summary" in schema.get("required", []):
                out["summary"] = {"summary": "Maya migrates reconciliation.", "topics": []}
            return out
        if "links" in schema.get("properties", {}):
            return {"links": []}
        return {"summary": "Maya migrates reconciliation.", "topics": []}

    with ScriptedServer(chat=chat) as srv:
        yield srv


def test_llm_calls_carry_model_purpose_and_token_usage(spans: Spans, server: ScriptedServer) -> None:
    llm = OpenAICompatibleLlm("scripted-model", base_url=server.base_url, backoff_s=0.01)
    memory = AgentMemory("memory://", embedder=HashingEmbedder(64), llm=llm)
    thread = memory.create_thread(user_id="maya")
    thread.add_messages(TURNS)

    add = spans.one("agentmemory.add_messages")
    llm_spans = [s for s in spans.all if s.name.startswith("agentmemory.llm.")]
    assert llm_spans and "agentmemory.llm.extraction" in {s.name for s in llm_spans}
    for span in llm_spans:
        assert span.parent is not None and span.parent.span_id == add.context.span_id
        assert span.attributes["gen_ai.request.model"] == "scripted-model"
        assert span.attributes["gen_ai.usage.input_tokens"] > 0
        assert span.attributes["gen_ai.usage.output_tokens"] > 0
    assert sum(s.attributes["agentmemory.llm.total_tokens"] for s in llm_spans) == llm.usage_total["total_tokens"]
    memory.close()


def test_without_opentelemetry_nothing_is_traced() -> None:
    """``opentelemetry`` unimportable: ``TRACING`` is False and every operation still works."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if not installed
        from agentmemory import AgentMemory, observability
        from agentmemory.embedders import HashingEmbedder
        assert observability.TRACING is False
        with observability.span("x") as current:
            assert current is None
        thread = AgentMemory("memory://", embedder=HashingEmbedder(16)).create_thread(user_id="u")
        thread.add_messages([{"role": "user", "content": "I prefer tea."}])
        assert thread.search("tea", max_results=1)
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_without_a_tracer_provider_the_drivers_make_no_spans() -> None:
    """The API installed but no provider configured (the global one is OpenTelemetry's proxy):
    ``active()`` is False, so operations run on the plain path; once a provider is set, the
    next operation is traced."""
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from agentmemory import AgentMemory, observability
        from agentmemory.embedders import HashingEmbedder
        assert observability.TRACING is True and observability.active() is False
        with observability.span("x") as current:
            assert current is None
        thread = AgentMemory("memory://", embedder=HashingEmbedder(16)).create_thread(user_id="u")
        thread.add_messages([{"role": "user", "content": "I prefer tea."}])
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        assert observability.active() is True
        assert thread.search("tea", max_results=1)
        names = [s.name for s in exporter.get_finished_spans()]
        assert "agentmemory.search" in names and "agentmemory.add_messages" not in names, names
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
