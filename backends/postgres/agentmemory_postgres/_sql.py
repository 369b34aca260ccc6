"""SQL text, parameters and row decoding of the PostgreSQL backend (pure: no connection here).

One store is one PostgreSQL schema holding four tables:

* ``am_meta`` — one row: schema version, vector dimension, keyword analyzer, the store-wide
  ``seq`` counter and the BM25 corpus statistics (documents, total length). Writers that add,
  delete or re-index records lock this row first, so ``seq`` follows commit order and the
  statistics stay exact.
* ``am_records`` — every record with its vector (``vector(dim)``, unit length), its analysed
  terms (distinct terms and their counts, GIN-indexed) and its metadata as JSON text (kept
  verbatim: ``1``, ``1.0`` and ``true`` stay apart).
* ``am_links`` — links, carrying the user scope of their source record.
* ``am_terms`` — BM25 document frequency per term over the searchable records, kept in step
  with ``am_records`` in the same transaction.

Every table carries the user scope (``user_key``: the user id, ``''`` when absent) in its
primary key, so Citus can distribute them by user without changes (docs in the README).
"""

from __future__ import annotations

import copy
import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, RecordFilter

SCHEMA_VERSION = 2
"""The layout this package writes; ``MIGRATIONS`` lifts older stores to it."""

INLINE_EMBEDDING = "ALTER TABLE {s}.am_records ALTER COLUMN embedding SET STORAGE MAIN"
"""Keep each vector in its row. A record's row (text, index text, terms, counts, metadata and a
384-d vector of 1,544 bytes) passes PostgreSQL's 2 kB TOAST threshold, and pgvector's ``vector``
type is stored ``EXTERNAL``, so the vector, the largest value, went out of line: every candidate
of a search, and every row of an exact scan, then cost a TOAST lookup (measured at 10k × 384-d:
heap 10 MB + TOAST 12 MB; fetching 50 candidates with their vectors took 2-4x the index scan).
``MAIN`` moves the other columns out first and the vector only when the row cannot fit a page.
Rows written before a store's migration to version 2 keep their layout until rewritten
(``VACUUM FULL``)."""

MIGRATIONS: dict[int, list[str]] = {1: [INLINE_EMBEDDING]}
"""version -> statements (with ``{s}`` for the schema, ``{vector}`` for the vector type) that
lift a store from that version to the next (1 -> 2: ``INLINE_EMBEDDING``)."""

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")

RECORD_COLUMNS = (
    "r.record_id, r.record_type, r.content, r.index_text, r.user_id, r.agent_id, r.thread_id, r.role, "
    "r.seq, r.ts, r.created_at, r.expires_at, r.status, r.metadata"
)
LINK_COLUMNS = "l.link_id, l.source_id, l.target_id, l.link_type, l.created_at, l.metadata"


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def valid_schema_name(name: Any) -> bool:
    """True for a plain PostgreSQL identifier (letters, digits, ``_``, ``$``; at most 63 bytes)."""
    return isinstance(name, str) and bool(_SCHEMA_NAME.match(name))


@dataclass(frozen=True)
class Names:
    """The qualified names of one store's objects (``schema``) and of the pgvector extension's
    type and operators (``ext``: the schema the extension lives in)."""

    schema: str
    ext: str = "public"
    engine: str = "pgvector"
    """``pgvector``: a ``vector(dim)`` column (HNSW, ``<=>``); ``client``: unit float32 vectors
    as ``bytea``, ranked exactly in Python (servers whose pgvector cannot run, see README)."""

    @property
    def s(self) -> str:
        return quote_ident(self.schema)

    @property
    def meta(self) -> str:
        return f"{self.s}.am_meta"

    @property
    def records(self) -> str:
        return f"{self.s}.am_records"

    @property
    def links(self) -> str:
        return f"{self.s}.am_links"

    @property
    def terms(self) -> str:
        return f"{self.s}.am_terms"

    @property
    def vector_type(self) -> str:
        return f"{quote_ident(self.ext)}.vector"

    @property
    def cosine(self) -> str:
        """The cosine distance operator, qualified (``OPERATOR(ext.<=>)``)."""
        return f"OPERATOR({quote_ident(self.ext)}.<=>)"

    @property
    def vector_send(self) -> str:
        """pgvector's binary output function, qualified: ``vector_send(embedding)`` is the vector's
        wire form as ``bytea``, which the driver loads in C (``vectors_from_send`` decodes a
        batch at once) instead of calling a Python loader per row."""
        return f"{quote_ident(self.ext)}.vector_send"

    @property
    def lock_key(self) -> str:
        """Text whose ``hashtext`` keys this store's advisory lock (DDL of concurrent openers)."""
        return f"agentmemory-postgres:{self.schema}"


