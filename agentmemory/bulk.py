"""Bulk import: many records given column by column, added in one atomic write.

``MemoryStore.bulk_add(RecordColumns(...))`` adds exactly the records that one ``write`` of the
same ``NewRecord``s would add, after the same checks, but it never builds a ``Record`` per row
and returns a count instead of the records. Loading a large history with precomputed embeddings
needs neither, and those per-row objects were about half of the DuckDB backend's ingest time
(backends/duckdb/README.md). Every backend supports it through the default implementation (the
rows as one ``WriteBatch``); a backend with a columnar insert overrides ``_bulk_add``.

A column is either one value for every row (a ``str``, ``datetime``, mapping, enum member or
None) or a list/tuple with one value per row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from .errors import InvalidArgument
from .records import Record, RecordStatus, RecordType
from .validation import (
    bad_vector_row,
    metadata_json,
    simple_metadata,
    stored_metadata,
    validate_aware_datetime,
    validate_content,
    validate_id,
    validate_record_type,
    validate_status,
)

_SCALAR_TYPES = (str, datetime, Mapping, RecordType, RecordStatus, type(None))


@dataclass(frozen=True)
class RecordColumns:
    """Records to add, column by column (row ``i`` of every column is record ``i``).

    ``vectors`` is an ``(n, dimension)`` array with every record's embedding, or None when no
    record is vector-searchable. ``created_at`` defaults to ``timestamp``.
    """

    record_id: Sequence[str]
    content: Sequence[str]
    record_type: RecordType | str | Sequence[RecordType | str]
    timestamp: datetime | Sequence[datetime]
    created_at: datetime | Sequence[datetime] | None = None
    user_id: str | None | Sequence[str | None] = None
    agent_id: str | None | Sequence[str | None] = None
    thread_id: str | None | Sequence[str | None] = None
    role: str | None | Sequence[str | None] = None
    expires_at: datetime | None | Sequence[datetime | None] = None
    status: RecordStatus | str | Sequence[RecordStatus | str] = RecordStatus.VALID
    metadata: Mapping[str, Any] | None | Sequence[Mapping[str, Any] | None] = None
    vectors: np.ndarray | None = None
    index_text: str | None | Sequence[str | None] = None
    """What the keyword index sees per row (``Record.index_text``); None = the content."""


@dataclass(frozen=True)
class ValidatedColumns:
    """``RecordColumns`` after the checks: one list per column (scalars repeated), metadata as
    stored (plain JSON copies), vectors as checked float32 rows (not yet unit length)."""

    record_id: list[str]
    content: list[str]
    record_type: list[RecordType]
    timestamp: list[datetime]
    created_at: list[datetime]
    user_id: list[str | None]
    agent_id: list[str | None]
    thread_id: list[str | None]
    role: list[str | None]
    expires_at: list[datetime | None]
    status: list[RecordStatus]
    metadata: list[dict[str, Any]]
    vectors: np.ndarray | None
    index_text: list[str | None]

    def __len__(self) -> int:
        return len(self.record_id)

    def records(self) -> Iterator[tuple[Record, np.ndarray | None]]:
        """Each row as a ``Record`` (``seq`` 0, assigned by the store) and its vector."""
        for i in range(len(self)):
            record = Record(
                record_id=self.record_id[i], record_type=self.record_type[i], content=self.content[i],
                user_id=self.user_id[i], agent_id=self.agent_id[i], thread_id=self.thread_id[i],
                role=self.role[i], timestamp=self.timestamp[i], created_at=self.created_at[i],
                expires_at=self.expires_at[i], status=self.status[i], metadata=self.metadata[i],
                index_text=self.index_text[i],
            )
            yield record, None if self.vectors is None else self.vectors[i]


def validate_columns(columns: Any, dimension: int) -> ValidatedColumns:
    """Check ``columns`` like ``write`` checks the same rows; the error names the column and the
    row (``columns.user_id[17]``). Nothing is written by a caller before this returns."""
    if not isinstance(columns, RecordColumns):
        raise InvalidArgument("columns", f"must be RecordColumns, got {type(columns).__name__}")
    ids = list(_per_row("record_id", columns.record_id, None))
    n = len(ids)
    _each("record_id", ids, lambda arg, rid: validate_id(arg, rid, internal=True))
    if len(set(ids)) != n:
        seen: set[str] = set()
        for i, rid in enumerate(ids):
            if rid in seen:
                raise InvalidArgument(f"columns.record_id[{i}]", f"duplicate record id {rid!r}")
            seen.add(rid)
    types = _checked("record_type", columns.record_type, n, validate_record_type, cache=True)
    contents = list(_per_row("content", columns.content, n))
    if RecordType.THREAD in types or RecordType.SUMMARY in types:  # these may be empty
        _each("content", list(zip(contents, types)), lambda arg, row: validate_content(
            arg, row[0], allow_empty=row[1] in (RecordType.THREAD, RecordType.SUMMARY)))
    else:
        _each("content", contents, validate_content)
    timestamps = _checked("timestamp", columns.timestamp, n, validate_aware_datetime)
    created = timestamps if columns.created_at is None else _checked("created_at", columns.created_at, n, validate_aware_datetime)
    scopes = [_checked(name, getattr(columns, name), n, _optional_id, cache=True) for name in ("user_id", "agent_id", "thread_id")]
    roles = _checked("role", columns.role, n, _optional_role, cache=True)
    expires = _checked("expires_at", columns.expires_at, n, _optional_datetime)
    statuses = _checked("status", columns.status, n, validate_status, cache=True)
    metadata = _checked("metadata", columns.metadata, n, _stored_metadata)
    index_texts = _checked("index_text", columns.index_text, n, _optional_role)
    return ValidatedColumns(
        record_id=ids, content=contents, record_type=types, timestamp=timestamps, created_at=created,
        user_id=scopes[0], agent_id=scopes[1], thread_id=scopes[2], role=roles, expires_at=expires,
        status=statuses, metadata=metadata, vectors=_vectors(columns.vectors, n, dimension),
        index_text=index_texts,
    )


def _per_row(name: str, values: Any, n: int | None) -> Sequence[Any]:
    if isinstance(values, np.ndarray) and values.ndim == 1:
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidArgument(f"columns.{name}", f"must be a list with one value per row, got {type(values).__name__}")
    if n is not None and len(values) != n:
        raise InvalidArgument(f"columns.{name}", f"has {len(values)} values for {n} rows")
    return values


def _each(name: str, rows: Sequence[Any], check: Callable[[str, Any], Any]) -> list[Any]:
    """``check`` applied to every row. The argument name is built only when a row fails: the
    rows are checked again one by one to name the first bad one (``columns.name[i]``)."""
    argument = f"columns.{name}"
    try:
        return [check(argument, value) for value in rows]
    except InvalidArgument:
        for i, value in enumerate(rows):
            check(f"{argument}[{i}]", value)
        raise


def _checked(name: str, values: Any, n: int, check: Callable[[str, Any], Any], *, cache: bool = False) -> list[Any]:
    """The column as one checked value per row: a scalar is checked once and repeated. With
    ``cache`` (columns of strings and enums, where equal values are identical) each distinct
    value is checked once, so repeated scope ids cost a lookup."""
    if isinstance(values, _SCALAR_TYPES):
        return [check(f"columns.{name}", values)] * n
    rows = _per_row(name, values, n)
    if not cache:
        return _each(name, rows, check)
    done: dict[Any, Any] = {}
    missing = object()
    out: list[Any] = []
    for i, value in enumerate(rows):
        try:
            hit = done.get(value, missing)
        except TypeError:  # unhashable: certainly invalid here, the check names it
            hit = missing
        if hit is missing:
            hit = done[value] = check(f"columns.{name}[{i}]", value)
        out.append(hit)
    return out


def _optional_id(argument: str, value: Any) -> str | None:
    return None if value is None else validate_id(argument, value)


def _optional_role(argument: str, value: Any) -> str | None:
    """A role or index text: None, or non-empty text within the content limits."""
    return None if value is None else validate_content(argument, value)


def _optional_datetime(argument: str, value: Any) -> datetime | None:
    return None if value is None else validate_aware_datetime(argument, value)


def _stored_metadata(argument: str, value: Any) -> dict[str, Any]:
    """Checked metadata as a read returns it (what ``write`` stores)."""
    if value is None or simple_metadata(value):
        return stored_metadata(value)
    return stored_metadata(value, metadata_json(argument, value, allow_reserved=True))


def _vectors(vectors: Any, n: int, dimension: int) -> np.ndarray | None:
    if vectors is None:
        return None
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf: rejected below
            matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("columns.vectors", f"not a numeric matrix ({exc})") from None
    if matrix.shape != (n, dimension):
        raise InvalidArgument("columns.vectors", f"expected shape ({n}, {dimension}), got {matrix.shape}")
    bad = bad_vector_row(matrix)
    if bad is not None:
        raise InvalidArgument(f"columns.vectors[{bad[0]}]", bad[1])
    return matrix
