"""Messages of a thread: add (one commit with their inline extraction, see
``extraction.after_messages_op``), read by position or id. Updating and deleting a message share ``memories.update_record_op`` /
``delete_typed_op``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..config import MemoryExtractionConfig
from ..effects import Call, Op
from ..embedders.base import embed_op
from ..errors import InvalidArgument, NotFound
from ..ids import new_id
from ..index_text import SPEAKER_KEY, embedding_text, message_index_texts
from ..records import MESSAGE_TYPES, Record, RecordType
from ..spi import NewRecord, Order
from ..validation import RESERVED_METADATA_KEY, validate_content, validate_id, validate_metadata, validate_positive_int
from .context import OMITTED, MemoryContext, ThreadScope
from .extraction import after_messages_op, inline_pending_op
from .lookup import parse_timestamp, previous_message_op, thread_record_op
from .retention import expires_at

ROLES = ("user", "assistant", "system", "tool")
DEFAULT_MESSAGE_WINDOW = 20
"""How many of the newest messages ``get_messages()`` returns without bounds."""


class Message(BaseModel):
    """A message to add: role (user/assistant/system/tool), content, optional id, timestamp
    (datetime or ISO string), metadata and ``name``: the speaker (OpenAI's ``name`` field), for
    chats between people. A named speaker is indexed and embedded with the turn, shown in the
    card, and a query that names a participant favours that participant's turns
    (``search.speaker_boost``). Messages take the store's default TTL."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    role: str
    content: str
    id: str | None = None
    timestamp: datetime | str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    name: str | None = None


MAX_NAME_CHARS = 100


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
    if msg.name is not None:
        validate_content(f"{arg}.name", msg.name)
        if len(msg.name) > MAX_NAME_CHARS or len(msg.name.splitlines()) > 1:
            raise InvalidArgument(f"{arg}.name", f"must be one line of at most {MAX_NAME_CHARS} characters")
    return msg


def add_messages_op(ctx: MemoryContext, scope: ThreadScope, messages: Any, call_config: Any = None) -> Op[list[str]]:
    """``add_messages``: validate every message, then write them with their inline extraction
    in one batch (or write them and queue extraction) with ``call_config`` as the highest
    settings level; summary updates as configured."""
    call = None if call_config is None else MemoryExtractionConfig.from_any(call_config)
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidArgument("messages", "must be a list of messages")
    if not messages:
        return []
    parsed = [parse_message(i, m) for i, m in enumerate(messages)]
    thread = yield from thread_record_op(ctx, scope.thread_id)  # a deleted thread takes no more messages
    ids = [m.id or new_id() for m in parsed]
    if len(set(ids)) != len(ids):
        raise InvalidArgument("messages", "message ids must be unique within a call")
    now = ctx.now()
    records = []
    for i, (msg, rid) in enumerate(zip(parsed, ids)):
        ts = parse_timestamp(f"messages[{i}].timestamp", msg.timestamp) or now
        records.append(
            Record(
                record_id=rid,
                record_type=RecordType.MESSAGE,
                content=msg.content,
                role=msg.role,
                user_id=scope.user_id,
                agent_id=scope.agent_id,
                thread_id=scope.thread_id,
                timestamp=ts,
                created_at=now,
                expires_at=expires_at(ctx, OMITTED, now, ts),
                metadata={**msg.metadata, RESERVED_METADATA_KEY: {SPEAKER_KEY: msg.name.strip()}} if msg.name else dict(msg.metadata),
            )
        )
    pending = None
    if ctx.index_context:
        # the messages inline extraction will read anyway end with the previous message
        pending = yield from inline_pending_op(ctx, scope, call, thread, len(records))
        if pending is not None and pending.rows:
            previous: Record | None = pending.rows[-1]
        else:
            previous = yield from previous_message_op(ctx, scope.thread_id)
        texts = message_index_texts(records, previous)
        records = [r.model_copy(update={"index_text": text}) for r, text in zip(records, texts)]
    vectors = yield from embed_op(ctx.embedder, [embedding_text(r) for r in records])
    yield from after_messages_op(ctx, scope, [NewRecord(r, v) for r, v in zip(records, vectors)], call, thread, pending)
    return ids


def get_messages_op(ctx: MemoryContext, scope: ThreadScope, start: Any, end: Any) -> Op[list[Record]]:
    """``get_messages``: by 0-based position, ``end`` exclusive; no bounds: the newest window."""
    flt = ctx.alive(thread_id=scope.thread_id, record_types=MESSAGE_TYPES)
    if start is None and end is None:
        rows: list[Record] = yield Call(ctx.store, "query", (flt,), {"order": Order.SEQ_DESC, "limit": DEFAULT_MESSAGE_WINDOW})
        return rows[::-1]
    first = 0 if start is None else validate_positive_int("start", start, minimum=0)
    if end is None or end == -1:
        limit = None
    else:
        stop = validate_positive_int("end", end, minimum=0)
        if stop < first:
            raise InvalidArgument("end", f"must be >= start ({first}) or -1, got {stop}")
        limit = stop - first
    rows = yield Call(ctx.store, "query", (flt,), {"offset": first, "limit": limit})
    return rows


def get_in_thread_op(ctx: MemoryContext, scope: ThreadScope, record_id: str, types: frozenset[RecordType], kind: str) -> Op[Record]:
    """One alive record of ``types`` in this thread; ``NotFound`` names it as ``kind``."""
    validate_id(f"{kind}_id", record_id)
    flt = ctx.alive(thread_id=scope.thread_id, record_ids=(record_id,), record_types=types)
    rows: list[Record] = yield Call(ctx.store, "query", (flt,))
    if not rows:
        raise NotFound(kind, record_id)
    return rows[0]
