"""``Thread``: one conversation. Messages in order, thread-scoped memories, search defaults.

Extraction (``agentmemory.extraction``), summaries and the context card (``agentmemory.card``)
build on this handle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .card import context_card_op, summary_op
from .card_model import ContextCard
from .client import OMITTED, internal_metadata, parse_timestamp, user_metadata
from .config import MemoryExtractionConfig, ResolvedExtractionConfig
from .effects import Call, Op, run_async, run_sync
from .embedders.base import embed_op
from .errors import InvalidArgument, NotFound
from .ids import new_id
from .records import MEMORY_TYPES, Record, RecordStatus, RecordType, SearchResult, Summary
from .search import search_op
from .spi import NewRecord, Order, RecordFilter, WriteBatch
from .validation import validate_content, validate_id, validate_metadata, validate_positive_int

if TYPE_CHECKING:
    from .client import AgentMemory

ROLES = ("user", "assistant", "system", "tool")
DEFAULT_MESSAGE_WINDOW = 20
"""How many of the newest messages ``get_messages()`` returns without bounds."""
MESSAGE_TYPES = frozenset({RecordType.MESSAGE})


class Message(BaseModel):
    """A message to add: role (user/assistant/system/tool), content, optional id, timestamp
    (datetime or ISO string) and metadata. Messages take the store's default TTL."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    role: str
    content: str
    id: str | None = None
    timestamp: datetime | str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def parse_message(index: int, item: Any) -> Message:
    """A ``Message`` from a Message or a dict; ``InvalidArgument`` names the bad item."""
    arg = f"messages[{index}]"
    if isinstance(item, Message):
        msg = item
    elif isinstance(item, Mapping):
        try:
            msg = Message.model_validate(dict(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise InvalidArgument(f"{arg}.{where}", err["msg"]) from None
    else:
        raise InvalidArgument(arg, f"must be a Message or a dict with role and content, got {type(item).__name__}")
    if msg.role not in ROLES:
        raise InvalidArgument(f"{arg}.role", f"must be one of {', '.join(ROLES)}, got {msg.role!r}")
    validate_content(f"{arg}.content", msg.content)
    if msg.id is not None:
        validate_id(f"{arg}.id", msg.id)
    validate_metadata(f"{arg}.metadata", msg.metadata)
    return msg


class Thread:
    """A handle on one thread. Created by ``AgentMemory.create_thread`` / ``get_thread``."""

    def __init__(
        self,
        client: AgentMemory,
        record: Record,
        *,
        llm: Any = None,
        overrides: MemoryExtractionConfig | None = None,
        context_card_type_search_concurrency: int | None = None,
    ) -> None:
        self.client = client
        self.thread_id: str = record.thread_id or ""
        self.user_id: str | None = record.user_id
        self.agent_id: str | None = record.agent_id
        self.metadata: dict[str, Any] = user_metadata(record)
        self.persisted_config = MemoryExtractionConfig.from_any(internal_metadata(record).get("config") or {})
        self.live_overrides = overrides or MemoryExtractionConfig()
        self.llm = llm
        concurrency = 5 if context_card_type_search_concurrency is None else context_card_type_search_concurrency
        self.context_card_type_search_concurrency = validate_positive_int(
            "context_card_type_search_concurrency", concurrency, minimum=1, maximum=64
        )
        """How many per-type card searches run at once (this handle only; not persisted)."""

    def __repr__(self) -> str:
        return f"Thread(thread_id={self.thread_id!r}, user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    @property
    def effective_llm(self) -> Any:
        """The thread's LLM, else the client's."""
        return self.llm if self.llm is not None else self.client.llm

    def extraction_config(self, call: MemoryExtractionConfig | None = None) -> ResolvedExtractionConfig:
        """Settings resolved call → live overrides → thread (persisted) → client → default."""
        return MemoryExtractionConfig.resolve(call, self.live_overrides, self.persisted_config, self.client.memory_extraction_config)

    def _scope_filter(self, **kwargs: Any) -> RecordFilter:
        return self.client._alive(thread_id=self.thread_id, **kwargs)

    # ---- messages -------------------------------------------------------------------------------
    def _add_messages_op(self, messages: Any, call_config: Any = None) -> Op[list[str]]:
        call = None if call_config is None else MemoryExtractionConfig.from_any(call_config)
        if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
            raise InvalidArgument("messages", "must be a list of messages")
        if not messages:
            return []
        parsed = [parse_message(i, m) for i, m in enumerate(messages)]
        yield from self.client._thread_op(self.thread_id)  # a deleted thread takes no more messages
        ids = [m.id or new_id() for m in parsed]
        if len(set(ids)) != len(ids):
            raise InvalidArgument("messages", "message ids must be unique within a call")
        now = self.client.now()
        records = []
        for i, (msg, rid) in enumerate(zip(parsed, ids)):
            ts = parse_timestamp(f"messages[{i}].timestamp", msg.timestamp) or now
            records.append(
                Record(
                    record_id=rid,
                    record_type=RecordType.MESSAGE,
                    content=msg.content,
                    role=msg.role,
                    user_id=self.user_id,
                    agent_id=self.agent_id,
                    thread_id=self.thread_id,
                    timestamp=ts,
                    created_at=now,
                    expires_at=self.client.expires_at(OMITTED, now, ts),
                    metadata=dict(msg.metadata),
                )
            )
        vectors = yield from embed_op(self.client.embedder, [r.content for r in records])
        added: list[Record] = yield Call(
            self.client.store, "write", (WriteBatch(add=[NewRecord(r, v) for r, v in zip(records, vectors)]),)
        )
        yield from self.client._after_messages_op(self, added, call)
        return ids

    def add_messages(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Persist messages in order (one atomic batch) and return their ids; then run
        extraction and summary updates as the settings say (``memory_extraction_config`` here
        overrides every other level for this call only). In INLINE mode an extraction failure
        raises after the messages are stored; they are extracted again on the next call."""
        return run_sync(self._add_messages_op(messages, memory_extraction_config))

    async def add_messages_async(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Async ``add_messages``."""
        return await run_async(self._add_messages_op(messages, memory_extraction_config))

    def _get_messages_op(self, start: Any, end: Any) -> Op[list[Record]]:
        flt = self._scope_filter(record_types=MESSAGE_TYPES)
        if start is None and end is None:
            rows: list[Record] = yield Call(self.client.store, "query", (flt,), {"order": Order.SEQ_DESC, "limit": DEFAULT_MESSAGE_WINDOW})
            return rows[::-1]
        first = 0 if start is None else validate_positive_int("start", start, minimum=0)
        if end is None or end == -1:
            limit = None
        else:
            stop = validate_positive_int("end", end, minimum=0)
            if stop < first:
                raise InvalidArgument("end", f"must be >= start ({first}) or -1, got {stop}")
            limit = stop - first
        rows = yield Call(self.client.store, "query", (flt,), {"offset": first, "limit": limit})
        return rows

    def get_messages(self, start: int | None = None, end: int | None = None) -> list[Record]:
        """Messages by 0-based position, ``end`` exclusive. No bounds: the newest 20;
        ``end=None``/``-1`` with a start: through the last message."""
        return run_sync(self._get_messages_op(start, end))

    async def get_messages_async(self, start: int | None = None, end: int | None = None) -> list[Record]:
        """Async ``get_messages``."""
        return await run_async(self._get_messages_op(start, end))

    def _get_in_thread_op(self, record_id: str, types: frozenset[RecordType], kind: str) -> Op[Record]:
        validate_id(f"{kind}_id", record_id)
        rows: list[Record] = yield Call(self.client.store, "query", (self._scope_filter(record_ids=(record_id,), record_types=types),))
        if not rows:
            raise NotFound(kind, record_id)
        return rows[0]

    def get_message(self, message_id: str) -> Record:
        """One message of this thread; ``NotFound`` otherwise."""
        return run_sync(self._get_in_thread_op(message_id, MESSAGE_TYPES, "message"))

    async def get_message_async(self, message_id: str) -> Record:
        """Async ``get_message``."""
        return await run_async(self._get_in_thread_op(message_id, MESSAGE_TYPES, "message"))

    def update_message(self, message_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED) -> Record:
        """Change a message's content (re-embedded) and/or metadata."""
        return run_sync(self.client._update_record_op(message_id, MESSAGE_TYPES, "message", content, metadata, OMITTED, self.thread_id))

    async def update_message_async(self, message_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED) -> Record:
        """Async ``update_message``."""
        return await run_async(self.client._update_record_op(message_id, MESSAGE_TYPES, "message", content, metadata, OMITTED, self.thread_id))

    def delete_message(self, message_id: str) -> int:
        """Delete the raw message only (derived memories stay); returns 1 or 0."""
        return run_sync(self.client._delete_typed_op(message_id, MESSAGE_TYPES, self.thread_id, "message_id"))

    async def delete_message_async(self, message_id: str) -> int:
        """Async ``delete_message``."""
        return await run_async(self.client._delete_typed_op(message_id, MESSAGE_TYPES, self.thread_id, "message_id"))

    # ---- memories -----------------------------------------------------------------------------
    def _add_memory_op(self, content: str, kw: dict[str, Any]) -> Op[str]:
        allowed = {"memory_type", "memory_id", "metadata", "timestamp", "ttl_days", "status", "memory_id_to_link", "link_type"}
        unknown = sorted(set(kw) - allowed)
        if unknown:
            raise InvalidArgument(unknown[0], "unknown argument of Thread.add_memory")
        args = {
            "memory_type": RecordType.MEMORY, "memory_id": None, "metadata": None, "timestamp": None,
            "ttl_days": OMITTED, "status": RecordStatus.VALID, "memory_id_to_link": None, "link_type": None,
        }
        args.update(kw)
        rid = yield from self.client._add_memory_op(
            content, args["memory_type"], self.user_id, self.agent_id, self.thread_id, args["memory_id"],
            args["metadata"], args["timestamp"], args["ttl_days"], args["status"], args["memory_id_to_link"], args["link_type"],
        )
        return rid

    def add_memory(self, content: str, **options: Any) -> str:
        """Store a memory in this thread's scope. Options as ``AgentMemory.add_memory``:
        ``memory_type``, ``memory_id``, ``metadata``, ``timestamp``, ``ttl_days``, ``status``,
        ``memory_id_to_link``, ``link_type``."""
        return run_sync(self._add_memory_op(content, options))

    async def add_memory_async(self, content: str, **options: Any) -> str:
        """Async ``add_memory``."""
        return await run_async(self._add_memory_op(content, options))

    def update_memory(self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED, status: RecordStatus | str = OMITTED) -> Record:
        """Update a memory-like record of this exact thread."""
        return run_sync(self.client._update_record_op(memory_id, MEMORY_TYPES, "memory", content, metadata, status, self.thread_id))

    async def update_memory_async(self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED, status: RecordStatus | str = OMITTED) -> Record:
        """Async ``update_memory``."""
        return await run_async(self.client._update_record_op(memory_id, MEMORY_TYPES, "memory", content, metadata, status, self.thread_id))

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this exact thread; returns 1 or 0."""
        return run_sync(self.client._delete_typed_op(memory_id, MEMORY_TYPES, self.thread_id))

    async def delete_memory_async(self, memory_id: str) -> int:
        """Async ``delete_memory``."""
        return await run_async(self.client._delete_typed_op(memory_id, MEMORY_TYPES, self.thread_id))

    # ---- search -------------------------------------------------------------------------------
    def _search_query(self, query: Any, options: dict[str, Any]) -> Any:
        defaults: dict[str, Any] = {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "thread_id": self.thread_id,
            "exact_user_match": True,
            "exact_agent_match": True,
            "exact_thread_match": False,
        }
        defaults.update(options)
        if defaults["exact_user_match"] is not True:
            raise InvalidArgument("exact_user_match", "thread search is always scoped to one user (must be True)")
        try:
            return self.client.build_search(query, **defaults)
        except TypeError as exc:
            raise InvalidArgument("search options", str(exc)) from None

    def search(self, query: str, **options: Any) -> list[SearchResult]:
        """Search with this thread's user and agent (exact) and any of their threads by default;
        ``exact_thread_match=True`` restricts to this thread. Options as ``AgentMemory.search``."""
        return run_sync(search_op(self.client.store, self.client.embedder, self._search_query(query, options)))

    async def search_async(self, query: str, **options: Any) -> list[SearchResult]:
        """Async ``search``."""
        return await run_async(search_op(self.client.store, self.client.embedder, self._search_query(query, options)))

    # ---- summary and context card ---------------------------------------------------------------
    def get_summary(self, except_last: int = 0, token_budget: int | None = None) -> Summary:
        """The running summary (stored, or computed for all but the last ``except_last``
        messages without changing the stored one); ``token_budget`` is a soft cap on the text."""
        return run_sync(summary_op(self, except_last, token_budget))

    async def get_summary_async(self, except_last: int = 0, token_budget: int | None = None) -> Summary:
        """Async ``get_summary``."""
        return await run_async(summary_op(self, except_last, token_budget))

    def get_context_card(
        self,
        max_relevant_results: int | None = None,
        min_relevant_results_by_type: Mapping[str, int] | None = None,
        max_recent_messages: int = 0,
        except_last_messages: int = 0,
        fallback_message_count: int = 5,
        metadata_filter: Mapping[str, Any] | None = None,
        include_invalid_results: bool = False,
        token_budget: int | None = None,
        soft_token_budget: int | None = None,
    ) -> ContextCard:
        """The compact prompt context for this thread (SPEC §6); ``.content`` is the text."""
        return run_sync(context_card_op(
            self, max_relevant_results=max_relevant_results, min_relevant_results_by_type=min_relevant_results_by_type,
            max_recent_messages=max_recent_messages, except_last_messages=except_last_messages,
            fallback_message_count=fallback_message_count, metadata_filter=metadata_filter,
            include_invalid_results=include_invalid_results, token_budget=token_budget, soft_token_budget=soft_token_budget,
        ))

    async def get_context_card_async(
        self,
        max_relevant_results: int | None = None,
        min_relevant_results_by_type: Mapping[str, int] | None = None,
        max_recent_messages: int = 0,
        except_last_messages: int = 0,
        fallback_message_count: int = 5,
        metadata_filter: Mapping[str, Any] | None = None,
        include_invalid_results: bool = False,
        token_budget: int | None = None,
        soft_token_budget: int | None = None,
    ) -> ContextCard:
        """Async ``get_context_card``."""
        return await run_async(context_card_op(
            self, max_relevant_results=max_relevant_results, min_relevant_results_by_type=min_relevant_results_by_type,
            max_recent_messages=max_recent_messages, except_last_messages=except_last_messages,
            fallback_message_count=fallback_message_count, metadata_filter=metadata_filter,
            include_invalid_results=include_invalid_results, token_budget=token_budget, soft_token_budget=soft_token_budget,
        ))