# ---- DDL ----------------------------------------------------------------------------------------
def create_statements(names: Names, dimension: int, vector_index: bool = True) -> list[str]:
    """Every object of a fresh store, ``IF NOT EXISTS`` (run under the store's DDL lock)."""
    s = names.s
    embedding = f"{names.vector_type}({int(dimension)})" if names.engine == "pgvector" else "bytea"
    statements = [
        f"CREATE SCHEMA IF NOT EXISTS {s}",
        f"""CREATE TABLE IF NOT EXISTS {names.meta} (
            store_key text COLLATE "C" NOT NULL DEFAULT '' PRIMARY KEY,
            schema_version integer NOT NULL,
            dimension integer NOT NULL,
            language text NOT NULL,
            fingerprint text NOT NULL,
            seq bigint NOT NULL DEFAULT 0,
            n_docs bigint NOT NULL DEFAULT 0,
            total_len bigint NOT NULL DEFAULT 0,
            vector_engine text NOT NULL DEFAULT 'pgvector',
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now())""",
        f"""CREATE TABLE IF NOT EXISTS {names.records} (
            user_key text COLLATE "C" NOT NULL,
            record_id text COLLATE "C" NOT NULL,
            seq bigint NOT NULL,
            record_type text COLLATE "C" NOT NULL,
            content text NOT NULL,
            index_text text,
            user_id text COLLATE "C",
            agent_id text COLLATE "C",
            thread_id text COLLATE "C",
            role text,
            ts timestamptz NOT NULL,
            created_at timestamptz NOT NULL,
            expires_at timestamptz,
            status text COLLATE "C" NOT NULL,
            metadata text NOT NULL,
            embedding {embedding},
            terms text[] COLLATE "C" NOT NULL,
            term_counts integer[] NOT NULL,
            doc_len integer NOT NULL,
            PRIMARY KEY (user_key, record_id))""",
        INLINE_EMBEDDING.format(s=s),
        f"CREATE INDEX IF NOT EXISTS am_records_id ON {names.records} (record_id)",
        f"CREATE INDEX IF NOT EXISTS am_records_seq ON {names.records} (seq)",
        f"CREATE INDEX IF NOT EXISTS am_records_scope ON {names.records} (user_key, thread_id, seq)",
        f"CREATE INDEX IF NOT EXISTS am_records_terms ON {names.records} USING gin (terms) WHERE embedding IS NOT NULL",
        f"""CREATE TABLE IF NOT EXISTS {names.links} (
            user_key text COLLATE "C" NOT NULL,
            link_id text COLLATE "C" NOT NULL,
            source_id text COLLATE "C" NOT NULL,
            target_id text COLLATE "C" NOT NULL,
            link_type text COLLATE "C" NOT NULL,
            created_at timestamptz NOT NULL,
            metadata text NOT NULL,
            PRIMARY KEY (user_key, link_id))""",
        f"CREATE INDEX IF NOT EXISTS am_links_id ON {names.links} (link_id)",
        f"CREATE INDEX IF NOT EXISTS am_links_source ON {names.links} (source_id)",
        f"CREATE INDEX IF NOT EXISTS am_links_target ON {names.links} (target_id)",
        f"""CREATE TABLE IF NOT EXISTS {names.terms} (
            term text COLLATE "C" NOT NULL PRIMARY KEY,
            df bigint NOT NULL)""",
    ]
    if names.engine == "pgvector" and vector_index:
        statements.append(hnsw_statement(names))
    return statements


