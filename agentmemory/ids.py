"""Record ids: generated ids and the reserved ids of threads, profiles and summaries."""

from __future__ import annotations

import uuid

from .records import RecordType


def new_id() -> str:
    """A fresh random id (uuid4 hex)."""
    return uuid.uuid4().hex


def thread_record_id(thread_id: str) -> str:
    """The record id under which a thread's settings are stored."""
    return f"@thread:{thread_id}"


def summary_record_id(thread_id: str) -> str:
    """The record id of a thread's running summary."""
    return f"@summary:{thread_id}"


def profile_record_id(actor_type: RecordType, actor_id: str) -> str:
    """The record id of a user or agent profile."""
    return f"@{actor_type.value}:{actor_id}"
