"""``AgentMemory``: the client facade over one store. Threads, profiles, memories, links, search,
TTL purge.

Each method validates nothing and decides nothing itself: it builds the ``MemoryContext`` and
drives one operation from ``agentmemory.operations`` (sync with ``run_sync``, the ``*_async``
twin with ``run_async``; see ``effects``). Where each concept lives: ``docs/architecture.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .config import MemoryExtractionConfig, MemoryRetentionConfig
from .effects import run_async, run_sync
from .embedders import Embedder
from .embedders.base import as_embedder
from .errors import AgentMemoryError, InvalidArgument
from .llm.base import as_llm
from .operations import links, lookup, memories, profiles, retention, threads
from .operations.background import BackgroundExtraction
from .operations.context import OMITTED, MemoryContext, utc_now
from .operations.search import build_search, search_op
from .plugins import PluginManager, get_plugin_manager
from .records import (
    MEMORY_TYPES,
    MESSAGE_TYPES,
    Link,
    LinkType,
    Profile,
    Record,
    RecordStatus,
    RecordType,
    SearchResult,
    ThreadInfo,
)
from .registry import default_embedder, resolve_store
from .rerankers import Reranker
from .spi import MemoryStore, SchemaPolicy
from .thread import Thread
from .tokens import TokenCounter, resolve_token_counter


class AgentMemory:
    """The agent-memory client over one store.

    ``store``: a ``MemoryStore`` instance, a URI (``duckdb:///path.db``, ``memory://``) or None
    for the embedded default (``AGENTMEMORY_STORE``, else DuckDB at ``~/.agentmemory/memory.duckdb``,
    else the in-process store). ``embedder``: defaults to the bundled local model.
    ``token_counter``: what budgets count in (see ``agentmemory.tokens``).
    """

    def __init__(
        self,
        store: MemoryStore | str | None = None,
        *,
        embedder: Embedder | Any = None,
        llm: Any = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        schema_policy: SchemaPolicy | str = SchemaPolicy.CREATE_IF_NECESSARY,
        retention: MemoryRetentionConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        plugin_manager: PluginManager | None = None,
        rerankers: Sequence[Reranker | str] = (),
        extractor: Any = None,
        card_renderer: Any = "xml",
        token_counter: TokenCounter | str | None = None,
        index_context: bool = True,
    ) -> None:
        try:
            policy = SchemaPolicy(schema_policy)
        except ValueError:
            known = ", ".join(p.value for p in SchemaPolicy)
            raise InvalidArgument("schema_policy", f"must be one of {known}, got {schema_policy!r}") from None
        if retention is not None and not isinstance(retention, MemoryRetentionConfig):
            raise InvalidArgument("retention", "must be a MemoryRetentionConfig")
        self.plugins = plugin_manager or get_plugin_manager()
        self.store: MemoryStore = resolve_store(store, self.plugins)
        self.embedder: Embedder = as_embedder(embedder, self.plugins) if embedder is not None else default_embedder()
        self.llm = as_llm(llm, self.plugins)  # a LangChain chat model / Embeddings is wrapped (agentmemory.integrations.langchain)
        self.memory_extraction_config = MemoryExtractionConfig.from_any(memory_extraction_config)
        self.retention = retention or MemoryRetentionConfig()
        self.clock: Callable[[], datetime] = clock or utc_now
        self.rerankers: tuple[Reranker, ...] = tuple(
            self.plugins.load("rerankers", r)() if isinstance(r, str) else r for r in rerankers
        )
        self.extractor = extractor
        """None (LLM extractor with an LLM, rule-based without), a registered name, an Extractor,
        or a list of those run in order as one chain (``extractor=[None, "dates"]``: the default,
        then the dates plugin; see ``agentmemory.extraction.base.ExtractorChain``)."""
        self.card_renderer = card_renderer
        """A registered card renderer name ("xml", "markdown") or a renderer object."""
        if isinstance(card_renderer, str) and card_renderer in self.plugins.names("card_renderers"):
            # imported now, with the client, not inside the first card after a (re)start; an
            # unknown or broken name is still reported by the card that uses it
            with contextlib.suppress(AgentMemoryError):
                self.plugins.load("card_renderers", card_renderer)
        self.token_counter: TokenCounter = resolve_token_counter(token_counter, self.llm, self.plugins)
        """What every budget counts in (search, card, summary, extraction prompts): a registered
        name ("estimate", "cl100k_base", "o200k_base"), a ``TokenCounter``, or by default the
        LangChain model's own ``get_num_tokens`` when ``llm`` is one, else the estimate."""
        if not isinstance(index_context, bool):
            raise InvalidArgument("index_context", f"must be True or False, got {index_context!r}")
        self.index_context = index_context
        """True (default): messages are indexed with their role, date and previous turn, so a
        reply such as "yes, on Tuesday" is found by the question it answers; the stored content
        is unchanged (``Record.index_text``). False: each message's content alone."""
        self.background = BackgroundExtraction()
        """The background extraction worker (``extraction_mode=BACKGROUND``), started on first use."""
        self.store.open(dimension=self.embedder.dimension, schema_policy=policy)

    def context(self) -> MemoryContext:
        """What operations see of this client, as it is configured now."""
        return MemoryContext(
            store=self.store, embedder=self.embedder, llm=self.llm, plugins=self.plugins, clock=self.clock,
            retention=self.retention, extraction_config=self.memory_extraction_config, rerankers=self.rerankers,
            extractor=self.extractor, card_renderer=self.card_renderer, token_counter=self.token_counter,
            background=self.background, index_context=self.index_context,
        )

    # ---- lifecycle ----------------------------------------------------------------------------
    def close(self, timeout: float | None = 300.0) -> None:
        """Finish background extraction (up to ``timeout`` seconds) and close the store."""
        try:
            self.background.stop(timeout)
        finally:
            self.store.close()

    async def close_async(self, timeout: float | None = 300.0) -> None:
        """Async ``close``."""
        await asyncio.to_thread(self.close, timeout)

    def __enter__(self) -> AgentMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The client's clock (injectable for tests)."""
        return self.clock()

    # ---- threads ----------------------------------------------------------------------------
    def create_thread(
        self, thread_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None, memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        llm: Any = None, **config_fields: Any,
    ) -> Thread:
        """Create a thread; extraction settings (config object and/or fields) are persisted."""
        concurrency = config_fields.pop("context_card_type_search_concurrency", None)
        op = threads.create_thread_op(self.context(), thread_id, user_id, agent_id, metadata, memory_extraction_config, config_fields)
        return Thread(self, run_sync(op), llm=as_llm(llm, self.plugins), context_card_type_search_concurrency=concurrency)

    async def create_thread_async(
        self, thread_id: str | None = None, *, user_id: str | None = None, agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None, memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        llm: Any = None, **config_fields: Any,
    ) -> Thread:
        """Async ``create_thread``."""
        concurrency = config_fields.pop("context_card_type_search_concurrency", None)
        op = threads.create_thread_op(self.context(), thread_id, user_id, agent_id, metadata, memory_extraction_config, config_fields)
        return Thread(self, await run_async(op), llm=as_llm(llm, self.plugins), context_card_type_search_concurrency=concurrency)

    def get_thread(
        self, thread_id: str, *, llm: Any = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None, **live_overrides: Any,
    ) -> Thread:
        """A handle on an existing thread; ``memory_extraction_config`` and config fields given
        here apply to this handle only and are not persisted."""
        concurrency = live_overrides.pop("context_card_type_search_concurrency", None)
        overrides = threads.merge_config(memory_extraction_config, live_overrides)
        record = run_sync(lookup.thread_record_op(self.context(), thread_id))
        return Thread(self, record, llm=as_llm(llm, self.plugins), overrides=overrides, context_card_type_search_concurrency=concurrency)

    async def get_thread_async(
        self, thread_id: str, *, llm: Any = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None, **live_overrides: Any,
    ) -> Thread:
        """Async ``get_thread``."""
        concurrency = live_overrides.pop("context_card_type_search_concurrency", None)
        overrides = threads.merge_config(memory_extraction_config, live_overrides)
        record = await run_async(lookup.thread_record_op(self.context(), thread_id))
        return Thread(self, record, llm=as_llm(llm, self.plugins), overrides=overrides, context_card_type_search_concurrency=concurrency)

    def update_thread(
        self, thread_id: str, *, metadata: Mapping[str, Any] | None = OMITTED,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = OMITTED, **config_fields: Any,
    ) -> ThreadInfo:
        """Persist new metadata and/or settings; a field passed as None clears the thread's value
        (the client's value then applies); ``memory_extraction_config=None`` clears them all."""
        return run_sync(threads.update_thread_op(self.context(), thread_id, metadata, memory_extraction_config, config_fields))

    async def update_thread_async(
        self, thread_id: str, *, metadata: Mapping[str, Any] | None = OMITTED,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = OMITTED, **config_fields: Any,
    ) -> ThreadInfo:
        """Async ``update_thread``."""
        return await run_async(threads.update_thread_op(self.context(), thread_id, metadata, memory_extraction_config, config_fields))

    def delete_thread(self, thread_id: str) -> int:
        """Delete a thread with its messages, memories, summary and their links; returns how many
        records went (0 when the thread does not exist)."""
        return run_sync(threads.delete_thread_op(self.context(), thread_id))

    async def delete_thread_async(self, thread_id: str) -> int:
        """Async ``delete_thread``."""
        return await run_async(threads.delete_thread_op(self.context(), thread_id))

    def list_threads(self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, limit: int = 100, offset: int = 0) -> list[ThreadInfo]:
        """Threads in creation order, optionally of one user and/or agent."""
        return run_sync(threads.list_threads_op(self.context(), user_id, agent_id, limit, offset))

    async def list_threads_async(self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, limit: int = 100, offset: int = 0) -> list[ThreadInfo]:
        """Async ``list_threads``."""
        return await run_async(threads.list_threads_op(self.context(), user_id, agent_id, limit, offset))

    # ---- profiles ---------------------------------------------------------------------------
    def add_user(self, user_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a searchable profile of a user."""
        return run_sync(profiles.add_profile_op(self.context(), RecordType.USER, user_id, information, metadata))

    async def add_user_async(self, user_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Async ``add_user``."""
        return await run_async(profiles.add_profile_op(self.context(), RecordType.USER, user_id, information, metadata))

    def add_agent(self, agent_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a searchable profile of an agent."""
        return run_sync(profiles.add_profile_op(self.context(), RecordType.AGENT, agent_id, information, metadata))

    async def add_agent_async(self, agent_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Async ``add_agent``."""
        return await run_async(profiles.add_profile_op(self.context(), RecordType.AGENT, agent_id, information, metadata))

    def list_users(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """User profiles in creation order."""
        return run_sync(profiles.list_profiles_op(self.context(), RecordType.USER, limit, offset))

    async def list_users_async(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Async ``list_users``."""
        return await run_async(profiles.list_profiles_op(self.context(), RecordType.USER, limit, offset))

    def list_agents(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Agent profiles in creation order."""
        return run_sync(profiles.list_profiles_op(self.context(), RecordType.AGENT, limit, offset))

    async def list_agents_async(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Async ``list_agents``."""
        return await run_async(profiles.list_profiles_op(self.context(), RecordType.AGENT, limit, offset))

    def delete_user(self, user_id: str, *, cascade: bool = True) -> int:
        """Delete a user's profile and, with ``cascade``, every record of that user (threads,
        messages, memories, summaries, links): nothing of it stays readable or searchable."""
        return run_sync(profiles.delete_actor_op(self.context(), RecordType.USER, user_id, cascade))

    async def delete_user_async(self, user_id: str, *, cascade: bool = True) -> int:
        """Async ``delete_user``."""
        return await run_async(profiles.delete_actor_op(self.context(), RecordType.USER, user_id, cascade))

    def delete_agent(self, agent_id: str, *, cascade: bool = True) -> int:
        """Delete an agent's profile and, with ``cascade``, every record of that agent."""
        return run_sync(profiles.delete_actor_op(self.context(), RecordType.AGENT, agent_id, cascade))

    async def delete_agent_async(self, agent_id: str, *, cascade: bool = True) -> int:
        """Async ``delete_agent``."""
        return await run_async(profiles.delete_actor_op(self.context(), RecordType.AGENT, agent_id, cascade))

    # ---- memories -----------------------------------------------------------------------------
    def add_memory(
        self, content: str, *, memory_type: RecordType | str = RecordType.MEMORY, user_id: str | None = None,
        agent_id: str | None = None, thread_id: str | None = None, memory_id: str | None = None,
        metadata: Mapping[str, Any] | None = None, timestamp: datetime | str | None = None, ttl_days: float | None = OMITTED,
        status: RecordStatus | str = RecordStatus.VALID, memory_id_to_link: str | None = None, link_type: LinkType | str | None = None,
    ) -> str:
        """Store a memory-like record (memory, fact, guideline, preference); optionally link it to
        ``memory_id_to_link`` (a lifecycle link invalidates that memory). Returns its id.
        ``ttl_days``: omitted = the store default; None = the store maximum or never; any
        positive number, clamped to the store maximum (one ending past year 9999 = never)."""
        return run_sync(memories.add_memory_op(
            self.context(), content, memory_type, user_id, agent_id, thread_id, memory_id, metadata, timestamp, ttl_days, status,
            memory_id_to_link, link_type,
        ))

    async def add_memory_async(
        self, content: str, *, memory_type: RecordType | str = RecordType.MEMORY, user_id: str | None = None,
        agent_id: str | None = None, thread_id: str | None = None, memory_id: str | None = None,
        metadata: Mapping[str, Any] | None = None, timestamp: datetime | str | None = None, ttl_days: float | None = OMITTED,
        status: RecordStatus | str = RecordStatus.VALID, memory_id_to_link: str | None = None, link_type: LinkType | str | None = None,
    ) -> str:
        """Async ``add_memory``."""
        return await run_async(memories.add_memory_op(
            self.context(), content, memory_type, user_id, agent_id, thread_id, memory_id, metadata, timestamp, ttl_days, status,
            memory_id_to_link, link_type,
        ))

    def update_memory(
        self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED,
        status: RecordStatus | str = OMITTED, ttl_days: float | None = OMITTED,
    ) -> Record:
        """Change a memory's content (re-embedded), metadata (replaced), status and/or TTL
        (``ttl_days`` counts from now; None = the store maximum or never; one ending past year
        9999 = never)."""
        op = memories.update_record_op(self.context(), memory_id, MEMORY_TYPES, "memory", content, metadata, status, ttl_days=ttl_days)
        return run_sync(op)

    async def update_memory_async(
        self, memory_id: str, *, content: str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED,
        status: RecordStatus | str = OMITTED, ttl_days: float | None = OMITTED,
    ) -> Record:
        """Async ``update_memory``."""
        op = memories.update_record_op(self.context(), memory_id, MEMORY_TYPES, "memory", content, metadata, status, ttl_days=ttl_days)
        return await run_async(op)

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record and its links (restoring memories it had invalidated);
        returns 1, or 0 when there is no such memory."""
        return run_sync(memories.delete_typed_op(self.context(), memory_id, MEMORY_TYPES))

    async def delete_memory_async(self, memory_id: str) -> int:
        """Async ``delete_memory``."""
        return await run_async(memories.delete_typed_op(self.context(), memory_id, MEMORY_TYPES))

    def get_memory(self, memory_id: str) -> Record:
        """One memory-like record; ``NotFound`` when missing or expired."""
        return run_sync(memories.get_memory_op(self.context(), memory_id))

    async def get_memory_async(self, memory_id: str) -> Record:
        """Async ``get_memory``."""
        return await run_async(memories.get_memory_op(self.context(), memory_id))

    def list_memories(
        self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, thread_id: str | None = OMITTED,
        memory_types: Sequence[RecordType | str] | None = None, metadata_filter: Mapping[str, Any] | None = None,
        include_invalid: bool = True, limit: int = 100, offset: int = 0,
    ) -> list[Record]:
        """Memory-like records in insertion order. A scope key given (even None) filters exactly."""
        types = memories.memory_types(memory_types)
        return run_sync(memories.list_records_op(self.context(), types, user_id, agent_id, thread_id, metadata_filter, include_invalid, limit, offset))

    async def list_memories_async(
        self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, thread_id: str | None = OMITTED,
        memory_types: Sequence[RecordType | str] | None = None, metadata_filter: Mapping[str, Any] | None = None,
        include_invalid: bool = True, limit: int = 100, offset: int = 0,
    ) -> list[Record]:
        """Async ``list_memories``."""
        types = memories.memory_types(memory_types)
        return await run_async(memories.list_records_op(self.context(), types, user_id, agent_id, thread_id, metadata_filter, include_invalid, limit, offset))

    def list_messages(
        self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, thread_id: str | None = OMITTED,
        metadata_filter: Mapping[str, Any] | None = None, limit: int = 100, offset: int = 0,
    ) -> list[Record]:
        """Messages in order across threads. A scope key given (even None) filters exactly."""
        return run_sync(memories.list_records_op(self.context(), MESSAGE_TYPES, user_id, agent_id, thread_id, metadata_filter, True, limit, offset))

    async def list_messages_async(
        self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, thread_id: str | None = OMITTED,
        metadata_filter: Mapping[str, Any] | None = None, limit: int = 100, offset: int = 0,
    ) -> list[Record]:
        """Async ``list_messages``."""
        return await run_async(memories.list_records_op(self.context(), MESSAGE_TYPES, user_id, agent_id, thread_id, metadata_filter, True, limit, offset))

    # ---- links ------------------------------------------------------------------------------
    def link_records(
        self, source_id: str, target_id: str, link_type: LinkType | str, *, metadata: Mapping[str, Any] | None = None,
        link_id: str | None = None,
    ) -> Link:
        """Link two memory-like records; supersedes/refines/duplicates invalidate the target."""
        return run_sync(links.link_op(self.context(), source_id, target_id, link_type, metadata, link_id))

    async def link_records_async(
        self, source_id: str, target_id: str, link_type: LinkType | str, *, metadata: Mapping[str, Any] | None = None,
        link_id: str | None = None,
    ) -> Link:
        """Async ``link_records``."""
        return await run_async(links.link_op(self.context(), source_id, target_id, link_type, metadata, link_id))

    def update_record_link(
        self, link_id: str, *, link_type: LinkType | str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED
    ) -> Link:
        """Change a link's type and/or metadata; target status follows the lifecycle rules."""
        return run_sync(links.update_link_op(self.context(), link_id, link_type, metadata))

    async def update_record_link_async(
        self, link_id: str, *, link_type: LinkType | str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED
    ) -> Link:
        """Async ``update_record_link``."""
        return await run_async(links.update_link_op(self.context(), link_id, link_type, metadata))

    def delete_record_link(self, link_id: str) -> int:
        """Delete a link; a lifecycle link's target becomes valid again unless another lifecycle
        link still targets it. Returns 1, or 0 when there is no such link."""
        return run_sync(links.delete_link_op(self.context(), link_id))

    async def delete_record_link_async(self, link_id: str) -> int:
        """Async ``delete_record_link``."""
        return await run_async(links.delete_link_op(self.context(), link_id))

    def list_record_links(self, record_id: str | None = None) -> list[Link]:
        """Links touching ``record_id`` (either end), or every link."""
        return run_sync(links.list_links_op(self.context(), record_id))

    async def list_record_links_async(self, record_id: str | None = None) -> list[Link]:
        """Async ``list_record_links``."""
        return await run_async(links.list_links_op(self.context(), record_id))

    # ---- search -------------------------------------------------------------------------------
    def search(self, query: str, *, user_id: str | None, exact_user_match: bool = True, **options: Any) -> list[SearchResult]:
        """Search one user's records (``user_id`` is required: scope is a hard boundary).

        Options: ``agent_id``, ``thread_id``, ``exact_agent_match``, ``exact_thread_match``,
        ``max_results``, ``record_types``, ``metadata_filter``, ``num_hops``,
        ``max_linked_results``, ``include_invalid_results``, ``token_budget``,
        ``soft_token_budget``, ``strategy`` (vector | keyword | hybrid; default hybrid where the store
        declares keyword search, else vector), ``rerankers``.
        """
        ctx = self.context()
        q = build_search(ctx, query, {"user_id": user_id, "exact_user_match": exact_user_match, **options})
        return run_sync(search_op(ctx.store, ctx.embedder, q))

    async def search_async(self, query: str, *, user_id: str | None, exact_user_match: bool = True, **options: Any) -> list[SearchResult]:
        """Async ``search``."""
        ctx = self.context()
        q = build_search(ctx, query, {"user_id": user_id, "exact_user_match": exact_user_match, **options})
        return await run_async(search_op(ctx.store, ctx.embedder, q))

    # ---- maintenance ----------------------------------------------------------------------------
    def purge_expired(self) -> int:
        """Delete expired records for good (they are already invisible); returns how many."""
        return run_sync(retention.purge_op(self.context()))

    async def purge_expired_async(self) -> int:
        """Async ``purge_expired``."""
        return await run_async(retention.purge_op(self.context()))

    def wait_for_memory_extraction(self, timeout: float | None = 300.0) -> bool:
        """Block until background extraction is done (True) or ``timeout`` passes (False);
        re-raises a background failure as ``ModelError``."""
        return self.background.wait(timeout)

    async def wait_for_memory_extraction_async(self, timeout: float | None = 300.0) -> bool:
        """Async ``wait_for_memory_extraction``."""
        return await asyncio.to_thread(self.wait_for_memory_extraction, timeout)
