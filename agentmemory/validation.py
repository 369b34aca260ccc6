"""Argument validation shared by the client, the SPI and every backend.

Each check raises ``InvalidArgument`` naming the argument, before anything is written.
Limits: ids 128 characters, content 1,000,000 characters, metadata 1,000,000 bytes as JSON and
64 levels of nested objects and arrays (``MAX_METADATA_DEPTH``), metadata filters 128 levels
(``MAX_FILTER_DEPTH``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence, Set
from datetime import datetime
from typing import Any

import numpy as np

from .errors import InvalidArgument
from .filters import validate_metadata_filter
from .nesting import MAX_FILTER_DEPTH as MAX_FILTER_DEPTH  # re-exported: validation's documented limit
from .nesting import MAX_METADATA_DEPTH, nested_deeper_than
from .records import MEMORY_TYPES, Link, LinkType, Record, RecordStatus, RecordType
from .store_types import ANY, UNSET, NewRecord, Order, RecordFilter, RecordPatch, WriteBatch

MAX_ID_CHARS = 128
MAX_CONTENT_CHARS = 1_000_000
MAX_METADATA_BYTES = 1_000_000
RESERVED_ID_PREFIX = "@"
"""Ids the core makes for threads, profiles and summaries start with this; callers' ids may not."""
RESERVED_METADATA_KEY = "$agent_memory"


def user_metadata(record: Record) -> dict[str, Any]:
    """A record's metadata without the reserved ``$agent_memory`` key."""
    return {k: v for k, v in record.metadata.items() if k != RESERVED_METADATA_KEY}


def internal_metadata(record: Record) -> dict[str, Any]:
    """The reserved ``$agent_memory`` part of a record's metadata."""
    value = record.metadata.get(RESERVED_METADATA_KEY) or {}
    return dict(value) if isinstance(value, Mapping) else {}


_METADATA_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False)
"""One encoder for every metadata check (``json.dumps`` with options builds one per call)."""


def _check_text(argument: str, value: str) -> None:
    if "\x00" in value:
        raise InvalidArgument(argument, "contains a NUL character")
    if value.isascii():  # no surrogates possible: skip the encode (bulk ingest hot path)
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(argument, "is not valid unicode (lone surrogate)") from None


def validate_aware_datetime(argument: str, value: Any) -> datetime:
    """A timezone-aware ``datetime`` (naive ones are ambiguous across backends)."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(argument, f"must be a timezone-aware datetime, got {value!r}")
    return value


def validate_id(argument: str, value: Any, *, internal: bool = False) -> str:
    """A record, thread, user, agent or link id: 1–128 chars, no NUL, no edge whitespace."""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidArgument(argument, "must not be empty")
    if value != value.strip():
        raise InvalidArgument(argument, "must not start or end with whitespace")
    if len(value) > MAX_ID_CHARS + (64 if internal else 0):
        raise InvalidArgument(argument, f"is longer than {MAX_ID_CHARS} characters")
    if not internal and value.startswith(RESERVED_ID_PREFIX):
        raise InvalidArgument(argument, f"must not start with {RESERVED_ID_PREFIX!r} (reserved)")
    _check_text(argument, value)
    return value


def validate_optional_id(argument: str, value: Any) -> str | None:
    """An id or None."""
    return None if value is None else validate_id(argument, value)


def validate_content(argument: str, value: Any, *, allow_empty: bool = False) -> str:
    """Record text: a string without NUL, at most 1,000,000 characters, non-blank by default."""
    if not isinstance(value, str):
        raise InvalidArgument(argument, f"must be a string, got {type(value).__name__}")
    if not allow_empty and (not value or value.isspace()):  # = not value.strip(), no copy
        raise InvalidArgument(argument, "must not be empty or blank")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidArgument(argument, f"is longer than {MAX_CONTENT_CHARS} characters")
    _check_text(argument, value)
    return value


def validate_metadata(
    argument: str, value: Any, *, allow_reserved: bool = False
) -> dict[str, Any]:
    """Caller metadata: a JSON object with string keys, no NaN, under 1 MB, nested at most
    ``MAX_METADATA_DEPTH`` (64) levels; ``$`` keys reserved. Returns the metadata as it reads
    back (a plain JSON copy)."""
    if value is None:
        return {}
    return json.loads(metadata_json(argument, value, allow_reserved=allow_reserved))


def metadata_json(argument: str, value: Any, *, allow_reserved: bool = False) -> str:
    """The checks of ``validate_metadata`` without the copy: the metadata's JSON text."""
    if not isinstance(value, Mapping):
        raise InvalidArgument(argument, f"must be a mapping, got {type(value).__name__}")
    if not value:
        return "{}"
    for key in value:
        if not isinstance(key, str) or not key:
            raise InvalidArgument(argument, f"keys must be non-empty strings, got {key!r}")
        _check_text(f"{argument} key", key)
        if key.startswith("$") and not (allow_reserved and key == RESERVED_METADATA_KEY):
            raise InvalidArgument(argument, f"key {key!r} is reserved ($-prefixed)")
    if nested_deeper_than(value, MAX_METADATA_DEPTH):
        raise InvalidArgument(argument, f"is nested deeper than {MAX_METADATA_DEPTH} levels of objects and arrays")
    try:
        text = _METADATA_ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(argument, f"is not plain JSON ({exc})") from None
    if "\\u0000" in text:
        raise InvalidArgument(argument, "contains a NUL character")
    if len(text) <= MAX_METADATA_BYTES // 4 and text.isascii():  # short ASCII: within the limit, no surrogates
        return text
    if len(text.encode("utf-8", "surrogatepass")) > MAX_METADATA_BYTES:
        raise InvalidArgument(argument, f"is larger than {MAX_METADATA_BYTES} bytes as JSON")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(argument, "is not valid unicode (lone surrogate)") from None
    return text


