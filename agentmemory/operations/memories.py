"""Memory-like records (memory, fact, guideline, preference): add (optionally linked), update,
delete, list. Updating and deleting by type also serve messages (``Thread.update_message``)."""

from __future__ import annotations

from typing import Any

from ..effects import Call, Op
from ..embedders.base import embed_op
from ..errors import InvalidArgument, NotFound
from ..filters import validate_metadata_filter
from ..ids import new_id
from ..index_text import embedding_text, message_index_texts
from ..records import MEMORY_TYPES, Link, Record, RecordStatus, RecordType
from ..spi import ANY, NewRecord, RecordFilter, RecordPatch, WriteBatch
from ..validation import (
    RESERVED_METADATA_KEY,
    internal_metadata,
    validate_content,
    validate_id,
    validate_link_type,
    validate_memory_type,
    validate_metadata,
    validate_optional_id,
    validate_positive_int,
    validate_status,
)
from .context import OMITTED, MemoryContext, ThreadScope
from .links import delete_records_op, invalidate_patch
from .lookup import (
    LIST_LIMIT_MAX,
    get_record_op,
    list_scope,
    parse_timestamp,
    previous_message_op,
    thread_record_op,
)
from .reindex import follower_patches_op
from .retention import expires_at
from .search import statuses_for

THREAD_MEMORY_OPTIONS = ("memory_type", "memory_id", "metadata", "timestamp", "ttl_days", "status", "memory_id_to_link", "link_type")


def memory_types(value: Any) -> frozenset[RecordType]:
    """``memory_types`` of a listing: None (every memory-like type), one type, or several."""
    if value is None:
        return MEMORY_TYPES
    if isinstance(value, (str, RecordType)):
        value = [value]
    return frozenset(validate_memory_type("memory_types", t) for t in value)


