"""``AgentMemory``: the client. Threads, profiles, memories, links, search, TTL, cascades.

Every operation is written once as an effect generator (``_*_op``) and exposed as a sync
method and an ``*_async`` twin (see ``effects``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from .config import MemoryExtractionConfig, MemoryRetentionConfig, TimeToLiveAnchor
from .effects import Call, Op, run_async, run_sync
from .embedders import Embedder
from .embedders.base import as_embedder, embed_op
from .errors import Conflict, InvalidArgument, NotFound
from .filters import validate_metadata_filter
from .ids import new_id, profile_record_id, thread_record_id
from .llm.base import as_llm
from .plugins import PluginManager, get_plugin_manager
from .records import (
    MEMORY_TYPES,
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
from .search import Reranker, build_query, parse_record_types, scope_value, search_op, statuses_for
from .spi import ANY, MemoryStore, NewRecord, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch
from .tokens import TokenCounter, resolve_token_counter
from .validation import (
    RESERVED_METADATA_KEY,
    validate_content,
    validate_id,
    validate_link_type,
    validate_memory_type,
    validate_metadata,
    validate_optional_id,
    validate_positive_int,
    validate_status,
    validate_ttl_days,
)

if TYPE_CHECKING:
    from .thread import Thread

log = logging.getLogger(__name__)


class _Omitted:
    """Sentinel for "argument not given" where None has a meaning of its own."""

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Any = _Omitted()
LIST_LIMIT_MAX = 10_000


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(timezone.utc)


def parse_timestamp(argument: str, value: Any) -> datetime | None:
    """A datetime or ISO-8601 string (naive means UTC), or None."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgument(argument, f"not an ISO-8601 timestamp: {value!r}") from None
    if not isinstance(value, datetime):
        raise InvalidArgument(argument, f"must be a datetime or ISO string, got {type(value).__name__}")
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def user_metadata(record: Record) -> dict[str, Any]:
    """A record's metadata without the reserved ``$agent_memory`` key."""
    return {k: v for k, v in record.metadata.items() if k != RESERVED_METADATA_KEY}


def internal_metadata(record: Record) -> dict[str, Any]:
    """The reserved ``$agent_memory`` part of a record's metadata."""
    value = record.metadata.get(RESERVED_METADATA_KEY) or {}
    return dict(value) if isinstance(value, Mapping) else {}


