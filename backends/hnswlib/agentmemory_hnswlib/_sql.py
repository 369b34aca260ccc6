"""The SQLite side: schema, ``RecordFilter`` → SQL, and rows ↔ records.

Records, vectors (unit float32 BLOBs), links and store metadata live in one SQLite file in WAL
mode; it is the source of truth. Keyword search uses an FTS5 table whose rows are the keyword
analyzer's terms (``agentmemory.analysis.Analyzer.terms``: case-folded, stemmed, stop words
dropped) joined by spaces under the ``ascii`` tokenizer with ``_`` as a token character, so FTS5
splits them back into exactly those terms. ``meta`` records the analyzer's ``language`` and
``analyzer`` fingerprint; a store written under another fingerprint is re-analysed on open.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentmemory.filters import metadata_matches_json
from agentmemory.memo import BoundedMemo
from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, RecordFilter

SCHEMA_VERSION = 3
"""2: FTS rows hold analysed terms (version 1: lower-cased words); 3: ``records.index_text``
(SPI 1.1: what keyword search indexes in place of the content; NULL = the content). Older stores
get the column and are re-analysed on open."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    rid INTEGER PRIMARY KEY,
    record_id TEXT NOT NULL UNIQUE,
    record_type TEXT NOT NULL,
    content TEXT NOT NULL,
    user_id TEXT,
    agent_id TEXT,
    thread_id TEXT,
    role TEXT,
    seq INTEGER NOT NULL UNIQUE,
    timestamp TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    expires_us INTEGER,
    status TEXT NOT NULL,
    metadata TEXT NOT NULL,
    rev INTEGER NOT NULL,
    index_text TEXT
);
CREATE INDEX IF NOT EXISTS records_user ON records (user_id, seq);
CREATE INDEX IF NOT EXISTS records_agent ON records (agent_id, seq);
CREATE INDEX IF NOT EXISTS records_thread ON records (thread_id, seq);
CREATE INDEX IF NOT EXISTS records_thread_type ON records (thread_id, record_type, seq);
CREATE INDEX IF NOT EXISTS records_type ON records (record_type, seq);
CREATE INDEX IF NOT EXISTS records_expires ON records (expires_us) WHERE expires_us IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_rev ON records (rev);
CREATE TABLE IF NOT EXISTS vectors (
    label INTEGER PRIMARY KEY AUTOINCREMENT,
    record_id TEXT NOT NULL UNIQUE,
    ntok INTEGER NOT NULL,
    embedding BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS links (
    link_id TEXT PRIMARY KEY,
    source_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    link_type TEXT NOT NULL,
    created_at TEXT NOT NULL,
    metadata TEXT NOT NULL,
    lo TEXT NOT NULL,
    hi TEXT NOT NULL,
    UNIQUE (lo, hi)
);
CREATE INDEX IF NOT EXISTS links_source ON links (source_id);
CREATE INDEX IF NOT EXISTS links_target ON links (target_id);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (body, tokenize = "ascii tokenchars '_'");
"""

RECORD_COLUMNS = (
    "record_id, record_type, content, user_id, agent_id, thread_id, role, seq, timestamp, "
    "created_at, expires_at, status, metadata, index_text"
)
VECTOR_ROW_SQL = (
    "SELECT v.label, r.record_id, r.record_type, r.user_id, r.agent_id, r.thread_id, r.status, "
    "r.expires_us, r.seq, v.ntok, r.metadata, v.embedding, r.content, r.role, r.timestamp, "
    "r.created_at, r.expires_at, r.index_text FROM vectors v "
    "JOIN records r ON r.record_id = v.record_id"
)
LINK_COLUMNS = "link_id, source_id, target_id, link_type, created_at, metadata"

META_UDF = "am_metadata_matches"


def register_functions(con: Any) -> None:
    """Register the reference metadata matcher as a deterministic SQL function."""
    con.create_function(META_UDF, 2, _udf_metadata_matches, deterministic=True)


def _udf_metadata_matches(metadata_json: str | None, filter_json: str) -> int:
    return 1 if metadata_matches_json(metadata_json, filter_json) else 0


def dumps(value: Any) -> str:
    """Compact JSON text as stored (non-ASCII kept, NaN refused)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


_WHERE_MEMO: BoundedMemo[tuple[Any, ...], tuple[str, list[Any]]] = BoundedMemo(256)
"""``where``'s clause by filter shape (``_where_key``): its text and the parameters before the
instants and sequence bounds, which differ per call (a read's ``alive_at`` is now). A pure
function of the key."""


def _where_key(flt: RecordFilter) -> tuple[Any, ...]:
    return (flt.record_types, flt.user_id, flt.agent_id, flt.thread_id, flt.statuses,
            flt.alive_at is None, flt.expired_at is None, flt.min_seq is None, flt.max_seq is None)


THREAD_TYPE_INDEX = "CREATE INDEX IF NOT EXISTS records_thread_type ON records (thread_id, record_type, seq)"
"""Made on open in stores written before it existed (a one-time pass over their rows)."""


def source(flt: RecordFilter) -> str:
    """What a query over ``flt`` reads from: a thread's rows of some types go through the
    (thread, type, seq) index. SQLite's planner walks ``records_thread`` in seq order instead,
    filtering types row by row: a card's memories of a 6,000-message thread cost 2.1 ms that
    way and 8 us through the index (a thread's messages 16 against 18 us)."""
    if flt.record_types is not None and flt.record_ids is None and flt.thread_id is not ANY and flt.thread_id is not None:
        return "records INDEXED BY records_thread_type"
    return "records"


def where(flt: RecordFilter, to_us: Any) -> tuple[str, list[Any]]:
    """The WHERE clause (over ``records``) and parameters expressing ``flt`` exactly as the
    reference ``record_matches`` does. A scope (no record ids, no metadata filter) has its
    clause and fixed parameters remembered by its shape (``_WHERE_MEMO``): the card asks the
    same scopes each turn, and building them cost a third of a window's statement."""
    if flt.metadata_filter is not None or flt.record_ids is not None:
        return _where(flt, to_us)
    key = _where_key(flt)
    try:
        known = _WHERE_MEMO.get(key)
    except TypeError:  # an unhashable scope value: validation refuses it, the SQL below as well
        return _where(flt, to_us)
    if known is None:
        clause, params = _where(flt, to_us)
        fixed = len(params) - sum(v is not None for v in (flt.alive_at, flt.expired_at, flt.min_seq, flt.max_seq))
        known = _WHERE_MEMO.keep(key, (clause, params[:fixed]))
    clause, head = known
    params = list(head)
    if flt.alive_at is not None:
        params.append(to_us(flt.alive_at))
    if flt.expired_at is not None:
        params.append(to_us(flt.expired_at))
    if flt.min_seq is not None:
        params.append(flt.min_seq)
    if flt.max_seq is not None:
        params.append(flt.max_seq)
    return clause, params


def _where(flt: RecordFilter, to_us: Any) -> tuple[str, list[Any]]:
    """``where`` built afresh."""
    clauses: list[str] = []
    params: list[Any] = []
    if flt.record_ids is not None:
        clauses.append("record_id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(flt.record_ids)))
    if flt.record_types is not None:
        clauses.append("record_type IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(RecordType(t).value for t in flt.record_types)))
    for dim in ("user_id", "agent_id", "thread_id"):
        want = getattr(flt, dim)
        if want is ANY:
            continue
        if want is None:
            clauses.append(f"{dim} IS NULL")
        else:
            clauses.append(f"{dim} = ?")
            params.append(want)
    if flt.statuses is not None:
        statuses = sorted(RecordStatus(s).value for s in flt.statuses)
        clauses.append(f"status IN ({','.join('?' * len(statuses))})")
        params.extend(statuses)
    if flt.alive_at is not None:
        clauses.append("(expires_us IS NULL OR expires_us > ?)")
        params.append(to_us(flt.alive_at))
    if flt.expired_at is not None:
        clauses.append("(expires_us IS NOT NULL AND expires_us <= ?)")
        params.append(to_us(flt.expired_at))
    if flt.min_seq is not None:
        clauses.append("seq >= ?")
        params.append(flt.min_seq)
    if flt.max_seq is not None:
        clauses.append("seq < ?")
        params.append(flt.max_seq)
    if flt.metadata_filter is not None:
        clauses.append(f"{META_UDF}(metadata, ?)")
        params.append(dumps(flt.metadata_filter))
    return (" AND ".join(clauses) if clauses else "1"), params


_FIELDS = ("record_id", "record_type", "content", "user_id", "agent_id", "thread_id", "role", "seq",
           "timestamp", "created_at", "expires_at", "status", "metadata", "index_text")
_TYPES = {t.value: t for t in RecordType}
_STATUSES = {s.value: s for s in RecordStatus}
_new_record = Record.__new__
_set = object.__setattr__
_DIRECT = (
    tuple(Record.model_fields) == _FIELDS
    and not Record.__pydantic_root_model__
    and not Record.__pydantic_post_init__
    and not Record.__private_attributes__
    and Record.model_config.get("extra") != "allow"
)
"""Whether ``row_to_record`` may fill the model's slots directly: exactly what
``Record.model_construct`` with every field does, without its per-field alias and default
handling (a tenth of the cost of decoding a row); otherwise it calls ``model_construct``."""
_ALL_SET = set(_FIELDS)
"""The ``model_fields_set`` of every decoded record, shared: a frozen ``Record`` never changes
it (``model_copy`` copies it first), and building one per row cost a quarter of the decoding."""


def row_to_record(row: tuple[Any, ...]) -> Record:
    """A ``Record`` from a row of ``RECORD_COLUMNS`` (values were validated when written):
    equal, field for field and in ``model_fields_set``, to ``Record.model_construct`` of them."""
    (record_id, record_type, content, user_id, agent_id, thread_id, role, seq, timestamp,
     created_at, expires_at, status, metadata, index_text) = row
    values = {
        "record_id": record_id,
        "record_type": _TYPES[record_type],
        "content": content,
        "user_id": user_id,
        "agent_id": agent_id,
        "thread_id": thread_id,
        "role": role,
        "seq": seq,
        "timestamp": datetime.fromisoformat(timestamp),
        "created_at": datetime.fromisoformat(created_at),
        "expires_at": None if expires_at is None else datetime.fromisoformat(expires_at),
        "status": _STATUSES[status],
        "metadata": {} if metadata == "{}" else json.loads(metadata),
        "index_text": index_text,
    }
    if not _DIRECT:  # pragma: no cover - a Record shape this fast path does not know
        return Record.model_construct(**values)
    rec = _new_record(Record)
    _set(rec, "__dict__", values)
    _set(rec, "__pydantic_fields_set__", _ALL_SET)
    _set(rec, "__pydantic_extra__", None)
    _set(rec, "__pydantic_private__", None)
    return rec


def row_to_link(row: tuple[Any, ...]) -> Link:
    """A ``Link`` from a row of ``LINK_COLUMNS``."""
    link_id, source_id, target_id, link_type, created_at, metadata = row
    return Link.model_construct(
        link_id=link_id,
        source_id=source_id,
        target_id=target_id,
        link_type=LinkType(link_type),
        created_at=datetime.fromisoformat(created_at),
        metadata=json.loads(metadata),
    )