def simple_metadata(value: Any) -> bool:
    """True for metadata that is certainly valid without encoding it (the bulk-add hot path):
    a small dict of short printable-ASCII keys, not ``$``-prefixed, with None, bool, 64-bit int
    or short printable-ASCII string values (far under the size limit, nothing to escape
    badly). Anything else gets ``metadata_json``'s full check."""
    if type(value) is not dict or len(value) > 32:
        return False
    for key, item in value.items():
        if type(key) is not str or not 0 < len(key) <= 256 or not key.isascii() or not key.isprintable() or key[0] == "$":
            return False
        kind = type(item)
        if kind is str:
            if len(item) > 1000 or not item.isascii() or not item.isprintable():
                return False
        elif kind is int:
            if not -(1 << 63) <= item < (1 << 63):
                return False
        elif kind is not bool and item is not None:
            return False
    return True


_PLAIN_SCALARS = frozenset({str, int, float, bool, type(None)})


def stored_metadata(value: Mapping[str, Any] | None, text: str | None = None) -> dict[str, Any]:
    """Metadata as every backend reads it back: a private plain-JSON copy (tuples become lists,
    mapping types dicts) of metadata that passed the checks. A flat dict of plain scalars is
    copied directly; anything else goes through JSON (``text``, when the caller has it)."""
    if not value:
        return {}
    if type(value) is dict and _PLAIN_SCALARS.issuperset(map(type, value.values())):
        return dict(value)
    return json.loads(json.dumps(value) if text is None else text)


def bad_vector_row(matrix: np.ndarray) -> tuple[int, str] | None:
    """The first row of a float32 matrix that is not a usable embedding, and why; None when
    every row is finite and not all zeros (the one rule for single vectors and batches)."""
    finite = np.isfinite(matrix).all(axis=1)
    nonzero = matrix.any(axis=1)
    good = finite & nonzero
    if good.all():
        return None
    row = int(np.argmin(good))
    return row, "contains NaN or infinity" if not finite[row] else "is all zeros (cosine distance undefined)"


def validate_record_type(argument: str, value: Any) -> RecordType:
    """A ``RecordType`` or its string value."""
    try:
        return RecordType(value)
    except ValueError:
        known = ", ".join(t.value for t in RecordType)
        raise InvalidArgument(argument, f"unknown record type {value!r}; known: {known}") from None


