"""An LLM client for any OpenAI-compatible ``/chat/completions`` server (OpenAI, Ollama, vLLM,
llama.cpp, …): JSON-schema structured output, split timeouts, retries with backoff and
``Retry-After``, token usage, pooled connections and native async (httpx, ``agentmemory.http``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..http import HttpSettings, JsonHttpClient
from .base import Llm, LlmResult, add_usage, usage_total


class OpenAICompatibleLlm(Llm):
    """``POST {base_url}/chat/completions``; ``usage_total`` accumulates tokens reported.

    ``timeout_s`` bounds each read, ``connect_timeout_s`` opening a connection; a
    ``Retry-After`` over ``max_retry_after_s`` fails at once. Proxies and CA bundles come from
    the environment (httpx's ``trust_env``)."""

    name = "openai-compatible"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://localhost:11434/v1",
        api_key: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        connect_timeout_s: float = 10.0,
        max_retry_after_s: float = 60.0,
    ) -> None:
        self.model = model
        self.settings = HttpSettings(base_url, api_key, timeout_s, max_retries, backoff_s, connect_timeout_s, max_retry_after_s)
        self.http = JsonHttpClient(self.settings)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.usage_total = usage_total()

    def _payload(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": dict(schema), "strict": True},
            }
        return payload

    def _result(self, answer: dict[str, Any], schema: Mapping[str, Any] | None) -> LlmResult:
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"malformed chat completion: {str(answer)[:300]}") from None
        usage = {k: int(v) for k, v in (answer.get("usage") or {}).items() if isinstance(v, int)}
        add_usage(self.usage_total, usage)
        parsed = parse_json_text(text) if schema is not None else None
        return LlmResult(text=text, json=parsed, usage=usage)

    def generate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        answer = self.http.post("/chat/completions", self._payload(messages, response_json_schema))
        return self._result(answer, response_json_schema)

    async def agenerate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        """Native async ``generate`` (httpx.AsyncClient on the running loop)."""
        answer = await self.http.apost("/chat/completions", self._payload(messages, response_json_schema))
        return self._result(answer, response_json_schema)

    def close(self) -> None:
        """Close the pooled connections."""
        self.http.close()


class InvalidJsonAnswer(ModelError):
    """The model answered text that is not valid JSON; ``text`` keeps the answer for a retry."""

    def __init__(self, message: str, text: str) -> None:
        super().__init__(message)
        self.text = text


def parse_json_text(text: str) -> Any:
    """Parse a model's JSON answer, tolerating a Markdown code fence around it."""
    body = text.strip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise InvalidJsonAnswer(f"model answer is not valid JSON ({exc}): {text[:200]!r}", text) from None
