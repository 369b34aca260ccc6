"""Pure SQL generation for every SPI operation: SQL text plus bind dictionaries.

Nothing here imports python-oracledb or touches a connection, so every statement shape is unit
tested without a server. Rules that the tests enforce:

- caller data (ids, content, metadata keys and values, query text, vectors, times) only ever
  travels in binds; SQL text is built from fixed fragments, validated names (``StoreNames``) and
  Python ints we computed (dimensions, row counts, accuracy);
- each statement says which binds need an explicit driver type (``types``): ``json`` for the
  ``md_keys`` fact documents (strings only) bound as native JSON, ``vector`` for ``array('f')``
  and ``timestamp`` for datetimes (UTC, naive). Metadata is bound as JSON *text*
  (``metadata_text``), never as native JSON: python-oracledb would turn its floats into Oracle
  NUMBERs;
- record ids and types in IN-lists are padded to a few fixed sizes so the statement cache is not
  flooded by one text per list length.
"""

from __future__ import annotations

import array
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Literal

import numpy as np

from agentmemory.analysis import Analyzer
from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.spi import ANY, UNSET, Order, RecordFilter, RecordPatch

from . import mdfilter
from .names import StoreNames

BindType = Literal["json", "vector", "timestamp"]

MAX_IN_LIST = 1000
"""Oracle's limit on expressions in one IN list."""
_IN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, MAX_IN_LIST)

RECORD_COLUMNS = (
    "record_id",
    "seq",
    "record_type",
    "content",
    "user_id",
    "agent_id",
    "thread_id",
    "message_role",
    "record_ts",
    "created_at",
    "expires_at",
    "status",
    "metadata",
    "index_text",
)
"""Columns selected for a ``Record`` (``record_from_row`` reads them in this order)."""

LINK_COLUMNS = ("link_id", "source_id", "target_id", "link_type", "metadata", "created_at")

NLS_BINARY = "'NLS_SORT=BINARY'"
"""Tie-breaks sort ids by code point (UTF-8 byte order) whatever the session's NLS_SORT."""

TEXT_QUERY_MAX_BYTES = 4000
"""The Oracle Text query is bound as a string: up to 4,000 bytes it travels as VARCHAR2; longer,
python-oracledb thin sends it as LONG, which ``CONTAINS`` on a database with the default
``MAX_STRING_SIZE=STANDARD`` rejects. ``text_query`` stays within it."""
TEXT_TOKEN_MAX_BYTES = 255
"""Oracle Text (18c and later) indexes tokens of up to 255 bytes and truncates longer ones; a
longer query term is cut to the same prefix, so it still finds its document."""
_ACCUM = " ACCUM "
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
"""Letters and digits: analysed terms split at ``_``, as Oracle Text's lexer splits them."""


def analysed_text(content: str | None, analyzer: Analyzer | None = None) -> str:
    """What ``chunk_text`` holds for a record indexed by ``content`` (its ``indexed_text``, see
    ``indexed_text``): its analysed terms (``agentmemory.analysis``: case-folded, stop words
    dropped, stemmed) joined by spaces, so Oracle Text indexes the same terms as every other
    backend (its own stoplist is empty, see ``ddl``)."""
    return " ".join((analyzer or Analyzer.for_language()).terms(content or ""))


def indexed_text(content: str | None, index_text: str | None) -> str | None:
    """``Record.indexed_text`` from the two stored columns: ``index_text`` when set, else the
    content (SPI 1.1). What ``chunk_text`` is analysed from, on every write and re-analysis."""
    return content if index_text is None else index_text


# ---- statements --------------------------------------------------------------------------
@dataclass(frozen=True)
class Fetch:
    """A query whose rows are returned (LOBs fetched as values)."""

    sql: str
    binds: dict[str, Any] = field(default_factory=dict)
    types: dict[str, BindType] = field(default_factory=dict)


@dataclass(frozen=True)
class Execute:
    """A DML or DDL statement run once; the driver returns its row count."""

    sql: str
    binds: dict[str, Any] = field(default_factory=dict)
    types: dict[str, BindType] = field(default_factory=dict)


@dataclass(frozen=True)
class ExecuteMany:
    """One DML statement run for many bind rows (array DML, one round trip).

    With ``rowcounts`` the driver returns the row count of every input row, in order.
    """

    sql: str
    rows: list[dict[str, Any]]
    types: dict[str, BindType] = field(default_factory=dict)
    rowcounts: bool = False


