"""Retention: when a record expires (TTL rules) and purging expired records for good."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from ..config import TimeToLiveAnchor
from ..effects import Call, Op
from ..records import Record
from ..spi import RecordFilter
from ..validation import validate_ttl_days
from .context import OMITTED, MemoryContext
from .links import delete_records_op

log = logging.getLogger(__name__)


def expires_at(ctx: MemoryContext, ttl_days: Any, created_at: datetime, timestamp: datetime) -> datetime | None:
    """TTL rules: omitted → store default (else the maximum); None → store maximum or never;
    every TTL is clamped to the maximum. A TTL that ends past the last representable instant
    (``datetime.max``, year 9999; e.g. ``ttl_days=1e7``, ``1e308`` or ``10**400`` without a
    maximum) means never: ``None``, not an ``OverflowError``."""
    retention = ctx.retention
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


def purge_op(ctx: MemoryContext) -> Op[int]:
    """Delete expired records (and their links) for good; returns how many."""
    rows: list[Record] = yield Call(ctx.store, "query", (RecordFilter(expired_at=ctx.now()),))
    count = yield from delete_records_op(ctx, [r.record_id for r in rows])
    return count
