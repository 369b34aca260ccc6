"""The OpenAI-compatible LLM client, driven over real HTTP against the scripted server.

What a production server sees (request shape, JSON-schema structured output, auth header) and
what the client does with its answers (usage accounting, fenced JSON, retries on 5xx/429,
immediate failure on 4xx, timeouts, malformed answers) — all as typed ``ModelError``s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agentmemory import ModelError
from agentmemory.extraction.models import ExtractionOutput, json_schema
from agentmemory.llm import LlmResult, OpenAICompatibleLlm
from agentmemory.testing import ScriptedServer

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ScriptedServer]:
    """One scripted server per module (closing one costs its 0.5 s poll interval)."""
    srv = ScriptedServer()
    yield srv
    srv.close()


@pytest.fixture
def server(shared_server: ScriptedServer) -> Iterator[ScriptedServer]:
    """The shared server, reset: each test sets ``server.chat``; ``requests`` starts empty."""
    shared_server.chat = None
    shared_server.requests.clear()
    yield shared_server
    shared_server.__dict__.pop("_answer", None)  # undo per-test protocol overrides


def make_llm(server: ScriptedServer, **kwargs: Any) -> OpenAICompatibleLlm:
    """A client pointed at the scripted server with fast retries."""
    kwargs.setdefault("backoff_s", 0.01)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenAICompatibleLlm("test-model", base_url=server.base_url, **kwargs)


def chat_requests(server: ScriptedServer) -> list[dict[str, Any]]:
    """Bodies of the chat-completion requests received so far."""
    return [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]


def test_request_carries_model_messages_and_strict_json_schema(server: ScriptedServer) -> None:
    server.chat = lambda req: {"answer": "ok"}
    llm = make_llm(server, temperature=0.25, max_tokens=77)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]

    result = llm.generate(messages, response_json_schema=SCHEMA)

    assert isinstance(result, LlmResult)
    assert result.json == {"answer": "ok"}
    [req] = chat_requests(server)
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert req["model"] == "test-model"
    assert req["messages"] == messages
    assert req["temperature"] == 0.25
    assert req["max_tokens"] == 77
    fmt = req["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == SCHEMA
    assert fmt["json_schema"]["strict"] is True
    assert isinstance(fmt["json_schema"]["name"], str) and fmt["json_schema"]["name"]


def test_plain_generation_sends_no_response_format_and_parses_nothing(server: ScriptedServer) -> None:
    server.chat = lambda req: "just text, not JSON"
    llm = make_llm(server)

    result = llm.generate([{"role": "user", "content": "hello"}])

    assert result.text == "just text, not JSON"
    assert result.json is None
    [req] = chat_requests(server)
    assert "response_format" not in req
    assert "max_tokens" not in req  # not sent unless configured


def test_api_key_is_sent_as_bearer_token(server: ScriptedServer) -> None:
    server.chat = lambda req: "ok"
    make_llm(server, api_key="sk-test-123").generate([{"role": "user", "content": "x"}])
    make_llm(server).generate([{"role": "user", "content": "x"}])
    seen = [{k.lower(): v for k, v in r["headers"].items()}.get("authorization") for r in server.requests]
    assert seen == ["Bearer sk-test-123", None]


def test_usage_is_reported_per_call_and_accumulated(server: ScriptedServer) -> None:
    server.chat = lambda req: {"answer": "x" * 40}
    llm = make_llm(server)
    msgs = [{"role": "user", "content": "y" * 80}]

    first = llm.generate(msgs, response_json_schema=SCHEMA)
    second = llm.generate(msgs, response_json_schema=SCHEMA)

    assert first.usage["prompt_tokens"] == 20  # the scripted server counts len // 4
    assert first.usage["completion_tokens"] > 0
    assert first.usage["total_tokens"] == first.usage["prompt_tokens"] + first.usage["completion_tokens"]
    assert llm.usage_total == {
        key: first.usage[key] + second.usage[key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")
    }


def test_usage_accumulation_is_thread_safe(server: ScriptedServer) -> None:
    server.chat = lambda req: "ok"
    llm = make_llm(server)
    per_call = llm.generate([{"role": "user", "content": "z" * 40}]).usage["total_tokens"]
    llm.usage_total = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}

    workers = [threading.Thread(target=lambda: llm.generate([{"role": "user", "content": "z" * 40}])) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()

    assert llm.usage_total["total_tokens"] == 4 * per_call


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"answer": "fenced"}\n```',
        '```\n{"answer": "fenced"}\n```',
        '  \n{"answer": "fenced"}\n  ',
    ],
)
def test_fenced_or_padded_json_is_tolerated(server: ScriptedServer, content: str) -> None:
    server.chat = lambda req: content
    assert make_llm(server).generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA).json == {"answer": "fenced"}


def test_invalid_json_answer_is_a_model_error(server: ScriptedServer) -> None:
    server.chat = lambda req: "sure! here it is: {answer: nope"
    with pytest.raises(ModelError, match="not valid JSON"):
        make_llm(server).generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)


def test_retries_after_503_then_succeeds(server: ScriptedServer) -> None:
    answers: list[Any] = [503, 503, {"answer": "third time"}]
    server.chat = lambda req: answers.pop(0)

    result = make_llm(server, max_retries=3).generate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)

    assert result.json == {"answer": "third time"}
    assert len(chat_requests(server)) == 3


def test_retries_after_429_rate_limit(server: ScriptedServer) -> None:
    answers: list[Any] = [429, "fine"]
    server.chat = lambda req: answers.pop(0)
    assert make_llm(server).generate([{"role": "user", "content": "q"}]).text == "fine"
    assert len(chat_requests(server)) == 2


def test_persistent_500_is_a_clear_model_error_after_all_retries(server: ScriptedServer) -> None:
    server.chat = lambda req: 500

    with pytest.raises(ModelError) as info:
        make_llm(server, max_retries=2).generate([{"role": "user", "content": "q"}])

    message = str(info.value)
    assert "HTTP 500" in message
    assert "3 attempt" in message
    assert "scripted error 500" in message  # the server's own message is kept
    assert "/chat/completions" in message
    assert len(chat_requests(server)) == 3


def test_backoff_grows_between_retries(server: ScriptedServer) -> None:
    stamps: list[float] = []

    def chat(req: dict[str, Any]) -> Any:
        stamps.append(time.monotonic())
        return 503

    server.chat = chat
    with pytest.raises(ModelError):
        make_llm(server, max_retries=2, backoff_s=0.05).generate([{"role": "user", "content": "q"}])
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert len(gaps) == 2
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095  # 0.05, then 0.1


def test_400_fails_at_once_without_retry(server: ScriptedServer) -> None:
    server.chat = lambda req: 400

    with pytest.raises(ModelError, match="HTTP 400") as info:
        make_llm(server, max_retries=5).generate([{"role": "user", "content": "q"}])

    assert "1 attempt" in str(info.value)
    assert len(chat_requests(server)) == 1


def test_timeout_is_a_model_error_and_is_retried(server: ScriptedServer) -> None:
    calls: list[int] = []

    def slow(req: dict[str, Any]) -> Any:
        calls.append(1)
        time.sleep(10.0)
        return "late"

    server.chat = slow
    started = time.monotonic()
    with pytest.raises(ModelError, match="(?i)timed out|connection failed"):
        make_llm(server, timeout_s=0.15, max_retries=1).generate([{"role": "user", "content": "q"}])
    # gave up on its own timeout (0.15 s a try), did not wait for the server's 10 s answers
    assert time.monotonic() - started < 8
    deadline = time.monotonic() + 10  # the server's handler of the retry may not have run yet
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(calls) == 2  # first try and one retry


def test_unreachable_server_is_a_model_error() -> None:
    srv = ScriptedServer(chat=lambda req: "x")
    url = srv.base_url
    srv.close()
    with pytest.raises(ModelError, match="connection failed"):
        OpenAICompatibleLlm("m", base_url=url, max_retries=1, backoff_s=0.01, timeout_s=1.0).generate(
            [{"role": "user", "content": "q"}]
        )


def test_malformed_completion_is_a_model_error(server: ScriptedServer) -> None:
    # a server that answers 200 with something that is not a chat completion
    server._answer = lambda path, body: (200, {"object": "chat.completion", "choices": []})  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="malformed chat completion"):
        make_llm(server).generate([{"role": "user", "content": "q"}])


def test_non_object_json_answer_is_a_model_error(server: ScriptedServer) -> None:
    server._answer = lambda path, body: (200, ["not", "an", "object"])  # type: ignore[method-assign]
    with pytest.raises(ModelError, match="expected a JSON object"):
        make_llm(server).generate([{"role": "user", "content": "q"}])


def test_extraction_schema_is_strict_for_structured_output_servers() -> None:
    """Strict structured output (OpenAI) needs every object closed and every property required."""
    schema = json_schema(ExtractionOutput)

    def objects(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if node.get("type") == "object":
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    found = list(objects(schema))
    assert len(found) >= 3  # output, memory candidate, link candidate
    for obj in found:
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj.get("properties", {}))
    assert "memories" in schema["properties"]


async def test_agenerate_uses_the_same_http_path(server: ScriptedServer) -> None:
    server.chat = lambda req: {"answer": "async"}
    result = await make_llm(server).agenerate([{"role": "user", "content": "q"}], response_json_schema=SCHEMA)
    assert result.json == {"answer": "async"}
    assert len(chat_requests(server)) == 1
