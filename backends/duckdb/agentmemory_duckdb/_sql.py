"""Pure helpers of the DuckDB backend: filter compilation, value conversion, row decoding.

Kept free of connection state so they can be unit-tested on their own.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa

from agentmemory.filters import metadata_matches
from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, UNSET, RecordFilter, RecordPatch

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

RECORD_COLUMNS = (
    "rid, rtype, content, user_id, agent_id, thread_id, role, seq, ts, created, expires, status, metadata, index_text"
)
"""The columns ``decode_record`` expects, in order (prefix each with the table alias)."""

META_MATCH_UDF = "am_meta_match"
"""Name prefix of the DuckDB UDF wrapping ``agentmemory.filters.metadata_matches_json`` (each
store registers its own, suffixed, because connections to one file share the function catalog)."""

_MAX_INLINE_IDS = 64
_IDENT = re.compile(r"^[a-z_][a-z0-9_]*$")


def qualified_columns(alias: str) -> str:
    """``RECORD_COLUMNS`` with ``alias.`` in front of each column."""
    return ", ".join(f"{alias}.{c.strip()}" for c in RECORD_COLUMNS.split(","))


def ident(name: str) -> str:
    """``name`` if it is a safe lower-case SQL identifier (we only build our own names)."""
    if not _IDENT.match(name):
        raise ValueError(f"unsafe SQL identifier {name!r}")
    return name


def to_micros(value: datetime) -> int:
    """Microseconds since the epoch; a naive datetime counts as UTC (like the client does)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def iso(value: datetime | None) -> str | None:
    """The lossless text form of a datetime (offset kept, microseconds kept)."""
    return None if value is None else value.isoformat()


def from_iso(text: str | None) -> datetime | None:
    """Inverse of ``iso``."""
    return None if text is None else datetime.fromisoformat(text)