Statement = Fetch | Execute | ExecuteMany


class Binds:
    """Allocates positional-looking named binds (``:b0``, ``:b1``, …) for one statement."""

    def __init__(self, prefix: str = "b") -> None:
        self.prefix = prefix
        self.values: dict[str, Any] = {}
        self.types: dict[str, BindType] = {}

    def add(self, value: Any, bind_type: BindType | None = None) -> str:
        """Register ``value`` and return its placeholder."""
        name = f"{self.prefix}{len(self.values)}"
        self.values[name] = value
        if bind_type is not None:
            self.types[name] = bind_type
        return ":" + name

    def fetch(self, sql: str) -> Fetch:
        return Fetch(sql, dict(self.values), dict(self.types))

    def execute(self, sql: str) -> Execute:
        return Execute(sql, dict(self.values), dict(self.types))


# ---- value conversion ---------------------------------------------------------------------
def to_db_time(value: datetime | None) -> datetime | None:
    """A naive UTC datetime for a TIMESTAMP column (naive input is taken to be UTC already)."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def from_db_time(value: datetime | None) -> datetime | None:
    """The aware UTC datetime for a value read from a TIMESTAMP column."""
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _required_time(value: datetime | None, column: str) -> datetime:
    out = from_db_time(value)
    if out is None:
        raise ValueError(f"column {column} is NULL")
    return out


def to_db_vector(vector: np.ndarray) -> array.array:
    """The unit-normalised float32 vector as ``array('f')`` (python-oracledb rejects numpy)."""
    arr = np.asarray(vector, dtype=np.float32)
    arr = arr / np.float32(np.linalg.norm(arr))
    out = array.array("f")
    out.frombytes(arr.astype("=f4").tobytes())
    return out


def metadata_text(metadata: Mapping[str, Any]) -> str:
    """The JSON text stored in a ``metadata`` column (CLOB): the text the reference store's
    ``json`` round trip reads back exactly (``1.0`` stays a float, ``1e-300`` and integers of any
    size survive). ASCII-only, so the database character set cannot alter it."""
    return json.dumps(dict(metadata), ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def read_json_object(value: Any) -> dict[str, Any]:
    """A ``metadata`` column value (JSON text fetched as ``str``, or NULL) as a dict."""
    if value is None:
        return {}
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(f"stored metadata is not JSON text: {type(value).__name__}")
    parsed = json.loads(value) if value.strip() else {}
    if not isinstance(parsed, dict):
        raise ValueError(f"stored metadata is not a JSON object: {type(parsed).__name__}")
    return parsed


def record_from_row(row: Sequence[Any]) -> Record:
    """Build a ``Record`` from the first ``len(RECORD_COLUMNS)`` values of ``row``."""
    (rid, seq, rtype, content, user_id, agent_id, thread_id, role, ts, created, expires, status, meta, index_text) = row[
        : len(RECORD_COLUMNS)
    ]
    return Record(
        record_id=rid,
        record_type=RecordType(rtype),
        content=content if content is not None else "",  # Oracle stores '' as NULL
        user_id=user_id,
        agent_id=agent_id,
        thread_id=thread_id,
        role=role,
        seq=int(seq),
        timestamp=_required_time(ts, "record_ts"),
        created_at=_required_time(created, "created_at"),
        expires_at=from_db_time(expires),
        status=RecordStatus(status),
        metadata=read_json_object(meta),
        index_text=index_text,  # NULL = the content; never '' (validation refuses a blank one)
    )


def link_from_row(row: Sequence[Any]) -> Link:
    """Build a ``Link`` from a row of ``LINK_COLUMNS``."""
    link_id, source_id, target_id, link_type, meta, created = row[: len(LINK_COLUMNS)]
    return Link(
        link_id=link_id,
        source_id=source_id,
        target_id=target_id,
        link_type=LinkType(link_type),
        metadata=read_json_object(meta),
        created_at=_required_time(created, "created_at"),
    )


# ---- predicates -----------------------------------------------------------------------------
def _bucket(n: int) -> int:
    for size in _IN_BUCKETS:
        if n <= size:
            return size
    return MAX_IN_LIST


def in_list(column: str, values: Sequence[Any], binds: Binds) -> str:
    """``column IN (:b…)`` over distinct ``values`` (``1 = 0`` when empty), padded and split
    into lists of at most 1000."""
    distinct = list(dict.fromkeys(values))
    if not distinct:
        return "1 = 0"
    parts = []
    for start in range(0, len(distinct), MAX_IN_LIST):
        chunk = distinct[start : start + MAX_IN_LIST]
        padded = chunk + [chunk[-1]] * (_bucket(len(chunk)) - len(chunk))
        parts.append(f"{column} IN ({', '.join(binds.add(v) for v in padded)})")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"


def scope_predicate(column: str, want: Any, binds: Binds) -> str | None:
    """Three states: ``ANY`` → no predicate, ``None`` → ``IS NULL``, an id → ``= :b``."""
    if want is ANY:
        return None
    if want is None:
        return f"{column} IS NULL"
    return f"{column} = {binds.add(want)}"


def record_predicate(flt: RecordFilter, alias: str, binds: Binds) -> str:
    """The WHERE condition for ``flt`` over a record or chunk table aliased ``alias``.

    Both tables carry the filtered columns (the chunk table denormalises them), so one function
    serves queries, counts and both searches.
    """
    parts: list[str] = []
    if flt.record_ids is not None:
        parts.append(in_list(f"{alias}.record_id", flt.record_ids, binds))
    if flt.record_types is not None:
        types = sorted(RecordType(t).value for t in flt.record_types)
        parts.append(in_list(f"{alias}.record_type", types, binds))
    for dim in ("user_id", "agent_id", "thread_id"):
        cond = scope_predicate(f"{alias}.{dim}", getattr(flt, dim), binds)
        if cond is not None:
            parts.append(cond)
    if flt.statuses is not None:
        statuses = sorted(RecordStatus(s).value for s in flt.statuses)
        parts.append(in_list(f"{alias}.status", statuses, binds))
    if flt.alive_at is not None:
        at = binds.add(to_db_time(flt.alive_at), "timestamp")
        parts.append(f"({alias}.expires_at IS NULL OR {alias}.expires_at > {at})")
    if flt.expired_at is not None:
        at = binds.add(to_db_time(flt.expired_at), "timestamp")
        parts.append(f"({alias}.expires_at IS NOT NULL AND {alias}.expires_at <= {at})")
    if flt.min_seq is not None:
        parts.append(f"{alias}.seq >= {binds.add(int(flt.min_seq))}")
    if flt.max_seq is not None:
        parts.append(f"{alias}.seq < {binds.add(int(flt.max_seq))}")
    if flt.metadata_filter:
        pred = mdfilter.compile_filter(flt.metadata_filter)
        parts.append(mdfilter.render(pred, f"{alias}.md_keys", binds.add))
    return " AND ".join(parts) if parts else "1 = 1"


def _columns(alias: str, columns: Sequence[str] = RECORD_COLUMNS) -> str:
    return ", ".join(f"{alias}.{c}" for c in columns)


# ---- reads ----------------------------------------------------------------------------------
def select_records(
    names: StoreNames, flt: RecordFilter, order: Order = Order.SEQ_ASC, limit: int | None = None, offset: int = 0
) -> Fetch:
    """``query``: matching records ordered by ``seq``, windowed with OFFSET/FETCH."""
    binds = Binds()
    where = record_predicate(flt, "r", binds)
    direction = "DESC" if Order(order) is Order.SEQ_DESC else "ASC"
    sql = f"SELECT {_columns('r')} FROM {names.record} r WHERE {where} ORDER BY r.seq {direction}"
    if offset:
        sql += f" OFFSET {binds.add(int(offset))} ROWS"
    if limit is not None:
        sql += f" FETCH NEXT {binds.add(int(limit))} ROWS ONLY"
    return binds.fetch(sql)


def count_records(names: StoreNames, flt: RecordFilter) -> Fetch:
    """``count``: one row, one column."""
    binds = Binds()
    where = record_predicate(flt, "r", binds)
    return binds.fetch(f"SELECT COUNT(*) FROM {names.record} r WHERE {where}")


def select_existing_ids(names: StoreNames, ids: Sequence[str]) -> Fetch:
    """Which of ``ids`` exist as records (one column)."""
    binds = Binds()
    where = in_list("r.record_id", ids, binds)
    return binds.fetch(f"SELECT r.record_id FROM {names.record} r WHERE {where}")


def select_vectors(names: StoreNames, ids: Sequence[str]) -> Fetch:
    """``read_vectors``: the embedding of each of ``ids`` that has one (its single chunk)."""
    binds = Binds()
    where = in_list("c.record_id", ids, binds)
    return binds.fetch(f"SELECT c.record_id, c.embedding FROM {names.chunk} c WHERE c.chunk_seq = 1 AND {where}")


def select_links(names: StoreNames, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> Fetch:
    """``links``: links touching ``record_ids`` (either end) and/or with ``link_ids``."""
    binds = Binds()
    parts = []
    if record_ids is not None:
        src = in_list("l.source_id", record_ids, binds)
        tgt = in_list("l.target_id", record_ids, binds)
        parts.append(f"({src} OR {tgt})")
    if link_ids is not None:
        parts.append(in_list("l.link_id", link_ids, binds))
    where = " AND ".join(parts) if parts else "1 = 1"
    sql = (
        f"SELECT {_columns('l', LINK_COLUMNS)} FROM {names.link} l WHERE {where} "
        f"ORDER BY NLSSORT(l.link_id, {NLS_BINARY})"
    )
    return binds.fetch(sql)


def select_link_conflicts(names: StoreNames, links: Sequence[Link]) -> Fetch:
    """Existing links that share an id or an endpoint pair with ``links`` (pre-insert check)."""
    binds = Binds()
    by_id = in_list("l.link_id", [x.link_id for x in links], binds)
    by_pair = in_list("l.pair_lo", [pair_of(x)[0] for x in links], binds)
    return binds.fetch(f"SELECT l.link_id, l.pair_lo, l.pair_hi FROM {names.link} l WHERE {by_id} OR {by_pair}")


def pair_of(link: Link) -> tuple[str, str]:
    """The unordered endpoint pair, as stored in ``pair_lo``/``pair_hi`` (unique together)."""
    lo, hi = sorted((link.source_id, link.target_id))
    return lo, hi


# ---- vector search ------------------------------------------------------------------------
APPROX_MAX_CANDIDATES = 1000
"""The most neighbours one ``FETCH APPROX FIRST n`` asks the HNSW index for. A large ``n`` fails
with ORA-51966 ("TopK RowIDs HNSW memory allocation is failing": the K value is too high);
Oracle documents no number, only "specify reasonable K values", so this is a conservative cap.
Searches that need more are ranked exactly (``plans.VectorPlanner``)."""
APPROX_TOO_HIGH = frozenset({"ORA-51966"})
"""The error of a ``FETCH APPROX`` whose K the server cannot allocate; the plan then ranks exactly."""
def count_vector_candidates(names: StoreNames, flt: RecordFilter, cap: int) -> Fetch:
    """How many chunks match ``flt``, counting at most ``cap`` (the planner's probe)."""
    binds = Binds()
    where = record_predicate(flt, "c", binds)
    sql = f"SELECT COUNT(*) FROM (SELECT 1 FROM {names.chunk} c WHERE {where} FETCH FIRST {binds.add(int(cap))} ROWS ONLY)"
    return binds.fetch(sql)


def vector_search(
    names: StoreNames,
    flt: RecordFilter,
    vector: np.ndarray,
    k: int,
    *,
    approximate: bool = False,
    candidates: int | None = None,
    target_accuracy: int = 95,
) -> Fetch:
    """Top-``k`` by cosine distance among chunks matching ``flt``: rows of record columns + distance.

    Exact: every matching chunk is ranked (``FETCH FIRST``). Approximate: the HNSW index yields
    ``candidates`` neighbours (``FETCH APPROX FIRST n ROWS ONLY WITH TARGET ACCURACY a``; Oracle
    pre- or in-filters them by the WHERE clause), then the outer query re-ranks the candidates
    with the deterministic tie-break ``(ROUND(distance, 6), record_id)`` and keeps ``k``.
    """
    binds = Binds()
    qv = binds.add(to_db_vector(vector), "vector")
    where = record_predicate(flt, "c", binds)
    distance = f"VECTOR_DISTANCE(c.embedding, {qv}, COSINE)"
    inner = f"SELECT c.record_id, {distance} AS distance FROM {names.chunk} c WHERE {where}"
    if approximate:
        n = int(candidates if candidates is not None else k)
        accuracy = int(target_accuracy)
        if not 1 <= accuracy <= 100 or not 1 <= n <= APPROX_MAX_CANDIDATES:
            raise ValueError(f"candidates must be in 1..{APPROX_MAX_CANDIDATES} and target_accuracy in 1..100")
        inner += f" ORDER BY {distance} FETCH APPROX FIRST {n} ROWS ONLY WITH TARGET ACCURACY {accuracy}"
    top = (
        f"SELECT record_id, distance FROM ({inner}) "
        f"ORDER BY ROUND(distance, 6), NLSSORT(record_id, {NLS_BINARY}) FETCH FIRST {binds.add(int(k))} ROWS ONLY"
    )
    sql = (
        f"SELECT {_columns('r')}, h.distance FROM ({top}) h JOIN {names.record} r ON r.record_id = h.record_id "
        f"ORDER BY ROUND(h.distance, 6), NLSSORT(h.record_id, {NLS_BINARY})"
    )
    return binds.fetch(sql)


# ---- keyword search -------------------------------------------------------------------------
def text_query(text: str, analyzer: Analyzer | None = None) -> str | None:
    """An Oracle Text query that matches any analysed term of ``text`` literally, or None if it
    has none (no word, or only stop words).

    Terms come from ``analyzer`` (default English), the one that wrote ``chunk_text``; each is
    split into runs of letters and digits (at ``_``, like Oracle Text's BASIC_LEXER splits the
    indexed text), cut to ``TEXT_TOKEN_MAX_BYTES`` (at a character boundary), de-duplicated,
    wrapped in ``{…}`` (Oracle Text's escape: such a token cannot contain ``}``) and joined with
    ``ACCUM`` so documents matching more terms score higher. Terms are taken in order while the
    query fits ``TEXT_QUERY_MAX_BYTES`` of UTF-8. The result is always bound, never pasted into SQL.
    """
    analysed = (analyzer or Analyzer.for_language()).query_terms(text)
    pieces = (piece for term in analysed for piece in _WORD.findall(term))
    terms: list[str] = []
    size = 0
    for token in dict.fromkeys(_utf8_prefix(piece, TEXT_TOKEN_MAX_BYTES) for piece in pieces):
        term = "{" + token + "}"
        cost = len(term.encode("utf-8")) + (len(_ACCUM) if terms else 0)
        if size + cost <= TEXT_QUERY_MAX_BYTES:
            terms.append(term)
            size += cost
    return _ACCUM.join(terms) if terms else None


def _utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form has at most ``max_bytes`` bytes."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", "ignore")


