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

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from ... import observability
from ...client import AgentMemory
from ...config import MemoryExtractionConfig
from ...effects import Call, Op, run_async, run_sync
from ...errors import InvalidArgument
from ...llm.base import Llm, as_llm
from ...records import Record
from ...thread import Thread
from .turns import (
    CARD_MESSAGE_NAME,
    CARD_OPTIONS,
    CARD_SOURCE,
    DEFER_EXTRACTION,
    EMPTY_CARD,
    KNOWN_CACHE_LIMIT,
    ContextSize,
    MemoryIo,
    Pattern,
    Scope,
    TokenCounter,
    Trigger,
    Turn,
    message_record_id,
    message_text,
    normalize_trigger,
    persisted_role,
    validate_size,
)


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
        self.keep = validate_size("keep", keep[0], keep[1])
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
        self._io = MemoryIo(memory, config)
        if isinstance(llm, str) and llm != "agent":
            raise InvalidArgument("llm", f"must be 'agent', None, a LangChain chat model or an Llm, got {llm!r}")
        self.llm_choice: Any = llm if isinstance(llm, str) or llm is None else as_llm(llm, memory.plugins)
        self._agent_llm: Any = as_llm(model, memory.plugins) if llm == "agent" and model is not None else None
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
            self._agent_llm = as_llm(model, self.memory.plugins)

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
    def _scope(self, runtime: Runtime[Any] | None) -> Scope:
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
        return Scope(str(thread_id), pick("user_id", self.user_id), pick("agent_id", self.agent_id))

    def _thread_op(self, scope: Scope) -> Op[Thread]:
        thread = self._threads.get(scope.thread_id)
        if thread is None:
            thread = yield Call(self._io, "thread", (scope,))
            self._threads[scope.thread_id] = thread
        if thread.llm is None:
            thread.llm = self.memory_llm
        return thread

    # ---- persistence ----------------------------------------------------------------------
    def _turns(self, thread: Thread, messages: Sequence[BaseMessage]) -> list[Turn]:
        turns: list[Turn] = []
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
            turns.append(Turn(rid, role, text, message.id))
        return turns

    def _persist_turns_op(self, thread: Thread, turns: Sequence[Turn]) -> Op[None]:
        fresh = [t for t in turns if t.record_id not in self._known]
        if not fresh:
            return
        stored: list[Record] = yield Call(self._io, "stored", (thread, [t.record_id for t in fresh]))
        present = {r.record_id for r in stored}
        todo = [t for t in fresh if t.record_id not in present]
        if todo:
            yield Call(self._io, "add", (thread, todo, DEFER_EXTRACTION if self._waiting_for_agent_model else None))
        with self._lock:
            if len(self._known) > KNOWN_CACHE_LIMIT:  # only a cache: the store is the truth
                self._known.clear()
            self._known.update(t.record_id for t in fresh)

    def _persist_op(self, messages: Sequence[BaseMessage], scope: Scope) -> Op[None]:
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

    def _before_model_op(self, messages: list[BaseMessage], scope: Scope) -> Op[dict[str, Any] | None]:
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