def dump_json(value: Any) -> str:
    """Compact JSON text of metadata (validated JSON already, so this cannot fail)."""
    return _ENCODER.encode(value)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` as float32 scaled to length 1 (stored like the reference store does)."""
    arr = np.asarray(vector, dtype=np.float32)
    return arr / np.float32(np.linalg.norm(arr))


def vector_literal(vector: np.ndarray) -> str:
    """A ``[x, y, …]`` string that casts back to the same float32 values (``?::FLOAT[d]``).

    Binding a Python list as a ``FLOAT[d]`` parameter costs ~80 ms per call; a string cast is
    ~2 ms (perf_baseline.md). ``repr`` of the float64 widening is exact for float32.
    """
    return "[" + ",".join(map(repr, np.asarray(vector, dtype=np.float32).tolist())) + "]"


def sql_str(value: str) -> str:
    """``value`` as a DuckDB string literal. Standard SQL strings have one special character,
    the quote, doubled here; NUL never reaches us (ids, text and metadata are validated).

    Literals instead of ``?`` parameters: the duckdb Python client tries ``import pandas``
    twice per bound parameter, which costs 0.1-0.3 ms each when pandas is not installed."""
    if "\x00" in value:
        raise ValueError("NUL in SQL literal")
    return "'" + value.replace("'", "''") + "'"


def sql_str_list(values: Sequence[str]) -> str:
    """A ``VARCHAR[]`` expression holding ``values`` (one literal, parsed by DuckDB's JSON reader)."""
    return f"from_json({sql_str(json.dumps(list(values)))}, '[\"VARCHAR\"]')"


def compile_filter(flt: RecordFilter, alias: str = "r", udf: str = META_MATCH_UDF) -> tuple[str, list[Any]]:
    """A SQL boolean expression over ``alias`` equal to
    ``agentmemory.reference_store.record_matches`` (values inlined as literals, so the parameter
    list is empty). The metadata part calls the UDF, so its semantics are the reference's by
    construction; cheap substring tests in front of it only skip rows it would reject."""
    parts: list[str] = []
    a = alias
    if flt.record_ids is not None:
        ids = list(dict.fromkeys(flt.record_ids))
        if not ids:
            return "FALSE", []
        if len(ids) <= _MAX_INLINE_IDS:
            parts.append(f"{a}.rid IN ({', '.join(sql_str(i) for i in ids)})")
        else:
            parts.append(f"{a}.rid IN (SELECT unnest({sql_str_list(ids)}))")
    if flt.record_types is not None:
        types = sorted(RecordType(t).value for t in flt.record_types)
        if not types:
            return "FALSE", []
        parts.append(f"{a}.rtype IN ({', '.join(sql_str(t) for t in types)})")
    for dim in ("user_id", "agent_id", "thread_id"):
        want = getattr(flt, dim)
        if want is ANY:
            continue
        parts.append(f"{a}.{dim} IS NULL" if want is None else f"{a}.{dim} = {sql_str(want)}")
    if flt.statuses is not None:
        statuses = sorted(RecordStatus(s).value for s in flt.statuses)
        if not statuses:
            return "FALSE", []
        parts.append(f"{a}.status IN ({', '.join(sql_str(s) for s in statuses)})")
    if flt.alive_at is not None:
        parts.append(f"({a}.expires_us IS NULL OR {a}.expires_us > {to_micros(flt.alive_at)})")
    if flt.expired_at is not None:
        parts.append(f"({a}.expires_us IS NOT NULL AND {a}.expires_us <= {to_micros(flt.expired_at)})")
    if flt.min_seq is not None:
        parts.append(f"{a}.seq >= {int(flt.min_seq)}")
    if flt.max_seq is not None:
        parts.append(f"{a}.seq < {int(flt.max_seq)}")
    if flt.metadata_filter:
        # cheap necessary conditions first (native substring tests), then the reference matcher
        for needle in necessary_substrings(flt.metadata_filter):
            parts.append(f"contains({a}.metadata, {sql_str(needle)})")
        parts.append(f"{udf}({a}.metadata, {sql_str(json.dumps(flt.metadata_filter, sort_keys=True))})")
    return (" AND ".join(parts) if parts else "TRUE"), []


def necessary_substrings(flt: Mapping[str, Any]) -> list[str]:
    """Texts that the stored metadata JSON (written by ``dump_json``) must contain for
    ``metadata_matches(metadata, flt)`` to hold: the encoded key of every non-``$not`` condition
    (a missing key never matches one) and encoded string/boolean values it must equal or hold.
    Only a pre-filter: the reference matcher still decides every row that passes."""
    out: list[str] = []
    for key, expr in flt.items():
        op = _operator(expr)
        if op == "$not":
            continue
        out.append(_encode(key) + ":")
        if op == "$array_contains":
            wanted = expr[op] if isinstance(expr[op], list) else [expr[op]]
            out.extend(_encode(w) for w in wanted if isinstance(w, (str, bool)))
        elif op is None and isinstance(expr, Mapping):
            out.extend(necessary_substrings(expr))
        elif isinstance(expr, (str, bool)):
            out.append(_encode(expr))
    return out


def _operator(expr: Any) -> str | None:
    if isinstance(expr, Mapping) and len(expr) == 1:
        (key,) = expr
        if isinstance(key, str) and key.startswith("$"):
            return key
    return None


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=1024)
def _parsed_filter(text: str) -> Any:
    return json.loads(text)


def metadata_udf(metadata: pa.Array, filters: pa.Array) -> pa.Array:
    """Vectorised (Arrow) DuckDB UDF: ``metadata_matches`` of each row's JSON against the JSON
    filter — the reference matcher itself, so semantics cannot drift. Identical metadata texts
    in a chunk are decided once (~25x faster than a row-at-a-time Python UDF)."""
    out: list[bool | None] = []
    seen: dict[tuple[str, str], bool] = {}
    for meta, flt in zip(metadata.to_pylist(), filters.to_pylist()):
        if meta is None or flt is None:
            out.append(None)
            continue
        key = (meta, flt)
        hit = seen.get(key)
        if hit is None:
            hit = seen[key] = metadata_matches(json.loads(meta), _parsed_filter(flt))
        out.append(hit)
    return pa.array(out, type=pa.bool_())


def is_unfiltered(flt: RecordFilter) -> bool:
    """True when ``flt`` constrains nothing (every record matches)."""
    return (
        flt.record_ids is None
        and flt.record_types is None
        and flt.user_id is ANY
        and flt.agent_id is ANY
        and flt.thread_id is ANY
        and flt.statuses is None
        and flt.alive_at is None
        and flt.expired_at is None
        and flt.min_seq is None
        and flt.max_seq is None
        and not flt.metadata_filter
    )


def decode_record(row: Sequence[Any]) -> Record:
    """A ``Record`` from a row selected with ``RECORD_COLUMNS`` (extra trailing columns ignored)."""
    return Record(
        record_id=row[0],
        record_type=row[1],
        content=row[2],
        user_id=row[3],
        agent_id=row[4],
        thread_id=row[5],
        role=row[6],
        seq=row[7],
        timestamp=datetime.fromisoformat(row[8]),
        created_at=datetime.fromisoformat(row[9]),
        expires_at=None if row[10] is None else datetime.fromisoformat(row[10]),
        status=row[11],
        metadata=json.loads(row[12]),
        index_text=row[13],
    )


def patched_row(row: tuple[Any, ...], patch: RecordPatch) -> tuple[Any, ...]:
    """A row of ``RECORD_COLUMNS`` and ``has_vec`` (as the store keeps them) after ``patch``,
    column for column what the ``UPDATE`` in ``DuckDBStore._apply`` stores."""
    new = list(row)
    if isinstance(patch.content, str):
        new[2] = patch.content
    if isinstance(patch.index_text, str):
        new[13] = patch.index_text
    elif patch.index_text is None or isinstance(patch.content, str):  # new content: index it
        new[13] = None
    if isinstance(patch.metadata, Mapping):
        new[12] = dump_json(dict(patch.metadata))
    if patch.status is not UNSET:
        new[11] = RecordStatus(patch.status).value
    if isinstance(patch.timestamp, datetime):
        new[8] = patch.timestamp.isoformat()
    if patch.expires_at is None:
        new[10] = None
    elif isinstance(patch.expires_at, datetime):
        new[10] = patch.expires_at.isoformat()
    if patch.vector is None:
        new[14] = False
    elif isinstance(patch.vector, np.ndarray):
        new[14] = True
    return tuple(new)


LINK_COLUMNS = "link_id, source_id, target_id, link_type, created, metadata"


def decode_link(row: Sequence[Any]) -> Link:
    """A ``Link`` from a row selected with ``LINK_COLUMNS``."""
    return Link(
        link_id=row[0],
        source_id=row[1],
        target_id=row[2],
        link_type=LinkType(row[3]),
        created_at=datetime.fromisoformat(row[4]),
        metadata=json.loads(row[5]),
    )
