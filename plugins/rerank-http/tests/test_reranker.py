"""The HTTP reranker against a local server speaking each dialect of the rerank protocol."""

from __future__ import annotations

import importlib.metadata
import math
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from agentmemory_conformance import RerankerConformance
from agentmemory_rerank_http import DIALECTS, HttpReranker, RerankError, RerankUnavailable
from rerank_server import RerankServer, answer_as

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument, Record, RecordType, SearchResult
from agentmemory.plugins import PluginManager

Serve = Callable[[Callable[[str, dict[str, Any]], Any]], RerankServer]
T0 = datetime(2024, 6, 1, tzinfo=timezone.utc)
DOCS = ["Bob drinks coffee", "Maya drinks green tea every morning", "the deploy failed", "green tea is Maya's favourite tea"]


def results(docs: list[str]) -> list[SearchResult]:
    return [
        SearchResult(record=Record(record_id=f"@r{i}", record_type=RecordType.FACT, content=d, user_id="u", timestamp=T0, created_at=T0),
                     distance=0.1 * i, score=1 - 0.1 * i, formatted_content=d)
        for i, d in enumerate(docs)
    ]


def ids(out: list[SearchResult]) -> list[str]:
    return [r.record.record_id for r in out]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_each_dialect_sends_its_request_and_reads_its_answer(serve: Serve, dialect: str) -> None:
    server = serve(lambda path, body: answer_as(dialect, body))
    reranker = HttpReranker(server.url, dialect=dialect, model="m1", api_key="k")
    out = reranker("which tea does Maya drink", results(DOCS))
    assert ids(out) == ["@r1", "@r3", "@r0", "@r2"]
    req = server.requests[0]
    d = DIALECTS[dialect]
    assert req["path"] == d.path and req["headers"]["Authorization"] == "Bearer k"
    assert req["body"]["query"] == "which tea does Maya drink"
    assert req["body"][d.documents_key] == DOCS
    assert req["body"].get("model") == (None if dialect == "tei" else "m1")
    if d.top_key:
        assert req["body"][d.top_key] == len(DOCS)


def test_documents_go_in_batches_and_scores_merge_across_them(serve: Serve) -> None:
    server = serve(lambda path, body: answer_as("cohere", body))
    docs = [f"filler {i}" for i in range(70)]
    docs[5], docs[66] = "maya tea", "maya green tea"
    out = HttpReranker(server.url + "/v2/rerank", batch_size=32)("maya green tea", results(docs))
    assert [len(r["body"]["documents"]) for r in server.requests] == [32, 32, 6]
    assert ids(out)[:2] == ["@r66", "@r5"] and len(out) == 70


def test_top_n_min_score_and_unscored_documents(serve: Serve) -> None:
    # the server scores only the first two documents: the others keep their order after them
    server = serve(lambda path, body: {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]})
    assert ids(HttpReranker(server.url)("q", results(DOCS))) == ["@r1", "@r0", "@r2", "@r3"]
    assert ids(HttpReranker(server.url, top_n=1)("q", results(DOCS))) == ["@r1"]
    assert ids(HttpReranker(server.url, min_score=0.5)("q", results(DOCS))) == ["@r1"]


def test_ties_keep_the_search_order(serve: Serve) -> None:
    server = serve(lambda path, body: {"results": [{"index": i, "relevance_score": 0.5} for i in (3, 2, 1, 0)]})
    assert ids(HttpReranker(server.url)("q", results(DOCS))) == ["@r0", "@r1", "@r2", "@r3"]


def test_transient_failures_are_retried_with_backoff(serve: Serve) -> None:
    answers: list[Any] = [(503, {"error": "loading"}, {}), (429, {"error": "slow down"}, {"Retry-After": "2"})]
    server = serve(lambda path, body: answers.pop(0) if answers else answer_as("cohere", body))
    slept: list[float] = []
    out = HttpReranker(server.url, backoff_s=0.5, sleep=slept.append)("maya tea", results(DOCS))
    assert len(server.requests) == 3 and slept == [0.5, 2.0] and len(out) == 4


def test_persistent_failure_is_rerank_unavailable(serve: Serve) -> None:
    server = serve(lambda path, body: (502, "bad gateway", {}))
    slept: list[float] = []
    with pytest.raises(RerankUnavailable, match="HTTP 502"):
        HttpReranker(server.url, max_retries=2, backoff_s=1, max_backoff_s=1.5, sleep=slept.append)("q", results(DOCS))
    assert len(server.requests) == 3 and slept == [1, 1.5]


