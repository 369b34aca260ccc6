"""The plain data the store SPI passes around: filters, patches, batches, hits and their sentinels.

``MemoryStore`` (``agentmemory.spi``) takes and returns these; they live here, below the SPI and
``validation``, so the argument checks can name them without importing the SPI. Import them from
``agentmemory.spi`` as before: it re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, Final

import numpy as np

from .records import Link, Record, RecordStatus, RecordType


class Order(str, Enum):
    """Result order of ``query``: by store sequence number, ties impossible."""

    SEQ_ASC = "seq_asc"
    SEQ_DESC = "seq_desc"


class _Any:
    """Sentinel type for an unconstrained scope dimension."""

    _instance: _Any | None = None

    def __new__(cls) -> _Any:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ANY"

    def __reduce__(self) -> str:
        return "ANY"


ANY: Final = _Any()
"""Scope value meaning "any value, including absent"; ``None`` means "must be absent"."""

ScopeValue = str | None | _Any


class _Unset:
    """Sentinel type for a patch field that is left unchanged."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset()


@dataclass(frozen=True)
class RecordFilter:
    """Which records a read sees. All given conditions are ANDed.

    Scope dimensions take ``ANY`` (unconstrained), a string (equal) or ``None`` (absent).
    ``alive_at`` hides records whose ``expires_at`` is at or before it; ``expired_at`` selects
    only those (for purging). ``min_seq`` is inclusive, ``max_seq`` exclusive.
    """

    record_ids: tuple[str, ...] | None = None
    record_types: frozenset[RecordType] | None = None
    user_id: ScopeValue = ANY
    agent_id: ScopeValue = ANY
    thread_id: ScopeValue = ANY
    statuses: frozenset[RecordStatus] | None = None
    metadata_filter: Mapping[str, Any] | None = None
    alive_at: datetime | None = None
    expired_at: datetime | None = None
    min_seq: int | None = None
    max_seq: int | None = None


@dataclass(frozen=True)
class NewRecord:
    """A record to add and its embedding (None for records that are not vector-searchable).

    The store assigns ``seq``; the value in ``record`` is ignored.
    """

    record: Record
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class RecordPatch:
    """A partial update of one record; ``UNSET`` fields stay as they are.

    Setting ``content`` without ``index_text`` resets ``index_text`` to None (the new content is
    indexed), so a record's index never describes words it no longer holds."""

    record_id: str
    content: str | _Unset = UNSET
    index_text: str | None | _Unset = UNSET
    metadata: Mapping[str, Any] | _Unset = UNSET
    status: RecordStatus | _Unset = UNSET
    timestamp: datetime | _Unset = UNSET
    expires_at: datetime | None | _Unset = UNSET
    vector: np.ndarray | None | _Unset = UNSET


@dataclass(frozen=True)
class WriteBatch:
    """Every write is a batch, applied whole or not at all, in this order:
    adds, patches, link deletes, link adds, record deletes (which also remove their links).

    Adding an existing record id or a link between already-linked records raises ``Conflict``;
    patching, deleting or linking a missing record raises ``NotFound``.
    """

    add: Sequence[NewRecord] = ()
    patch: Sequence[RecordPatch] = ()
    add_links: Sequence[Link] = ()
    delete_links: Sequence[str] = ()
    delete: Sequence[str] = ()

    def is_empty(self) -> bool:
        """True when the batch changes nothing."""
        return not (self.add or self.patch or self.add_links or self.delete_links or self.delete)


@dataclass(frozen=True)
class Hit:
    """A search candidate: vector hits carry a cosine ``distance`` (lower is closer), keyword hits
    a ``score`` (higher is better). Backends return hits ordered best first, ties by record id."""

    record: Record
    distance: float | None = None
    score: float | None = None
