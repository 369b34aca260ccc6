"""The middleware's building blocks: card and trigger settings, which turns are persisted and
under which record ids, and ``MemoryIo``, the few agentmemory calls it makes (sync and async).
``AgentMemoryMiddleware`` (``middleware``) is the logic over them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ...client import AgentMemory
from ...config import MemoryExtractionConfig
from ...errors import Conflict, InvalidArgument, NotFound
from ...records import MESSAGE_TYPES, Record
from ...spi import RecordFilter
from ...thread import Thread
from .namespaces import content_hash

CARD_MESSAGE_NAME = "memory_context_card"
"""The ``name`` of the injected card message (the name the seed guide uses)."""
CARD_SOURCE = "agentmemory_context_card"
"""``additional_kwargs["lc_source"]`` of the injected card message."""
EMPTY_CARD = "<context_card>\n  No relevant short-term context yet.\n</context_card>"
CARD_OPTIONS = frozenset(
    {
        "max_relevant_results",
        "min_relevant_results_by_type",
        "fallback_message_count",
        "metadata_filter",
        "include_invalid_results",
        "token_budget",
        "soft_token_budget",
        "short_thread",
    }
)
"""``get_context_card`` arguments a caller may set through ``card_options``."""
METRICS = ("tokens", "messages", "fraction")
KNOWN_CACHE_LIMIT = 200_000

TokenCounter = Callable[[Iterable[BaseMessage]], int]
ContextSize = tuple[str, float]
"""``("tokens", n)``, ``("messages", n)`` or ``("fraction", f)``, as in ``SummarizationMiddleware``."""
Trigger = ContextSize | Mapping[str, float] | Sequence[ContextSize | Mapping[str, float]] | None
"""One threshold (tuple), an AND of thresholds (mapping) or an OR of those (list); None = never."""
Pattern = Literal["external_tail", "self_contained"]
DEFER_EXTRACTION = {"extract_memories": False, "enable_context_summary": False}
"""The per-call config of turns written before the agent's model is known (``llm="agent"``):
they are extracted, with the later turns, once it is."""


def message_text(message: BaseMessage | Any) -> str:
    """The plain text of a message: its string content, or the text blocks of a block list."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


