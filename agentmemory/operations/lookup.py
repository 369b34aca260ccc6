"""What most operations start with: reading one record (alive, of a type, or a thread's record),
splitting its metadata into the user's part and the reserved ``$agent_memory`` part, and parsing
the arguments every listing and write shares (timestamps, list scopes)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ..effects import Call, Op
from ..errors import InvalidArgument, NotFound
from ..ids import summary_record_id, thread_record_id
from ..records import MESSAGE_TYPES, Record, RecordType, Summary
from ..spi import ANY, Order, RecordFilter, RecordPatch
from ..validation import RESERVED_METADATA_KEY, internal_metadata, validate_id, validate_optional_id
from .context import OMITTED, MemoryContext

LIST_LIMIT_MAX = 10_000


def get_record_op(ctx: MemoryContext, record_id: str, types: frozenset[RecordType], kind: str) -> Op[Record]:
    """The alive record ``record_id`` of one of ``types``; ``NotFound`` names it as ``kind``."""
    rows: list[Record] = yield Call(ctx.store, "query", (ctx.alive(record_ids=(record_id,), record_types=types),))
    if not rows:
        raise NotFound(kind, record_id)
    return rows[0]


def previous_message_op(ctx: MemoryContext, thread_id: str | None, before_seq: int | None = None) -> Op[Record | None]:
    """The thread's newest alive message (below ``before_seq`` when given), or None: the turn a
    message's contextual index text starts from (``agentmemory.index_text``)."""
    flt = ctx.alive(thread_id=thread_id, record_types=MESSAGE_TYPES, max_seq=before_seq)
    rows: list[Record] = yield Call(ctx.store, "query", (flt,), {"order": Order.SEQ_DESC, "limit": 1})
    return rows[0] if rows else None


def thread_record_op(ctx: MemoryContext, thread_id: str) -> Op[Record]:
    """The stored record of thread ``thread_id``; ``NotFound`` when there is none."""
    validate_id("thread_id", thread_id)
    rows: list[Record] = yield Call(
        ctx.store,
        "query",
        (RecordFilter(record_ids=(thread_record_id(thread_id),), record_types=frozenset({RecordType.THREAD})),),
    )
    if not rows:
        raise NotFound("thread", thread_id)
    return rows[0]


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


def list_scope(argument: str, value: Any) -> Any:
    """List APIs: an omitted scope key is unconstrained; a given one (even None) is exact."""
    if value is OMITTED:
        return ANY
    return validate_optional_id(argument, value)


def thread_state(record: Record) -> dict[str, Any]:
    """The extraction bookkeeping kept in a thread record."""
    return dict(internal_metadata(record).get("state") or {})


def state_patch(thread: Record, state: dict[str, Any]) -> RecordPatch:
    """The patch that stores ``state`` as ``thread``'s extraction bookkeeping."""
    meta = dict(thread.metadata)
    internal = internal_metadata(thread)
    internal["state"] = state
    meta[RESERVED_METADATA_KEY] = internal
    return RecordPatch(thread.record_id, metadata=meta)


def stored_summary_op(ctx: MemoryContext, thread_id: str) -> Op[Summary | None]:
    """The thread's stored running summary, if any."""
    rows: list[Record] = yield Call(ctx.store, "query", (RecordFilter(record_ids=(summary_record_id(thread_id),)),))
    if not rows:
        return None
    internal = internal_metadata(rows[0])
    return Summary(
        content=rows[0].content,
        topics=tuple(internal.get("topics") or ()),
        last_message_seq=int(internal.get("last_message_seq", 0)),
        revision=int(internal.get("revision", 0)),
    )