def add_memory_op(
    ctx: MemoryContext,
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
    """``add_memory``: validate, inherit the thread's scope, embed and write the record with its
    optional link (and the invalidation a lifecycle link causes) in one batch."""
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
        thread = yield from thread_record_op(ctx, thread_id)
        for dim, given in (("user_id", user_id), ("agent_id", agent_id)):
            own = getattr(thread, dim)
            if given is not None and given != own:
                raise InvalidArgument(dim, f"{given!r} differs from thread {thread_id!r}'s {own!r}")
        user_id = thread.user_id if user_id is None else user_id
        agent_id = thread.agent_id if agent_id is None else agent_id
    now = ctx.now()
    record = Record(
        record_id=rid,
        record_type=rtype,
        content=content,
        user_id=user_id,
        agent_id=agent_id,
        thread_id=thread_id,
        timestamp=ts or now,
        created_at=now,
        expires_at=expires_at(ctx, ttl_days, now, ts or now),
        status=record_status,
        metadata=meta,
    )
    links: list[Link] = []
    patches: list[RecordPatch] = []
    if memory_id_to_link is not None:
        validate_id("memory_id_to_link", memory_id_to_link)
        ltype = validate_link_type("link_type", link_type)
        target = yield from get_record_op(ctx, memory_id_to_link, MEMORY_TYPES, "memory")
        link = Link(link_id=new_id(), source_id=rid, target_id=target.record_id, link_type=ltype, created_at=now)
        links.append(link)
        if ltype.is_lifecycle:
            patches.append(invalidate_patch(target, link))
    vectors = yield from embed_op(ctx.embedder, [content])
    batch = WriteBatch(add=[NewRecord(record, vectors[0])], patch=patches, add_links=links)
    yield Call(ctx.store, "write", (batch,))
    return rid


def get_memory_op(ctx: MemoryContext, memory_id: str) -> Op[Record]:
    """``get_memory``: one alive memory-like record; ``NotFound`` otherwise."""
    validate_id("memory_id", memory_id)
    record = yield from get_record_op(ctx, memory_id, MEMORY_TYPES, "memory")
    return record


def thread_add_memory_op(ctx: MemoryContext, scope: ThreadScope, content: str, options: dict[str, Any]) -> Op[str]:
    """``Thread.add_memory``: ``add_memory`` in the thread's scope; ``options`` as its keywords."""
    unknown = sorted(set(options) - set(THREAD_MEMORY_OPTIONS))
    if unknown:
        raise InvalidArgument(unknown[0], "unknown argument of Thread.add_memory")
    args: dict[str, Any] = {
        "memory_type": RecordType.MEMORY, "memory_id": None, "metadata": None, "timestamp": None,
        "ttl_days": OMITTED, "status": RecordStatus.VALID, "memory_id_to_link": None, "link_type": None,
    }
    args.update(options)
    rid = yield from add_memory_op(
        ctx, content, args["memory_type"], scope.user_id, scope.agent_id, scope.thread_id, args["memory_id"],
        args["metadata"], args["timestamp"], args["ttl_days"], args["status"], args["memory_id_to_link"], args["link_type"],
    )
    return rid


def update_record_op(
    ctx: MemoryContext,
    record_id: str,
    types: frozenset[RecordType],
    kind: str,
    content: Any,
    metadata: Any,
    status: Any,
    thread_id: str | None = None,
    ttl_days: Any = OMITTED,
) -> Op[Record]:
    """Change content (re-embedded and, for a message, re-indexed with its context), metadata (replaced, the reserved part kept), status and/or
    TTL of one alive record of ``types`` (in ``thread_id`` when given); returns it updated."""
    validate_id(f"{kind}_id", record_id)
    rec = yield from get_record_op(ctx, record_id, types, kind)
    if thread_id is not None and rec.thread_id != thread_id:
        raise NotFound(kind, record_id)
    patch: dict[str, Any] = {}
    followers: list[RecordPatch] = []
    if content is not OMITTED:
        validate_content("content", content)
        edited = rec.model_copy(update={"content": content})
        if rec.record_type is RecordType.MESSAGE:
            if ctx.index_context:  # keep its context indexed
                previous = yield from previous_message_op(ctx, rec.thread_id, rec.seq)
                patch["index_text"] = message_index_texts([edited], previous)[0]
            # the next turn quotes this one: re-indexed in the same batch, no stale words
            followers = yield from follower_patches_op(ctx, [rec], edited={rec.record_id: edited})
        vectors = yield from embed_op(ctx.embedder, [embedding_text(edited.model_copy(update={"index_text": patch.get("index_text")}))])
        patch.update(content=content, vector=vectors[0])
    if metadata is not OMITTED:
        meta = validate_metadata("metadata", metadata)
        internal = internal_metadata(rec)
        patch["metadata"] = {**meta, RESERVED_METADATA_KEY: internal} if internal else meta
    if status is not OMITTED:
        patch["status"] = validate_status("status", status)
    if ttl_days is not OMITTED:  # a new TTL counts from now (or from the record's timestamp)
        patch["expires_at"] = expires_at(ctx, ttl_days, ctx.now(), rec.timestamp)
    if patch:
        yield Call(ctx.store, "write", (WriteBatch(patch=[RecordPatch(record_id, **patch), *followers]),))
    updated = yield from get_record_op(ctx, record_id, types, kind)
    return updated


def delete_typed_op(
    ctx: MemoryContext, record_id: str, types: frozenset[RecordType], thread_id: str | None = None, argument: str = "memory_id"
) -> Op[int]:
    """Delete one record of ``types`` (in ``thread_id`` when given) with its links; 1 or 0."""
    validate_id(argument, record_id)
    flt = RecordFilter(record_ids=(record_id,), record_types=types, thread_id=ANY if thread_id is None else thread_id)
    rows: list[Record] = yield Call(ctx.store, "query", (flt,))
    count = yield from delete_records_op(ctx, [r.record_id for r in rows])
    return count


def list_records_op(
    ctx: MemoryContext,
    types: frozenset[RecordType],
    user_id: Any,
    agent_id: Any,
    thread_id: Any,
    metadata_filter: Any,
    include_invalid: Any,
    limit: Any,
    offset: Any,
) -> Op[list[Record]]:
    """Alive records of ``types`` in insertion order; a scope key given (even None) is exact."""
    validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
    validate_positive_int("offset", offset, minimum=0)
    if metadata_filter is not None:
        validate_metadata_filter(metadata_filter)
    flt = ctx.alive(
        record_types=types,
        user_id=list_scope("user_id", user_id),
        agent_id=list_scope("agent_id", agent_id),
        thread_id=list_scope("thread_id", thread_id),
        metadata_filter=metadata_filter,
        statuses=statuses_for(include_invalid, "include_invalid"),
    )
    rows: list[Record] = yield Call(ctx.store, "query", (flt,), {"limit": limit, "offset": offset})
    return rows
