"""The ``Llm`` interface used for extraction, linking and summaries."""

from __future__ import annotations

import asyncio
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class LlmResult:
    """A completion: the text, its parsed JSON when a schema was requested, and token usage."""

    text: str
    json: Any = None
    usage: dict[str, int] = field(default_factory=dict)


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


def langchain_instance(value: Any, module: str, cls: str) -> bool:
    """True when ``value`` is an instance of LangChain's ``module.cls``. Free when LangChain is
    not installed or not imported: a LangChain object can only exist once its module is loaded."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, cls, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


def as_llm(value: Any) -> Any:
    """The LLM the core calls for ``value``: a LangChain chat model (``BaseChatModel``) wrapped in
    ``agentmemory.integrations.langchain.LangChainLlm``; anything else (an ``Llm``, None, an
    object with ``generate``/``agenerate``) unchanged."""
    if value is not None and not isinstance(value, Llm) and langchain_instance(
        value, "langchain_core.language_models.chat_models", "BaseChatModel"
    ):
        from ..integrations.langchain import LangChainLlm

        return LangChainLlm(value)
    return value
