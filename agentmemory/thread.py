"""``Thread``: the facade over one conversation. Messages in order, thread-scoped memories,
search with the thread's defaults, the running summary and the context card.

Like ``AgentMemory``, each method only drives one operation from ``agentmemory.operations``
with the client's ``MemoryContext`` and this handle's ``ThreadScope``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from .card_model import ContextCard
from .config import MemoryExtractionConfig, ResolvedExtractionConfig
from .effects import run_async, run_sync
from .operations import card, memories, summary
from .operations.context import OMITTED, MemoryContext, ThreadScope
from .operations.messages import Message, add_messages_op, get_in_thread_op, get_messages_op
from .operations.search import build_search, search_op, thread_search_options
from .operations.threads import thread_scope
from .records import MEMORY_TYPES, MESSAGE_TYPES, Record, RecordStatus, SearchResult, Summary
from .spi import MemoryStore
from .validation import user_metadata

__all__ = ["Message", "Thread"]


class MemoryClient(Protocol):
    """What a thread needs of its client (``AgentMemory``)."""

    store: MemoryStore

    def context(self) -> MemoryContext: ...


class Thread:
    """A handle on one thread. Created by ``AgentMemory.create_thread`` / ``get_thread``."""

    def __init__(
        self,
        client: MemoryClient,
        record: Record,
        *,
        llm: Any = None,
        overrides: MemoryExtractionConfig | None = None,
        context_card_type_search_concurrency: int | None = None,
    ) -> None:
        scope = thread_scope(record, llm, overrides, context_card_type_search_concurrency)
        self.client = client
        self.thread_id: str = scope.thread_id
        self.user_id: str | None = scope.user_id
        self.agent_id: str | None = scope.agent_id
        self.metadata: dict[str, Any] = user_metadata(record)
        self.persisted_config = scope.persisted_config
        self.live_overrides = scope.live_overrides
        self.llm = llm
        self.context_card_type_search_concurrency = scope.card_concurrency
        """How many per-type card searches run at once (this handle only; not persisted)."""

    def __repr__(self) -> str:
        return f"Thread(thread_id={self.thread_id!r}, user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    def scope(self) -> ThreadScope:
        """What operations see of this handle, as it is set now."""
        return ThreadScope(
            thread_id=self.thread_id, user_id=self.user_id, agent_id=self.agent_id, llm=self.llm,
            live_overrides=self.live_overrides, persisted_config=self.persisted_config,
            card_concurrency=self.context_card_type_search_concurrency,
        )

    @property
    def effective_llm(self) -> Any:
        """The thread's LLM, else the client's."""
        return self.scope().effective_llm(self.client.context())

    def extraction_config(self, call: MemoryExtractionConfig | None = None) -> ResolvedExtractionConfig:
        """Settings resolved call → live overrides → thread (persisted) → client → default."""
        return self.scope().extraction_config(self.client.context(), call)

    # ---- messages -------------------------------------------------------------------------------
    def add_messages(
        self, messages: Sequence[Message | Mapping[str, Any]], *,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Persist messages in order (one atomic batch) and return their ids; then run
        extraction and summary updates as the settings say (``memory_extraction_config`` here
        overrides every other level for this call only). In INLINE mode an extraction failure
        raises after the messages are stored; they are extracted again on the next call."""
        return run_sync(add_messages_op(self.client.context(), self.scope(), messages, memory_extraction_config))

    async def add_messages_async(
        self, messages: Sequence[Message | Mapping[str, Any]], *,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Async ``add_messages``."""
        return await run_async(add_messages_op(self.client.context(), self.scope(), messages, memory_extraction_config))

    def get_messages(self, start: int | None = None, end: int | None = None) -> list[Record]:
        """Messages by 0-based position, ``end`` exclusive. No bounds: the newest 20;
        ``end=None``/``-1`` with a start: through the last message."""
        return run_sync(get_messages_op(self.client.context(), self.scope(), start, end))

    async def get_messages_async(self, start: int | None = None, end: int | None = None) -> list[Record]:
        """Async ``get_messages``."""
        return await run_async(get_messages_op(self.client.context(), self.scope(), start, end))

    def get_message(self, message_id: str) -> Record:
        """One message of this thread; ``NotFound`` otherwise."""
        return run_sync(get_in_thread_op(self.client.context(), self.scope(), message_id, MESSAGE_TYPES, "message"))

    async def get_message_async(self, message_id: str) -> Record:
        """Async ``get_message``."""
        return await run_async(get_in_thread_op(self.client.context(), self.scope(), message_id, MESSAGE_TYPES, "message"))

    def update_message(self, message_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED) -> Record:
        """Change a message's content (re-embedded) and/or metadata."""
        ctx = self.client.context()
        return run_sync(memories.update_record_op(ctx, message_id, MESSAGE_TYPES, "message", content, metadata, OMITTED, self.thread_id))

    async def update_message_async(self, message_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED) -> Record:
        """Async ``update_message``."""
        ctx = self.client.context()
        return await run_async(memories.update_record_op(ctx, message_id, MESSAGE_TYPES, "message", content, metadata, OMITTED, self.thread_id))

    def delete_message(self, message_id: str) -> int:
        """Delete the raw message only (derived memories stay); returns 1 or 0."""
        return run_sync(memories.delete_typed_op(self.client.context(), message_id, MESSAGE_TYPES, self.thread_id, "message_id"))

    async def delete_message_async(self, message_id: str) -> int:
        """Async ``delete_message``."""
        return await run_async(memories.delete_typed_op(self.client.context(), message_id, MESSAGE_TYPES, self.thread_id, "message_id"))

    # ---- memories -----------------------------------------------------------------------------
    def add_memory(self, content: str, **options: Any) -> str:
        """Store a memory in this thread's scope. Options as ``AgentMemory.add_memory``:
        ``memory_type``, ``memory_id``, ``metadata``, ``timestamp``, ``ttl_days``, ``status``,
        ``memory_id_to_link``, ``link_type``."""
        return run_sync(memories.thread_add_memory_op(self.client.context(), self.scope(), content, options))

    async def add_memory_async(self, content: str, **options: Any) -> str:
        """Async ``add_memory``."""
        return await run_async(memories.thread_add_memory_op(self.client.context(), self.scope(), content, options))

    def update_memory(
        self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED, status: RecordStatus | str = OMITTED
    ) -> Record:
        """Update a memory-like record of this exact thread."""
        ctx = self.client.context()
        return run_sync(memories.update_record_op(ctx, memory_id, MEMORY_TYPES, "memory", content, metadata, status, self.thread_id))

    async def update_memory_async(
        self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED, status: RecordStatus | str = OMITTED
    ) -> Record:
        """Async ``update_memory``."""
        ctx = self.client.context()
        return await run_async(memories.update_record_op(ctx, memory_id, MEMORY_TYPES, "memory", content, metadata, status, self.thread_id))

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this exact thread; returns 1 or 0."""
        return run_sync(memories.delete_typed_op(self.client.context(), memory_id, MEMORY_TYPES, self.thread_id))

    async def delete_memory_async(self, memory_id: str) -> int:
        """Async ``delete_memory``."""
        return await run_async(memories.delete_typed_op(self.client.context(), memory_id, MEMORY_TYPES, self.thread_id))

    # ---- search -------------------------------------------------------------------------------
    def search(self, query: str, **options: Any) -> list[SearchResult]:
        """Search with this thread's user and agent (exact) and any of their threads by default;
        ``exact_thread_match=True`` restricts to this thread. Options as ``AgentMemory.search``."""
        ctx = self.client.context()
        q = build_search(ctx, query, thread_search_options(self.scope(), options), caller="thread")
        return run_sync(search_op(ctx.store, ctx.embedder, q))

    async def search_async(self, query: str, **options: Any) -> list[SearchResult]:
        """Async ``search``."""
        ctx = self.client.context()
        q = build_search(ctx, query, thread_search_options(self.scope(), options), caller="thread")
        return await run_async(search_op(ctx.store, ctx.embedder, q))

    # ---- summary and context card ---------------------------------------------------------------
    def get_summary(self, except_last: int = 0, token_budget: int | None = None) -> Summary:
        """The running summary (stored, or computed for all but the last ``except_last``
        messages without changing the stored one); ``token_budget`` is a soft cap on the text."""
        return run_sync(summary.summary_op(self.client.context(), self.scope(), except_last, token_budget))

    async def get_summary_async(self, except_last: int = 0, token_budget: int | None = None) -> Summary:
        """Async ``get_summary``."""
        return await run_async(summary.summary_op(self.client.context(), self.scope(), except_last, token_budget))

    def get_context_card(
        self, max_relevant_results: int | None = None, min_relevant_results_by_type: Mapping[str, int] | None = None,
        max_recent_messages: int = 0, except_last_messages: int = 0, fallback_message_count: int = 5,
        metadata_filter: Mapping[str, Any] | None = None, include_invalid_results: bool = False,
        token_budget: int | None = None, soft_token_budget: int | None = None, short_thread: str = "card",
    ) -> ContextCard:
        """The compact prompt context for this thread (SPEC §6); ``.content`` is the text. On a
        thread shorter than a card's markup (a few turns) the card can cost more than the
        transcript it stands for: ``short_thread="card"`` returns it with ``note`` saying so,
        ``"transcript"`` the transcript itself (``is_transcript``)."""
        return run_sync(card.context_card_op(
            self.client.context(), self.scope(), max_relevant_results=max_relevant_results,
            min_relevant_results_by_type=min_relevant_results_by_type, max_recent_messages=max_recent_messages,
            except_last_messages=except_last_messages, fallback_message_count=fallback_message_count,
            metadata_filter=metadata_filter, include_invalid_results=include_invalid_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, short_thread=short_thread,
        ))

    async def get_context_card_async(
        self, max_relevant_results: int | None = None, min_relevant_results_by_type: Mapping[str, int] | None = None,
        max_recent_messages: int = 0, except_last_messages: int = 0, fallback_message_count: int = 5,
        metadata_filter: Mapping[str, Any] | None = None, include_invalid_results: bool = False,
        token_budget: int | None = None, soft_token_budget: int | None = None, short_thread: str = "card",
    ) -> ContextCard:
        """Async ``get_context_card``."""
        return await run_async(card.context_card_op(
            self.client.context(), self.scope(), max_relevant_results=max_relevant_results,
            min_relevant_results_by_type=min_relevant_results_by_type, max_recent_messages=max_recent_messages,
            except_last_messages=except_last_messages, fallback_message_count=fallback_message_count,
            metadata_filter=metadata_filter, include_invalid_results=include_invalid_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, short_thread=short_thread,
        ))