def validate_memory_type(argument: str, value: Any) -> RecordType:
    """One of memory, fact, guideline, preference."""
    rtype = validate_record_type(argument, value)
    if rtype not in MEMORY_TYPES:
        known = ", ".join(sorted(t.value for t in MEMORY_TYPES))
        raise InvalidArgument(argument, f"must be a memory type ({known}), got {rtype.value!r}")
    return rtype


def validate_link_type(argument: str, value: Any) -> LinkType:
    """A ``LinkType`` or its string value."""
    try:
        return LinkType(value)
    except ValueError:
        known = ", ".join(t.value for t in LinkType)
        raise InvalidArgument(argument, f"unknown link type {value!r}; known: {known}") from None


def validate_status(argument: str, value: Any) -> RecordStatus:
    """``valid`` or ``invalid``."""
    try:
        return RecordStatus(value)
    except ValueError:
        raise InvalidArgument(argument, f"must be 'valid' or 'invalid', got {value!r}") from None


def validate_new_record(record: Any, *, known_ids: set[str] | None = None) -> None:
    """The SPI-level check of a record about to be added. ``known_ids``: scope ids already
    found valid; a batch validator shares one set so repeated user/agent/thread ids are checked
    once per batch (new valid ones are added to it)."""
    if not isinstance(record, Record):
        raise InvalidArgument("record", f"must be a Record, got {type(record).__name__}")
    validate_id("record_id", record.record_id, internal=True)
    allow_empty = record.record_type in (RecordType.THREAD, RecordType.SUMMARY)
    validate_content("content", record.content, allow_empty=allow_empty)
    if record.index_text is not None:
        validate_content("index_text", record.index_text)
    for dim, value in (("user_id", record.user_id), ("agent_id", record.agent_id), ("thread_id", record.thread_id)):
        if value is not None and (known_ids is None or value not in known_ids):
            validate_id(dim, value)
            if known_ids is not None:
                known_ids.add(value)
    if record.metadata is not None and not simple_metadata(record.metadata):
        metadata_json("metadata", record.metadata, allow_reserved=True)
    if record.role is not None:
        validate_content("role", record.role)
    if not isinstance(record.record_type, RecordType):
        raise InvalidArgument("record_type", f"must be a RecordType, got {record.record_type!r}")
    if not isinstance(record.status, RecordStatus):
        raise InvalidArgument("status", f"must be a RecordStatus, got {record.status!r}")
    validate_aware_datetime("timestamp", record.timestamp)
    validate_aware_datetime("created_at", record.created_at)
    if record.expires_at is not None:
        validate_aware_datetime("expires_at", record.expires_at)


def validate_patch(patch: RecordPatch) -> None:
    """The SPI-level check of a record patch."""
    validate_id("record_id", patch.record_id, internal=True)
    if patch.content is not UNSET:
        validate_content("content", patch.content)
    if patch.index_text is not UNSET and patch.index_text is not None:
        validate_content("index_text", patch.index_text)
    if patch.metadata is not UNSET:
        if not isinstance(patch.metadata, Mapping):
            raise InvalidArgument("metadata", f"must be a mapping, got {type(patch.metadata).__name__}")
        validate_metadata("metadata", patch.metadata, allow_reserved=True)
    if patch.status is not UNSET and not isinstance(patch.status, RecordStatus):
        raise InvalidArgument("status", f"must be a RecordStatus, got {patch.status!r}")
    if patch.timestamp is not UNSET:
        validate_aware_datetime("timestamp", patch.timestamp)
    if patch.expires_at is not UNSET and patch.expires_at is not None:
        validate_aware_datetime("expires_at", patch.expires_at)


def validate_link(link: Any) -> None:
    """The SPI-level check of a link about to be added."""
    if not isinstance(link, Link):
        raise InvalidArgument("link", f"must be a Link, got {type(link).__name__}")
    validate_id("link_id", link.link_id, internal=True)
    validate_id("source_id", link.source_id)
    validate_id("target_id", link.target_id)
    if link.source_id == link.target_id:
        raise InvalidArgument("target_id", "a record cannot be linked to itself")
    if not isinstance(link.link_type, LinkType):
        raise InvalidArgument("link_type", f"must be a LinkType, got {link.link_type!r}")
    validate_aware_datetime("created_at", link.created_at)
    validate_metadata("link metadata", link.metadata)