def validate_size(argument: str, kind: Any, value: Any) -> tuple[str, float]:
    if kind not in METRICS:
        raise InvalidArgument(argument, f"unknown metric {kind!r}; use one of {', '.join(METRICS)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(argument, f"{kind} threshold must be a number, got {value!r}")
    if kind == "fraction":
        if not 0 < value <= 1:
            raise InvalidArgument(argument, f"fraction must be in (0, 1], got {value}")
    elif not isinstance(value, int) or value <= 0:
        raise InvalidArgument(argument, f"{kind} threshold must be a positive int, got {value!r}")
    return kind, value


def normalize_trigger(trigger: Any) -> list[dict[str, float]]:
    """``trigger`` as a list of AND-clauses (OR across clauses), validated like LangChain's."""
    if trigger is None:
        return []

    def clause(item: Any) -> dict[str, float]:
        if isinstance(item, tuple):
            if len(item) != 2:
                raise InvalidArgument("trigger", f"a threshold is a (metric, value) pair, got {item!r}")
            kind, value = validate_size("trigger", item[0], item[1])
            return {kind: value}
        if isinstance(item, Mapping):
            if not item:
                raise InvalidArgument("trigger", "a trigger clause needs at least one of tokens, messages, fraction")
            return dict(validate_size("trigger", k, v) for k, v in item.items())
        raise InvalidArgument("trigger", f"expected a (metric, value) tuple or a mapping, got {type(item).__name__}")

    if isinstance(trigger, (tuple, Mapping)):
        return [clause(trigger)]
    if isinstance(trigger, list):
        if not trigger:
            raise InvalidArgument("trigger", "an empty list never fires; pass None to disable compaction")
        return [clause(item) for item in trigger]
    raise InvalidArgument("trigger", f"expected a tuple, a mapping, a list of them or None, got {type(trigger).__name__}")


def message_record_id(thread_id: str, role: str, message: BaseMessage, text: str) -> str:
    """The agentmemory record id of a LangChain message in a thread: from its id, or from its
    role and text when it has none (stable across processes, unlike ``hash()``)."""
    key = f"id:{message.id}" if message.id else f"{role}:{content_hash(text)}"
    return "lg-" + content_hash(f"{thread_id}\x00{key}")[:40]


def persisted_role(message: BaseMessage) -> str | None:
    """``user`` / ``assistant`` for turns worth remembering; None for tool calls, tool results,
    system and synthetic messages."""
    if isinstance(message, HumanMessage):
        if message.additional_kwargs.get("lc_source") in (CARD_SOURCE, "summarization"):
            return None
        return "user"
    if isinstance(message, AIMessage) and not message.tool_calls:
        return "assistant"
    return None


@dataclass(frozen=True)
class Turn:
    record_id: str
    role: str
    text: str
    message_id: str | None


@dataclass(frozen=True)
class Scope:
    thread_id: str
    user_id: str | None
    agent_id: str | None


class MemoryIo:
    """The few agentmemory calls the middleware makes, as sync methods and ``a``-prefixed async
    twins, so the middleware's logic is written once and driven by ``run_sync``/``run_async``."""

    trace_name = "middleware"

    def __init__(self, memory: AgentMemory, config: MemoryExtractionConfig | None) -> None:
        self.memory = memory
        self.config = config

    def thread(self, scope: Scope) -> Thread:
        try:
            return self.memory.get_thread(scope.thread_id)
        except NotFound:
            pass
        try:
            return self.memory.create_thread(
                scope.thread_id, user_id=scope.user_id, agent_id=scope.agent_id, memory_extraction_config=self.config
            )
        except Conflict:  # created concurrently
            return self.memory.get_thread(scope.thread_id)

    async def athread(self, scope: Scope) -> Thread:
        try:
            return await self.memory.get_thread_async(scope.thread_id)
        except NotFound:
            pass
        try:
            return await self.memory.create_thread_async(
                scope.thread_id, user_id=scope.user_id, agent_id=scope.agent_id, memory_extraction_config=self.config
            )
        except Conflict:
            return await self.memory.get_thread_async(scope.thread_id)

    def _messages_filter(self, thread: Thread, **kwargs: Any) -> RecordFilter:
        return RecordFilter(thread_id=thread.thread_id, record_types=MESSAGE_TYPES, **kwargs)

    def stored(self, thread: Thread, record_ids: Sequence[str]) -> list[Record]:
        return self.memory.store.query(self._messages_filter(thread, record_ids=tuple(record_ids)))

    async def astored(self, thread: Thread, record_ids: Sequence[str]) -> list[Record]:
        return await self.memory.store.aquery(self._messages_filter(thread, record_ids=tuple(record_ids)))

    def messages_from(self, thread: Thread, seq: int) -> int:
        """How many live messages of the thread have ``seq`` or a later one."""
        return self.memory.store.count(self._messages_filter(thread, min_seq=seq, alive_at=self.memory.now()))

    async def amessages_from(self, thread: Thread, seq: int) -> int:
        return await self.memory.store.acount(self._messages_filter(thread, min_seq=seq, alive_at=self.memory.now()))

    def _batch(self, turns: Sequence[Turn]) -> list[dict[str, Any]]:
        return [
            {
                "role": t.role,
                "content": t.text,
                "id": t.record_id,
                "metadata": {"langgraph_message_id": t.message_id} if t.message_id else {},
            }
            for t in turns
        ]

    def add(self, thread: Thread, turns: Sequence[Turn], call: Mapping[str, Any] | None = None) -> None:
        try:
            thread.add_messages(self._batch(turns), memory_extraction_config=call)
        except Conflict:  # another worker wrote some of them first: add the rest once
            known = {r.record_id for r in self.stored(thread, [t.record_id for t in turns])}
            rest = [t for t in turns if t.record_id not in known]
            if rest:
                thread.add_messages(self._batch(rest), memory_extraction_config=call)

    async def aadd(self, thread: Thread, turns: Sequence[Turn], call: Mapping[str, Any] | None = None) -> None:
        try:
            await thread.add_messages_async(self._batch(turns), memory_extraction_config=call)
        except Conflict:
            known = {r.record_id for r in await self.astored(thread, [t.record_id for t in turns])}
            rest = [t for t in turns if t.record_id not in known]
            if rest:
                await thread.add_messages_async(self._batch(rest), memory_extraction_config=call)

    def card(self, thread: Thread, options: dict[str, Any]) -> str:
        return thread.get_context_card(**options).content

    async def acard(self, thread: Thread, options: dict[str, Any]) -> str:
        return (await thread.get_context_card_async(**options)).content
