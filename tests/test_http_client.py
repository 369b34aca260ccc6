"""The httpx transport under the OpenAI-compatible LLM and embedder, over real HTTP against the
scripted server: pooled connections, native async, ``Retry-After``, split timeouts, proxies
from the environment."""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from agentmemory import ModelError
from agentmemory.embedders import OpenAICompatibleEmbedder
from agentmemory.http import retry_after_seconds
from agentmemory.llm import OpenAICompatibleLlm
from agentmemory.testing import ScriptedServer

Q = [{"role": "user", "content": "q"}]


@pytest.fixture
def server(server: ScriptedServer) -> Iterator[ScriptedServer]:
    """The module's scripted server (conftest), reset for each test."""
    server.chat = None
    server.embed = None
    server.requests.clear()
    yield server


def make_llm(server: ScriptedServer, **kwargs: Any) -> OpenAICompatibleLlm:
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAICompatibleLlm("test-model", base_url=server.base_url, **kwargs)


def test_sequential_calls_reuse_one_pooled_connection(server: ScriptedServer) -> None:
    server.chat = lambda req: "ok"
    llm = make_llm(server)
    for _ in range(5):
        assert llm.generate(Q).text == "ok"
    assert len(server.requests) == 5
    assert len({r["peer"] for r in server.requests}) == 1  # one TCP connection for all five


def test_retry_after_seconds_is_honoured_instead_of_the_backoff(server: ScriptedServer) -> None:
    answers: list[Any] = [(429, {"Retry-After": "0.3"}), "after the wait"]
    stamps: list[float] = []

    def chat(req: dict[str, Any]) -> Any:
        stamps.append(time.monotonic())
        return answers.pop(0)

    server.chat = chat
    assert make_llm(server, backoff_s=0.001).generate(Q).text == "after the wait"
    assert stamps[1] - stamps[0] >= 0.28  # the server's 0.3 s, not the 1 ms backoff


def test_retry_after_longer_than_allowed_fails_at_once(server: ScriptedServer) -> None:
    server.chat = lambda req: (503, {"Retry-After": "3600"})
    started = time.monotonic()
    with pytest.raises(ModelError, match="retry after 3600s") as info:
        make_llm(server, max_retries=3, max_retry_after_s=5).generate(Q)
    assert "1 attempt" in str(info.value) and "HTTP 503" in str(info.value)
    assert len(server.requests) == 1
    assert time.monotonic() - started < 30  # not the server's hour (nor the 5 s cap: one attempt)


def test_retry_after_http_date_and_garbage() -> None:
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= (retry_after_seconds(future) or 0) <= 31
    assert retry_after_seconds(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0
    assert retry_after_seconds("2.5") == 2.5
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds(None) is None


def test_connect_and_read_timeouts_are_separate(server: ScriptedServer) -> None:
    llm = make_llm(server, timeout_s=42.0, connect_timeout_s=1.5)
    timeout = llm.http.client.timeout
    assert (timeout.connect, timeout.read, timeout.write) == (1.5, 42.0, 42.0)


def test_read_timeout_does_not_wait_for_the_connect_budget(server: ScriptedServer) -> None:
    def slow(req: dict[str, Any]) -> Any:
        time.sleep(10.0)
        return "late"

    server.chat = slow
    started = time.monotonic()
    with pytest.raises(ModelError, match="timed out"):
        make_llm(server, timeout_s=0.1, connect_timeout_s=30.0, max_retries=0).generate(Q)
    # gave up at the 0.1 s read budget, not after the server's 10 s nor the 30 s connect budget
    # (wide margins: a loaded CI machine must not decide this)
    assert time.monotonic() - started < 8


def test_proxy_is_taken_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY`` routes the request through the proxy (httpx's ``trust_env``): the scripted
    server plays the proxy and sees the absolute upstream URL."""
    with ScriptedServer(chat=lambda req: "via proxy") as proxy:
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.rsplit("/v1", 1)[0])
        llm = OpenAICompatibleLlm("m", base_url="http://upstream.invalid/v1", max_retries=0, timeout_s=5.0)
        assert llm.generate(Q).text == "via proxy"
        assert proxy.requests[0]["path"] == "http://upstream.invalid/v1/chat/completions"


async def test_agenerate_is_native_async_on_one_pool(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_threads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("agenerate must not run in a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)

    # each answer waits until all six requests are in flight at once: calls made one after
    # another break the barrier (an HTTP 500, then a typed error) instead of timing out a clock
    in_flight = threading.Barrier(6, timeout=20)

    def chat(req: dict[str, Any]) -> Any:
        in_flight.wait()
        return req["messages"][0]["content"]

    server.chat = chat
    llm = make_llm(server)
    results = await asyncio.gather(*(llm.agenerate([{"role": "user", "content": f"n{i}" * 8}]) for i in range(6)))
    assert [r.text for r in results] == [f"n{i}" * 8 for i in range(6)]
    assert llm.usage_total["total_tokens"] > 0
    assert llm.http.async_client() is llm.http.async_client()  # one pool per loop


async def test_async_retry_after_and_typed_error(server: ScriptedServer) -> None:
    answers: list[Any] = [(429, {"Retry-After": "0.2"}), 400]
    server.chat = lambda req: answers.pop(0)
    started = time.monotonic()
    with pytest.raises(ModelError, match="HTTP 400") as info:
        await make_llm(server, backoff_s=0.001).agenerate(Q)
    assert "2 attempt" in str(info.value)
    assert time.monotonic() - started >= 0.18


def test_async_clients_follow_their_event_loop(server: ScriptedServer) -> None:
    """``asyncio.run`` twice (two loops) on one LLM: each loop gets a working pool of its own."""
    server.chat = lambda req: "ok"
    llm = make_llm(server)
    assert asyncio.run(llm.agenerate(Q)).text == "ok"
    assert asyncio.run(llm.agenerate(Q)).text == "ok"


def _vectors(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 1.0, float(i % 3)] for i, t in enumerate(texts)]


async def test_embedder_async_batches_go_out_concurrently(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server.embed = _vectors
    embedder = OpenAICompatibleEmbedder("e", base_url=server.base_url, dimension=3, batch_size=2, backoff_s=0.01)

    async def no_threads(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("aembed must not run in a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_threads)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    out = await embedder.aembed(texts)
    assert out.shape == (5, 3)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert np.allclose(out, embedder.embed(texts))  # same rows, same order as the sync path
    assert sum(1 for r in server.requests if r["path"].endswith("/embeddings")) == 3 + 3


async def test_embedder_async_rejects_a_short_answer(server: ScriptedServer) -> None:
    server.embed = lambda texts: _vectors(texts)[:-1]
    embedder = OpenAICompatibleEmbedder("e", base_url=server.base_url, dimension=3, backoff_s=0.01)
    with pytest.raises(ModelError, match="asked for 2 embeddings, got 1"):
        await embedder.aembed(["x", "y"])


def test_httpx_is_the_transport(server: ScriptedServer) -> None:
    server.chat = lambda req: "ok"
    llm = make_llm(server)
    llm.generate(Q)
    assert isinstance(llm.http.client, httpx.Client)
    assert "python-httpx" in {k.lower(): v for k, v in server.requests[0]["headers"].items()}["user-agent"]