def validate_filter(flt: RecordFilter) -> None:
    """The SPI-level check of a read filter."""
    if not isinstance(flt, RecordFilter):
        raise InvalidArgument("filter", f"must be a RecordFilter, got {type(flt).__name__}")
    for dim in ("user_id", "agent_id", "thread_id"):
        value = getattr(flt, dim)
        if value is not ANY and value is not None:
            validate_id(dim, value)
    if flt.record_ids is not None:
        if isinstance(flt.record_ids, str) or not isinstance(flt.record_ids, Sequence):
            raise InvalidArgument("record_ids", "must be a tuple of ids")
        for rid in flt.record_ids:
            validate_id("record_ids", rid, internal=True)
    for name, enum in (("record_types", RecordType), ("statuses", RecordStatus)):
        values = getattr(flt, name)
        if values is None:
            continue
        if not isinstance(values, Set):
            raise InvalidArgument(name, f"must be a frozenset of {enum.__name__}, got {type(values).__name__}")
        for value in values:
            if not isinstance(value, enum):
                raise InvalidArgument(name, f"must contain {enum.__name__} values, got {value!r}")
    for name in ("alive_at", "expired_at"):
        if getattr(flt, name) is not None:
            validate_aware_datetime(name, getattr(flt, name))
    for name in ("min_seq", "max_seq"):
        value = getattr(flt, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidArgument(name, f"must be an int or None, got {value!r}")
        if value is not None and not SEQ_RANGE[0] <= value <= SEQ_RANGE[1]:
            raise InvalidArgument(name, f"must be a signed 64-bit int, got {value}")
    if flt.metadata_filter is not None:
        validate_metadata_filter(flt.metadata_filter)


MAX_WINDOW = 2**62
"""Read windows are clamped here: no store holds 2**62 records, so an ``offset`` at or past it is
past the end (an empty result, without asking the backend) and a ``limit`` at or past it is no
limit. Backends never see a window their 64-bit integers cannot hold."""

SEQ_RANGE = (-(2**63), 2**63 - 1)
"""``RecordFilter.min_seq`` / ``max_seq`` bounds: sequence numbers are signed 64-bit."""


def validate_window(limit: Any, offset: Any) -> tuple[int | None, int]:
    """A read window: ``limit`` None or an int >= 0, ``offset`` an int >= 0, any size.
    Returns them clamped by ``MAX_WINDOW`` (a huge limit becomes None; a huge offset becomes
    ``MAX_WINDOW``, which the SPI answers with ``[]``)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgument("limit", f"must be None or an int >= 0, got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgument("offset", f"must be an int >= 0, got {offset!r}")
    return (None if limit is not None and limit >= MAX_WINDOW else limit), min(offset, MAX_WINDOW)


def validate_positive_int(argument: str, value: Any, *, minimum: int = 1, maximum: int | None = None) -> int:
    """An int (not bool) within bounds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(argument, f"must be an int, got {type(value).__name__}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"{minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise InvalidArgument(argument, f"must be {bound}, got {value}")
    return value


def validate_ttl_days(argument: str, value: Any) -> float | None:
    """A positive finite number of days, or None. Any size is accepted: an int too large for a
    float becomes ``math.inf``, and a TTL that ends past the last representable instant (year
    9999) means the record never expires (``AgentMemory.expires_at``). NaN, infinity, bools and
    non-numbers are refused."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgument(argument, f"must be a positive number of days, got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise InvalidArgument(argument, f"must be > 0, got {value}")
        try:
            return float(value)
        except OverflowError:  # beyond any float: beyond any date too
            return math.inf
    if not math.isfinite(value):
        raise InvalidArgument(argument, f"must be a positive number of days, got {value!r}")
    if value <= 0:
        raise InvalidArgument(argument, f"must be > 0, got {value}")
    return float(value)


# ---- the SPI's checks, shared by its sync and async paths ----------------------------------
def validate_batch(batch: WriteBatch, dimension: int) -> None:
    """The SPI-level check of a ``WriteBatch`` for a store of vectors of ``dimension``."""
    if not isinstance(batch, WriteBatch):
        raise InvalidArgument("batch", f"must be a WriteBatch, got {type(batch).__name__}")
    seen: set[str] = set()
    known_ids: set[str] = set()
    with_vector: list[NewRecord] = []
    for item in batch.add:
        if not isinstance(item, NewRecord):
            raise InvalidArgument("batch.add", f"items must be NewRecord, got {type(item).__name__}")
        validate_new_record(item.record, known_ids=known_ids)
        if item.record.record_id in seen:
            raise InvalidArgument("batch.add", f"duplicate record id {item.record.record_id!r}")
        seen.add(item.record.record_id)
        if item.vector is not None:
            with_vector.append(item)
    _validate_added_vectors(with_vector, dimension)
    for patch in batch.patch:
        if not isinstance(patch, RecordPatch):
            raise InvalidArgument("batch.patch", f"items must be RecordPatch, got {patch!r}")
        validate_patch(patch)
        if patch.vector is not UNSET and patch.vector is not None:
            validate_vector(f"vector of {patch.record_id!r}", patch.vector, dimension)
    for link in batch.add_links:
        validate_link(link)
    validate_id_list("batch.delete_links", batch.delete_links)
    validate_id_list("batch.delete", batch.delete)


_VECTOR_CHUNK = 4096
"""Rows checked together by ``_validate_added_vectors`` (bounds the temporary matrix)."""


def _validate_added_vectors(items: list[NewRecord], dimension: int) -> None:
    """``validate_vector`` for every added vector, as whole-matrix checks where the vectors are
    numeric arrays of the right shape (bulk ingest); the first bad one raises its own error."""
    for start in range(0, len(items), _VECTOR_CHUNK):
        chunk = items[start:start + _VECTOR_CHUNK]
        vectors = [item.vector for item in chunk]
        if all(type(v) is np.ndarray and v.shape == (dimension,) and v.dtype.kind in "fiu" for v in vectors):
            with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf
                matrix = np.asarray(vectors, dtype=np.float32)
            bad = bad_vector_row(matrix)
            if bad is not None:
                raise InvalidArgument(f"vector of {chunk[bad[0]].record.record_id!r}", bad[1])
            continue
        for item in chunk:
            validate_vector(f"vector of {item.record.record_id!r}", item.vector, dimension)


def validate_vector(name: str, vector: Any, dimension: int) -> np.ndarray:
    """One vector of ``dimension`` finite values, not all zero, as a float32 array."""
    try:
        # out-of-range values become inf, and a sum of squares may overflow: both decided below
        with np.errstate(over="ignore", invalid="ignore"):
            arr = np.asarray(vector, dtype=np.float32)
            shaped = arr.ndim == 1 and arr.shape[0] == dimension
            # a finite positive sum of squares proves every value finite and one not zero (a
            # search's hot path: one reduction); NaN, infinity, zeros or overflow: the full rule
            plain = shaped and 0.0 < float(np.dot(arr, arr)) < math.inf
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(name, f"not a numeric vector ({exc})") from None
    if not shaped:
        raise InvalidArgument(name, f"expected shape ({dimension},), got {arr.shape}")
    if not plain:
        bad = bad_vector_row(arr[None, :])
        if bad is not None:
            raise InvalidArgument(name, bad[1])
    return arr


def validate_order(order: Any) -> Order:
    """An ``Order`` or its string value."""
    if order.__class__ is Order:
        return order
    try:
        return Order(order)
    except ValueError:
        raise InvalidArgument("order", f"must be one of {[o.value for o in Order]}, got {order!r}") from None


def validate_k(k: Any) -> None:
    """A search's ``k``: an int in 1..10000."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or k > 10_000:
        raise InvalidArgument("k", f"must be an int in 1..10000, got {k!r}")


def validate_id_list(name: str, ids: Sequence[str] | None) -> None:
    """None or a list (not a string) of non-empty string ids."""
    if ids is None:
        return
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise InvalidArgument(name, "must be a list of ids")
    for value in ids:
        if not isinstance(value, str) or not value:
            raise InvalidArgument(name, f"ids must be non-empty strings, got {value!r}")