def _list_scope(argument: str, value: Any) -> Any:
    """List APIs: an omitted scope key is unconstrained; a given one (even None) is exact."""
    if value is OMITTED:
        return ANY
    return validate_optional_id(argument, value)


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
        self.embedder: Embedder = as_embedder(embedder) if embedder is not None else default_embedder()
        self.llm = as_llm(llm)  # a LangChain chat model / Embeddings is wrapped (agentmemory.integrations.langchain)
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
        self.token_counter: TokenCounter = resolve_token_counter(token_counter, self.llm, self.plugins)
        """What every budget counts in (search, card, summary, extraction prompts): a registered
        name ("estimate", "cl100k_base", "o200k_base"), a ``TokenCounter``, or by default the
        LangChain model's own ``get_num_tokens`` when ``llm`` is one, else the estimate."""
        self._worker: Any = None
        self._worker_lock = threading.Lock()
        self.store.open(dimension=self.embedder.dimension, schema_policy=policy)

    # ---- lifecycle ----------------------------------------------------------------------------
    def close(self, timeout: float | None = 300.0) -> None:
        """Finish background extraction (up to ``timeout`` seconds) and close the store."""
        worker, self._worker = self._worker, None
        try:
            if worker is not None:
                worker.stop(timeout)
        finally:
            self.store.close()

    async def close_async(self, timeout: float | None = 300.0) -> None:
        """Async ``close``."""
        await asyncio.to_thread(self.close, timeout)

    def card_renderer_object(self) -> Any:
        """The configured card renderer (a registered name is built through the plugins)."""
        if isinstance(self.card_renderer, str):
            return self.plugins.load("card_renderers", self.card_renderer)()
        return self.card_renderer

    def extraction_worker(self) -> Any:
        """The background extraction worker (started on first use)."""
        from .extraction.pipeline import ExtractionWorker

        with self._worker_lock:
            if self._worker is None:
                self._worker = ExtractionWorker(self)
            return self._worker

    def _after_messages_op(self, thread: Thread, added: list[Record], call: MemoryExtractionConfig | None = None) -> Op[None]:
        from .extraction.pipeline import after_messages_op

        yield from after_messages_op(self, thread, added, call)

    def __enter__(self) -> AgentMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The client's clock (injectable for tests)."""
        return self.clock()

    # ---- helpers shared by operations ----------------------------------------------------------
    def expires_at(self, ttl_days: Any, created_at: datetime, timestamp: datetime) -> datetime | None:
        """TTL rules: omitted → store default (else the maximum); None → store maximum or never;
        every TTL is clamped to the maximum. A TTL that ends past the last representable instant
        (``datetime.max``, year 9999; e.g. ``ttl_days=1e7``, ``1e308`` or ``10**400`` without a
        maximum) means never: ``None``, not an ``OverflowError``."""
        retention = self.retention
        if ttl_days is OMITTED:
            days = retention.default_ttl_days if retention.default_ttl_days is not None else retention.max_ttl_days
        else:
            days = validate_ttl_days("ttl_days", ttl_days)
            if days is None:
                days = retention.max_ttl_days
        if days is not None and retention.max_ttl_days is not None and days > retention.max_ttl_days:
            log.warning("ttl_days=%s exceeds max_ttl_days=%s; clamped", days, retention.max_ttl_days)
            days = retention.max_ttl_days
        if days is None:
            return None
        anchor = timestamp if retention.ttl_anchor is TimeToLiveAnchor.TIMESTAMP else created_at
        try:
            return anchor + timedelta(days=days)
        except OverflowError:  # past year 9999 (or beyond any timedelta): never expires
            return None

    def _alive(self, **kwargs: Any) -> RecordFilter:
        return RecordFilter(alive_at=self.now(), **kwargs)

    def _get_op(self, record_id: str, types: frozenset[RecordType], kind: str) -> Op[Record]:
        rows: list[Record] = yield Call(
            self.store, "query", (self._alive(record_ids=(record_id,), record_types=types),)
        )
        if not rows:
            raise NotFound(kind, record_id)
        return rows[0]

    def _thread_op(self, thread_id: str) -> Op[Record]:
        validate_id("thread_id", thread_id)
        rows: list[Record] = yield Call(
            self.store,
            "query",
            (RecordFilter(record_ids=(thread_record_id(thread_id),), record_types=frozenset({RecordType.THREAD})),),
        )
        if not rows:
            raise NotFound("thread", thread_id)
        return rows[0]

    def _embed_op(self, texts: Sequence[str]) -> Op[Any]:
        return (yield from embed_op(self.embedder, texts))

    def _delete_op(self, record_ids: Sequence[str], extra: WriteBatch | None = None) -> Op[int]:
        """Delete records (their links go too) and restore targets that lose their last
        lifecycle link, in one batch."""
        ids = sorted(set(record_ids))
        if not ids:
            return 0
        links: list[Link] = yield Call(self.store, "links", (), {"record_ids": ids})
        removed = {link.link_id for link in links}
        patches = yield from self._restore_patches_op(
            [lk for lk in links if lk.link_type.is_lifecycle and lk.target_id not in ids], removed
        )
        batch = WriteBatch(patch=patches + list(extra.patch if extra else ()), delete=ids)
        yield Call(self.store, "write", (batch,))
        return len(ids)

    def _restore_patches_op(self, dropped: Sequence[Link], removed_link_ids: set[str]) -> Op[list[RecordPatch]]:
        """Patches that make targets of ``dropped`` lifecycle links valid again unless another
        lifecycle link (not being removed) still targets them."""
        targets = sorted({lk.target_id for lk in dropped if lk.link_type.is_lifecycle})
        if not targets:
            return []
        remaining: list[Link] = yield Call(self.store, "links", (), {"record_ids": targets})
        still_invalid = {
            lk.target_id
            for lk in remaining
            if lk.link_type.is_lifecycle and lk.link_id not in removed_link_ids
        }
        records: list[Record] = yield Call(self.store, "query", (RecordFilter(record_ids=tuple(targets)),))
        patches = []
        for rec in records:
            if rec.record_id in still_invalid:
                continue
            meta = dict(rec.metadata)
            internal = internal_metadata(rec)
            internal.pop("invalidation_reason", None)
            if internal:
                meta[RESERVED_METADATA_KEY] = internal
            else:
                meta.pop(RESERVED_METADATA_KEY, None)
            patches.append(RecordPatch(rec.record_id, status=RecordStatus.VALID, metadata=meta))
        return patches

    def _invalidate_patch(self, target: Record, link: Link) -> RecordPatch:
        meta = dict(target.metadata)
        internal = internal_metadata(target)
        internal["invalidation_reason"] = f"{link.link_type.opposite} {link.source_id}"
        meta[RESERVED_METADATA_KEY] = internal
        return RecordPatch(target.record_id, status=RecordStatus.INVALID, metadata=meta)

    # ---- threads ----------------------------------------------------------------------------
    def _create_thread_op(
        self,
        thread_id: str | None,
        user_id: str | None,
        agent_id: str | None,
        metadata: Any,
        memory_extraction_config: Any,
        config_fields: dict[str, Any],
    ) -> Op[Record]:
        tid = new_id() if thread_id is None else validate_id("thread_id", thread_id)
        validate_optional_id("user_id", user_id)
        validate_optional_id("agent_id", agent_id)
        meta = validate_metadata("metadata", metadata)
        config = _merge_config(memory_extraction_config, config_fields)
        now = self.now()
        record = Record(
            record_id=thread_record_id(tid),
            record_type=RecordType.THREAD,
            content="",
            user_id=user_id,
            agent_id=agent_id,
            thread_id=tid,
            timestamp=now,
            created_at=now,
            metadata={**meta, RESERVED_METADATA_KEY: {"config": config.set_fields()}},
        )
        try:
            added = yield Call(self.store, "write", (WriteBatch(add=[NewRecord(record)]),))
        except Conflict:
            raise Conflict(f"thread {tid!r} already exists") from None
        return added[0]

    def create_thread(
        self,
        thread_id: str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        llm: Any = None,
        **config_fields: Any,
    ) -> Thread:
        """Create a thread; extraction settings (config object and/or fields) are persisted."""
        concurrency = config_fields.pop("context_card_type_search_concurrency", None)
        rec = run_sync(self._create_thread_op(thread_id, user_id, agent_id, metadata, memory_extraction_config, config_fields))
        return self._handle(rec, llm, None, concurrency)

    async def create_thread_async(
        self,
        thread_id: str | None = None,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        llm: Any = None,
        **config_fields: Any,
    ) -> Thread:
        """Async ``create_thread``."""
        concurrency = config_fields.pop("context_card_type_search_concurrency", None)
        rec = await run_async(self._create_thread_op(thread_id, user_id, agent_id, metadata, memory_extraction_config, config_fields))
        return self._handle(rec, llm, None, concurrency)

    def _handle(self, rec: Record, llm: Any, overrides: MemoryExtractionConfig | None, concurrency: Any = None) -> Thread:
        from .thread import Thread

        return Thread(self, rec, llm=as_llm(llm), overrides=overrides, context_card_type_search_concurrency=concurrency)

    def get_thread(
        self,
        thread_id: str,
        *,
        llm: Any = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        **live_overrides: Any,
    ) -> Thread:
        """A handle on an existing thread; ``memory_extraction_config`` and config fields given
        here apply to this handle only and are not persisted."""
        concurrency = live_overrides.pop("context_card_type_search_concurrency", None)
        overrides = _merge_config(memory_extraction_config, live_overrides)
        return self._handle(run_sync(self._thread_op(thread_id)), llm, overrides, concurrency)

    async def get_thread_async(
        self,
        thread_id: str,
        *,
        llm: Any = None,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = None,
        **live_overrides: Any,
    ) -> Thread:
        """Async ``get_thread``."""
        concurrency = live_overrides.pop("context_card_type_search_concurrency", None)
        overrides = _merge_config(memory_extraction_config, live_overrides)
        return self._handle(await run_async(self._thread_op(thread_id)), llm, overrides, concurrency)

    def _update_thread_op(self, thread_id: str, metadata: Any, config: Any, fields: dict[str, Any]) -> Op[ThreadInfo]:
        rec = yield from self._thread_op(thread_id)
        internal = internal_metadata(rec)
        current = MemoryExtractionConfig.from_any(internal.get("config") or {})
        if config is None:
            current = MemoryExtractionConfig()
        elif config is not OMITTED:
            given = MemoryExtractionConfig.from_any(config)
            # fields set explicitly on the given config replace (None clears); others stay
            current = current.model_copy(update={f: getattr(given, f) for f in given.model_fields_set})
        if fields:
            unknown = sorted(set(fields) - set(MemoryExtractionConfig.model_fields))
            if unknown:
                raise InvalidArgument(unknown[0], "not a thread setting (MemoryExtractionConfig field)")
            data = current.model_dump()
            data.update(fields)  # None clears the thread value so the client's applies
            current = MemoryExtractionConfig.from_any(data, argument="")
        meta = user_metadata(rec) if metadata is OMITTED else validate_metadata("metadata", metadata)
        internal["config"] = current.set_fields()
        patch = RecordPatch(rec.record_id, metadata={**meta, RESERVED_METADATA_KEY: internal})
        yield Call(self.store, "write", (WriteBatch(patch=[patch]),))
        updated = yield from self._thread_op(thread_id)
        return thread_info(updated)

    def update_thread(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = OMITTED,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = OMITTED,
        **config_fields: Any,
    ) -> ThreadInfo:
        """Persist new metadata and/or settings; a field passed as None clears the thread's value
        (the client's value then applies); ``memory_extraction_config=None`` clears them all."""
        return run_sync(self._update_thread_op(thread_id, metadata, memory_extraction_config, config_fields))

    async def update_thread_async(
        self,
        thread_id: str,
        *,
        metadata: Mapping[str, Any] | None = OMITTED,
        memory_extraction_config: MemoryExtractionConfig | Mapping[str, Any] | None = OMITTED,
        **config_fields: Any,
    ) -> ThreadInfo:
        """Async ``update_thread``."""
        return await run_async(self._update_thread_op(thread_id, metadata, memory_extraction_config, config_fields))

    def _delete_thread_op(self, thread_id: str) -> Op[int]:
        validate_id("thread_id", thread_id)
        rows: list[Record] = yield Call(self.store, "query", (RecordFilter(thread_id=thread_id),))
        count = yield from self._delete_op([r.record_id for r in rows])
        return count

    def delete_thread(self, thread_id: str) -> int:
        """Delete a thread with its messages, memories, summary and their links; returns how many
        records went (0 when the thread does not exist)."""
        return run_sync(self._delete_thread_op(thread_id))

    async def delete_thread_async(self, thread_id: str) -> int:
        """Async ``delete_thread``."""
        return await run_async(self._delete_thread_op(thread_id))

    def _list_threads_op(self, user_id: Any, agent_id: Any, limit: int, offset: int) -> Op[list[ThreadInfo]]:
        validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
        validate_positive_int("offset", offset, minimum=0)
        flt = RecordFilter(
            record_types=frozenset({RecordType.THREAD}),
            user_id=_list_scope("user_id", user_id),
            agent_id=_list_scope("agent_id", agent_id),
        )
        rows: list[Record] = yield Call(self.store, "query", (flt,), {"limit": limit, "offset": offset})
        return [thread_info(r) for r in rows]

    def list_threads(self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, limit: int = 100, offset: int = 0) -> list[ThreadInfo]:
        """Threads in creation order, optionally of one user and/or agent."""
        return run_sync(self._list_threads_op(user_id, agent_id, limit, offset))

    async def list_threads_async(self, *, user_id: str | None = OMITTED, agent_id: str | None = OMITTED, limit: int = 100, offset: int = 0) -> list[ThreadInfo]:
        """Async ``list_threads``."""
        return await run_async(self._list_threads_op(user_id, agent_id, limit, offset))

    # ---- profiles ---------------------------------------------------------------------------
    def _add_profile_op(self, actor_type: RecordType, actor_id: str, information: str, metadata: Any) -> Op[str]:
        validate_id(f"{actor_type.value}_id", actor_id)
        validate_content("information", information)
        meta = validate_metadata("metadata", metadata)
        vectors = yield from self._embed_op([information])
        now = self.now()
        record = Record(
            record_id=profile_record_id(actor_type, actor_id),
            record_type=actor_type,
            content=information,
            user_id=actor_id if actor_type is RecordType.USER else None,
            agent_id=actor_id if actor_type is RecordType.AGENT else None,
            timestamp=now,
            created_at=now,
            metadata=meta,
        )
        try:
            yield Call(self.store, "write", (WriteBatch(add=[NewRecord(record, vectors[0])]),))
        except Conflict:
            raise Conflict(f"{actor_type.value} {actor_id!r} already exists") from None
        return actor_id

    def add_user(self, user_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a searchable profile of a user."""
        return run_sync(self._add_profile_op(RecordType.USER, user_id, information, metadata))

    async def add_user_async(self, user_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Async ``add_user``."""
        return await run_async(self._add_profile_op(RecordType.USER, user_id, information, metadata))

    def add_agent(self, agent_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Store a searchable profile of an agent."""
        return run_sync(self._add_profile_op(RecordType.AGENT, agent_id, information, metadata))

    async def add_agent_async(self, agent_id: str, information: str, metadata: Mapping[str, Any] | None = None) -> str:
        """Async ``add_agent``."""
        return await run_async(self._add_profile_op(RecordType.AGENT, agent_id, information, metadata))

    def _list_profiles_op(self, actor_type: RecordType, limit: int, offset: int) -> Op[list[Profile]]:
        validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
        validate_positive_int("offset", offset, minimum=0)
        rows: list[Record] = yield Call(
            self.store, "query", (RecordFilter(record_types=frozenset({actor_type})),), {"limit": limit, "offset": offset}
        )
        return [profile_of(r) for r in rows]

    def list_users(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """User profiles in creation order."""
        return run_sync(self._list_profiles_op(RecordType.USER, limit, offset))

    async def list_users_async(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Async ``list_users``."""
        return await run_async(self._list_profiles_op(RecordType.USER, limit, offset))

    def list_agents(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Agent profiles in creation order."""
        return run_sync(self._list_profiles_op(RecordType.AGENT, limit, offset))

    async def list_agents_async(self, *, limit: int = 100, offset: int = 0) -> list[Profile]:
        """Async ``list_agents``."""
        return await run_async(self._list_profiles_op(RecordType.AGENT, limit, offset))

    def _delete_actor_op(self, actor_type: RecordType, actor_id: str, cascade: bool) -> Op[int]:
        validate_id(f"{actor_type.value}_id", actor_id)
        if not isinstance(cascade, bool):
            raise InvalidArgument("cascade", f"must be a bool, got {cascade!r}")
        ids = [profile_record_id(actor_type, actor_id)]
        if cascade:
            by_actor = RecordFilter(user_id=actor_id) if actor_type is RecordType.USER else RecordFilter(agent_id=actor_id)
            rows: list[Record] = yield Call(self.store, "query", (by_actor,))
            ids += [r.record_id for r in rows]
            threads = {r.thread_id for r in rows if r.record_type is RecordType.THREAD and r.thread_id}
            for tid in sorted(threads):  # records of the actor's threads that carry no actor id
                in_thread: list[Record] = yield Call(self.store, "query", (RecordFilter(thread_id=tid),))
                ids += [r.record_id for r in in_thread]
        existing: list[Record] = yield Call(self.store, "query", (RecordFilter(record_ids=tuple(sorted(set(ids)))),))
        count = yield from self._delete_op([r.record_id for r in existing])
        return count

    def delete_user(self, user_id: str, *, cascade: bool = True) -> int:
        """Delete a user's profile and, with ``cascade``, every record of that user (threads,
        messages, memories, summaries, links): nothing of it stays readable or searchable."""
        return run_sync(self._delete_actor_op(RecordType.USER, user_id, cascade))

    async def delete_user_async(self, user_id: str, *, cascade: bool = True) -> int:
        """Async ``delete_user``."""
        return await run_async(self._delete_actor_op(RecordType.USER, user_id, cascade))

    def delete_agent(self, agent_id: str, *, cascade: bool = True) -> int:
        """Delete an agent's profile and, with ``cascade``, every record of that agent."""
        return run_sync(self._delete_actor_op(RecordType.AGENT, agent_id, cascade))

    async def delete_agent_async(self, agent_id: str, *, cascade: bool = True) -> int:
        """Async ``delete_agent``."""
        return await run_async(self._delete_actor_op(RecordType.AGENT, agent_id, cascade))

    # ---- memories -----------------------------------------------------------------------------
    def _add_memory_op(
        self,
        content: Any,
        memory_type: Any,
        user_id: Any,
        agent_id: Any,
        thread_id: Any,
        memory_id: Any,
        metadata: Any,
        timestamp: Any,
        ttl_days: Any,
        status: Any,
        memory_id_to_link: Any,
        link_type: Any,
    ) -> Op[str]:
        validate_content("content", content)
        rtype = validate_memory_type("memory_type", memory_type)
        validate_optional_id("user_id", user_id)
        validate_optional_id("agent_id", agent_id)
        rid = new_id() if memory_id is None else validate_id("memory_id", memory_id)
        meta = validate_metadata("metadata", metadata)
        ts = parse_timestamp("timestamp", timestamp)
        record_status = validate_status("status", status)
        if (memory_id_to_link is None) != (link_type is None):
            raise InvalidArgument("link_type", "memory_id_to_link and link_type are given together")
        if thread_id is not None:
            thread = yield from self._thread_op(thread_id)
            for dim, given in (("user_id", user_id), ("agent_id", agent_id)):
                own = getattr(thread, dim)
                if given is not None and given != own:
                    raise InvalidArgument(dim, f"{given!r} differs from thread {thread_id!r}'s {own!r}")
            user_id = thread.user_id if user_id is None else user_id
            agent_id = thread.agent_id if agent_id is None else agent_id
        now = self.now()
        record = Record(
            record_id=rid,
            record_type=rtype,
            content=content,
            user_id=user_id,
            agent_id=agent_id,
            thread_id=thread_id,
            timestamp=ts or now,
            created_at=now,
            expires_at=self.expires_at(ttl_days, now, ts or now),
            status=record_status,
            metadata=meta,
        )
        links: list[Link] = []
        patches: list[RecordPatch] = []
        if memory_id_to_link is not None:
            validate_id("memory_id_to_link", memory_id_to_link)
            ltype = validate_link_type("link_type", link_type)
            target = yield from self._get_op(memory_id_to_link, MEMORY_TYPES, "memory")
            link = Link(link_id=new_id(), source_id=rid, target_id=target.record_id, link_type=ltype, created_at=now)
            links.append(link)
            if ltype.is_lifecycle:
                patches.append(self._invalidate_patch(target, link))
        vectors = yield from self._embed_op([content])
        batch = WriteBatch(add=[NewRecord(record, vectors[0])], patch=patches, add_links=links)
        yield Call(self.store, "write", (batch,))
        return rid

    def add_memory(
        self,
        content: str,
        *,
        memory_type: RecordType | str = RecordType.MEMORY,
        user_id: str | None = None,
        agent_id: str | None = None,
        thread_id: str | None = None,
        memory_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timestamp: datetime | str | None = None,
        ttl_days: float | None = OMITTED,
        status: RecordStatus | str = RecordStatus.VALID,
        memory_id_to_link: str | None = None,
        link_type: LinkType | str | None = None,
    ) -> str:
        """Store a memory-like record (memory, fact, guideline, preference); optionally link it to
        ``memory_id_to_link`` (a lifecycle link invalidates that memory). Returns its id.
        ``ttl_days``: omitted = the store default; None = the store maximum or never; any
        positive number, clamped to the store maximum (one ending past year 9999 = never)."""
        return run_sync(self._add_memory_op(content, memory_type, user_id, agent_id, thread_id, memory_id, metadata, timestamp, ttl_days, status, memory_id_to_link, link_type))

    async def add_memory_async(
        self,
        content: str,
        *,
        memory_type: RecordType | str = RecordType.MEMORY,
        user_id: str | None = None,
        agent_id: str | None = None,
        thread_id: str | None = None,
        memory_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        timestamp: datetime | str | None = None,
        ttl_days: float | None = OMITTED,
        status: RecordStatus | str = RecordStatus.VALID,
        memory_id_to_link: str | None = None,
        link_type: LinkType | str | None = None,
    ) -> str:
        """Async ``add_memory``."""
        return await run_async(self._add_memory_op(content, memory_type, user_id, agent_id, thread_id, memory_id, metadata, timestamp, ttl_days, status, memory_id_to_link, link_type))

    def _update_record_op(
        self,
        record_id: str,
        types: frozenset[RecordType],
        kind: str,
        content: Any,
        metadata: Any,
        status: Any,
        thread_id: str | None = None,
        ttl_days: Any = OMITTED,
    ) -> Op[Record]:
        validate_id(f"{kind}_id", record_id)
        rec = yield from self._get_op(record_id, types, kind)
        if thread_id is not None and rec.thread_id != thread_id:
            raise NotFound(kind, record_id)
        patch: dict[str, Any] = {}
        if content is not OMITTED:
            validate_content("content", content)
            vectors = yield from self._embed_op([content])
            patch.update(content=content, vector=vectors[0])
        if metadata is not OMITTED:
            meta = validate_metadata("metadata", metadata)
            internal = internal_metadata(rec)
            patch["metadata"] = {**meta, RESERVED_METADATA_KEY: internal} if internal else meta
        if status is not OMITTED:
            patch["status"] = validate_status("status", status)
        if ttl_days is not OMITTED:  # a new TTL counts from now (or from the record's timestamp)
            patch["expires_at"] = self.expires_at(ttl_days, self.now(), rec.timestamp)
        if patch:
            yield Call(self.store, "write", (WriteBatch(patch=[RecordPatch(record_id, **patch)]),))
        updated = yield from self._get_op(record_id, types, kind)
        return updated

    def update_memory(
        self,
        memory_id: str,
        *,
        content: str = OMITTED,
        metadata: Mapping[str, Any] | None = OMITTED,
        status: RecordStatus | str = OMITTED,
        ttl_days: float | None = OMITTED,
    ) -> Record:
        """Change a memory's content (re-embedded), metadata (replaced), status and/or TTL
        (``ttl_days`` counts from now; None = the store maximum or never; one ending past year
        9999 = never)."""
        return run_sync(self._update_record_op(memory_id, MEMORY_TYPES, "memory", content, metadata, status, ttl_days=ttl_days))

    async def update_memory_async(
        self,
        memory_id: str,
        *,
        content: str = OMITTED,
        metadata: Mapping[str, Any] | None = OMITTED,
        status: RecordStatus | str = OMITTED,
        ttl_days: float | None = OMITTED,
    ) -> Record:
        """Async ``update_memory``."""
        return await run_async(self._update_record_op(memory_id, MEMORY_TYPES, "memory", content, metadata, status, ttl_days=ttl_days))

    def _delete_typed_op(
        self, record_id: str, types: frozenset[RecordType], thread_id: str | None = None, argument: str = "memory_id"
    ) -> Op[int]:
        validate_id(argument, record_id)
        flt = RecordFilter(record_ids=(record_id,), record_types=types, thread_id=ANY if thread_id is None else thread_id)
        rows: list[Record] = yield Call(self.store, "query", (flt,))
        count = yield from self._delete_op([r.record_id for r in rows])
        return count

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record and its links (restoring memories it had invalidated);
        returns 1, or 0 when there is no such memory."""
        return run_sync(self._delete_typed_op(memory_id, MEMORY_TYPES))

    async def delete_memory_async(self, memory_id: str) -> int:
        """Async ``delete_memory``."""
        return await run_async(self._delete_typed_op(memory_id, MEMORY_TYPES))

    def get_memory(self, memory_id: str) -> Record:
        """One memory-like record; ``NotFound`` when missing or expired."""
        validate_id("memory_id", memory_id)
        return run_sync(self._get_op(memory_id, MEMORY_TYPES, "memory"))

    async def get_memory_async(self, memory_id: str) -> Record:
        """Async ``get_memory``."""
        validate_id("memory_id", memory_id)
        return await run_async(self._get_op(memory_id, MEMORY_TYPES, "memory"))

    def _list_op(
        self,
        types: frozenset[RecordType],
        user_id: Any,
        agent_id: Any,
        thread_id: Any,
        metadata_filter: Any,
        include_invalid: Any,
        limit: Any,
        offset: Any,
    ) -> Op[list[Record]]:
        validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
        validate_positive_int("offset", offset, minimum=0)
        if metadata_filter is not None:
            validate_metadata_filter(metadata_filter)
        flt = self._alive(
            record_types=types,
            user_id=_list_scope("user_id", user_id),
            agent_id=_list_scope("agent_id", agent_id),
            thread_id=_list_scope("thread_id", thread_id),
            metadata_filter=metadata_filter,
            statuses=statuses_for(include_invalid, "include_invalid"),
        )
        rows: list[Record] = yield Call(self.store, "query", (flt,), {"limit": limit, "offset": offset})
        return rows

    def list_memories(
        self,
        *,
        user_id: str | None = OMITTED,
        agent_id: str | None = OMITTED,
        thread_id: str | None = OMITTED,
        memory_types: Sequence[RecordType | str] | None = None,
        metadata_filter: Mapping[str, Any] | None = None,
        include_invalid: bool = True,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Record]:
        """Memory-like records in insertion order. A scope key given (even None) filters exactly."""
        types = _memory_types(memory_types)
        return run_sync(self._list_op(types, user_id, agent_id, thread_id, metadata_filter, include_invalid, limit, offset))

    async def list_memories_async(
        self,
        *,
        user_id: str | None = OMITTED,
        agent_id: str | None = OMITTED,
        thread_id: str | None = OMITTED,
        memory_types: Sequence[RecordType | str] | None = None,
        metadata_filter: Mapping[str, Any] | None = None,
        include_invalid: bool = True,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Record]:
        """Async ``list_memories``."""
        types = _memory_types(memory_types)
        return await run_async(self._list_op(types, user_id, agent_id, thread_id, metadata_filter, include_invalid, limit, offset))

    def list_messages(
        self,
        *,
        user_id: str | None = OMITTED,
        agent_id: str | None = OMITTED,
        thread_id: str | None = OMITTED,
        metadata_filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Record]:
        """Messages in order across threads. A scope key given (even None) filters exactly."""
        types = frozenset({RecordType.MESSAGE})
        return run_sync(self._list_op(types, user_id, agent_id, thread_id, metadata_filter, True, limit, offset))

    async def list_messages_async(
        self,
        *,
        user_id: str | None = OMITTED,
        agent_id: str | None = OMITTED,
        thread_id: str | None = OMITTED,
        metadata_filter: Mapping[str, Any] | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Record]:
        """Async ``list_messages``."""
        types = frozenset({RecordType.MESSAGE})
        return await run_async(self._list_op(types, user_id, agent_id, thread_id, metadata_filter, True, limit, offset))

    # ---- links ------------------------------------------------------------------------------
    def _link_op(self, source_id: Any, target_id: Any, link_type: Any, metadata: Any, link_id: Any) -> Op[Link]:
        validate_id("source_id", source_id)
        validate_id("target_id", target_id)
        ltype = validate_link_type("link_type", link_type)
        meta = validate_metadata("metadata", metadata)
        lid = new_id() if link_id is None else validate_id("link_id", link_id)
        if source_id == target_id:
            raise InvalidArgument("target_id", "a record cannot be linked to itself")
        yield from self._get_op(source_id, MEMORY_TYPES, "memory")
        target = yield from self._get_op(target_id, MEMORY_TYPES, "memory")
        link = Link(link_id=lid, source_id=source_id, target_id=target_id, link_type=ltype, created_at=self.now(), metadata=meta)
        patches = [self._invalidate_patch(target, link)] if ltype.is_lifecycle else []
        yield Call(self.store, "write", (WriteBatch(patch=patches, add_links=[link]),))
        return link

    def link_records(
        self,
        source_id: str,
        target_id: str,
        link_type: LinkType | str,
        *,
        metadata: Mapping[str, Any] | None = None,
        link_id: str | None = None,
    ) -> Link:
        """Link two memory-like records; supersedes/refines/duplicates invalidate the target."""
        return run_sync(self._link_op(source_id, target_id, link_type, metadata, link_id))

    async def link_records_async(
        self,
        source_id: str,
        target_id: str,
        link_type: LinkType | str,
        *,
        metadata: Mapping[str, Any] | None = None,
        link_id: str | None = None,
    ) -> Link:
        """Async ``link_records``."""
        return await run_async(self._link_op(source_id, target_id, link_type, metadata, link_id))

    def _get_link_op(self, link_id: str) -> Op[Link]:
        validate_id("link_id", link_id)
        links: list[Link] = yield Call(self.store, "links", (), {"link_ids": [link_id]})
        if not links:
            raise NotFound("link", link_id)
        return links[0]

    def _update_link_op(self, link_id: str, link_type: Any, metadata: Any) -> Op[Link]:
        old = yield from self._get_link_op(link_id)
        ltype = old.link_type if link_type is OMITTED else validate_link_type("link_type", link_type)
        meta = old.metadata if metadata is OMITTED else validate_metadata("metadata", metadata)
        new = old.model_copy(update={"link_type": ltype, "metadata": meta})
        patches: list[RecordPatch] = []
        if old.link_type.is_lifecycle and not ltype.is_lifecycle:
            patches = yield from self._restore_patches_op([old], {old.link_id})
        elif ltype.is_lifecycle and ltype is not old.link_type:
            target = yield from self._get_op(old.target_id, MEMORY_TYPES, "memory")
            patches = [self._invalidate_patch(target, new)]
        batch = WriteBatch(patch=patches, delete_links=[link_id], add_links=[new])
        yield Call(self.store, "write", (batch,))
        return new

    def update_record_link(
        self, link_id: str, *, link_type: LinkType | str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED
    ) -> Link:
        """Change a link's type and/or metadata; target status follows the lifecycle rules."""
        return run_sync(self._update_link_op(link_id, link_type, metadata))

    async def update_record_link_async(
        self, link_id: str, *, link_type: LinkType | str = OMITTED, metadata: Mapping[str, Any] | None = OMITTED
    ) -> Link:
        """Async ``update_record_link``."""
        return await run_async(self._update_link_op(link_id, link_type, metadata))

    def _delete_link_op(self, link_id: str) -> Op[int]:
        validate_id("link_id", link_id)
        links: list[Link] = yield Call(self.store, "links", (), {"link_ids": [link_id]})
        if not links:
            return 0
        patches = yield from self._restore_patches_op(links, {link_id})
        yield Call(self.store, "write", (WriteBatch(patch=patches, delete_links=[link_id]),))
        return 1

    def delete_record_link(self, link_id: str) -> int:
        """Delete a link; a lifecycle link's target becomes valid again unless another lifecycle
        link still targets it. Returns 1, or 0 when there is no such link."""
        return run_sync(self._delete_link_op(link_id))

    async def delete_record_link_async(self, link_id: str) -> int:
        """Async ``delete_record_link``."""
        return await run_async(self._delete_link_op(link_id))

    def _list_links_op(self, record_id: str | None) -> Op[list[Link]]:
        ids = None if record_id is None else [validate_id("record_id", record_id)]
        links: list[Link] = yield Call(self.store, "links", (), {"record_ids": ids})
        return links

    def list_record_links(self, record_id: str | None = None) -> list[Link]:
        """Links touching ``record_id`` (either end), or every link."""
        return run_sync(self._list_links_op(record_id))

    async def list_record_links_async(self, record_id: str | None = None) -> list[Link]:
        """Async ``list_record_links``."""
        return await run_async(self._list_links_op(record_id))

    # ---- search -------------------------------------------------------------------------------
    def build_search(
        self,
        query: Any,
        *,
        user_id: Any,
        agent_id: Any = None,
        thread_id: Any = None,
        exact_user_match: Any = True,
        exact_agent_match: Any = None,
        exact_thread_match: Any = None,
        max_results: Any = 10,
        record_types: Any = None,
        metadata_filter: Any = None,
        num_hops: Any = 0,
        max_linked_results: Any = 100,
        include_invalid_results: Any = True,
        token_budget: Any = None,
        soft_token_budget: Any = None,
        strategy: Any = None,
        rerankers: Sequence[Reranker] | None = None,
    ) -> Any:
        """Validate search arguments into a ``SearchQuery`` (shared by client and thread)."""
        if metadata_filter is not None:
            validate_metadata_filter(metadata_filter)
        flt = self._alive(
            record_types=parse_record_types(record_types),
            user_id=scope_value("user_id", user_id, exact_user_match),
            agent_id=scope_value("agent_id", agent_id, exact_agent_match),
            thread_id=scope_value("thread_id", thread_id, exact_thread_match),
            metadata_filter=metadata_filter,
            statuses=statuses_for(include_invalid_results),
        )
        return build_query(
            query,
            filter=flt,
            max_results=max_results,
            strategy=strategy,
            num_hops=num_hops,
            max_linked_results=max_linked_results,
            token_budget=token_budget,
            soft_token_budget=soft_token_budget,
            rerankers=self.rerankers if rerankers is None else rerankers,
            token_counter=self.token_counter,
        )

    def search(self, query: str, *, user_id: str | None, exact_user_match: bool = True, **options: Any) -> list[SearchResult]:
        """Search one user's records (``user_id`` is required: scope is a hard boundary).

        Options: ``agent_id``, ``thread_id``, ``exact_agent_match``, ``exact_thread_match``,
        ``max_results``, ``record_types``, ``metadata_filter``, ``num_hops``,
        ``max_linked_results``, ``include_invalid_results``, ``token_budget``,
        ``soft_token_budget``, ``strategy`` (vector | keyword | hybrid; default hybrid where the store
        declares keyword search, else vector), ``rerankers``.
        """
        q = self._client_search(query, user_id, exact_user_match, options)
        return run_sync(search_op(self.store, self.embedder, q))

    async def search_async(self, query: str, *, user_id: str | None, exact_user_match: bool = True, **options: Any) -> list[SearchResult]:
        """Async ``search``."""
        q = self._client_search(query, user_id, exact_user_match, options)
        return await run_async(search_op(self.store, self.embedder, q))

    def _client_search(self, query: Any, user_id: Any, exact_user_match: Any, options: dict[str, Any]) -> Any:
        if exact_user_match is not True:
            raise InvalidArgument("exact_user_match", "client search is always scoped to one user (must be True)")
        try:
            return self.build_search(query, user_id=user_id, exact_user_match=True, **options)
        except TypeError as exc:
            raise InvalidArgument("search options", str(exc)) from None

    # ---- maintenance ----------------------------------------------------------------------------
    def _purge_op(self) -> Op[int]:
        rows: list[Record] = yield Call(self.store, "query", (RecordFilter(expired_at=self.now()),))
        count = yield from self._delete_op([r.record_id for r in rows])
        return count

    def purge_expired(self) -> int:
        """Delete expired records for good (they are already invisible); returns how many."""
        return run_sync(self._purge_op())

    async def purge_expired_async(self) -> int:
        """Async ``purge_expired``."""
        return await run_async(self._purge_op())

    def wait_for_memory_extraction(self, timeout: float | None = 300.0) -> bool:
        """Block until background extraction is done (True) or ``timeout`` passes (False);
        re-raises a background failure as ``ModelError``."""
        if self._worker is None:
            return True
        return bool(self._worker.wait(timeout))

    async def wait_for_memory_extraction_async(self, timeout: float | None = 300.0) -> bool:
        """Async ``wait_for_memory_extraction``."""
        return await asyncio.to_thread(self.wait_for_memory_extraction, timeout)


def _memory_types(memory_types: Any) -> frozenset[RecordType]:
    if memory_types is None:
        return MEMORY_TYPES
    if isinstance(memory_types, (str, RecordType)):
        memory_types = [memory_types]
    return frozenset(validate_memory_type("memory_types", t) for t in memory_types)


def _merge_config(config: Any, fields: dict[str, Any]) -> MemoryExtractionConfig:
    """A config object/dict plus keyword fields (fields win); unknown names are rejected."""
    base = MemoryExtractionConfig.from_any(config)
    if not fields:
        return base
    unknown = sorted(set(fields) - set(MemoryExtractionConfig.model_fields))
    if unknown:
        raise InvalidArgument(unknown[0], "unknown argument (not a MemoryExtractionConfig field)")
    data = base.model_dump()
    data.update({k: v for k, v in fields.items() if v is not None})
    return MemoryExtractionConfig.from_any(data, argument="")


def thread_info(record: Record) -> ThreadInfo:
    """The public view of a thread record."""
    return ThreadInfo(
        thread_id=record.thread_id or "",
        user_id=record.user_id,
        agent_id=record.agent_id,
        metadata=user_metadata(record),
        created_at=record.created_at,
        memory_extraction_config=dict(internal_metadata(record).get("config") or {}),
    )


def profile_of(record: Record) -> Profile:
    """The public view of a user or agent profile record."""
    actor = record.user_id if record.record_type is RecordType.USER else record.agent_id
    return Profile(
        actor_id=actor or "",
        actor_type=record.record_type,
        information=record.content,
        metadata=user_metadata(record),
        created_at=record.created_at,
    )
