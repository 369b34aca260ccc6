"""An LLM client for any OpenAI-compatible ``/chat/completions`` server (OpenAI, Ollama, vLLM,
llama.cpp, …): JSON-schema structured output, timeouts, retries with backoff, token usage."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..http import HttpSettings, post_json
from .base import Llm, LlmResult


class OpenAICompatibleLlm(Llm):
    """``POST {base_url}/chat/completions``; ``usage_total`` accumulates tokens reported."""

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
    ) -> None:
        self.model = model
        self.settings = HttpSettings(base_url, api_key, timeout_s, max_retries, backoff_s)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.usage_total: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self._lock = threading.Lock()

    def generate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if response_json_schema is not None:
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": dict(response_json_schema), "strict": True},
            }
        answer = post_json(self.settings, "/chat/completions", payload)
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise ModelError(f"malformed chat completion: {str(answer)[:300]}") from None
        usage = {k: int(v) for k, v in (answer.get("usage") or {}).items() if isinstance(v, int)}
        with self._lock:
            for key in self.usage_total:
                self.usage_total[key] += usage.get(key, 0)
        parsed = None
        if response_json_schema is not None:
            parsed = parse_json_text(text)
        return LlmResult(text=text, json=parsed, usage=usage)


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