def test_timeouts_are_retried_then_unavailable(serve: Serve) -> None:
    server = serve(lambda path, body: answer_as("cohere", body))
    server.delay_s = 0.5
    with pytest.raises(RerankUnavailable, match="timed out"):
        HttpReranker(server.url, timeout_s=0.1, max_retries=1, sleep=lambda s: None)("q", results(DOCS))
    assert len(server.requests) == 2


def test_unreachable_server_is_rerank_unavailable() -> None:
    with pytest.raises(RerankUnavailable):
        HttpReranker("http://127.0.0.1:9", max_retries=0)("q", results(DOCS))


def test_client_errors_are_not_retried(serve: Serve) -> None:
    server = serve(lambda path, body: (400, {"message": "model not found"}, {}))
    with pytest.raises(RerankError, match="model not found") as info:
        HttpReranker(server.url, sleep=lambda s: None)("q", results(DOCS))
    assert not isinstance(info.value, RerankUnavailable) and len(server.requests) == 1


@pytest.mark.parametrize("answer", [
    {"results": [{"index": 9, "relevance_score": 1.0}]},
    {"results": [{"index": 0, "relevance_score": 1.0}, {"index": 0, "relevance_score": 0.5}]},
    {"results": [{"index": 0, "relevance_score": "high"}]},
    {"results": [{"index": True, "relevance_score": 1.0}]},
    {"data": []},
    "not json",
])
def test_answers_outside_the_protocol_are_rerank_errors(serve: Serve, answer: Any) -> None:
    server = serve(lambda path, body: answer)
    with pytest.raises(RerankError):
        HttpReranker(server.url)("q", results(DOCS))


def test_on_error_keep_returns_the_search_order(serve: Serve) -> None:
    server = serve(lambda path, body: (500, "boom", {}))
    given = results(DOCS)
    assert HttpReranker(server.url, on_error="keep", max_retries=0)("q", given) == given


@pytest.mark.parametrize(("kwargs", "argument"), [
    ({"url": None}, "url"), ({"url": "ftp://x"}, "url"), ({"dialect": "nope"}, "dialect"), ({"batch_size": 0}, "batch_size"),
    ({"timeout_s": 0}, "timeout_s"), ({"timeout_s": math.inf}, "timeout_s"), ({"top_n": 0}, "top_n"), ({"on_error": "x"}, "on_error"),
    ({"max_retries": -1}, "max_retries"), ({"backoff_s": -1}, "backoff_s"),
])
def test_bad_settings_are_invalid_argument(monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], argument: str) -> None:
    monkeypatch.delenv("AGENTMEMORY_RERANK_URL", raising=False)
    with pytest.raises(InvalidArgument) as info:
        HttpReranker(**{"url": "http://localhost:1", **kwargs})
    assert info.value.argument == argument


def test_registered_by_entry_point_and_configured_from_the_environment(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AgentMemory(rerankers=["http"])`` finds the plugin through its entry point."""
    eps = [ep for ep in importlib.metadata.entry_points(group="agentmemory") if ep.name == "rerank_http"]
    assert eps and eps[0].value == "agentmemory_rerank_http.plugin"
    server = serve(lambda path, body: answer_as("tei", body))
    monkeypatch.setenv("AGENTMEMORY_RERANK_URL", server.url)
    monkeypatch.setenv("AGENTMEMORY_RERANK_DIALECT", "tei")
    pm = PluginManager()
    assert "http" in pm.names("rerankers")
    client = AgentMemory("memory://", embedder=HashingEmbedder(64), plugin_manager=pm, rerankers=["http"])
    try:
        for doc in DOCS:
            client.add_memory(doc, user_id="u")
        hits = client.search("Maya drinks tea every morning", user_id="u", max_results=2)
        assert [h.record.content for h in hits] == [DOCS[1], DOCS[3]]
        assert server.requests[0]["path"] == "/rerank"
    finally:
        client.close()


class TestConformance(RerankerConformance):
    """The shared reranker checks, through a live scripted server."""

    @pytest.fixture(autouse=True)
    def _server(self, serve: Serve) -> None:
        self.server = serve(lambda path, body: answer_as("jina", body))

    def make_reranker(self) -> HttpReranker:
        return HttpReranker(self.server.url, dialect="jina", batch_size=16)