def hnsw_statement(names: Names) -> str:
    """The HNSW (cosine) index over the vectors (pgvector engine)."""
    return (
        f"CREATE INDEX IF NOT EXISTS am_records_hnsw ON {names.records} USING hnsw "
        f"(embedding {quote_ident(names.ext)}.vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
    )


TABLES = ("am_terms", "am_links", "am_records", "am_meta")


def drop_statement(names: Names) -> str:
    """Drop the store's tables (never the schema: it may hold other things)."""
    return "DROP TABLE IF EXISTS " + ", ".join(f"{names.s}.{t}" for t in TABLES) + " CASCADE"


def existing_tables(names: Names) -> tuple[str, list[Any]]:
    return (
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND c.relname = ANY(%s::text[])",
        [names.schema, list(TABLES)],
    )


# ---- vectors ------------------------------------------------------------------------------------
def unit(vector: Any) -> np.ndarray:
    """``vector`` as float32 scaled to length 1 (stored like the reference store does)."""
    arr = np.asarray(vector, dtype=np.float32)
    return arr / np.float32(np.linalg.norm(arr))


def encode_vector(names: Names, vector: Any) -> Any:
    """A vector parameter as the store keeps it: the unit float32 array (dumped as pgvector's
    binary ``vector``) or, for the client engine, its little-endian float32 bytes."""
    arr = unit(vector)
    return arr if names.engine == "pgvector" else arr.astype("<f4").tobytes()


def decode_vector(value: Any) -> np.ndarray:
    """A stored vector as read (a loaded ``vector`` or ``bytea``) as a float32 array."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32)
    return np.asarray(value, dtype=np.float32)


def vector_to_binary(vector: np.ndarray) -> bytes:
    """pgvector's binary wire format: ``int16 dim``, ``int16 0``, ``dim`` big-endian float32."""
    arr = np.asarray(vector, dtype=">f4").ravel()
    return struct.pack(">HH", arr.shape[0], 0) + arr.tobytes()


def vector_from_binary(data: bytes | bytearray | memoryview) -> np.ndarray:
    """Inverse of ``vector_to_binary`` (a native float32 array)."""
    raw = bytes(data)
    (dim,) = struct.unpack(">H", raw[:2])
    return np.frombuffer(raw, dtype=">f4", count=dim, offset=4).astype(np.float32)


def vectors_from_send(blobs: Sequence[bytes]) -> np.ndarray:
    """A batch of ``vector_send`` outputs (``vector_to_binary``'s format, one dimension) as one
    float32 matrix: the 4-byte header is one big-endian float32 slot per row, dropped."""
    flat = np.frombuffer(b"".join(blobs), dtype=">f4")
    return flat.reshape(len(blobs), -1)[:, 1:].astype(np.float32)


def vector_from_text(text: str) -> np.ndarray:
    """pgvector's text form ``[x,y,...]`` as float32."""
    inner = text.strip()[1:-1]
    return np.asarray([float(x) for x in inner.split(",")] if inner else [], dtype=np.float32)


# ---- values -------------------------------------------------------------------------------------
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dump_json(value: Any) -> str:
    """Compact JSON text of validated metadata."""
    return _ENCODER.encode(value if value is not None else {})


def user_key(user_id: str | None) -> str:
    """The distribution column: the user id, ``''`` when absent (user ids are never empty)."""
    return "" if user_id is None else user_id