def keyword_search(names: StoreNames, flt: RecordFilter, query: str, k: int) -> Fetch:
    """Top-``k`` chunks by Oracle Text ``SCORE`` for ``CONTAINS(chunk_text, :q)``: record columns + score."""
    binds = Binds()
    q = binds.add(query)
    where = record_predicate(flt, "c", binds)
    inner = (
        f"SELECT c.record_id, SCORE(1) AS score FROM {names.chunk} c "
        f"WHERE CONTAINS(c.chunk_text, {q}, 1) > 0 AND {where}"
    )
    top = (
        f"SELECT record_id, score FROM ({inner}) "
        f"ORDER BY score DESC, NLSSORT(record_id, {NLS_BINARY}) FETCH FIRST {binds.add(int(k))} ROWS ONLY"
    )
    sql = (
        f"SELECT {_columns('r')}, h.score FROM ({top}) h JOIN {names.record} r ON r.record_id = h.record_id "
        f"ORDER BY h.score DESC, NLSSORT(h.record_id, {NLS_BINARY})"
    )
    return binds.fetch(sql)


# ---- writes ---------------------------------------------------------------------------------
def next_seqs(names: StoreNames, n: int) -> Fetch:
    """``n`` fresh values of the store's ordered sequence (one column; sort them ascending)."""
    binds = Binds()
    return binds.fetch(f"SELECT {names.seq}.NEXTVAL FROM DUAL CONNECT BY LEVEL <= {binds.add(int(n))}")


