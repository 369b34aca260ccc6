"""The ``Llm`` interface used for extraction, linking and summaries."""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..plugins import PluginManager, get_plugin_manager


@dataclass(frozen=True)
class LlmResult:
    """A completion: the text, its parsed JSON when a schema was requested, and token usage."""

    text: str
    json: Any = None
    usage: dict[str, int] = field(default_factory=dict)


_USAGE_LOCK = threading.Lock()


def usage_total() -> dict[str, int]:
    """A zeroed ``usage_total``: prompt, completion and total tokens (OpenAI names)."""
    return {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def add_usage(total: dict[str, int], usage: Mapping[str, int]) -> None:
    """Add one call's reported ``usage`` to an LLM's ``total``; thread-safe, since the card's
    parallel searches and background extraction may call one model at once."""
    with _USAGE_LOCK:
        for key in total:
            total[key] += usage.get(key, 0)


class Llm(ABC):
    """Chat-completion model. ``response_json_schema`` asks for JSON matching the schema; the
    result's ``json`` then holds the parsed object (validation is the caller's job)."""

    name: str = "llm"

    @abstractmethod
    def generate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult: ...

    async def agenerate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        """Async ``generate`` (a worker thread unless overridden)."""
        return await asyncio.to_thread(self.generate, messages, response_json_schema=response_json_schema)


def as_llm(value: Any, plugins: PluginManager | None = None) -> Any:
    """The LLM the core calls for ``value``: another framework's chat model wrapped by the
    adapter registered for it (``agentmemory_register_llm_adapters``; built in: any LangChain
    ``BaseChatModel`` in ``agentmemory.integrations.langchain.LangChainLlm``), looked up in
    ``plugins`` (default: the process-wide manager); anything else (an ``Llm``, None, an object
    with ``generate``/``agenerate``) unchanged."""
    if value is None or isinstance(value, Llm):
        return value
    return (plugins or get_plugin_manager()).adapt("llm_adapters", value)