_RECORD = Record.model_construct(
    record_id="", record_type=RecordType.MEMORY, content="", index_text=None, user_id=None, agent_id=None,
    thread_id=None, role=None, seq=0, timestamp=None, created_at=None, expires_at=None, status=RecordStatus.VALID,
    metadata={},
)
"""The record ``decode_record`` copies: ``copy.copy`` of a constructed model and its fields put
into the copy's ``__dict__`` give what ``Record.model_construct`` gives with every field (the
same fields set), in a quarter of its time (about 3 µs against 10.5 per record; a search builds
its k records)."""
_TYPES = {t.value: t for t in RecordType}
_STATUSES = {s.value: s for s in RecordStatus}


def decode_record(row: Sequence[Any]) -> Record:
    """A ``Record`` from a row selected with ``RECORD_COLUMNS`` (extra trailing columns ignored)."""
    rec = copy.copy(_RECORD)
    rec.__dict__.update(
        record_id=row[0],
        record_type=_TYPES.get(row[1]) or RecordType(row[1]),
        content=row[2],
        index_text=row[3],
        user_id=row[4],
        agent_id=row[5],
        thread_id=row[6],
        role=row[7],
        seq=int(row[8]),
        timestamp=row[9],
        created_at=row[10],
        expires_at=row[11],
        status=_STATUSES.get(row[12]) or RecordStatus(row[12]),
        metadata=json.loads(row[13]) if row[13] and row[13] != "{}" else {},
    )
    return rec


def decode_link(row: Sequence[Any]) -> Link:
    """A ``Link`` from a row selected with ``LINK_COLUMNS``."""
    return Link.model_construct(
        link_id=row[0],
        source_id=row[1],
        target_id=row[2],
        link_type=LinkType(row[3]),
        created_at=row[4],
        metadata=json.loads(row[5]) if row[5] and row[5] != "{}" else {},
    )


# ---- filters ------------------------------------------------------------------------------------
def compile_filter(flt: RecordFilter, alias: str = "r") -> tuple[str, list[Any]]:
    """``flt`` without its metadata part as a SQL condition over ``alias`` and its parameters
    (the metadata filter is applied in Python with the reference matcher, after this)."""
    conds: list[str] = []
    params: list[Any] = []
    a = alias
    if flt.record_ids is not None:
        conds.append(f"{a}.record_id = ANY(%s::text[])")
        params.append(list(dict.fromkeys(flt.record_ids)))
    if flt.record_types is not None:
        if not flt.record_types:
            return "FALSE", []
        conds.append(f"{a}.record_type = ANY(%s::text[])")
        params.append(sorted(RecordType(t).value for t in flt.record_types))
    if flt.user_id is not ANY:
        conds.append(f"{a}.user_key = %s")
        params.append(user_key(flt.user_id))  # type: ignore[arg-type]
    for column in ("agent_id", "thread_id"):
        want = getattr(flt, column)
        if want is ANY:
            continue
        if want is None:
            conds.append(f"{a}.{column} IS NULL")
        else:
            conds.append(f"{a}.{column} = %s")
            params.append(want)
    if flt.statuses is not None:
        if not flt.statuses:
            return "FALSE", []
        conds.append(f"{a}.status = ANY(%s::text[])")
        params.append(sorted(RecordStatus(s).value for s in flt.statuses))
    if flt.alive_at is not None:
        conds.append(f"({a}.expires_at IS NULL OR {a}.expires_at > %s)")
        params.append(flt.alive_at)
    if flt.expired_at is not None:
        conds.append(f"{a}.expires_at <= %s")
        params.append(flt.expired_at)
    if flt.min_seq is not None:
        conds.append(f"{a}.seq >= %s")
        params.append(int(flt.min_seq))
    if flt.max_seq is not None:
        conds.append(f"{a}.seq < %s")
        params.append(int(flt.max_seq))
    return (" AND ".join(conds) if conds else "TRUE"), params


def parse_time(value: Any) -> datetime:
    """A timestamptz as the driver returns it (always aware)."""
    assert isinstance(value, datetime)
    return value
