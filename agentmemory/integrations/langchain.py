"""LangChain models as agentmemory's LLM and embedder (``pip install "agentmemory[langchain]"``).

``AgentMemory(llm=ChatAnthropic(...), embedder=OpenAIEmbeddings(...))`` wraps any
``BaseChatModel`` in ``LangChainLlm`` and any ``Embeddings`` in ``LangChainEmbedder``
(``agentmemory.llm.as_llm`` / ``agentmemory.embedders.as_embedder`` do the detecting, through the
adapters ``agentmemory.builtins`` registers for these classes); use the classes directly only to
set their options. Structured answers go through the model's own
``with_structured_output`` (tool calling or JSON mode, whatever the provider implements), and
the async paths through ``ainvoke`` / ``aembed_*``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.runnables import Runnable

from ..embedders.base import Embedder
from ..errors import InvalidArgument, ModelError
from ..llm.base import Llm, LlmResult, add_usage, usage_total
from ..llm.http import parse_json_text
from ..tokens import CallableCounter, EstimateCounter, TokenCounter

JSON_INSTRUCTION = "Answer with one JSON object, and nothing else, that matches this JSON schema:\n{schema}"
"""Appended as a system message when the model has no structured output of its own."""

log = logging.getLogger(__name__)


def model_name(model: Any) -> str:
    """The provider's model name of a LangChain object (``model_name``, ``model``, ``model_id``),
    else its class name."""
    for attribute in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def usage_of(message: Any) -> dict[str, int]:
    """A message's ``usage_metadata`` in agentmemory's (OpenAI) names."""
    meta = getattr(message, "usage_metadata", None) or {}
    names = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens", "total_tokens": "total_tokens"}
    return {ours: int(meta[theirs]) for theirs, ours in names.items() if isinstance(meta.get(theirs), int)}


@contextlib.contextmanager
def provider_errors(who: str) -> Iterator[None]:
    """A provider's own exception types (``openai.APIError``, ``botocore`` errors, …) as one
    ``ModelError`` naming ``who``, the cause kept; agentmemory's typed errors pass unchanged."""
    try:
        yield
    except (ModelError, InvalidArgument):
        raise
    except Exception as exc:
        raise ModelError(f"{who} failed: {type(exc).__name__}: {exc}") from exc