_RECORD_INSERT_COLUMNS = (
    "record_id",
    "seq",
    "record_type",
    "content",
    "user_id",
    "agent_id",
    "thread_id",
    "message_role",
    "record_ts",
    "created_at",
    "expires_at",
    "status",
    "metadata",
    "md_keys",
    "index_text",
)
_RECORD_TYPES: dict[str, BindType] = {
    "record_ts": "timestamp",
    "created_at": "timestamp",
    "expires_at": "timestamp",
    "md_keys": "json",
}
_CHUNK_INSERT_COLUMNS = (
    "record_id",
    "record_type",
    "seq",
    "user_id",
    "agent_id",
    "thread_id",
    "status",
    "expires_at",
    "md_keys",
    "chunk_text",
    "embedding",
)
_CHUNK_TYPES: dict[str, BindType] = {"expires_at": "timestamp", "md_keys": "json", "embedding": "vector"}


def _insert_sql(table: str, columns: Sequence[str], fixed: Mapping[str, str] | None = None) -> str:
    fixed = fixed or {}
    cols = [*columns, *fixed]
    values = [f":{c}" for c in columns] + list(fixed.values())
    return f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(values)})"


def record_row(record: Record, seq: int) -> dict[str, Any]:
    """Bind row for inserting ``record`` with its assigned ``seq``."""
    metadata = dict(record.metadata)
    return {
        "record_id": record.record_id,
        "seq": int(seq),
        "record_type": RecordType(record.record_type).value,
        "content": record.content,
        "user_id": record.user_id,
        "agent_id": record.agent_id,
        "thread_id": record.thread_id,
        "message_role": record.role,
        "record_ts": to_db_time(record.timestamp),
        "created_at": to_db_time(record.created_at),
        "expires_at": to_db_time(record.expires_at),
        "status": RecordStatus(record.status).value,
        "metadata": metadata_text(metadata),
        "md_keys": mdfilter.md_keys_document(metadata),
        "index_text": record.index_text,
    }


