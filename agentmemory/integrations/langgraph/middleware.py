"""``AgentMemoryMiddleware``: short-term memory for ``langchain.agents.create_agent``.

The production version of the middleware in the LangGraph short-term-memory guide (seed 000):

- every new user/assistant turn in the agent state is written once to an agentmemory ``Thread``
  (deduplicated by LangChain message id, or by a content hash when a message has no id; the
  record ids are derived from those, so a restarted process never writes a turn twice);
- tool calls, tool results, system messages and synthetic messages (this middleware's own card,
  LangChain summaries) are never persisted;
- the trigger measures the *organic* prompt, without the card message;
- when a trigger fires (tokens, messages, or a fraction of the model's context window — the
  options of LangChain's ``SummarizationMiddleware``), the history is replaced by ONE
  context-card message plus the raw tail: the external-tail pattern
  (``except_last_messages=N, max_recent_messages=0`` and the last N raw messages after the card)
  or the self-contained pattern (``max_recent_messages=N``: the tail lives inside the card);
- a cut never separates an AI tool call from its tool results and never drops the newest human
  message;
- memories are extracted and summaries written by the agent's own chat model when the memory has
  no LLM of its own (``llm="agent"``, the default);
- with ``opentelemetry-api`` installed, each hook is an ``agentmemory.middleware.<hook>`` span
  in the agent's trace, over the spans of the memory work it does.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from ... import observability
from ...client import AgentMemory
from ...config import MemoryExtractionConfig
from ...effects import Call, Op, run_async, run_sync
from ...errors import Conflict, InvalidArgument, NotFound
from ...llm.base import Llm, as_llm
from ...records import Record, RecordType
from ...spi import RecordFilter
from ...thread import Thread

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
    }
)
"""``get_context_card`` arguments a caller may set through ``card_options``."""
_METRICS = ("tokens", "messages", "fraction")
_KNOWN_CACHE_LIMIT = 200_000

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


def _validate_size(argument: str, kind: Any, value: Any) -> tuple[str, float]:
    if kind not in _METRICS:
        raise InvalidArgument(argument, f"unknown metric {kind!r}; use one of {', '.join(_METRICS)}")
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
            kind, value = _validate_size("trigger", item[0], item[1])
            return {kind: value}
        if isinstance(item, Mapping):
            if not item:
                raise InvalidArgument("trigger", "a trigger clause needs at least one of tokens, messages, fraction")
            return dict(_validate_size("trigger", k, v) for k, v in item.items())
        raise InvalidArgument("trigger", f"expected a (metric, value) tuple or a mapping, got {type(item).__name__}")

    if isinstance(trigger, (tuple, Mapping)):
        return [clause(trigger)]
    if isinstance(trigger, list):
        if not trigger:
            raise InvalidArgument("trigger", "an empty list never fires; pass None to disable compaction")
        return [clause(item) for item in trigger]
    raise InvalidArgument("trigger", f"expected a tuple, a mapping, a list of them or None, got {type(trigger).__name__}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_record_id(thread_id: str, role: str, message: BaseMessage, text: str) -> str:
    """The agentmemory record id of a LangChain message in a thread: from its id, or from its
    role and text when it has none (stable across processes, unlike ``hash()``)."""
    key = f"id:{message.id}" if message.id else f"{role}:{_sha(text)}"
    return "lg-" + _sha(f"{thread_id}\x00{key}")[:40]


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
class _Turn:
    record_id: str
    role: str
    text: str
    message_id: str | None


@dataclass(frozen=True)
class _Scope:
    thread_id: str
    user_id: str | None
    agent_id: str | None


class _Io:
    """The few agentmemory calls the middleware makes, as sync methods and ``a``-prefixed async
    twins, so the middleware's logic is written once and driven by ``run_sync``/``run_async``."""

    trace_name = "middleware"

    def __init__(self, memory: AgentMemory, config: MemoryExtractionConfig | None) -> None:
        self.memory = memory
        self.config = config

    def thread(self, scope: _Scope) -> Thread:
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

    async def athread(self, scope: _Scope) -> Thread:
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
        return RecordFilter(thread_id=thread.thread_id, record_types=frozenset({RecordType.MESSAGE}), **kwargs)

    def stored(self, thread: Thread, record_ids: Sequence[str]) -> list[Record]:
        return self.memory.store.query(self._messages_filter(thread, record_ids=tuple(record_ids)))

    async def astored(self, thread: Thread, record_ids: Sequence[str]) -> list[Record]:
        return await self.memory.store.aquery(self._messages_filter(thread, record_ids=tuple(record_ids)))

    def messages_from(self, thread: Thread, seq: int) -> int:
        """How many live messages of the thread have ``seq`` or a later one."""
        return self.memory.store.count(self._messages_filter(thread, min_seq=seq, alive_at=self.memory.now()))

    async def amessages_from(self, thread: Thread, seq: int) -> int:
        return await self.memory.store.acount(self._messages_filter(thread, min_seq=seq, alive_at=self.memory.now()))

    def _batch(self, turns: Sequence[_Turn]) -> list[dict[str, Any]]:
        return [
            {
                "role": t.role,
                "content": t.text,
                "id": t.record_id,
                "metadata": {"langgraph_message_id": t.message_id} if t.message_id else {},
            }
            for t in turns
        ]

    def add(self, thread: Thread, turns: Sequence[_Turn], call: Mapping[str, Any] | None = None) -> None:
        try:
            thread.add_messages(self._batch(turns), memory_extraction_config=call)
        except Conflict:  # another worker wrote some of them first: add the rest once
            known = {r.record_id for r in self.stored(thread, [t.record_id for t in turns])}
            rest = [t for t in turns if t.record_id not in known]
            if rest:
                thread.add_messages(self._batch(rest), memory_extraction_config=call)

    async def aadd(self, thread: Thread, turns: Sequence[_Turn], call: Mapping[str, Any] | None = None) -> None:
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


class AgentMemoryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Persist the agent's turns in an agentmemory thread and compact the prompt into a context
    card when it grows past ``trigger``.

    ``memory``: the client (any backend). ``thread_id`` / ``user_id`` / ``agent_id``: fixed
    values, or None to take them per run from the LangGraph thread (``config["configurable"]
    ["thread_id"]``) and from ``runtime.context`` / ``configurable`` (``user_id``, ``agent_id``).
    The agentmemory thread is created on first use with ``memory_extraction_config``.

    ``trigger``: when to compact, as ``SummarizationMiddleware`` takes it — ``("tokens", n)``,
    ``("messages", n)``, ``("fraction", f)`` of ``max_input_tokens`` (given, or read from
    ``model.profile``), a mapping for AND, a list for OR, None for never. ``keep``: the raw tail
    kept after compaction, one ``("messages"|"tokens"|"fraction", value)``. ``pattern``:
    ``"external_tail"`` (card, then the raw tail: prompt-cache friendly) or ``"self_contained"``
    (the tail's turns rendered inside the card). ``card_options``: further
    ``get_context_card`` arguments (``max_relevant_results``, ``min_relevant_results_by_type``, …).

    ``llm``: the model that extracts memories and writes summaries for the middleware's threads
    when the memory has no ``llm`` of its own. ``"agent"`` (default): the agent's own chat model
    — ``model`` when given, else the model the agent calls (turns written before its first call
    are extracted with the next ones); a LangChain chat model or an agentmemory ``Llm``: that
    one; None: none (the memory's rule-based extractor and offline summary).
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        thread_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        trigger: Trigger = ("tokens", 6000),
        keep: ContextSize = ("messages", 3),
        pattern: Pattern = "external_tail",
        model: Any = None,
        max_input_tokens: int | None = None,
        token_counter: TokenCounter = count_tokens_approximately,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        card_options: Mapping[str, Any] | None = None,
        card_message_name: str = CARD_MESSAGE_NAME,
        empty_card_text: str = EMPTY_CARD,
        llm: Any = "agent",
    ) -> None:
        super().__init__()
        if not isinstance(memory, AgentMemory):
            raise InvalidArgument("memory", f"must be an AgentMemory client, got {type(memory).__name__}")
        for name, value in (("thread_id", thread_id), ("user_id", user_id), ("agent_id", agent_id)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise InvalidArgument(name, f"must be a non-empty string or None, got {value!r}")
        self.memory = memory
        self.thread_id = thread_id
        self.user_id = user_id
        self.agent_id = agent_id
        self.trigger_clauses = normalize_trigger(trigger)
        if not isinstance(keep, tuple) or len(keep) != 2:
            raise InvalidArgument("keep", f"must be one (metric, value) pair, got {keep!r}")
        self.keep = _validate_size("keep", keep[0], keep[1])
        if pattern not in ("external_tail", "self_contained"):
            raise InvalidArgument("pattern", f"must be 'external_tail' or 'self_contained', got {pattern!r}")
        self.pattern: Pattern = pattern
        if max_input_tokens is None and model is not None:
            profile = getattr(model, "profile", None)
            limit = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
            max_input_tokens = limit if isinstance(limit, int) and not isinstance(limit, bool) else None
        if max_input_tokens is not None and (isinstance(max_input_tokens, bool) or not isinstance(max_input_tokens, int) or max_input_tokens <= 0):
            raise InvalidArgument("max_input_tokens", f"must be a positive int, got {max_input_tokens!r}")
        self.max_input_tokens = max_input_tokens
        uses_fraction = self.keep[0] == "fraction" or any("fraction" in c for c in self.trigger_clauses)
        if uses_fraction and max_input_tokens is None:
            raise InvalidArgument(
                "max_input_tokens",
                "a 'fraction' trigger or keep needs the model's context window: pass max_input_tokens=, "
                "or model= with profile={'max_input_tokens': ...}",
            )
        if not callable(token_counter):
            raise InvalidArgument("token_counter", "must be callable")
        self.token_counter = token_counter
        options = dict(card_options or {})
        unknown = sorted(set(options) - CARD_OPTIONS)
        if unknown:
            raise InvalidArgument(
                "card_options",
                f"unknown or reserved key {unknown[0]!r} (the middleware sets except_last_messages and "
                f"max_recent_messages itself); allowed: {', '.join(sorted(CARD_OPTIONS))}",
            )
        self.card_options = options
        if not isinstance(card_message_name, str) or not card_message_name:
            raise InvalidArgument("card_message_name", "must be a non-empty string")
        self.card_message_name = card_message_name
        self.empty_card_text = empty_card_text
        config = None if memory_extraction_config is None else MemoryExtractionConfig.from_any(memory_extraction_config)
        self._io = _Io(memory, config)
        if isinstance(llm, str) and llm != "agent":
            raise InvalidArgument("llm", f"must be 'agent', None, a LangChain chat model or an Llm, got {llm!r}")
        self.llm_choice: Any = llm if isinstance(llm, str) or llm is None else as_llm(llm)
        self._agent_llm: Any = as_llm(model) if llm == "agent" and model is not None else None
        self._threads: dict[str, Thread] = {}
        self._known: set[str] = set()
        self._lock = threading.Lock()

    # ---- recognising messages -------------------------------------------------------------
    def is_card_message(self, message: BaseMessage) -> bool:
        """True for the context-card message this middleware injects."""
        return isinstance(message, HumanMessage) and (
            message.name == self.card_message_name or message.additional_kwargs.get("lc_source") == CARD_SOURCE
        )

    def organic_messages(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The state's messages without the injected card: what is measured and persisted."""
        return [m for m in messages if not self.is_card_message(m)]

    # ---- the hooks ------------------------------------------------------------------------
    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Persist new turns; compact the history when the organic prompt passes the trigger."""
        scope = self._scope(runtime)
        with observability.span("agentmemory.middleware.before_model", **{"agentmemory.thread_id": scope.thread_id}) as span:
            update = run_sync(self._before_model_op(list(state["messages"]), scope))
            _mark(span, update)
            return update

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async ``before_model``."""
        scope = self._scope(runtime)
        with observability.span("agentmemory.middleware.before_model", **{"agentmemory.thread_id": scope.thread_id}) as span:
            update = await run_async(self._before_model_op(list(state["messages"]), scope))
            _mark(span, update)
            return update

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Learn the agent's model (``llm="agent"``), then call it unchanged."""
        self._see_model(request.model)
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Async ``wrap_model_call``."""
        self._see_model(request.model)
        return await handler(request)

    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Persist the model's reply at once (the next ``before_model`` would otherwise)."""
        scope = self._scope(runtime)
        with observability.span("agentmemory.middleware.after_model", **{"agentmemory.thread_id": scope.thread_id}):
            run_sync(self._persist_op(list(state["messages"]), scope))
        return None

    async def aafter_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Async ``after_model``."""
        scope = self._scope(runtime)
        with observability.span("agentmemory.middleware.after_model", **{"agentmemory.thread_id": scope.thread_id}):
            await run_async(self._persist_op(list(state["messages"]), scope))
        return None

    # ---- the model that extracts ----------------------------------------------------------
    def _see_model(self, model: Any) -> None:
        if self.llm_choice == "agent" and self._agent_llm is None and model is not None:
            self._agent_llm = as_llm(model)

    @property
    def memory_llm(self) -> Llm | Any:
        """The LLM the middleware gives its threads: None leaves them to the memory's own."""
        if self.memory.llm is not None or self.llm_choice is None:
            return None
        return self._agent_llm if self.llm_choice == "agent" else self.llm_choice

    @property
    def _waiting_for_agent_model(self) -> bool:
        return self.llm_choice == "agent" and self.memory.llm is None and self._agent_llm is None

    # ---- scope ----------------------------------------------------------------------------
    def _scope(self, runtime: Runtime[Any] | None) -> _Scope:
        configurable: Mapping[str, Any] = {}
        try:
            from langgraph.config import get_config

            configurable = get_config().get("configurable") or {}
        except (RuntimeError, ImportError):
            pass
        context = getattr(runtime, "context", None)

        def pick(name: str, fixed: str | None) -> str | None:
            if fixed is not None:
                return fixed
            value = context.get(name) if isinstance(context, Mapping) else getattr(context, name, None)
            if value is None:
                value = configurable.get(name)
            return None if value is None else str(value)

        info = getattr(runtime, "execution_info", None)
        thread_id = self.thread_id or getattr(info, "thread_id", None) or configurable.get("thread_id")
        if thread_id is None or not str(thread_id).strip():
            raise InvalidArgument(
                "thread_id",
                "AgentMemoryMiddleware needs a thread: pass thread_id= or run the agent with "
                "config={'configurable': {'thread_id': ...}}",
            )
        return _Scope(str(thread_id), pick("user_id", self.user_id), pick("agent_id", self.agent_id))

    def _thread_op(self, scope: _Scope) -> Op[Thread]:
        thread = self._threads.get(scope.thread_id)
        if thread is None:
            thread = yield Call(self._io, "thread", (scope,))
            self._threads[scope.thread_id] = thread
        if thread.llm is None:
            thread.llm = self.memory_llm
        return thread

    # ---- persistence ----------------------------------------------------------------------
    def _turns(self, thread: Thread, messages: Sequence[BaseMessage]) -> list[_Turn]:
        turns: list[_Turn] = []
        seen: set[str] = set()
        for message in messages:
            if self.is_card_message(message):
                continue
            role = persisted_role(message)
            if role is None:
                continue
            text = message_text(message).strip()
            if not text:
                continue
            rid = message_record_id(thread.thread_id, role, message, text)
            if rid in seen:
                continue
            seen.add(rid)
            turns.append(_Turn(rid, role, text, message.id))
        return turns

    def _persist_turns_op(self, thread: Thread, turns: Sequence[_Turn]) -> Op[None]:
        fresh = [t for t in turns if t.record_id not in self._known]
        if not fresh:
            return
        stored: list[Record] = yield Call(self._io, "stored", (thread, [t.record_id for t in fresh]))
        present = {r.record_id for r in stored}
        todo = [t for t in fresh if t.record_id not in present]
        if todo:
            yield Call(self._io, "add", (thread, todo, DEFER_EXTRACTION if self._waiting_for_agent_model else None))
        with self._lock:
            if len(self._known) > _KNOWN_CACHE_LIMIT:  # only a cache: the store is the truth
                self._known.clear()
            self._known.update(t.record_id for t in fresh)

    def _persist_op(self, messages: Sequence[BaseMessage], scope: _Scope) -> Op[None]:
        thread = yield from self._thread_op(scope)
        yield from self._persist_turns_op(thread, self._turns(thread, messages))

    # ---- compaction -----------------------------------------------------------------------
    def _threshold(self, kind: str, value: float) -> int:
        if kind == "fraction":
            assert self.max_input_tokens is not None
            return max(1, int(self.max_input_tokens * value))
        return int(value)

    def should_compact(self, organic: Sequence[BaseMessage]) -> bool:
        """True when any trigger clause has all its thresholds reached by ``organic``."""
        if not self.trigger_clauses:
            return False
        tokens: int | None = None
        for clause in self.trigger_clauses:
            met = True
            for kind, value in clause.items():
                if kind == "messages":
                    met = len(organic) >= value
                else:
                    if tokens is None:
                        tokens = int(self.token_counter(organic))
                    met = tokens >= self._threshold(kind, value)
                if not met:
                    break
            if met:
                return True
        return False

    def cutoff_index(self, organic: Sequence[BaseMessage]) -> int:
        """Where the kept raw tail starts: by ``keep``, moved back so that no tool result loses
        its tool call and the newest human message stays."""
        n = len(organic)
        kind, value = self.keep
        if kind == "messages":
            cut = n - int(value)
        else:
            budget = self._threshold(kind, value)
            cut, used = n, 0
            while cut > 0:
                cost = int(self.token_counter([organic[cut - 1]]))
                if used + cost > budget:
                    break
                used += cost
                cut -= 1
            cut = min(cut, n - 1)  # keep at least the newest message
        cut = _safe_cutoff(organic, max(cut, 0))
        newest_human = next((i for i in range(n - 1, -1, -1) if isinstance(organic[i], HumanMessage)), None)
        if newest_human is not None:
            cut = min(cut, newest_human)
        return cut

    def _card_message(self, text: str) -> HumanMessage:
        return HumanMessage(
            content=text or self.empty_card_text,
            name=self.card_message_name,
            id=f"agentmemory-card-{uuid.uuid4().hex}",
            additional_kwargs={"lc_source": CARD_SOURCE},
        )

    def _before_model_op(self, messages: list[BaseMessage], scope: _Scope) -> Op[dict[str, Any] | None]:
        thread = yield from self._thread_op(scope)
        organic = self.organic_messages(messages)
        turns = self._turns(thread, organic)
        yield from self._persist_turns_op(thread, turns)
        if not self.should_compact(organic):
            return None
        cut = self.cutoff_index(organic)
        if cut <= 0:
            return None
        dropped, tail = organic[:cut], organic[cut:]
        tail_turns = self._turns(thread, tail)
        # how many stored messages the raw tail covers: from its first turn to the newest message
        count = len(tail_turns)
        if tail_turns:
            first: list[Record] = yield Call(self._io, "stored", (thread, [tail_turns[0].record_id]))
            if first:
                count = yield Call(self._io, "messages_from", (thread, first[0].seq))
        options = dict(self.card_options)
        options["except_last_messages"] = count
        if self.pattern == "self_contained":
            options["max_recent_messages"] = count
            # the tail's turns are inside the card; only trailing tool traffic stays raw
            last_turn = max((i for i, m in enumerate(tail) if persisted_role(m) and message_text(m).strip()), default=-1)
            raw = tail[last_turn + 1 :]
        else:
            options["max_recent_messages"] = 0
            raw = tail
        text: str = yield Call(self._io, "card", (thread, options))
        systems = [m for m in dropped if isinstance(m, SystemMessage)]
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *systems, self._card_message(text), *raw]}


def _mark(span: Any, update: dict[str, Any] | None) -> None:
    """Record on the hook's span whether it compacted the history."""
    if span is not None and span.is_recording():
        span.set_attribute("agentmemory.compacted", update is not None)


def _safe_cutoff(messages: Sequence[BaseMessage], cut: int) -> int:
    """Move ``cut`` so the tail never starts with tool results whose tool call was cut off:
    back to the AI message that made the calls, else forward past the orphaned results."""
    if cut >= len(messages) or not isinstance(messages[cut], ToolMessage):
        return cut
    ids: set[str] = set()
    end = cut
    while end < len(messages) and isinstance(messages[end], ToolMessage):
        tool_message = messages[end]
        assert isinstance(tool_message, ToolMessage)
        ids.add(tool_message.tool_call_id)
        end += 1
    for i in range(cut - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, AIMessage) and msg.tool_calls and ids & {c.get("id") for c in msg.tool_calls}:
            return i
    return end