class LangChainLlm(Llm):
    """Any LangChain chat model (``BaseChatModel``, or a chat-model runnable such as
    ``model.with_retry()``) as an agentmemory ``Llm``.

    With ``response_json_schema`` the model's ``with_structured_output`` is used where it has one;
    an answer that did not come back structured (or a model without it) is parsed from its text,
    so the extraction pipeline's retry-on-invalid-JSON still applies. Failures of the model are
    ``ModelError``s; ``usage_total`` accumulates the token usage the model reports.
    """

    name = "langchain"

    def __init__(self, model: BaseChatModel | Runnable[Any, Any]) -> None:
        if not isinstance(model, Runnable):
            raise InvalidArgument("llm", f"expected a LangChain chat model, got {type(model).__name__}")
        self.chat_model = model
        self.model = model_name(model)
        self.usage_total = usage_total()
        self._structured: dict[str, Runnable[Any, Any] | None] = {}

    def token_counter(self) -> TokenCounter:
        """The model's own ``get_num_tokens``: what the client's budgets count in by default.
        The estimate when the runnable has none or it cannot count here (LangChain's fallback
        tokenizer needs ``transformers`` and a download; a provider's may need its API): tried
        once, and the reason logged."""
        count = getattr(self.chat_model, "get_num_tokens", None)
        if not callable(count):
            return EstimateCounter()
        try:
            count("probe")
        except Exception as exc:  # any provider's failure: counting must never break a budget
            log.warning("%s cannot count tokens here (%s: %s); budgets use the estimate", self.model, type(exc).__name__, exc)
            return EstimateCounter()
        return CallableCounter(f"langchain:{self.model}", count)

    def __repr__(self) -> str:
        return f"LangChainLlm({type(self.chat_model).__name__}, model={self.model!r})"

    def _structured_runnable(self, schema: Mapping[str, Any]) -> Runnable[Any, Any] | None:
        """``with_structured_output(schema, include_raw=True)``, cached per schema; None when the
        model has none."""
        key = json.dumps(schema, sort_keys=True)
        if key not in self._structured:
            method = getattr(self.chat_model, "with_structured_output", None)
            runnable: Runnable[Any, Any] | None = None
            if method is not None:
                titled = {"title": "response", "description": "The answer, as structured output.", **schema}
                try:
                    runnable = method(titled, include_raw=True)
                except NotImplementedError:
                    runnable = None
            self._structured[key] = runnable
        return self._structured[key]

    def _prepare(
        self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None
    ) -> tuple[Runnable[Any, Any], list[BaseMessage]]:
        converted = convert_to_messages([dict(m) for m in messages])
        if schema is None:
            return self.chat_model, converted
        structured = self._structured_runnable(schema)
        if structured is not None:
            return structured, converted
        instruction = {"role": "system", "content": JSON_INSTRUCTION.format(schema=json.dumps(schema))}
        return self.chat_model, [*converted, *convert_to_messages([instruction])]

    def _result(self, answer: Any, schema: Mapping[str, Any] | None) -> LlmResult:
        if isinstance(answer, Mapping) and "raw" in answer:  # include_raw=True
            raw, parsed = answer["raw"], answer.get("parsed")
        else:
            raw, parsed = answer, None
        if not isinstance(raw, BaseMessage):
            raise ModelError(f"{self!r} answered {type(raw).__name__}, not a chat message")
        text = str(raw.text)  # string content, or its text blocks joined
        if schema is not None and parsed is None:
            tool_calls = getattr(raw, "tool_calls", None) if isinstance(raw, AIMessage) else None
            if tool_calls:
                parsed = tool_calls[0].get("args")
                text = text or json.dumps(parsed)
            else:
                parsed = parse_json_text(text)  # InvalidJsonAnswer: the caller shows the model its error
        elif schema is not None and not text:
            text = json.dumps(parsed, default=str)
        dump = getattr(parsed, "model_dump", None)
        if callable(dump):
            parsed = dump()
        usage = usage_of(raw)
        add_usage(self.usage_total, usage)
        return LlmResult(text=text, json=parsed if schema is not None else None, usage=usage)

    def generate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        runnable, prompt = self._prepare(messages, response_json_schema)
        with provider_errors(repr(self)):
            answer = runnable.invoke(prompt)
        return self._result(answer, response_json_schema)

    async def agenerate(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        response_json_schema: Mapping[str, Any] | None = None,
    ) -> LlmResult:
        """Native async ``generate`` through ``ainvoke``."""
        runnable, prompt = self._prepare(messages, response_json_schema)
        with provider_errors(repr(self)):
            answer = await runnable.ainvoke(prompt)
        return self._result(answer, response_json_schema)


class LangChainEmbedder(Embedder):
    """Any LangChain ``Embeddings`` as an agentmemory ``Embedder``: passages through
    ``embed_documents``, search queries through ``embed_query`` (asymmetric models keep their
    query instruction), async through ``aembed_documents`` / ``aembed_query``.

    ``dimension`` is probed with one query when not given. ``name`` is ``langchain`` and
    ``model`` the provider's model name, so a dump's vectors are reused only by the same model.
    """

    name = "langchain"

    def __init__(self, embeddings: Embeddings, *, dimension: int | None = None, max_input_tokens: int = 512) -> None:
        if not isinstance(embeddings, Embeddings):
            raise InvalidArgument("embedder", f"expected a LangChain Embeddings, got {type(embeddings).__name__}")
        if dimension is not None and (isinstance(dimension, bool) or not isinstance(dimension, int) or dimension <= 0):
            raise InvalidArgument("dimension", f"must be a positive int, got {dimension!r}")
        self.embeddings = embeddings
        self.model = model_name(embeddings)
        self.max_input_tokens = max_input_tokens
        if dimension is None:
            with provider_errors(f"{self.model!r} embeddings"):
                probe = embeddings.embed_query("dimension probe")
            dimension = int(np.asarray(probe, dtype=np.float32).shape[-1])
        self.dimension = dimension

    def __repr__(self) -> str:
        return f"LangChainEmbedder({type(self.embeddings).__name__}, model={self.model!r}, dimension={self.dimension})"

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        with provider_errors(f"{self.model!r} embeddings"):
            rows: Any = [self.embeddings.embed_query(t) for t in texts] if is_query else self.embeddings.embed_documents(texts)
        return rows  # rows of floats, checked by Embedder._finish

    async def aembed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Native async ``embed`` (``aembed_documents``, or ``aembed_query`` per query)."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with provider_errors(f"{self.model!r} embeddings"):
            if is_query:
                rows: Any = await asyncio.gather(*(self.embeddings.aembed_query(t) for t in items))
            else:
                rows = await self.embeddings.aembed_documents(items)
        return self._finish(len(items), rows)
