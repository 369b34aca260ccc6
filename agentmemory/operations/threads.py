"""Threads: create, read, update (metadata and persisted extraction settings), list, delete."""

from __future__ import annotations

from typing import Any

from ..config import MemoryExtractionConfig
from ..effects import Call, Op
from ..errors import Conflict, InvalidArgument
from ..ids import new_id, thread_record_id
from ..records import Record, RecordType, ThreadInfo
from ..spi import NewRecord, RecordFilter, RecordPatch, WriteBatch
from ..validation import (
    RESERVED_METADATA_KEY,
    internal_metadata,
    user_metadata,
    validate_id,
    validate_metadata,
    validate_optional_id,
    validate_positive_int,
)
from .context import OMITTED, MemoryContext, ThreadScope
from .links import delete_records_op
from .lookup import LIST_LIMIT_MAX, list_scope, thread_record_op

DEFAULT_CARD_CONCURRENCY = 5


def merge_config(config: Any, fields: dict[str, Any]) -> MemoryExtractionConfig:
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


def thread_scope(record: Record, llm: Any, overrides: MemoryExtractionConfig | None, concurrency: Any) -> ThreadScope:
    """A handle's scope from its thread record; ``concurrency`` bounds the card's per-type searches."""
    return ThreadScope(
        thread_id=record.thread_id or "",
        user_id=record.user_id,
        agent_id=record.agent_id,
        llm=llm,
        live_overrides=overrides or MemoryExtractionConfig(),
        persisted_config=MemoryExtractionConfig.from_any(internal_metadata(record).get("config") or {}),
        card_concurrency=validate_positive_int(
            "context_card_type_search_concurrency",
            DEFAULT_CARD_CONCURRENCY if concurrency is None else concurrency,
            minimum=1,
            maximum=64,
        ),
    )


def create_thread_op(
    ctx: MemoryContext,
    thread_id: str | None,
    user_id: str | None,
    agent_id: str | None,
    metadata: Any,
    memory_extraction_config: Any,
    config_fields: dict[str, Any],
) -> Op[Record]:
    """Store a new thread record with its persisted extraction settings."""
    tid = new_id() if thread_id is None else validate_id("thread_id", thread_id)
    validate_optional_id("user_id", user_id)
    validate_optional_id("agent_id", agent_id)
    meta = validate_metadata("metadata", metadata)
    config = merge_config(memory_extraction_config, config_fields)
    now = ctx.now()
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
        added = yield Call(ctx.store, "write", (WriteBatch(add=[NewRecord(record)]),))
    except Conflict:
        raise Conflict(f"thread {tid!r} already exists") from None
    return added[0]


def update_thread_op(ctx: MemoryContext, thread_id: str, metadata: Any, config: Any, fields: dict[str, Any]) -> Op[ThreadInfo]:
    """``update_thread``: new metadata and/or persisted settings (a None field clears it)."""
    rec = yield from thread_record_op(ctx, thread_id)
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
    yield Call(ctx.store, "write", (WriteBatch(patch=[patch]),))
    updated = yield from thread_record_op(ctx, thread_id)
    return thread_info(updated)


def delete_thread_op(ctx: MemoryContext, thread_id: str) -> Op[int]:
    """Delete a thread and every record in it (with their links); returns how many."""
    validate_id("thread_id", thread_id)
    rows: list[Record] = yield Call(ctx.store, "query", (RecordFilter(thread_id=thread_id),))
    count = yield from delete_records_op(ctx, [r.record_id for r in rows])
    return count


def list_threads_op(ctx: MemoryContext, user_id: Any, agent_id: Any, limit: int, offset: int) -> Op[list[ThreadInfo]]:
    """Threads in creation order, optionally of one user and/or agent."""
    validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
    validate_positive_int("offset", offset, minimum=0)
    flt = RecordFilter(
        record_types=frozenset({RecordType.THREAD}),
        user_id=list_scope("user_id", user_id),
        agent_id=list_scope("agent_id", agent_id),
    )
    rows: list[Record] = yield Call(ctx.store, "query", (flt,), {"limit": limit, "offset": offset})
    return [thread_info(r) for r in rows]