def insert_records(names: StoreNames, rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array insert of record rows (``record_row``)."""
    return ExecuteMany(_insert_sql(names.record, _RECORD_INSERT_COLUMNS), rows, dict(_RECORD_TYPES))


def chunk_row(record_row_: Mapping[str, Any], vector: np.ndarray, analyzer: Analyzer | None = None) -> dict[str, Any]:
    """Bind row for the chunk of a new record: its vector, the analysed terms of its indexed
    text (``index_text`` when set, else the content) and the denormalised filter columns."""
    return {
        "record_id": record_row_["record_id"],
        "record_type": record_row_["record_type"],
        "seq": record_row_["seq"],
        "user_id": record_row_["user_id"],
        "agent_id": record_row_["agent_id"],
        "thread_id": record_row_["thread_id"],
        "status": record_row_["status"],
        "expires_at": record_row_["expires_at"],
        "md_keys": record_row_["md_keys"],
        "chunk_text": analysed_text(indexed_text(record_row_["content"], record_row_.get("index_text")), analyzer),
        "embedding": to_db_vector(vector),
    }


def insert_chunks(names: StoreNames, rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array insert of chunk rows (``chunk_row``); ``chunk_seq`` is always 1 (one vector per record)."""
    sql = _insert_sql(names.chunk, _CHUNK_INSERT_COLUMNS, {"chunk_seq": "1"})
    return ExecuteMany(sql, rows, dict(_CHUNK_TYPES))


PATCH_FIELDS = ("content", "index_text", "metadata", "status", "timestamp", "expires_at")
"""``RecordPatch`` fields stored on the record row (the vector lives in the chunk table)."""


def patch_shape(patch: RecordPatch) -> tuple[tuple[str, ...], str]:
    """Which fields ``patch`` sets, and what it does to the vector (``keep``/``drop``/``set``).

    A patch of ``content`` always sets ``index_text`` too (to NULL when the patch gives none:
    the new content is what is indexed, SPI 1.1). Consecutive patches of one shape share one
    array-DML statement.
    """
    resets_index = patch.content is not UNSET
    fields = tuple(
        f for f in PATCH_FIELDS if getattr(patch, f) is not UNSET or (f == "index_text" and resets_index)
    )
    vector = "keep" if patch.vector is UNSET else ("drop" if patch.vector is None else "set")
    return fields, vector


def patch_row(patch: RecordPatch) -> dict[str, Any]:
    """Bind row for ``patch`` (only the fields it sets, plus ``record_id``)."""
    row: dict[str, Any] = {"record_id": patch.record_id}
    if isinstance(patch.content, str):
        row["content"] = patch.content
    if isinstance(patch.index_text, str):
        row["index_text"] = patch.index_text
    elif patch.index_text is None or isinstance(patch.content, str):  # reset: the content is indexed
        row["index_text"] = None
    if isinstance(patch.metadata, Mapping):
        metadata = dict(patch.metadata)
        row["metadata"] = metadata_text(metadata)
        row["md_keys"] = mdfilter.md_keys_document(metadata)
    if isinstance(patch.status, (RecordStatus, str)):
        row["status"] = RecordStatus(patch.status).value
    if isinstance(patch.timestamp, datetime):
        row["record_ts"] = to_db_time(patch.timestamp)
    if patch.expires_at is None or isinstance(patch.expires_at, datetime):
        row["expires_at"] = to_db_time(patch.expires_at)
    return row


_PATCH_RECORD_SETS = {
    "content": ("content",),
    "index_text": ("index_text",),
    "metadata": ("metadata", "md_keys"),
    "status": ("status",),
    "timestamp": ("record_ts",),
    "expires_at": ("expires_at",),
}
_INDEX_FIELDS = ("content", "index_text")
"""Patch fields that change a record's indexed text, hence its ``chunk_text``."""
_PATCH_CHUNK_SETS = {
    "metadata": (("md_keys", "md_keys"),),
    "status": (("status", "status"),),
    "expires_at": (("expires_at", "expires_at"),),
}


def update_records(names: StoreNames, fields: Sequence[str], rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array UPDATE of the record row for patches setting ``fields`` (non-empty); row counts
    tell which record ids were missing."""
    columns = [c for f in fields for c in _PATCH_RECORD_SETS[f]]
    if not columns:
        raise ValueError("update_records needs at least one field")
    sets = ", ".join(f"{c} = :{c}" for c in columns)
    types = {c: t for c, t in _RECORD_TYPES.items() if c in columns}
    return ExecuteMany(f"UPDATE {names.record} SET {sets} WHERE record_id = :record_id", rows, types, rowcounts=True)


def needs_stored_content(row: Mapping[str, Any]) -> bool:
    """Whether the patch row ``row`` resets ``index_text`` without new content: the record is
    then indexed by the content it already holds, which the plan reads (``select_contents``)."""
    return "index_text" in row and row["index_text"] is None and "content" not in row


def patched_indexed_text(row: Mapping[str, Any], stored_contents: Mapping[str, str | None] | None = None) -> str | None:
    """The indexed text of a record after the patch row ``row`` (one setting ``index_text``):
    its new ``index_text``, else its new content, else its stored content (``stored_contents``,
    by record id; ``ValueError`` when it is not there)."""
    if not needs_stored_content(row):
        return indexed_text(row.get("content"), row.get("index_text"))
    if stored_contents is None or row["record_id"] not in stored_contents:
        raise ValueError(f"the stored content of {row['record_id']!r} is needed to reindex it")
    return stored_contents[row["record_id"]]


def update_chunks(
    names: StoreNames,
    fields: Sequence[str],
    rows: list[dict[str, Any]],
    analyzer: Analyzer | None = None,
    stored_contents: Mapping[str, str | None] | None = None,
) -> ExecuteMany | None:
    """Array UPDATE keeping the chunk's denormalised copies (and the analysed terms of the
    record's indexed text: ``patched_indexed_text``, with ``stored_contents`` for the rows that
    ``needs_stored_content``) in step with the record, or None when ``fields`` touch nothing the
    chunk copies."""
    reindex = any(f in _INDEX_FIELDS for f in fields)
    pairs = [("chunk_text", "chunk_text")] if reindex else []
    pairs += [p for f in fields for p in _PATCH_CHUNK_SETS.get(f, ())]
    if not pairs:
        return None
    sets = ", ".join(f"{col} = :{bind}" for col, bind in pairs)
    binds_used = {"record_id", *(b for _, b in pairs)}
    if reindex:
        rows = [
            {**row, "chunk_text": analysed_text(patched_indexed_text(row, stored_contents), analyzer)} for row in rows
        ]
    chunk_rows = [{k: v for k, v in row.items() if k in binds_used} for row in rows]
    types = {b: _RECORD_TYPES[b] for _, b in pairs if b in _RECORD_TYPES}
    return ExecuteMany(f"UPDATE {names.chunk} SET {sets} WHERE record_id = :record_id", chunk_rows, types)


def upsert_chunk_vectors(names: StoreNames, rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array MERGE setting each record's vector: updates its chunk or creates it from the
    (already patched) record row. Rows: ``record_id``, ``embedding``, ``chunk_text`` (the
    analysed terms of the record's indexed text, used when the chunk is created)."""
    cols = "record_id, record_type, seq, user_id, agent_id, thread_id, status, expires_at, md_keys"
    sql = (
        f"MERGE INTO {names.chunk} c "
        f"USING (SELECT {cols} FROM {names.record} WHERE record_id = :record_id) s "
        f"ON (c.record_id = s.record_id AND c.chunk_seq = 1) "
        f"WHEN MATCHED THEN UPDATE SET c.embedding = :embedding "
        f"WHEN NOT MATCHED THEN INSERT ({cols}, chunk_text, chunk_seq, embedding) "
        f"VALUES (s.record_id, s.record_type, s.seq, s.user_id, s.agent_id, s.thread_id, s.status, "
        f"s.expires_at, s.md_keys, :chunk_text, 1, :embedding)"
    )
    return ExecuteMany(sql, rows, {"embedding": "vector"})


def vector_row(record_id: str, vector: np.ndarray, chunk_text: str = "") -> dict[str, Any]:
    """Bind row for ``upsert_chunk_vectors`` (``chunk_text``: ``analysed_text`` of the record's
    indexed text)."""
    return {"record_id": record_id, "embedding": to_db_vector(vector), "chunk_text": chunk_text}


def select_contents(names: StoreNames, ids: Sequence[str]) -> Fetch:
    """``(record_id, content, index_text)`` of the records ``ids`` that exist (their indexed
    text is ``indexed_text(content, index_text)``)."""
    binds = Binds()
    where = in_list("r.record_id", ids, binds)
    return binds.fetch(f"SELECT r.record_id, r.content, r.index_text FROM {names.record} r WHERE {where}")


def select_chunk_contents(names: StoreNames) -> Fetch:
    """``(record_id, content, index_text)`` of every record with a chunk (to re-analyse
    ``chunk_text`` from ``indexed_text(content, index_text)``)."""
    return Fetch(
        f"SELECT c.record_id, r.content, r.index_text FROM {names.chunk} c "
        f"JOIN {names.record} r ON r.record_id = c.record_id",
        {},
    )


def update_chunk_texts(names: StoreNames, rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array UPDATE of ``chunk_text`` (rows: ``record_id``, ``chunk_text``)."""
    return ExecuteMany(f"UPDATE {names.chunk} SET chunk_text = :chunk_text WHERE record_id = :record_id", rows, {})


def delete_chunks(names: StoreNames, record_ids: Sequence[str]) -> ExecuteMany:
    """Array DELETE of the chunks of ``record_ids`` (patch ``vector=None``)."""
    return ExecuteMany(
        f"DELETE FROM {names.chunk} WHERE record_id = :record_id", [{"record_id": r} for r in record_ids]
    )


def delete_records(names: StoreNames, record_ids: Sequence[str]) -> ExecuteMany:
    """Array DELETE of records; chunks and links go with them (ON DELETE CASCADE). Row counts
    report missing ids."""
    return ExecuteMany(
        f"DELETE FROM {names.record} WHERE record_id = :record_id",
        [{"record_id": r} for r in record_ids],
        rowcounts=True,
    )


def delete_links(names: StoreNames, link_ids: Sequence[str]) -> ExecuteMany:
    """Array DELETE of links by id; row counts report missing ids."""
    return ExecuteMany(
        f"DELETE FROM {names.link} WHERE link_id = :link_id", [{"link_id": x} for x in link_ids], rowcounts=True
    )


_LINK_INSERT_COLUMNS = (
    "link_id",
    "source_id",
    "target_id",
    "link_type",
    "opposite_link_type",
    "pair_lo",
    "pair_hi",
    "metadata",
    "created_at",
)


def link_row(link: Link) -> dict[str, Any]:
    """Bind row for inserting ``link``."""
    lo, hi = pair_of(link)
    lt = LinkType(link.link_type)
    return {
        "link_id": link.link_id,
        "source_id": link.source_id,
        "target_id": link.target_id,
        "link_type": lt.value,
        "opposite_link_type": lt.opposite,
        "pair_lo": lo,
        "pair_hi": hi,
        "metadata": metadata_text(link.metadata),
        "created_at": to_db_time(link.created_at),
    }


def insert_links(names: StoreNames, rows: list[dict[str, Any]]) -> ExecuteMany:
    """Array insert of link rows (``link_row``)."""
    return ExecuteMany(
        _insert_sql(names.link, _LINK_INSERT_COLUMNS), rows, {"created_at": "timestamp"}
    )


def is_finite_distance(value: Any) -> bool:
    """Guard against NULL/NaN distances (a zero vector cannot be stored, but be safe)."""
    return value is not None and math.isfinite(float(value))
