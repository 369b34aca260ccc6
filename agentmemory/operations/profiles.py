"""User and agent profiles: searchable records about an actor, listed, and deleted with
(optionally) everything of that actor."""

from __future__ import annotations

from typing import Any

from ..effects import Call, Op
from ..embedders.base import embed_op
from ..errors import Conflict, InvalidArgument
from ..ids import profile_record_id
from ..records import Profile, Record, RecordType
from ..spi import NewRecord, RecordFilter, WriteBatch
from ..validation import user_metadata, validate_content, validate_id, validate_metadata, validate_positive_int
from .context import MemoryContext
from .links import delete_records_op
from .lookup import LIST_LIMIT_MAX


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


def add_profile_op(ctx: MemoryContext, actor_type: RecordType, actor_id: str, information: str, metadata: Any) -> Op[str]:
    """``add_user`` / ``add_agent``: store the actor's embedded profile; ``Conflict`` if it exists."""
    validate_id(f"{actor_type.value}_id", actor_id)
    validate_content("information", information)
    meta = validate_metadata("metadata", metadata)
    vectors = yield from embed_op(ctx.embedder, [information])
    now = ctx.now()
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
        yield Call(ctx.store, "write", (WriteBatch(add=[NewRecord(record, vectors[0])]),))
    except Conflict:
        raise Conflict(f"{actor_type.value} {actor_id!r} already exists") from None
    return actor_id


def list_profiles_op(ctx: MemoryContext, actor_type: RecordType, limit: int, offset: int) -> Op[list[Profile]]:
    """Profiles of one actor type in creation order."""
    validate_positive_int("limit", limit, minimum=0, maximum=LIST_LIMIT_MAX)
    validate_positive_int("offset", offset, minimum=0)
    rows: list[Record] = yield Call(
        ctx.store, "query", (RecordFilter(record_types=frozenset({actor_type})),), {"limit": limit, "offset": offset}
    )
    return [profile_of(r) for r in rows]


def delete_actor_op(ctx: MemoryContext, actor_type: RecordType, actor_id: str, cascade: bool) -> Op[int]:
    """``delete_user`` / ``delete_agent``: the profile and, with ``cascade``, every record of the
    actor, including records of the actor's threads that carry no actor id."""
    validate_id(f"{actor_type.value}_id", actor_id)
    if not isinstance(cascade, bool):
        raise InvalidArgument("cascade", f"must be a bool, got {cascade!r}")
    ids = [profile_record_id(actor_type, actor_id)]
    if cascade:
        by_actor = RecordFilter(user_id=actor_id) if actor_type is RecordType.USER else RecordFilter(agent_id=actor_id)
        rows: list[Record] = yield Call(ctx.store, "query", (by_actor,))
        ids += [r.record_id for r in rows]
        threads = {r.thread_id for r in rows if r.record_type is RecordType.THREAD and r.thread_id}
        for tid in sorted(threads):
            in_thread: list[Record] = yield Call(ctx.store, "query", (RecordFilter(thread_id=tid),))
            ids += [r.record_id for r in in_thread]
    existing: list[Record] = yield Call(ctx.store, "query", (RecordFilter(record_ids=tuple(sorted(set(ids)))),))
    count = yield from delete_records_op(ctx, [r.record_id for r in existing])
    return count
