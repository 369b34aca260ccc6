"""``DuckDBStore``: the embedded default backend — one DuckDB file, exact and HNSW vector
search, BM25 keyword search, transactional batches.

Design in one paragraph: ``am_records`` holds every record with its vector, and every read is
correct from it alone (exact scans). Two derived indexes accelerate search: an HNSW index
(vss) and a BM25 index (fts), each built on an immutable *snapshot table* copied at one point
of the store's write clock (its watermark). A query uses a snapshot for its rows that have not
changed since (changed ones are listed in ``am_stale``) and scans the rows written after the
watermark ("the delta") exactly, so a record is searchable the moment its batch commits and
deleted or changed rows never leak from a stale index. Indexes are rebuilt in a background
thread (or by ``build_indexes()``) when the delta grows, so ingest never pays for index
maintenance. A per-query planner picks between an exact scan of the rows the filter selects
and the HNSW index with over-fetch (DuckDB's HNSW applies ``WHERE`` after the index, so a
selective filter would otherwise lose results).
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import duckdb
import duckdb.func
import numpy as np
import pyarrow as pa

from agentmemory.analysis import Analyzer, normalize_language
from agentmemory.bm25 import bm25
from agentmemory.bulk import ValidatedColumns
from agentmemory.errors import (
    AgentMemoryError,
    BackendError,
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    NotFound,
    TransientBackendError,
)
from agentmemory.memo import BoundedMemo
from agentmemory.records import Link, Record, RecordStatus, RecordType
from agentmemory.reference_store import record_matches
from agentmemory.spi import (
    UNSET,
    Capability,
    Hit,
    MemoryStore,
    NewRecord,
    Order,
    RecordFilter,
    RecordPatch,
    SchemaPolicy,
    StoreInfo,
    WriteBatch,
)
from agentmemory.validation import stored_metadata

from . import _schema
from ._keyword import DeltaDocFreq, KeywordIndex
from ._sql import (
    LINK_COLUMNS,
    META_MATCH_UDF,
    compile_filter,
    decode_link,
    decode_record,
    dump_json,
    ident,
    is_unfiltered,
    metadata_udf,
    patched_row,
    qualified_columns,
    sql_str,
    sql_str_list,
    to_micros,
    unit,
    vector_literal,
)
from ._windows import Windows

log = logging.getLogger(__name__)

_COLS = qualified_columns("r")
_N_COLS = _COLS.count(",") + 1
_SNAPSHOT_COLUMNS = f"{_COLS}, r.expires_us"
_MAX_ID_LOOKUP = 64
"""A query naming at most this many ids reads them by id alone (the primary key's index) and
applies the rest of its filter in Python (``_query``)."""
"""Copied into every snapshot table: the record as read plus what filters read, so a snapshot
hit that is not stale is answered without touching ``am_records``."""
# planner cost model (ms per query), fitted at 100k 384-d rows on the 2-vCPU machine (README):
# exact scan ~ 4 + 0.0035 per selected row; HNSW ~ 6 + 0.09 per candidate (ef)
_EXACT_BASE_MS = 4.0
_EXACT_ROW_MS = 0.0035
_INDEX_BASE_MS = 6.0
_INDEX_EF_MS = 0.09
_FTS_IGNORE = r"\s+"
"""The fts extension's tokenizer only splits the ``terms`` column at spaces: the column holds
the analyzer's terms (``agentmemory.analysis``) joined by spaces, indexed as they are (no
lower-casing, accent stripping, stemming or stop words of DuckDB's own)."""


@dataclass(frozen=True)
class IndexState:
    """A built derived index: its snapshot table, its watermark (largest ``ver``), its rows."""

    table: str
    watermark: int
    rows: int


@dataclass(frozen=True)
class SearchPlan:
    """What the planner chose for the last vector search (diagnostics, tests, benchmarks)."""

    strategy: str
    """``exact`` (filtered scan) or ``index`` (HNSW + exact delta)."""
    matching: int
    """Rows with a vector that the filter selects (-1 when not counted)."""
    fetch: int = 0
    """HNSW candidates fetched (index strategy)."""
    fallback: bool = False
    """True when the index returned fewer than k matching rows and the exact scan answered."""


TIE_SPARE = 16
"""Extra rows the exact scan fetches by bare distance to order ties by (rounded distance, id)."""

_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(b|kb|mb|gb|tb|kib|mib|gib|tib|bytes)?\s*$", re.IGNORECASE)
"""A DuckDB size setting (``256MB``, ``1GiB``)."""


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"1", "true", "yes", "on"}:
        return True
    if isinstance(value, str) and value.strip().lower() in {"0", "false", "no", "off"}:
        return False
    raise InvalidArgument(name, f"must be a boolean, got {value!r}")


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(name, f"must be an int >= {minimum}, got {value!r}")
    return value


def _float(name: str, value: Any, minimum: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(name, f"must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(out) or out < minimum:
        raise InvalidArgument(name, f"must be a number >= {minimum}, got {value!r}")
    return out


class DuckDBStore(MemoryStore):
    """A ``MemoryStore`` in one DuckDB file (or ``":memory:"``).

    Options (keyword; strings are accepted so ``--agentmemory-option key=value`` works):

    * ``read_only`` — open without write access (several processes may read one file).
    * ``threads``, ``memory_limit`` — passed to DuckDB.
    * ``checkpoint_threshold`` — write-ahead log size that triggers a checkpoint (default
      ``256MB``; DuckDB's own is 16MB). Each checkpoint rewrites the table's last, partly
      filled row group (up to 122,880 rows of vectors): at 16MB, 1,000-row Arrow inserts into
      this table took 92 µs per row, at 1GB 25 µs (measured at 100k); the price of a larger log is replay time after a crash (~1.4 s
      for 100k 384-d records here). A clean ``close`` always checkpoints.
    * ``vector_index`` — use the HNSW index at all (default True).
    * ``auto_index`` — rebuild stale indexes in a background thread (default True), started by
      the first search or write after they became due (never by ``open`` alone).
    * ``vector_index_min_rows`` — build HNSW only from this many vectors (default 20,000;
      below it an exact scan is as fast).
    * ``fts_min_rows`` — build the BM25 index only from this many documents (default 1,000).
    * ``language`` — the keyword analyzer (``agentmemory.analysis``): a Snowball language
      (default ``english``: stemming and stop words) or ``none``. Persisted in the file; opening
      with another one, or with code whose analyzer fingerprint differs, rebuilds the BM25
      index (until then keyword search scans exactly, so it is never stale).
    * ``rebuild_fraction`` — rebuild HNSW when the changed rows reach this fraction of the
      indexed ones (default 0.2, at least 1,000 rows); BM25 at a quarter of it (at least 500).
    * ``planner`` — ``auto`` (default: cost model), ``index`` (use the HNSW index whenever the
      two limits below allow), ``exact`` (never use it).
    * ``exact_max_rows`` — the planner always scans exactly when the filter selects at most this
      many rows (default 2,000); above, a cost model picks exact scan or index.
    * ``overfetch`` / ``max_fetch`` — HNSW candidates = ``k * overfetch / selectivity + k``;
      above ``max_fetch`` the planner scans exactly (defaults 4.0 and 4,000).
    * ``hnsw_m``, ``hnsw_ef_construction``, ``hnsw_ef_search`` — HNSW parameters (16, 128, 64;
      the search uses at least as many candidates as it fetches, and at least 128 / 256 above
      150k / 500k indexed vectors).
    """

    name = "duckdb"
    min_recall_at_10 = 0.99

    def __init__(
        self,
        path: str | Path,
        *,
        read_only: bool | str = False,
        threads: int | str | None = None,
        memory_limit: str | None = None,
        checkpoint_threshold: str = "256MB",
        vector_index: bool | str = True,
        auto_index: bool | str = True,
        vector_index_min_rows: int | str = 20_000,
        fts_min_rows: int | str = 1_000,
        rebuild_fraction: float | str = 0.2,
        planner: str = "auto",
        exact_max_rows: int | str = 2_000,
        overfetch: float | str = 4.0,
        max_fetch: int | str = 4_000,
        hnsw_m: int | str = 16,
        hnsw_ef_construction: int | str = 128,
        hnsw_ef_search: int | str = 64,
        language: str | None = None,
    ) -> None:
        super().__init__()
        if isinstance(path, Path):
            path = str(path)
        if not isinstance(path, str) or not path.strip():
            raise InvalidArgument("path", f"must be a file path or ':memory:', got {path!r}")
        self._memory = path == ":memory:"
        self._path: Path | None = None if self._memory else Path(path).expanduser().absolute()
        self._read_only = _flag("read_only", read_only)
        if self._memory and self._read_only:
            raise InvalidArgument("read_only", "an in-memory database cannot be read-only")
        self._threads = None if threads is None else _int("threads", threads, 1)
        self._memory_limit = memory_limit
        if not isinstance(checkpoint_threshold, str) or not _SIZE.match(checkpoint_threshold):
            raise InvalidArgument("checkpoint_threshold", f"must be a size such as '256MB', got {checkpoint_threshold!r}")
        self._checkpoint_threshold = checkpoint_threshold
        self._vector_index = _flag("vector_index", vector_index)
        self._auto_index = _flag("auto_index", auto_index) and not self._read_only
        self._deferred = 0
        """Open ``deferring_indexes`` blocks: automatic builds wait until none is left."""
        self._vector_index_min_rows = _int("vector_index_min_rows", vector_index_min_rows, 1)
        self._fts_min_rows = _int("fts_min_rows", fts_min_rows, 1)
        self._rebuild_fraction = _float("rebuild_fraction", rebuild_fraction, 0.0)
        if planner not in ("auto", "index", "exact"):
            raise InvalidArgument("planner", f"must be 'auto', 'index' or 'exact', got {planner!r}")
        self._planner = planner
        self._exact_max_rows = _int("exact_max_rows", exact_max_rows, 0)
        self._overfetch = _float("overfetch", overfetch, 1.0)
        self._max_fetch = _int("max_fetch", max_fetch, 1)
        self._hnsw_m = _int("hnsw_m", hnsw_m, 2)
        self._hnsw_ef_construction = _int("hnsw_ef_construction", hnsw_ef_construction, 1)
        self._hnsw_ef_search = _int("hnsw_ef_search", hnsw_ef_search, 1)
        self._language = None if language is None else normalize_language(language)
        self._analyzer = Analyzer.for_language(self._language)
        """The keyword analyzer; on open, the file's language unless ``language`` was given."""

        self._udf = f"{META_MATCH_UDF}_{secrets.token_hex(4)}"
        self._terms_udf = f"am_terms_{secrets.token_hex(4)}"
        self._lock = threading.RLock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._vidx: IndexState | None = None
        self._fts: IndexState | None = None
        self._kw: KeywordIndex | None = None
        """The current BM25 snapshot as in-process postings (``_keyword``); built with the
        snapshot, or at the first keyword search after open."""
        self._kw_terms: dict[str, tuple[int, Counter[str], int]] = {}
        """Analysed terms of rows written since the BM25 snapshot (``_delta_terms``)."""
        self._delta_df = DeltaDocFreq()
        """Document frequencies over those rows, updated per write (``_delta_corpus``)."""
        self._memo: dict[tuple[Any, ...], Any] = {}
        """Reads that depend only on the stored rows, for the write clock ``_memo_clock`` (``_memoised``)."""
        self._memo_clock = -1
        self._fts_stats: tuple[str, Any, Any] | None = None
        """(BM25 snapshot table, its document count, its average length), read once per snapshot."""
        self._scopes: dict[str, _Scope] = {}
        self._id_rows: dict[str, tuple[Any, ...]] = {}
        """Rows (``_COLS`` and ``has_vec``) that queries by id read, kept as the store's writes
        change them (``_after_write``): this store is the file's only writer (see ``_claim``), so
        a turn's read of its thread record, and the write that patches it, ask DuckDB nothing."""
        self._absent_ids: set[str] = set()
        """Ids queries by id found no row for: the card asks for a thread's summary record at
        every call, which most threads never get; an add of the id takes it out (``_transact_once``)."""
        self._windows = Windows()
        """A scope's newest rows (``_windows``): the card's and a turn's queries with a small
        limit, kept as the store's writes change the table (``_after_write``)."""
        self._records: dict[str, tuple[tuple[Any, ...], Record]] = {}
        """Records decoded from rows, with the row (``_record_of``)."""
        self._timeless_filters: BoundedMemo[tuple[Any, ...], tuple[RecordFilter, str]] = BoundedMemo(256)
        """Filters without ``alive_at``, compiled (``_timeless``)."""
        self._written: tuple[Sequence[RecordPatch], Sequence[str]] = ((), ())
        """The patches and deletes of the write being applied, for ``_after_write``."""
        self._inserted: list[tuple[Any, ...]] = []
        """The rows the write being applied inserts as literals (``_values_insert``), as queries
        by id read them, for ``_after_write`` to keep: the next turn reads its previous message,
        written by the turn before, by id."""
        self._moved: list[tuple[str, int | None, Any]] | None = []
        """What the write being applied does to the searchable rows, add by add, patch by patch,
        delete by delete: (id, its new ``ver``, or None when it has no vector any more, and its
        new keyword text, ``_SAME_TEXT`` or None when not known here); None when not followed
        (an add through Arrow). ``_carried_memo`` brings the keyword delta along with it."""
        self._stale_written: list[str] = []
        """The ids the write being applied lists in ``am_stale`` (``_carried_memo``)."""
        self._added: _Added | None = None
        """The few records the write being applied inserts (``_keep_untouched_scopes``)."""
        self._touched: frozenset[str] | None = None
        """The record types the write being applied adds, patches or deletes (None: a bulk add): a
        kept scope limited to other types stays valid across it (``_transact``)."""
        self._scope_sizes: dict[str, int] = {}
        """Rows each scope held when last read (any write clock): small ones are read uncounted."""
        """Small scopes' vectors (``_scope``), for the write clock ``_memo_clock``, oldest first."""
        self._rows: dict[str, tuple[Any, ...]] = {}
        """Record rows read by searches (``_merge_with_rows``), for the write clock ``_memo_clock``."""
        self._ef_current: int | None = None
        self._loaded: set[str] = set()
        self._building = 0
        self._seq = self._clock = 0
        self._claimed: str | None = None
        # approximate change counters that decide when to rebuild (exact ones are in SQL)
        self._n_vectors = 0
        self._vec_changes = 0
        self._vec_changes_at_build = 0
        self._doc_changes = 0
        self._doc_changes_at_build = 0
        self._builder: threading.Thread | None = None
        self._builder_cursor: duckdb.DuckDBPyConnection | None = None
        self._build_lock = threading.Lock()
        self._stop = threading.Event()
        self._last_build_failure = 0.0
        self.last_plan: SearchPlan | None = None
        """The planner's choice for the most recent vector search (diagnostics)."""

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_uri(cls, uri: str) -> DuckDBStore:
        """``duckdb:///abs/path.db``, ``duckdb://relative.db``, ``duckdb://:memory:``; query
        parameters become options (``duckdb:///x.db?read_only=true&threads=2``)."""
        parts = urlsplit(uri)
        if parts.scheme != "duckdb":
            raise InvalidArgument("store", f"expected a duckdb:// URI, got {uri!r}")
        location = unquote(parts.netloc + parts.path)
        if not location:
            raise InvalidArgument("store", f"{uri!r} names no file (use duckdb:///abs/path.db)")
        options: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
        try:
            return cls(location, **options)
        except TypeError as exc:
            raise InvalidArgument("store", f"unknown option in {uri!r}: {exc}") from None

    @classmethod
    def in_directory(cls, directory: Path, **options: Any) -> DuckDBStore:
        """The store as ``memory.duckdb`` in ``directory`` (created on open)."""
        return cls(Path(directory) / "memory.duckdb", **options)

    @property
    def analyzer(self) -> Analyzer:
        """The keyword analyzer in force (``agentmemory.analysis``): after ``open``, the store's."""
        return self._analyzer

    def capabilities(self) -> frozenset[Capability]:
        caps = {Capability.KEYWORD_SEARCH, Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS}
        if not self._memory:
            caps.add(Capability.PERSISTENCE)
        if self._vector_index:
            caps.add(Capability.APPROXIMATE_SEARCH)
        return frozenset(caps)

    def info(self) -> StoreInfo:
        vidx, fts = self._vidx, self._fts
        return StoreInfo(
            name=self.name,
            dimension=self.dimension,
            path=":memory:" if self._memory else str(self._path),
            extra={
                "read_only": self._read_only,
                "schema_version": _schema.SCHEMA_VERSION,
                "language": self._analyzer.language,
                "analyzer": self._analyzer.fingerprint,
                "duckdb": duckdb.__version__,
                "vector_index": None if vidx is None else {"rows": vidx.rows, "watermark": vidx.watermark},
                "fts_index": None if fts is None else {"rows": fts.rows, "watermark": fts.watermark},
            },
        )

    # ---- lifecycle -------------------------------------------------------------------------------
    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        if self._path is not None and not self._path.exists():
            if schema_policy is SchemaPolicy.REQUIRE_EXISTING or self._read_only:
                raise BackendUnavailable(
                    f"no agentmemory DuckDB database at {self._path} (schema_policy="
                    f"{schema_policy.value}{', read_only' if self._read_only else ''}); "
                    "open it with schema_policy='create_if_necessary' to create it"
                )
            self._path.parent.mkdir(parents=True, exist_ok=True)
        self._claim()
        try:
            con = self._connect()
        except BaseException:
            self._release()
            raise
        try:
            with _mapped_errors():
                self._loaded = set()
                tables = {
                    name
                    for (name,) in con.execute(
                        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
                        "AND schema_name = 'main' AND table_name LIKE 'am\\_%' ESCAPE '\\' UNION ALL "
                        "SELECT substr(schema_name, 10) FROM duckdb_schemas() WHERE database_name = current_database() "
                        "AND schema_name LIKE 'fts\\_main\\_am\\_fts\\_%' ESCAPE '\\'"
                    ).fetchall()
                }
                # vss costs ~0.25 s to load per database: load it only when the file holds an
                # HNSW snapshot table (it must be loaded before such a table is touched). fts is
                # loaded only to build a BM25 snapshot (``_new_cursor``): searches read its
                # tables, or the postings kept beside the file, as plain data (0.14 s of an open)
                if any(t.startswith("am_vidx_") for t in tables):
                    self._load_extension(con, "vss")
                con.execute("SET disabled_optimizers = 'late_materialization'")
                con.create_function(
                    self._udf,
                    metadata_udf,
                    [duckdb.sqltype("VARCHAR"), duckdb.sqltype("VARCHAR")],
                    duckdb.sqltype("BOOLEAN"),
                    type=duckdb.func.ARROW,
                    side_effects=False,
                )
                con.create_function(
                    self._terms_udf,
                    self._terms_column,
                    [duckdb.sqltype("VARCHAR")],
                    duckdb.sqltype("VARCHAR"),
                    type=duckdb.func.ARROW,
                    side_effects=False,
                )
                self._prepare_schema(con, dimension, schema_policy, _schema.META_TABLE in tables)
                self._load_state(con, tables)
        except BaseException:
            con.close()
            self._release()
            raise
        self._con = con
        self._ef_current = None
        self._stop.clear()
        self._dimension = dimension
        # no build starts here: the first search or write starts the due ones. A process that
        # opens a store only to read it through (an export, the CLI's listings) would otherwise
        # start an HNSW build that its close must wait for (close cannot interrupt it: ~60 s at
        # 20k rows) and then throws away unfinished.

    def _claim(self) -> None:
        """Register this store as the file's writer in this process (read-only stores and
        ``:memory:`` need no claim); a second writer gets ``BackendUnavailable``."""
        if self._path is None or self._read_only:
            return
        key = str(self._path.resolve())
        with _CLAIMS_LOCK:
            owner = _CLAIMS.get(key)
            if owner is not None and owner != id(self):
                raise BackendUnavailable(
                    f"DuckDB database {key} is already open for writing by another DuckDBStore in this "
                    "process; share that store (one writer per file)"
                )
            _CLAIMS[key] = id(self)
        self._claimed = key

    def _release(self) -> None:
        if self._claimed is not None:
            with _CLAIMS_LOCK:
                if _CLAIMS.get(self._claimed) == id(self):
                    del _CLAIMS[self._claimed]
            self._claimed = None

    def _connect(self) -> duckdb.DuckDBPyConnection:
        ext_dir = _schema.extension_directory()
        if ext_dir is None:
            raise BackendUnavailable(
                "the DuckDB vss/fts extensions are not installed; install them with: "
                "pip install duckdb-ext-vss duckdb-ext-fts (they load offline from site-packages)"
            )
        config: dict[str, Any] = {
            "extension_directory": ext_dir,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": True,
            # float codecs (ALP/ALPRD/Chimp/Patas) barely shrink embeddings (~10%) but make every
            # exact scan decompress them: 3x slower at 10k rows (README). Strings keep FSST.
            "disabled_compression_methods": "alp,alprd,chimp,patas",
            "checkpoint_threshold": self._checkpoint_threshold,
        }
        if self._threads is not None:
            config["threads"] = self._threads
        if self._memory_limit is not None:
            config["memory_limit"] = str(self._memory_limit)
        target = ":memory:" if self._memory else str(self._path)
        try:
            con = duckdb.connect(target, read_only=self._read_only, config=config)
            # DuckDB draws a progress bar on stdout for a query over 2 s (rebuilding the keyword
            # postings of 1M records does): a store must not write into its user's output (an
            # ``agentmemory export`` to stdout, a JSON line a program prints). Cursors inherit it.
            con.execute("SET enable_progress_bar = false")
            return con
        except duckdb.Error as exc:
            message = str(exc)
            if "lock" in message.lower():
                raise BackendUnavailable(
                    f"DuckDB database {target} is in use by another process (DuckDB allows one "
                    f"writing process per file; close it there or open read_only): {message}"
                ) from exc
            raise BackendUnavailable(f"cannot open DuckDB database {target}: {message}") from exc

    def _prepare_schema(self, con: duckdb.DuckDBPyConnection, dimension: int, policy: SchemaPolicy, has_meta: bool) -> None:
        where = ":memory:" if self._memory else str(self._path)
        if policy is SchemaPolicy.RECREATE or not has_meta:
            if policy is SchemaPolicy.REQUIRE_EXISTING:
                raise BackendUnavailable(
                    f"{where} holds no agentmemory schema (schema_policy=require_existing); open it "
                    "with schema_policy='create_if_necessary' to create it"
                )
            if self._read_only:
                raise BackendUnavailable(f"{where} holds no agentmemory schema and is opened read_only")
            with _transaction(con):
                if policy is SchemaPolicy.RECREATE:
                    _schema.drop_all(con)
                _schema.create_base(con, dimension)
                _schema.migrate(con, 0, dimension)
            return
        meta = dict(con.execute(f"SELECT key, value FROM {_schema.META_TABLE}").fetchall())
        version = int(meta.get("schema_version", "0"))
        stored_dim = int(meta.get("dimension", "0"))
        if version > _schema.SCHEMA_VERSION:
            raise BackendUnavailable(
                f"{where} has schema version {version}, newer than this agentmemory-duckdb "
                f"understands ({_schema.SCHEMA_VERSION}); upgrade agentmemory-duckdb"
            )
        if stored_dim != dimension:
            raise Conflict(
                f"{where} holds {stored_dim}-dimensional vectors, not {dimension}; use another "
                "file or schema_policy='recreate'"
            )
        if version < _schema.SCHEMA_VERSION:
            if self._read_only:
                raise BackendUnavailable(
                    f"{where} needs a schema migration ({version} -> {_schema.SCHEMA_VERSION}); "
                    "open it once without read_only"
                )
            with _transaction(con):
                _schema.migrate(con, version, dimension)

    def _terms_column(self, content: pa.Array) -> pa.Array:
        """SQL function: each content's analysed terms joined by spaces (the BM25 column)."""
        terms = self._analyzer.terms
        return pa.array([" ".join(terms(text)) for text in content.to_pylist()], type=pa.string())

    def _load_state(self, con: duckdb.DuckDBPyConnection, tables: set[str]) -> None:
        meta = dict(con.execute(f"SELECT key, value FROM {_schema.META_TABLE}").fetchall())
        self._analyzer = Analyzer.for_language(self._language or meta.get("language"))
        analyzer_changed = meta.get("analyzer") != self._analyzer.fingerprint
        if analyzer_changed and not self._read_only:
            # the BM25 snapshot holds another analyzer's terms: forget it (dropped below as a
            # leftover); keyword search scans exactly until the builder makes a new one
            with _transaction(con):
                con.execute(f"DELETE FROM {_schema.META_TABLE} WHERE key IN ('fts_table', 'fts_watermark', 'fts_rows')")
                for key, value in (("language", self._analyzer.language), ("analyzer", self._analyzer.fingerprint)):
                    con.execute(f"INSERT OR REPLACE INTO {_schema.META_TABLE} VALUES (?, ?)", [key, value])
            meta = dict(con.execute(f"SELECT key, value FROM {_schema.META_TABLE}").fetchall())
        self._vidx = _index_state(meta, "vidx")
        self._fts = None if analyzer_changed else _index_state(meta, "fts")
        self._kw = None
        self._kw_terms = {}
        self._delta_df = DeltaDocFreq()
        self._memo, self._memo_clock = {}, -1
        self._fts_stats = None
        self._scopes, self._rows, self._scope_sizes = {}, {}, {}
        self._id_rows, self._absent_ids, self._records = {}, set(), {}
        self._timeless_filters.clear()
        self._windows.clear()
        if not self._read_only:
            # snapshot tables a crash left behind (built, never made current)
            current = {s.table for s in (self._vidx, self._fts) if s is not None}
            for table in sorted(tables):
                if table.startswith(("am_vidx_", "am_fts_")) and table not in current:
                    _drop_snapshot(con, table)
        vw = 0 if self._vidx is None else self._vidx.watermark
        fw = 0 if self._fts is None else self._fts.watermark
        # "changes" = rows past a snapshot's watermark plus its stale rows: zero means the
        # snapshot answers alone (queries then skip the delta and stale look-ups)
        n_vectors, vec_changes, doc_changes, top_seq, top_ver = con.execute(  # type: ignore[misc]
            f"SELECT count(*) FILTER (WHERE has_vec), count(*) FILTER (WHERE has_vec AND ver > {vw}) "
            f"+ (SELECT count(*) FROM am_stale WHERE clock > {vw}), count(*) FILTER (WHERE has_vec AND ver > {fw}) "
            f"+ (SELECT count(*) FROM am_stale WHERE clock > {fw}), coalesce(max(seq), 0), "
            f"greatest(coalesce(max(ver), 0), (SELECT coalesce(max(clock), 0) FROM am_stale)) FROM am_records"
        ).fetchone()
        # the counters as the last deleting batch wrote them, or the rows' own values past them (_v4)
        self._seq = max(int(meta.get("seq", "0")), int(top_seq))
        self._clock = max(int(meta.get("ver", "0")), int(top_ver), vw, fw)
        self._n_vectors = int(n_vectors)
        self._vec_changes, self._vec_changes_at_build = int(vec_changes), 0
        self._doc_changes, self._doc_changes_at_build = int(doc_changes), 0

    # ---- persisted keyword postings ------------------------------------------------------------
    @property
    def keyword_index_file(self) -> Path | None:
        """Where the BM25 snapshot's postings are kept beside the database (``<file>.keyword.npz``;
        None for an in-memory database). Derived data: deleting it costs one rebuild."""
        return None if self._path is None else self._path.with_name(f"{self._path.name}.keyword.npz")

    def _keyword_key(self, state: IndexState) -> str:
        return f"{state.table}:{state.watermark}:{state.rows}:{self._analyzer.fingerprint}"

    def _keyword_index(self, con: duckdb.DuckDBPyConnection, state: IndexState) -> KeywordIndex:
        """The snapshot's postings: from the file a build saved when it is of this snapshot (a
        reopened store's first keyword search then reads it instead of rebuilding: 1 s at 100k,
        11-18 s at 1M), else built from the fts tables (and saved for the next open)."""
        path = self.keyword_index_file
        if path is not None:
            try:
                return KeywordIndex.load(path, self._keyword_key(state))  # the key names the table
            except FileNotFoundError:
                pass
            except Exception as exc:  # another snapshot's, torn or foreign: rebuild
                log.debug("DuckDB keyword postings at %s not used: %s", path, exc)
        kw = KeywordIndex.build(con, state.table)
        if not self._read_only:
            self._save_keyword_index(kw, state)
        return kw

    def _save_keyword_index(self, kw: KeywordIndex, state: IndexState) -> None:
        """Keep ``kw`` beside the database (best effort: a failure costs the next open a rebuild)."""
        path = self.keyword_index_file
        if path is None or self._read_only:
            return
        try:
            kw.save(path, self._keyword_key(state))
        except OSError as exc:
            log.warning("DuckDB keyword postings not saved to %s: %s", path, exc)

    def _close(self) -> None:
        self._stop.set()
        builder = self._builder
        if builder is not None:
            cursor = self._builder_cursor
            if cursor is not None:
                with contextlib.suppress(Exception):
                    cursor.interrupt()
            builder.join()
        with self._lock:
            con, self._con = self._con, None
            self._kw = None
            if con is not None:
                for udf in (self._udf, self._terms_udf):
                    with contextlib.suppress(duckdb.Error):
                        con.remove_function(udf)
                with contextlib.suppress(duckdb.Error):
                    con.close()
            self._release()

    def _conn(self) -> duckdb.DuckDBPyConnection:
        con = self._con
        if con is None:
            raise BackendUnavailable(f"store {self.name!r} is closed")
        return con

    # ---- writes ------------------------------------------------------------------------------------
    def _write(self, batch: WriteBatch) -> list[Record]:
        applied = self._transact(lambda tx: self._apply(tx, batch), lambda: [item.record.record_id for item in batch.add])
        return applied[0]

    def _bulk_add(self, columns: ValidatedColumns) -> int:
        n, dim = len(columns), self.dimension

        def apply(tx: _Tx) -> tuple[list[Record], int, int, int, int, int]:
            seq, ver = self._seq, self._clock
            if columns.vectors is None:
                matrix, missing = np.zeros((n, dim), dtype=np.float32), np.ones(n, dtype=bool)
            else:
                matrix, missing = columns.vectors, np.zeros(n, dtype=bool)
            tx.insert_arrow(_arrow_table(columns, matrix, missing, seq, ver))  # the rows hold seq and ver (_schema._v4)
            self._moved = None
            with_vec = 0 if columns.vectors is None else n
            return [], with_vec, with_vec, with_vec, seq + n, ver + n

        self._transact(apply, lambda: columns.record_id)
        return n

    def _transact(
        self,
        apply: Callable[[_Tx], tuple[list[Record], int, int, int, int, int]],
        added_ids: Callable[[], Sequence[str]],
    ) -> tuple[list[Record], int, int, int, int, int]:
        """Run ``apply`` in one transaction (all or nothing), then advance the counters it
        returns: (added records, vector changes, text changes, vector count delta, seq, clock).

        A transaction conflict is retried once no index is being built (at most
        ``_WRITE_ATTEMPTS`` tries): updating a row's vector (or deleting a key twice)
        deletes and re-inserts its key, and DuckDB fails the commit of a key's second deletion
        while a transaction older than its first one is open, as a build's statements are. The
        failed try left nothing behind: DuckDB rolled its transaction back, ``apply`` changes
        nothing in this object but ``_touched`` (reset per try), and the counters move only
        after the commit."""
        if self._read_only:
            raise BackendUnavailable("the DuckDB store was opened read_only; writes are refused")
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            with self._lock:
                try:
                    return self._transact_once(apply, added_ids)
                except TransientBackendError:
                    if attempt == _WRITE_ATTEMPTS:
                        raise
            self._wait_for_build()  # returns at once when no build runs (it may have just ended)
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_for_build(self) -> None:
        """Wait until no index is being built (a background or an explicit build); called
        without the store lock, which the build takes to finish."""
        with self._build_lock:
            pass

    def _transact_once(
        self,
        apply: Callable[[_Tx], tuple[list[Record], int, int, int, int, int]],
        added_ids: Callable[[], Sequence[str]],
    ) -> tuple[list[Record], int, int, int, int, int]:
        """One try of ``_transact`` (under the store lock)."""
        con = self._conn()
        self._touched = self._added = None
        self._written = ((), ())
        self._inserted, self._moved, self._stale_written = [], [], []
        try:
            with _mapped_errors():
                tx = _Tx(con)
                try:
                    applied = apply(tx)
                    tx.commit()
                except BaseException:
                    with contextlib.suppress(duckdb.Error):  # none is open when nothing was sent
                        con.execute("ROLLBACK")
                    raise
        except _DuplicateAdd:
            # rolled back; name the first id in batch order that exists, like the reference
            ids = list(added_ids())
            with _mapped_errors():
                stored = {rid for (rid,) in con.execute(
                    f"SELECT rid FROM am_records WHERE rid IN (SELECT unnest({sql_str_list(ids)}))"
                ).fetchall()}
            first = next((rid for rid in ids if rid in stored), ids[0])
            raise Conflict(f"record id {first!r} already exists") from None
        self._after_write(added_ids)
        current = self._memo_clock == self._clock
        carried = self._carried_memo() if current else None
        _, vec_changes, doc_changes, vec_count, self._seq, self._clock = applied
        if current and self._touched is not None:
            self._keep_untouched_scopes(self._touched, self._added)
        if carried is not None:
            self._sync_memo()
            self._memo.update(carried[0])
            self._rows.update(carried[1])
        self._vec_changes += vec_changes
        self._doc_changes += doc_changes
        self._n_vectors += vec_count
        self._maybe_start_builder()
        return applied

    def _after_write(self, added_ids: Callable[[], Sequence[str]]) -> None:
        """Bring the rows kept for queries by id (``_id_rows``, ``_absent_ids``) and the kept
        windows (``_windows``) to what the committed write made of them: each patch as its
        ``UPDATE`` in ``_apply`` set the columns, deleted rows gone, added ids present."""
        patches, deletes = self._written
        kept = self._id_rows
        inserted, self._inserted = self._inserted, []
        if inserted:  # before the patches: a batch's patches come after its adds
            if len(kept) + len(inserted) > _ID_ROWS:
                kept.clear()
            kept.update((row[0], row) for row in inserted)
        if kept:
            for patch in patches:
                row = kept.get(patch.record_id)
                if row is not None:
                    kept[patch.record_id] = patched_row(row, patch)
            for rid in deletes:
                kept.pop(rid, None)
        if self._absent_ids or self._windows:
            added = added_ids()
            self._absent_ids.difference_update(added)
            self._windows.after_write(inserted, len(added) != len(inserted), patches, deletes, kept)

    def _carried_memo(self) -> tuple[dict[tuple[Any, ...], Any], dict[str, tuple[Any, ...]]]:
        """What searches read at the clock before the committed write that the write leaves
        valid or can bring along, to keep across it (a card right after a turn's write then asks
        DuckDB nothing of it; each statement costs ~1 ms at 100k rows): the record rows of
        searches but the patched and deleted ones, the stale ids with the ones it listed, and
        the keyword delta (``_carried_delta``). Called after ``_after_write``, before the clock moves."""
        patches, deletes = self._written
        changed = {patch.record_id for patch in patches} | set(deletes)
        rows = {rid: row for rid, row in self._rows.items() if rid not in changed}
        memo: dict[tuple[Any, ...], Any] = {}
        fts = 0 if self._fts is None else self._fts.watermark
        for key, value in self._memo.items():
            if key[0] == "stale":
                memo[key] = value | frozenset(self._stale_written) if self._stale_written else value
            elif key == ("delta", fts):  # an earlier snapshot's is not read again
                delta = self._carried_delta(key[1], value)
                if delta is not None:
                    memo[key] = delta
        return memo, rows

    def _carried_delta(self, watermark: int, value: Any) -> Any:
        """The keyword delta (``_delta_corpus``'s value) after the committed write, from what
        ``_apply`` recorded of it (``_moved``): its rows' versions moved along, terms analysed
        from the texts it wrote or the rows kept by id (``_id_rows``, already brought along);
        None when a text is not at hand or the write was not followed."""
        moved = self._moved
        rows: list[tuple[str, int, str | None]] = value[0]
        if moved is None or len(rows) + len(moved) > _CARRIED_DELTA_ROWS:
            return None
        if not moved:
            return value
        before = {rid: ver for rid, ver, _ in rows}
        vers = dict(before)
        texts: dict[str, Any] = {}
        for rid, ver, text in moved:
            if ver is None:
                vers.pop(rid, None)
                texts.pop(rid, None)
                continue
            vers[rid] = ver
            if text is not _SAME_TEXT or rid not in texts:
                texts[rid] = text
        terms = self._kw_terms
        for rid, text in texts.items():
            if isinstance(text, str):
                continue
            row = self._id_rows.get(rid)
            hit = terms.get(rid)
            if row is not None:
                texts[rid] = row[2] if row[13] is None else row[13]
            elif text is _SAME_TEXT and hit is not None and hit[0] == before.get(rid):
                terms[rid] = (vers[rid], hit[1], hit[2])  # the same words at its new version
            else:
                return None
        delta = [(rid, ver, text if isinstance(text := texts.get(rid), str) else None) for rid, ver in vers.items()]
        if any(text is None and ((hit := terms.get(rid)) is None or hit[0] != ver) for rid, ver, text in delta):
            return None  # a row's words would have to be read: not here, after the commit
        return self._delta_from(self._conn(), watermark, delta)

    def _keep_untouched_scopes(self, touched: frozenset[str], added: _Added | None = None) -> None:
        """After a write that added, patched or deleted records of the ``touched`` types only,
        move to its write clock keeping the small scopes limited to other types: their rows are
        exactly as before (a record's type never changes), so a turn that writes messages does
        not read the user's memory scope again. A scope of types the write only added records
        of (``added``: a few records, none patched or deleted in it) is kept with the added ones
        its filter selects appended, while it stays within ``exact_max_rows``: a turn that
        extracts a memory does not read the user's memory scope again either. Everything else
        memoised is dropped."""
        keep: dict[str, _Scope] = {}
        for where, scope in self._scopes.items():
            if not scope.types:
                continue
            if not scope.types & touched:
                keep[where] = scope
            elif added is not None and scope.filter is not None and not scope.types & added.other_types:
                grown = scope.extended(added)
                if len(grown.rids) <= self._exact_max_rows:
                    keep[where] = grown
                    self._scope_sizes[where] = len(grown.rids)
        self._sync_memo()
        self._scopes.update(keep)

    def _apply(self, tx: _Tx, batch: WriteBatch) -> tuple[list[Record], int, int, int, int, int]:
        """Apply ``batch`` inside the open transaction, in the reference order; return the added
        records, the (vector changes, text changes, vector count delta) it makes, and the new
        ``seq`` and clock values.

        The statements go to DuckDB in as few calls as its reads allow (``_Tx``): a turn's batch
        (its messages, a memory, the thread's state patch) is two, ``BEGIN`` with the read of the
        patched record's ``has_vec`` and type, then the inserts, the updates, the counters and
        ``COMMIT`` (it was eight: each call costs ~0.3 ms)."""
        seq, ver = self._seq, self._clock  # this store is the file's only writer (see _claim)
        changes = vec_count = 0
        stale: list[tuple[str, int]] = []
        added: list[Record] = []
        dim = self.dimension
        self._written = (batch.patch, batch.delete)
        # has_vec as it is and the type of every patched or deleted record, read at once before
        # any change: the batch's own adds are known here, and each patch and delete below moves
        # this view along. (No UPDATE … RETURNING: DuckDB runs it, as any update of ``vec``, as a
        # delete and insert of the row, and 1.4 fails the commit of a key's second delete while a
        # transaction older than its first is open ("write-write conflict on key"): a background
        # build's statements, during which a thread's record is patched at every add_messages.)
        rows: dict[str, tuple[bool, str]] = {
            item.record.record_id: (item.vector is not None, item.record.record_type.value) for item in batch.add
        }
        wanted = [rid for rid in dict.fromkeys([*(p.record_id for p in batch.patch), *batch.delete]) if rid not in rows]
        if wanted:  # records a query by id read (_query), as they are now
            known = self._id_rows
            rows.update((rid, (bool(known[rid][-1]), known[rid][1])) for rid in wanted if rid in known)
            wanted = [rid for rid in wanted if rid not in rows]
        if wanted:
            ids = ", ".join(sql_str(rid) for rid in wanted) if len(wanted) <= _MAX_ID_LOOKUP else f"SELECT unnest({sql_str_list(wanted)})"
            found = tx.read(f"SELECT rid, has_vec, rtype FROM am_records WHERE rid IN ({ids})").fetchall()
            rows.update((rid, (bool(has_vec), rtype)) for rid, has_vec, rtype in found)
        new_rows: tuple[np.ndarray, np.ndarray] | None = None
        if batch.add:
            added, columns, matrix, missing = self._new_rows(batch.add, seq, dim)
            if len(batch.add) <= _VALUES_MAX_ROWS:
                unit_rows = _unit_rows(matrix, missing)
                tx.run(_values_insert(columns, unit_rows, missing, seq, ver))
                new_rows = (unit_rows, missing)
                self._inserted = _inserted_rows(columns, missing, seq)
                self._moved = [
                    (rid, ver + i + 1, columns.content[i] if columns.index_text[i] is None else columns.index_text[i])
                    for i, rid in enumerate(columns.record_id) if not missing[i]
                ]
            else:
                tx.insert_arrow(_arrow_table(columns, matrix, missing, seq, ver))
                self._moved = None
            seq += len(batch.add)
            ver += len(batch.add)
            with_vec = sum(1 for item in batch.add if item.vector is not None)
            changes += with_vec
            vec_count += with_vec
        first_ver = self._clock
        touched = {item.record.record_type.value for item in batch.add}
        other: set[str] = set()  # the types of records patched or deleted
        for patch in batch.patch:
            lit = sql_str(patch.record_id)
            row = rows.get(patch.record_id)
            if row is None:
                tx.flush()  # a duplicate add is reported first, as when it was inserted at once
                raise NotFound("record", patch.record_id)
            sets: list[str] = []
            if isinstance(patch.content, str):
                sets.append(f"content = {sql_str(patch.content)}")
            if isinstance(patch.index_text, str):
                sets.append(f"index_text = {sql_str(patch.index_text)}")
            elif patch.index_text is None or isinstance(patch.content, str):  # new content: index it
                sets.append("index_text = NULL")
            if isinstance(patch.metadata, Mapping):
                sets.append(f"metadata = {sql_str(dump_json(dict(patch.metadata)))}")
            if patch.status is not UNSET:
                sets.append(f"status = {sql_str(RecordStatus(patch.status).value)}")
            if isinstance(patch.timestamp, datetime):
                sets.append(f"ts = {sql_str(patch.timestamp.isoformat())}")
            if patch.expires_at is None:
                sets.append("expires = NULL, expires_us = NULL")
            elif isinstance(patch.expires_at, datetime):
                sets.append(f"expires = {sql_str(patch.expires_at.isoformat())}, expires_us = {to_micros(patch.expires_at)}")
            had_vec, rtype = row
            if patch.vector is None:
                sets.append("vec = NULL, has_vec = FALSE")
                rows[patch.record_id] = (False, rtype)
            elif isinstance(patch.vector, np.ndarray):
                sets.append(f"vec = {sql_str(vector_literal(unit(patch.vector)))}::FLOAT[{dim}], has_vec = TRUE")
                rows[patch.record_id] = (True, rtype)
            # every patch moves the row past the snapshots' watermark (into the exact delta); only
            # rows with a vector are in a snapshot, so only they leave a stale snapshot row
            ver += 1
            sets.append(f"ver = {ver}")
            tx.run(f"UPDATE am_records SET {', '.join(sets)} WHERE rid = {lit}")
            if self._moved is not None:
                self._moved.append((patch.record_id, ver if rows[patch.record_id][0] else None, _patched_text(patch)))
            touched.add(rtype)
            other.add(rtype)
            if patch.vector is None:
                vec_count -= int(had_vec)
            elif isinstance(patch.vector, np.ndarray):
                vec_count += int(not had_vec)
            if had_vec or isinstance(patch.vector, np.ndarray):
                changes += 1
            if had_vec:
                stale.append((patch.record_id, ver))
        for link_id in batch.delete_links:
            if tx.read(f"SELECT 1 FROM am_links WHERE link_id = {sql_str(link_id)}").fetchone() is None:
                raise NotFound("link", link_id)
            tx.run(f"DELETE FROM am_links WHERE link_id = {sql_str(link_id)}")
        for link in batch.add_links:
            self._add_link(tx, link)
        for rid in batch.delete:
            lit = sql_str(rid)
            row = rows.pop(rid, None)
            if row is None:
                tx.flush()
                raise NotFound("record", rid)
            touched.add(row[1])
            other.add(row[1])
            tx.run(f"DELETE FROM am_records WHERE rid = {lit}")
            tx.run(f"DELETE FROM am_links WHERE source_id = {lit} OR target_id = {lit}")
            if self._moved is not None:
                self._moved.append((rid, None, None))
            ver += 1
            if row[0]:
                stale.append((rid, ver))
                vec_count -= 1
                changes += 1
        if stale and (self._vidx is not None or self._fts is not None or self._building):
            # snapshot rows of these records are no longer the live rows: queries skip them
            values = ", ".join(f"({sql_str(rid)}, {clock})" for rid, clock in stale)
            tx.run(f"INSERT INTO am_stale VALUES {values}")
            self._stale_written = [rid for rid, _ in stale]
        if batch.delete:  # a deleted row may have held the largest seq or ver: write them (_schema._v4)
            tx.run(_counters_sql(seq, ver))
        self._touched = frozenset(touched)
        if new_rows is not None:
            self._added = _Added(added, new_rows[0], new_rows[1], first_ver, frozenset(other))
        return added, changes, changes, vec_count, seq, ver

    def _add_link(self, tx: _Tx, link: Link) -> None:
        src, dst, lid = sql_str(link.source_id), sql_str(link.target_id), sql_str(link.link_id)
        found = {rid for (rid,) in tx.read(f"SELECT rid FROM am_records WHERE rid IN ({src}, {dst})").fetchall()}
        for end in (link.source_id, link.target_id):
            if end not in found:
                raise NotFound("record", end)
        if tx.read(f"SELECT 1 FROM am_links WHERE link_id = {lid}").fetchone() is not None:
            raise Conflict(f"link id {link.link_id!r} already exists")
        pair = tx.read(
            f"SELECT 1 FROM am_links WHERE (source_id = {src} AND target_id = {dst}) OR (source_id = {dst} AND target_id = {src})"
        ).fetchone()
        if pair is not None:
            raise Conflict(f"records {link.source_id!r} and {link.target_id!r} are already linked")
        values = [lid, src, dst, sql_str(link.link_type.value), sql_str(link.created_at.isoformat()), sql_str(dump_json(link.metadata))]
        tx.run(f"INSERT INTO am_links VALUES ({', '.join(values)})")

    @staticmethod
    def _new_rows(adds: Sequence[NewRecord], seq: int, dim: int) -> tuple[list[Record], ValidatedColumns, np.ndarray, np.ndarray]:
        """The added records as reads will return them (with ``seq`` and their metadata as
        stored), and their columns, vectors and missing-vector flags to insert them with
        (``_values_insert``, ``_arrow_table``)."""
        recs = [item.record for item in adds]
        metadata = [stored_metadata(r.metadata) for r in recs]
        added = [r.model_copy(update={"seq": seq + i + 1, "metadata": m}) for i, (r, m) in enumerate(zip(recs, metadata))]
        missing = np.fromiter((item.vector is None for item in adds), dtype=bool, count=len(recs))
        if missing.any():
            matrix = np.zeros((len(recs), dim), dtype=np.float32)
            if not missing.all():
                matrix[~missing] = np.asarray([item.vector for item in adds if item.vector is not None], dtype=np.float32)
        else:
            matrix = np.asarray([item.vector for item in adds], dtype=np.float32)
        columns = ValidatedColumns(
            record_id=[r.record_id for r in recs], content=[r.content for r in recs],
            record_type=[r.record_type for r in recs], timestamp=[r.timestamp for r in recs],
            created_at=[r.created_at for r in recs], user_id=[r.user_id for r in recs],
            agent_id=[r.agent_id for r in recs], thread_id=[r.thread_id for r in recs],
            role=[r.role for r in recs], expires_at=[r.expires_at for r in recs],
            status=[r.status for r in recs], metadata=metadata, vectors=None,
            index_text=[r.index_text for r in recs],
        )
        return added, columns, matrix, missing

    # ---- reads ---------------------------------------------------------------------------------
    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        if limit == 0:
            return []
        desc = order is Order.SEQ_DESC
        ids = None if filter.record_ids is None else list(dict.fromkeys(filter.record_ids))
        if ids is not None and len(ids) <= _MAX_ID_LOOKUP:
            # by id alone, so DuckDB looks the ids up in the primary key's index: with any other
            # condition beside it (the turn's thread record read names its type too) it scans
            # the table (7 ms at 100k rows instead of 0.5); the rest of the filter, the order and
            # the window are applied here, with the reference semantics of a filter
            if not ids:
                return []
            with self._lock, _mapped_errors():
                kept, absent = self._id_rows, self._absent_ids
                if all(i in kept or i in absent for i in ids):
                    rows = [kept[i] for i in ids if i in kept]
                else:
                    sql = f"SELECT {_COLS}, r.has_vec FROM am_records r WHERE r.rid IN ({', '.join(sql_str(i) for i in ids)})"
                    rows = self._conn().execute(sql).fetchall()
                    if len(kept) + len(rows) > _ID_ROWS:
                        kept.clear()
                    kept.update((row[0], row) for row in rows)
                    if len(rows) < len(ids):
                        if len(absent) > _ID_ROWS:
                            absent.clear()
                        absent.update(i for i in ids if i not in kept)
                records = [self._record_of(row) for row in rows]
            found = sorted((rec for rec in records if record_matches(rec, filter)), key=_by_seq, reverse=desc)
            return found[offset:] if limit is None else found[offset : offset + limit]
        with self._lock, _mapped_errors():
            windowed = self._windowed(filter, order, limit, offset)
        if windowed is not None:
            return windowed
        where, params = compile_filter(filter, udf=self._udf)
        sql = f"SELECT {_COLS} FROM am_records r WHERE {where}"
        if limit is None and not offset:
            # sorted here: DuckDB's ORDER BY costs ~0.4 ms even for the few rows of a thread's
            # new messages, more than sorting them in Python
            with self._lock, _mapped_errors():
                rows = self._conn().execute(sql, params).fetchall()
            rows.sort(key=_row_seq, reverse=desc)
            return [decode_record(row) for row in rows]
        sql += f" ORDER BY r.seq {'DESC' if desc else 'ASC'}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if offset:
            sql += f" OFFSET {int(offset)}"
        with self._lock, _mapped_errors():
            rows = self._conn().execute(sql, params).fetchall()
        return [decode_record(row) for row in rows]

    def _record_of(self, row: Sequence[Any]) -> Record:
        """``decode_record(row)``, decoded once per row content (under the store lock): a
        card's searches return the same few dozen rows call after call, and a decode costs
        ~10 us (pydantic, two datetimes, the metadata's JSON). Keyed by the row itself, so a
        changed row is decoded again."""
        cols = tuple(row[:_N_COLS])
        hit = self._records.get(cols[0])
        if hit is not None and hit[0] == cols:
            return hit[1]
        record = decode_record(cols)
        if len(self._records) >= _ID_ROWS:
            self._records.clear()
        self._records[cols[0]] = (cols, record)
        return record

    def _windowed(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record] | None:
        """The query's records from a kept window of its scope (``_windows``), read first when
        the query is a scope's newest few (the card's messages and memories); None when no
        window holds them all (called under the store lock, so no write comes in between)."""
        found = self._windows.answer(filter, order, limit, offset)
        if found is not None:
            return found
        load = self._windows.to_load(filter, order, limit, offset)
        if load is None:
            return None
        key, depth = load
        where, params = compile_filter(key.as_filter(), udf=self._udf)
        rows = self._conn().execute(
            f"SELECT {_COLS}, r.has_vec FROM am_records r WHERE {where} ORDER BY r.seq DESC LIMIT {int(depth)}", params
        ).fetchall()
        self._windows.load(key, rows, depth)
        return self._windows.answer(filter, order, limit, offset)

    def _count(self, filter: RecordFilter) -> int:
        where, params = compile_filter(filter, udf=self._udf)
        with self._lock, _mapped_errors():
            (n,) = self._conn().execute(f"SELECT count(*) FROM am_records r WHERE {where}", params).fetchone()  # type: ignore[misc]
        return int(n)

    def _links(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        conds: list[str] = []
        params: list[Any] = []
        if record_ids is not None:
            if not record_ids:
                return []
            ids = sql_str_list(record_ids)
            conds.append(f"(source_id IN (SELECT unnest({ids})) OR target_id IN (SELECT unnest({ids})))")
        if link_ids is not None:
            if not link_ids:
                return []
            conds.append(f"link_id IN (SELECT unnest({sql_str_list(link_ids)}))")
        where = " AND ".join(conds) or "TRUE"
        with self._lock, _mapped_errors():
            rows = self._conn().execute(f"SELECT {LINK_COLUMNS} FROM am_links WHERE {where} ORDER BY link_id", params).fetchall()
        return [decode_link(row) for row in rows]

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        dim = self.dimension
        sql = f"SELECT rid, vec FROM am_records WHERE has_vec AND rid IN (SELECT unnest({sql_str_list(record_ids)}))"
        with self._lock, _mapped_errors():
            table = self._conn().execute(sql).fetch_arrow_table()
        if not table.num_rows:
            return {}
        matrix = _vec_matrix(table, dim, copy=True)  # own arrays: callers get writable vectors
        return dict(zip(table.column("rid").to_pylist(), matrix, strict=True))

    # ---- vector search -------------------------------------------------------------------------
    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        dim = self.dimension

        def literal() -> str:
            # the query vector as an inline literal: a bound parameter makes the duckdb client
            # look for pandas on every call (~0.15 ms); the text holds only digits, '.', 'e',
            # '+', '-', ','. Rendered only for SQL: a kept small scope answers without it, and
            # rendering 384 floats was most of such a search (~90-190 us of ~110-200)
            return f"'{vector_literal(unit(vector))}'::FLOAT[{dim}]"

        with self._lock, _mapped_errors():
            con = self._conn()
            self._maybe_start_builder()
            vidx = self._vidx if self._vector_index else None
            full_rows: list[Any] | None = None
            scope: _Scope | None = None
            unfiltered = is_unfiltered(filter)
            matching, small, compiled = (-1, None, None) if unfiltered else self._small_scope(con, filter)
            if small is None:  # a kept small scope needs no SQL (search's alive_at: ~10 us to compile)
                where, params = compiled or compile_filter(filter, udf=self._udf)
            if matching == 0:
                self.last_plan = SearchPlan("exact", 0)
                return []
            if small is not None:
                # a small scope (one user's or one thread's rows): its vectors are read once per
                # write clock and every query on it is an in-process exact scan (``_scope``)
                self.last_plan = SearchPlan("exact", matching)
                scope, alive_us = small
                pairs = scope.nearest(unit(vector), k, alive_us)
            elif vidx is None or vidx.rows == 0:
                self.last_plan = SearchPlan("exact", matching)
                pairs = self._exact(con, literal(), dim, where, params, k)
            else:
                if unfiltered:
                    matching = self._n_vectors
                    if matching == 0:
                        self.last_plan = SearchPlan("exact", 0)
                        return []
                fetch = self._fetch_size(matching, vidx.rows, k)
                q = literal()
                pairs = []
                if self._index_pays(matching, fetch, dim):
                    full_rows = self._via_index(con, vidx, q, dim, where, params, k, fetch)
                    self.last_plan = SearchPlan("index", matching, fetch, fallback=full_rows is None)
                else:
                    self.last_plan = SearchPlan("exact", matching)
                if full_rows is None:
                    pairs = self._exact_over_snapshot(con, vidx, q, dim, where, params, k)
            rows = _merge_with_rows(con, pairs, full_rows or [], k, ascending=True, cache=self._row_cache(), scope=scope)
            return [Hit(record=self._record_of(row), distance=float(row[-1])) for row in rows]

    def _small_scope(
        self, con: duckdb.DuckDBPyConnection, flt: RecordFilter
    ) -> tuple[int, tuple[_Scope, int | None] | None, tuple[str, list[Any]] | None]:
        """(rows ``flt`` selects, for the planner; the scope to scan in process with the
        expiry time to apply to it, when those rows are few; ``flt`` compiled to SQL when this
        had to compile it, for the caller to reuse). A scope is read and kept without
        the filter's ``alive_at`` test, which names the current time and would make every
        call's scope a new one: expiry is applied in process (``_Scope.nearest``), so the next
        card (or search) before a write reuses it."""
        if flt.alive_at is not None:
            bare, timeless = self._timeless(flt)
            scope = self._scope(con, timeless, flt.record_types, bare)
            if scope is not None:
                return len(scope.rids), (scope, to_micros(flt.alive_at)), None
            compiled = compile_filter(flt, udf=self._udf)
            alive = self._matching_alive(con, timeless, to_micros(flt.alive_at))
            if alive is not None:
                if alive > self._exact_max_rows:  # large even without its expired rows: no count at this time
                    return alive, None, compiled
                self._memo[("matching", compiled[0])] = alive  # small once expired rows are left out: read below
        else:
            compiled = (self._timeless(flt)[1], [])
        where = compiled[0]
        scope = self._scope(con, where, flt.record_types, flt)  # expired rows may be what made the scope large
        if scope is not None:
            return len(scope.rids), (scope, None), compiled
        return self._matching(con, where), None, compiled

    def _kept_scope(self, flt: RecordFilter, where: str) -> tuple[_Scope, np.ndarray | None] | None:
        """A scope already read for ``flt`` (``_small_scope``), with the mask of its rows alive
        at the filter's ``alive_at`` (None: every row)."""
        self._sync_memo()
        if flt.alive_at is not None:
            scope = self._scopes.get(self._timeless(flt)[1])
            if scope is not None:
                return scope, scope.alive(to_micros(flt.alive_at))
        scope = self._scopes.get(where)
        return None if scope is None else (scope, None)

    def _timeless(self, flt: RecordFilter) -> tuple[RecordFilter, str]:
        """``flt`` without ``alive_at``, and that compiled (``compile_filter``): memoised, as a
        card's searches ask for the same few scopes at every call, each at a new time (a compile
        and a ``replace`` cost ~15 us). Filters with a metadata condition or ids in a list are
        compiled each time."""
        ids = flt.record_ids
        if flt.metadata_filter or not (ids is None or isinstance(ids, tuple)):
            bare = replace(flt, alive_at=None)
            return bare, compile_filter(bare, udf=self._udf)[0]
        key = (ids, flt.record_types, flt.user_id, flt.agent_id, flt.thread_id, flt.statuses, flt.expired_at, flt.min_seq, flt.max_seq)
        hit = self._timeless_filters.get(key)
        if hit is None:
            bare = replace(flt, alive_at=None)
            hit = self._timeless_filters.keep(key, (bare, compile_filter(bare, udf=self._udf)[0]))
        return hit

    def _matching(self, con: duckdb.DuckDBPyConnection, where: str) -> int:
        """Rows with a vector that ``where`` selects (the planner's input), memoised per write
        clock: the card asks several queries in one scope. The same statement counts those with
        an expiry time (memoised as ``("expiring", where)``, for ``_matching_alive``)."""

        def count() -> int:
            total, expiring = con.execute(  # type: ignore[misc]
                f"SELECT count(*), count(r.expires_us) FROM am_records r WHERE r.has_vec AND {where}"
            ).fetchone()
            self._memo[("expiring", where)] = int(expiring)
            return int(total)

        return int(self._memoised(("matching", where), count))

    def _matching_alive(self, con: duckdb.DuckDBPyConnection, timeless: str, alive_us: int) -> int | None:
        """``_matching`` of ``timeless`` (a filter compiled without ``alive_at``) and alive at
        ``alive_us``: its count less its rows expired by then, found in the sorted expiry times
        of the rows that have one (read once per write clock). The card's searches name the
        current time, so counting in SQL cost a statement at every card (~2 ms at 100k rows).
        None (count the timed filter in SQL) when more than ``_EXPIRY_TIMES_MAX`` rows expire."""
        total = self._matching(con, timeless)
        expiring = self._memo.get(("expiring", timeless))
        if expiring == 0:
            return total
        if expiring is None or expiring > _EXPIRY_TIMES_MAX:
            return None
        times = self._memoised(("expiry-times", timeless), lambda: np.sort(np.array(
            [e for (e,) in con.execute(
                f"SELECT r.expires_us FROM am_records r WHERE r.has_vec AND r.expires_us IS NOT NULL AND {timeless}"
            ).fetchall()], np.int64)))
        return total - int(np.searchsorted(times, alive_us, "right"))  # alive: no expiry, or one after alive_us

    def _scope(
        self, con: duckdb.DuckDBPyConnection, where: str, types: frozenset[RecordType] | None = None,
        flt: RecordFilter | None = None,
    ) -> _Scope | None:
        """The records and unit vectors of the rows ``where`` selects when there are at most
        ``exact_max_rows`` of them (else None), read from ``am_records`` (every live row, so no
        snapshot or stale list is involved) in one Arrow fetch and kept for the write clock: the
        context card runs three queries, each as vector and keyword search, in each of its
        scopes, and one statement serves them all. A scope that was small at an earlier write
        clock is read straight away (capped one row past the limit) instead of being counted
        first. At most ``_SCOPE_CACHE_ROWS`` rows are kept (oldest scopes dropped first). ``types``
        (the filter's record types) lets a later write of other types keep it, and ``flt`` (the
        filter ``where`` was compiled from) one that only adds records of its types extend it
        (``_keep_untouched_scopes``)."""
        self._sync_memo()
        scope = self._scopes.get(where)
        if scope is not None:
            return scope
        limit = self._exact_max_rows
        # not known to be small: count first, unless it is one thread's (a conversation: almost
        # always small, and the read is capped, so a large one costs one capped read, then counts)
        unknown = 0 if flt is not None and isinstance(flt.thread_id, str) else limit + 1
        if self._scope_sizes.get(where, unknown) > limit:
            if not 0 < self._matching(con, where) <= limit:
                return None
        table = con.execute(
            f"SELECT {_COLS}, r.ver, r.vec, coalesce(r.expires_us, {_NO_EXPIRY}) AS expires_us "
            f"FROM am_records r WHERE r.has_vec AND {where} LIMIT {limit + 1}"
        ).fetch_arrow_table()
        n = table.num_rows
        if len(self._scope_sizes) > 4_096:
            self._scope_sizes.clear()
        self._scope_sizes[where] = n
        if n > limit:  # it grew past the limit since it was last read
            return None
        self._memo[("matching", where)] = n
        matrix = _vec_matrix(table, self.dimension, copy=False)
        scope = _Scope(
            table.column("rid").to_pylist(), table.column("ver").to_numpy(), matrix, table.select(range(_N_COLS)),
            table.column("expires_us").to_numpy(), frozenset(t.value for t in types or ()), flt,
        )
        budget = max(_SCOPE_CACHE_ROWS, limit)
        while self._scopes and sum(len(s.rids) for s in self._scopes.values()) + n > budget:
            del self._scopes[next(iter(self._scopes))]
        self._scopes[where] = scope
        return scope

    def _row_cache(self) -> dict[str, tuple[Any, ...]]:
        """Record rows already read by searches since the last write (bounded)."""
        self._sync_memo()
        if len(self._rows) > _ROW_CACHE_ROWS:
            self._rows.clear()
        return self._rows

    def _fetch_size(self, matching: int, indexed: int, k: int) -> int:
        """HNSW candidates to fetch so that about ``overfetch * k`` of them pass the filter
        (just ``k`` when every indexed row passes; stale rows are added on top)."""
        selectivity = min(1.0, matching / max(indexed, 1))
        if selectivity >= 1.0:
            return k
        return math.ceil(k * self._overfetch / selectivity) + k

    def _ef_floor(self, rows: int) -> int:
        """``hnsw_ef_search``, raised for large indexes: DuckDB's HNSW (M=16) measured recall@10
        0.999 at ef 64 on 100k vectors but 0.958 at 1M, where ef 256 gives 1.0."""
        if rows > 500_000:
            return max(self._hnsw_ef_search, 256)
        if rows > 150_000:
            return max(self._hnsw_ef_search, 128)
        return self._hnsw_ef_search

    def _index_pays(self, matching: int, fetch: int, dim: int) -> bool:
        """The planner's rule: exact up to ``exact_max_rows`` matching rows or beyond
        ``max_fetch`` candidates; in between, whichever a simple cost model (fitted on this
        machine's measurements, see README) says is cheaper."""
        if self._planner == "exact" or matching <= self._exact_max_rows or fetch > self._max_fetch:
            return False
        if self._planner == "index":
            return True
        exact_ms = _EXACT_BASE_MS + _EXACT_ROW_MS * (dim / 384) * matching
        index_ms = _INDEX_BASE_MS + _INDEX_EF_MS * max(self._ef_floor(self._vidx.rows if self._vidx else 0), fetch)
        return index_ms < exact_ms

    @staticmethod
    def _exact(con: duckdb.DuckDBPyConnection, q: str, dim: int, where: str, params: list[Any], k: int) -> list[tuple[str, float]]:
        """The exact top-k ``(rid, distance)`` among the rows passing ``where``, ordered by
        ``(round(distance, 6), rid)`` (only ids and distances go through the sort; the k rows
        are read afterwards). DuckDB's top-N on the bare distance is ~1.5 ms cheaper at 10k
        rows than on that pair, so it fetches ``k + TIE_SPARE`` by distance and orders them
        here; that is exact unless the last one fetched could still tie with the k-th after
        rounding (near-duplicates), and then the tie-aware query runs instead."""
        distance = f"array_cosine_distance(r.vec, {q})"
        top = _top_k_if_exact([_nearest(con, distance, "am_records", f"r.has_vec AND {where}", params, k + TIE_SPARE)], k)
        if top is not None:
            return top
        rows = con.execute(
            f"SELECT r.rid, {distance} AS dist FROM am_records r "
            f"WHERE r.has_vec AND {where} ORDER BY round(dist::DOUBLE, 6), r.rid LIMIT {int(k)}",
            params,
        ).fetchall()
        return [(rid, float(d)) for rid, d in rows]

    def _exact_over_snapshot(
        self, con: duckdb.DuckDBPyConnection, vidx: IndexState, q: str, dim: int, where: str, params: list[Any], k: int,
    ) -> list[tuple[str, float]]:
        """``_exact``, but scanning the scope-clustered snapshot (stale rows dropped) plus the
        rows written since it, instead of ``am_records``: a scoped scan reads only its scope's
        blocks. Falls back to ``_exact`` when near-ties at a cut could change the answer."""
        clean = self._vec_changes == self._vec_changes_at_build  # nothing changed since the build
        stale = frozenset() if clean else self._stale_since(con, vidx.watermark)
        distance = f"array_cosine_distance(r.vec, {q})"
        # "+ 0": a bare ORDER BY distance LIMIT on this table would be answered by its HNSW index,
        # which applies the WHERE afterwards
        sources = [_nearest(con, f"{distance} + 0", ident(vidx.table), where, params, k + TIE_SPARE + len(stale), drop=stale)]
        if not clean:
            delta = f"r.ver > {int(vidx.watermark)} AND r.has_vec AND {where}"
            sources.append(_nearest(con, distance, "am_records", delta, params, k + TIE_SPARE))
        top = _top_k_if_exact(sources, k)
        return top if top is not None else self._exact(con, q, dim, where, params, k)

    def _via_index(
        self, con: duckdb.DuckDBPyConnection, vidx: IndexState, q: str, dim: int, where: str,
        params: list[Any], k: int, fetch: int,
    ) -> list[Any] | None:
        """Top-k rows (record columns, distance last) from the HNSW snapshot (over-fetched;
        stale rows and rows failing the filter dropped) together with an exact scan of the rows
        written since the snapshot; None when the index yields fewer than ``k`` rows (the
        caller then scans exactly)."""
        table = ident(vidx.table)
        snap_cols = _SNAPSHOT_COLUMNS.replace("r.", "")
        clean = self._vec_changes == self._vec_changes_at_build  # nothing changed since the build
        stale = frozenset() if clean else self._stale_since(con, vidx.watermark)
        ef = max(self._ef_floor(vidx.rows), fetch + len(stale))
        if ef != self._ef_current:
            con.execute(f"SET hnsw_ef_search = {int(ef)}")
            self._ef_current = ef
        hnsw = (
            f"SELECT {snap_cols}, array_cosine_distance(vec, {q}) AS dist "
            f"FROM {table} ORDER BY dist LIMIT {int(fetch + len(stale))}"
        )
        if where == "TRUE":  # unfiltered: the bare HNSW query (the wrapper costs ~0.6 ms)
            indexed = con.execute(hnsw).fetchall()
            indexed.sort(key=lambda row: (round(float(row[-1]), 6), row[0]))
        else:
            indexed = con.execute(
                f"WITH cand AS ({hnsw}) SELECT {_COLS}, r.dist FROM cand r WHERE {where} "
                f"ORDER BY round(r.dist::DOUBLE, 6), r.rid LIMIT {int(k + len(stale))}",
                params,
            ).fetchall()
        indexed = [row[:_N_COLS] + row[-1:] for row in indexed if row[0] not in stale][:k]
        if len(indexed) < k:
            return None
        if clean:
            return indexed
        delta = con.execute(
            f"SELECT {_COLS}, array_cosine_distance(r.vec, {q}) AS dist FROM am_records r "
            f"WHERE r.ver > {int(vidx.watermark)} AND r.has_vec AND {where} ORDER BY round(dist::DOUBLE, 6), r.rid LIMIT {int(k)}",
            params,
        ).fetchall()
        return indexed + delta

    # ---- keyword search ------------------------------------------------------------------------
    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        """BM25 (the reference's formula: natural-log idf, k1=1.2, b=0.75) over the fts snapshot
        for rows not changed since it was taken, plus the rows written since, scored exactly."""
        terms = self._analyzer.term_set(text)  # the reference's set: the same order of its terms' sums
        if not terms:  # no word, or only stop words
            return []
        where, params = compile_filter(filter, udf=self._udf)
        with self._lock, _mapped_errors():
            con = self._conn()
            fts = self._fts
            watermark = 0 if fts is None else fts.watermark
            indexed: list[tuple[str, float]] = []
            kw = None
            clean = self._doc_changes == self._doc_changes_at_build  # nothing changed since the build
            kept = self._kept_scope(filter, where)
            if fts is not None and fts.rows:
                stale = frozenset() if clean else self._stale_since(con, watermark)
                kw = self._kw
                if kw is None or kw.table != fts.table:
                    kw = self._kw = self._keyword_index(con, fts)
                indexed = kw.search(terms, filter, k, stale)
            # the delta's ids only: its rows are scored from cached term counts, and only the k
            # winners are read in full (by ``_merge_with_rows``)
            delta_ids = [] if clean else self._delta_ids(con, kept, where, watermark, filter)
            scored: list[tuple[str, float]] = []
            if delta_ids:
                n_idx, avgdl_idx, df_idx = 0, 0.0, {}
                if fts is not None and fts.rows:
                    schema = f"fts_main_{ident(fts.table)}"
                    # the snapshot's figures never change (its tables are immutable), so they are
                    # kept across writes; its document frequencies are the postings' own
                    assert kw is not None  # the block above set it for this same snapshot
                    if kw.fts_stats is not None:  # kept with the postings: no statement
                        self._fts_stats = (fts.table, *kw.fts_stats)
                    elif self._fts_stats is None or self._fts_stats[0] != fts.table:
                        self._fts_stats = (fts.table, *con.execute(  # type: ignore[misc]
                            f"SELECT (SELECT num_docs FROM {schema}.stats), (SELECT avgdl FROM {schema}.stats)"
                        ).fetchone())
                    _, n_idx, avgdl_idx = self._fts_stats
                    df_idx = kw.doc_freqs(terms)
                # corpus statistics: the snapshot's plus those of the whole delta (every searchable
                # row written since, not only the rows this filter passes: a scope must not change
                # a record's score); with no snapshot, exactly the reference's
                all_delta, stats, delta_len, delta_df = self._memoised(("delta", watermark), partial(self._delta_corpus, con, watermark))
                n_docs = int(n_idx) + len(all_delta)
                avg_len = (float(avgdl_idx or 0.0) * int(n_idx) + delta_len) / n_docs if n_docs else 1.0
                df = {t: int(df_idx.get(t, 0)) + delta_df[t] for t in terms}
                for rid in delta_ids:
                    counts = stats[rid][1]
                    if counts.keys().isdisjoint(terms):
                        continue
                    score = bm25(counts, terms, df, n_docs, avg_len or 1.0)
                    if score > 0:
                        scored.append((rid, score))
            rows = _merge_with_rows(
                con, indexed + scored, [], k, ascending=False, cache=self._row_cache(), scope=None if kept is None else kept[0]
            )
            self._maybe_start_builder()
            return [Hit(record=self._record_of(row), score=float(row[-1])) for row in rows]

    def _delta_ids(
        self, con: duckdb.DuckDBPyConnection, kept: tuple[_Scope, np.ndarray | None] | None, where: str, watermark: int,
        flt: RecordFilter,
    ) -> list[str]:
        """Ids of the rows written since the BM25 snapshot that ``where`` (``flt`` compiled)
        selects, memoised per write clock; taken from the scope's vectors (``kept``, from
        ``_kept_scope``) when a vector search already read them. With ``alive_at`` (the card's
        searches name the current time) they are read without it, with their expiry times, and
        the test is applied here, so the next search at another time runs no statement."""
        if kept is not None:
            scope, alive = kept
            fresh = scope.vers > watermark
            return [scope.rids[i] for i in np.flatnonzero(fresh if alive is None else fresh & alive)]
        if flt.alive_at is not None:
            timeless = self._timeless(flt)[1]
            rows: list[tuple[str, int | None]] = self._memoised(("delta-ids-expiry", timeless, watermark), lambda: con.execute(
                f"SELECT r.rid, r.expires_us FROM am_records r WHERE r.ver > {int(watermark)} AND r.has_vec AND {timeless}"
            ).fetchall())
            alive_us = to_micros(flt.alive_at)
            return [rid for rid, expires in rows if expires is None or expires > alive_us]
        return self._memoised(("delta-ids", where, watermark), lambda: [rid for (rid,) in con.execute(
            f"SELECT r.rid FROM am_records r WHERE r.ver > {int(watermark)} AND r.has_vec AND {where}"
        ).fetchall()])

    def _delta_terms(self, con: duckdb.DuckDBPyConnection, rows: list[tuple[str, int, str | None]]) -> dict[str, tuple[int, Counter[str], int]]:
        """``rid -> (ver, term counts, length)`` for the delta rows ``(rid, ver, content or
        None)``: analysed once per row version (content read here when not given), kept until
        the rows leave the delta (called under the store lock)."""
        cache = self._kw_terms
        missing = [rid for rid, ver, _ in rows if (hit := cache.get(rid)) is None or hit[0] != ver]
        if missing:
            given = {rid: (ver, text) for rid, ver, text in rows if text is not None}
            unread = [rid for rid in missing if rid not in given]
            if unread:
                given.update({rid: (ver, text) for rid, ver, text in con.execute(
                    f"SELECT rid, ver, coalesce(index_text, content) FROM am_records WHERE rid IN (SELECT unnest({sql_str_list(unread)}))"
                ).fetchall()})
            terms = self._analyzer.terms
            for rid in missing:
                ver, text = given[rid]
                counts = Counter(terms(text))
                cache[rid] = (ver, counts, sum(counts.values()))
        if len(cache) > 2 * len(rows) + 1_000:  # rows that left the delta (indexed, deleted)
            live = {rid for rid, _, _ in rows}
            for rid in [r for r in cache if r not in live]:
                del cache[rid]
        return cache

    def _delta_corpus(
        self, con: duckdb.DuckDBPyConnection, watermark: int
    ) -> tuple[list[tuple[str, int, str | None]], dict[str, tuple[int, Counter[str], int]], int, Counter[str]]:
        """Every searchable row written since the BM25 snapshot ``(rid, ver, None)``, their term
        counts (``_delta_terms``), their total length and their document frequencies: the
        delta's share of the corpus."""
        rows = con.execute(f"SELECT rid, ver, NULL FROM am_records WHERE has_vec AND ver > {int(watermark)}").fetchall()
        return self._delta_from(con, watermark, rows)

    def _delta_from(
        self, con: duckdb.DuckDBPyConnection, watermark: int, rows: list[tuple[str, int, str | None]]
    ) -> tuple[list[tuple[str, int, str | None]], dict[str, tuple[int, Counter[str], int]], int, Counter[str]]:
        """``_delta_corpus``'s value for the delta rows ``(rid, ver, text or None)``."""
        stats = self._delta_terms(con, rows)
        bare: list[tuple[str, int, str | None]] = [(rid, ver, None) for rid, ver, _ in rows]
        return bare, stats, sum(stats[rid][2] for rid, _, _ in rows), self._delta_df.update(watermark, bare, stats)

    def _memoised(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """A read that depends only on the stored rows and snapshots (stale ids, the delta's ids,
        BM25 statistics), computed once per write clock: a search after a search skips those
        queries. Every write advances the clock (one writer per file), so nothing stale is served;
        ``key`` names the snapshot it was read against. Called under the store lock."""
        self._sync_memo()
        if len(self._memo) > 4_096:
            self._memo.clear()
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def _sync_memo(self) -> None:
        """Forget what was memoised or cached for an earlier write clock (under the store lock)."""
        if self._memo_clock != self._clock:
            self._memo.clear()
            self._scopes.clear()
            self._rows.clear()
            self._memo_clock = self._clock

    def _stale_since(self, con: duckdb.DuckDBPyConnection, watermark: int) -> frozenset[str]:
        """``_stale_ids`` memoised per write clock."""
        return self._memoised(("stale", watermark), lambda: frozenset(_stale_ids(con, watermark)))

    # ---- derived indexes -----------------------------------------------------------------------
    def build_indexes(self, *, force: bool = False) -> dict[str, bool]:
        """Bring the derived indexes up to date now, in the calling thread (after waiting for a
        background build): every index with unindexed or changed rows is rebuilt, whatever its
        ``*_min_rows``; ``force`` rebuilds even up-to-date ones. Returns what was rebuilt. Call it
        after a bulk ingest to get the fast path at once."""
        self._check_open()
        if self._read_only:
            raise BackendUnavailable("the DuckDB store was opened read_only; indexes cannot be built")
        builder = self._builder
        if builder is not None:
            builder.join()
        with self._build_lock:
            cursor = self._new_cursor()
            try:
                with self._lock:
                    jobs = self._due_jobs(explicit=True, force=force)
                for job in jobs:
                    self._build(cursor, job)
            finally:
                cursor.close()
        return {"vector": "vector" in jobs, "fts": "fts" in jobs}

    def index_thresholds(self) -> dict[str, int]:
        """``{"vector": vector_index_min_rows, "keyword": fts_min_rows}`` (no ``"vector"`` with
        ``vector_index=false``): each snapshot index is built once the store holds that many
        records with a vector. Past it, keyword search scores the BM25 snapshot and vector
        search reads the HNSW snapshot (an exact scan of its rows, or the HNSW index itself
        when the planner picks it: ``planner``, ``exact_max_rows``, ``max_fetch``)."""
        out = {"keyword": self._fts_min_rows}
        if self._vector_index:
            out["vector"] = self._vector_index_min_rows
        return out

    def _settle(self) -> dict[str, bool]:
        """Wait for a background build, then build every index that is past its ``*_min_rows``
        and missing, or built with rows changed since (``build_indexes`` without forcing the
        indexes of a small store). A read-only store builds nothing; it reports what it has."""
        if not self._read_only:
            builder = self._builder
            if builder is not None:
                builder.join()
            with self._build_lock:
                cursor = self._new_cursor()
                try:
                    with self._lock:
                        jobs = self._due_jobs(explicit=True, settle=True)
                    for job in jobs:
                        self._build(cursor, job)
                finally:
                    cursor.close()
        with self._lock:
            status = {"keyword": self._fts is not None and self._doc_changes == self._doc_changes_at_build}
            if self._vector_index:
                status["vector"] = self._vidx is not None and self._vec_changes == self._vec_changes_at_build
        return status

    def wait_for_indexes(self, timeout: float | None = None) -> bool:
        """Wait for a running background build; True when none is running any more."""
        builder = self._builder
        if builder is not None:
            builder.join(timeout)
            return not builder.is_alive()
        return True

    def _due_jobs(self, *, explicit: bool = False, force: bool = False, settle: bool = False) -> list[str]:
        """Which indexes to rebuild: explicitly, every stale one (or all with ``force``; with
        ``settle``, a missing one only past its ``*_min_rows``); automatically, those past
        ``*_min_rows`` whose stale rows reach ``rebuild_fraction``."""
        jobs: list[str] = []
        # the BM25 delta is scored in Python, so it is kept smaller than the vector delta
        candidates = [
            ("vector", self._vector_index, self._vidx, self._vec_changes - self._vec_changes_at_build,
             self._vector_index_min_rows, 1_000.0, self._rebuild_fraction),
            ("fts", True, self._fts, self._doc_changes - self._doc_changes_at_build,
             self._fts_min_rows, 500.0, self._rebuild_fraction / 4),
        ]
        for job, enabled, state, stale, min_rows, min_stale, fraction in candidates:
            if not enabled or self._n_vectors <= 0:
                continue
            if explicit:
                if settle and state is None and self._n_vectors < min_rows:
                    continue
                if force or state is None or stale > 0:
                    jobs.append(job)
            elif self._n_vectors >= min_rows and stale >= max(
                min(min_stale, float(min_rows)), fraction * (0 if state is None else state.rows)
            ):
                jobs.append(job)
        return jobs

    def _defer_indexes(self, defer: bool) -> None:
        """While deferred (nested blocks count), no background build starts and a running builder
        stops after its current job. A build that became due starts at the next write or search
        (or at once with ``settle``), not when the block ends: a migration's process is usually
        about to close the store, and ``close`` would wait for a build it cannot interrupt
        (minutes for an HNSW index at 100k rows)."""
        with self._lock:
            self._deferred += 1 if defer else -1

    def _maybe_start_builder(self) -> None:
        """Start the background index builder when an index is due (called under the lock)."""
        if not self._auto_index or self._deferred or self._stop.is_set() or self._builder is not None:
            return
        if time.monotonic() - self._last_build_failure < 60.0 or not self._due_jobs():
            return
        thread = threading.Thread(target=self._builder_main, name=f"agentmemory-duckdb-index:{self._path}", daemon=True)
        self._builder = thread
        thread.start()

    def _builder_main(self) -> None:
        try:
            with self._build_lock:
                cursor = self._new_cursor()
                self._builder_cursor = cursor
                try:
                    while not self._stop.is_set():
                        with self._lock:
                            jobs = [] if self._deferred else self._due_jobs()
                        if not jobs:
                            break
                        for job in jobs:
                            if self._stop.is_set():
                                break
                            self._build(cursor, job)
                finally:
                    self._builder_cursor = None
                    cursor.close()
        except Exception:  # noqa: BLE001 - a failed build only costs speed; reads stay exact
            if not self._stop.is_set():
                log.exception("agentmemory-duckdb: background index build failed; retrying later")
                self._last_build_failure = time.monotonic()
        finally:
            with self._lock:
                self._builder = None

    def _new_cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            con = self._conn()
            self._load_extension(con, "vss")
            self._load_extension(con, "fts")
            cursor = con.cursor()
        if not self._memory:
            cursor.execute("SET hnsw_enable_experimental_persistence = true")
        return cursor

    def _load_extension(self, con: duckdb.DuckDBPyConnection, name: str) -> None:
        """``LOAD`` a bundled extension once per store, from the offline extension directory."""
        if name in self._loaded:
            return
        try:
            con.execute(f"LOAD {ident(name)}")
        except duckdb.Error as exc:
            raise BackendUnavailable(
                f"cannot load the DuckDB {name} extension offline ({exc}); install it with: "
                f"pip install duckdb-ext-{name}=={duckdb.__version__}.*"
            ) from exc
        if name == "vss" and not self._memory:
            con.execute("SET hnsw_enable_experimental_persistence = true")
        self._loaded.add(name)

    def _after_snapshot(self, job: str) -> None:
        """Test seam: called by a build between taking its snapshot and making it current."""

    def _build(self, cursor: duckdb.DuckDBPyConnection, job: str) -> None:
        """Build one snapshot index on ``cursor`` (its own connection cursor, outside the store
        lock, so foreground writes are not blocked), then make it current under the store lock
        in one small transaction.

        The snapshot copies the searchable rows; its watermark is the write clock the copy
        reflects (read in the copy's transaction: every write batch advances it in its own), so
        every change up to it, deletes included, is in the snapshot and its ``am_stale`` entries
        can go. Rows changed later carry a higher ``ver`` (the exact delta) and their snapshot
        rows are listed in ``am_stale`` with a clock above the watermark. (A watermark taken as
        the largest ``ver`` copied left the entry of a trailing delete above it for good: every
        later open counted it as a change, and every ``build_indexes`` rebuilt both indexes.)"""
        prefix = "am_vidx" if job == "vector" else "am_fts"
        table = ident(f"{prefix}_{secrets.token_hex(6)}")
        with self._lock:
            changes_at_start = self._vec_changes if job == "vector" else self._doc_changes
            self._building += 1  # from now on writes record stale rows
        try:
            # an empty CREATE TABLE AS, then INSERT … SELECT: a CREATE TABLE AS of all these
            # columns at 100k rows spins single-threaded for many minutes in DuckDB 1.4.4 (the
            # same copy as an INSERT takes ~1.5 s)
            columns = f"{_SNAPSHOT_COLUMNS}, r.ver, " + ("r.vec" if job == "vector" else f"{self._terms_udf}(coalesce(r.index_text, r.content)) AS terms")
            cursor.execute(f"CREATE TABLE {table} AS SELECT {columns} FROM am_records r WHERE FALSE")
            # clustered by scope: an exact scan of one user's rows then reads only their blocks
            # (zonemaps skip the rest): 17 → 8 ms for a user with 10 % of 100k rows, 8 → 2 ms at 0.1 %
            order = " ORDER BY r.user_id, r.thread_id, r.seq" if job == "vector" else ""
            with _transaction(cursor):  # reads only am_records/am_meta: foreground writes go on
                cursor.execute(f"INSERT INTO {table} SELECT {columns} FROM am_records r WHERE r.has_vec{order}")
                (clock,) = cursor.execute(  # type: ignore[misc]
                    f"SELECT greatest((SELECT value::BIGINT FROM {_schema.META_TABLE} WHERE key = 'ver'), "
                    "(SELECT coalesce(max(ver), 0) FROM am_records), (SELECT coalesce(max(clock), 0) FROM am_stale))"
                ).fetchone()  # the write clock, as _load_state takes it (_schema._v4)
            watermark, rows = int(clock), cursor.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # type: ignore[index]
            self._after_snapshot(job)
            if job == "vector":
                if rows:
                    cursor.execute(
                        f"CREATE INDEX {table}_hnsw ON {table} USING HNSW (vec) WITH (metric = 'cosine', "
                        f"M = {self._hnsw_m}, ef_construction = {self._hnsw_ef_construction})"
                    )
            elif rows:
                cursor.execute(
                    f"PRAGMA create_fts_index('{table}', 'rid', 'terms', stemmer = 'none', stopwords = 'none', "
                    f"ignore = '{_FTS_IGNORE}', strip_accents = 0, lower = 0, overwrite = 1)"
                )
            state = IndexState(table, int(watermark), int(rows))
            keyword = KeywordIndex.build(cursor, table) if job == "fts" and rows else None
            if keyword is not None:
                self._save_keyword_index(keyword, state)
            with self._lock:
                if self._stop.is_set() or self._con is None:
                    raise _Cancelled
                con = self._con
                key = "vidx" if job == "vector" else "fts"
                old = self._vidx if job == "vector" else self._fts
                other = self._fts if job == "vector" else self._vidx
                oldest = min(state.watermark, other.watermark) if other is not None else state.watermark
                with _transaction(con):
                    for name, value in ((f"{key}_table", state.table), (f"{key}_watermark", str(state.watermark)), (f"{key}_rows", str(state.rows))):
                        con.execute(f"INSERT OR REPLACE INTO am_meta VALUES ({sql_str(name)}, {sql_str(value)})")
                    con.execute(f"DELETE FROM am_stale WHERE clock <= {int(oldest)}")
                if job == "vector":
                    self._vidx, self._vec_changes_at_build = state, changes_at_start
                else:
                    self._fts, self._doc_changes_at_build, self._kw = state, changes_at_start, keyword
                if old is not None:
                    _drop_snapshot(con, old.table)
        except _Cancelled:
            with contextlib.suppress(Exception):
                _drop_snapshot(cursor, table)
        except BaseException:
            with contextlib.suppress(Exception):
                _drop_snapshot(cursor, table)
            raise
        finally:
            with self._lock:
                self._building -= 1



def _vec_matrix(table: pa.Table, dim: int, *, copy: bool) -> np.ndarray:
    """The ``vec`` column of an Arrow result as a float32 ``(rows, dim)`` matrix: a view of the
    (read-only) Arrow buffer with ``copy=False``, an own writable array with ``copy=True``."""
    column = table.column("vec").combine_chunks()
    if isinstance(column, pa.FixedSizeListArray) and not column.null_count:
        # the child values of the rows in view; ``flatten()`` does the same but imports
        # pyarrow.compute at its first call (0.2 s of a reopened store's first card)
        flat = column.values.slice(column.offset * dim, len(column) * dim).to_numpy(zero_copy_only=False)
    else:
        flat = column.flatten().to_numpy()
    return flat.astype(np.float32, copy=copy).reshape(table.num_rows, dim)


def _unit_rows(matrix: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """``matrix`` with each row scaled to unit length; rows flagged in ``missing`` are zero."""
    if missing.any():
        unit_rows = np.zeros_like(matrix, dtype=np.float32)
        present = ~missing
        rows = matrix[present]
        if len(rows):
            unit_rows[present] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return unit_rows
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _arrow_table(columns: ValidatedColumns, matrix: np.ndarray, missing: np.ndarray, seq: int, ver: int) -> pa.Table:
    """The ``am_records`` rows of ``columns`` as one Arrow table (bulk inserts through Arrow:
    ~100k rows/s instead of ~600 with executemany): the vectors in ``matrix`` scaled to unit
    length (rows flagged in ``missing`` have none), ``seq``/``ver`` counting on from the given
    values. Built column by column: every microsecond per row shows in ingest."""
    n = len(columns)
    present = ~missing
    unit_rows = _unit_rows(matrix, missing)
    # rows often share timestamps (created_at = now); keyed with the offset because equal
    # instants in different zones are equal datetimes with different text
    stamps: dict[tuple[datetime, Any], str] = {}

    def iso_of(value: datetime) -> str:
        key = (value, value.utcoffset())
        text = stamps.get(key)
        if text is None:
            text = stamps[key] = value.isoformat()
        return text

    strings = pa.string()
    arrays: list[pa.Array] = [
        pa.array(columns.record_id, type=strings),
        pa.array([t.value for t in columns.record_type], type=strings),
        pa.array(columns.content, type=strings),
        pa.array(columns.user_id, type=strings),
        pa.array(columns.agent_id, type=strings),
        pa.array(columns.thread_id, type=strings),
        pa.array(columns.role, type=strings),
        pa.array(np.arange(seq + 1, seq + n + 1, dtype=np.int64)),
        pa.array([iso_of(t) for t in columns.timestamp], type=strings),
        pa.array([iso_of(t) for t in columns.created_at], type=strings),
        pa.array([None if e is None else iso_of(e) for e in columns.expires_at], type=strings),
        pa.array([None if e is None else to_micros(e) for e in columns.expires_at], type=pa.int64()),
        pa.array([s.value for s in columns.status], type=strings),
        pa.array([dump_json(m) if m else "{}" for m in columns.metadata], type=strings),
        pa.array(np.arange(ver + 1, ver + n + 1, dtype=np.int64)),
        pa.array(present),
        pa.FixedSizeListArray.from_arrays(pa.array(unit_rows.ravel(), type=pa.float32()), matrix.shape[1], mask=pa.array(missing)),
        pa.array(columns.index_text, type=strings),
    ]
    names = ["rid", "rtype", "content", "user_id", "agent_id", "thread_id", "role", "seq", "ts", "created",
             "expires", "expires_us", "status", "metadata", "ver", "has_vec", "vec", "index_text"]
    return pa.Table.from_arrays(arrays, names=names)


_EXPIRY_TIMES_MAX = 50_000
"""``_matching_alive`` counts in process when at most this many rows of a scope expire."""
_SCOPE_CACHE_ROWS = 20_000
"""Rows of small scopes whose vectors are kept between writes (``DuckDBStore._scope``): 30 MB
at 384 dimensions."""
_ROW_CACHE_ROWS = 4_096
"""Record rows kept between writes for searches (``_merge_with_rows``)."""


_NO_EXPIRY = int(np.iinfo(np.int64).max)
"""A scope row's ``expires_us`` when it never expires."""

class _Scope:
    """The rows of one small scope: ids, write clock values, unit vectors and record columns."""

    def __init__(
        self, rids: list[str], vers: np.ndarray, matrix: np.ndarray, records: pa.Table, expires_us: np.ndarray,
        types: frozenset[str], flt: RecordFilter | None = None,
    ) -> None:
        self.rids = rids
        self.vers = vers
        self.matrix = matrix
        self.records = records
        """The record columns (``_COLS``), row for row."""
        self.expires_us = expires_us
        """Expiry in microseconds (``_NO_EXPIRY`` for none), row for row."""
        self.types = types
        """The record types the scope's filter is limited to (empty: any type)."""
        self.filter = flt
        """The filter whose rows these are (None: unknown, so the scope cannot be extended)."""
        self._pos: dict[str, int] | None = None

    def extended(self, added: _Added) -> _Scope:
        """This scope after ``added`` (records just inserted, none of them patched or deleted
        since): the ones with a vector that its filter selects are appended, as a read of the
        table would now return them."""
        assert self.filter is not None
        take = [i for i, rec in enumerate(added.records) if not added.missing[i] and record_matches(rec, self.filter)]
        if not take:
            return self
        recs = [added.records[i] for i in take]
        rows = [
            (r.record_id, r.record_type.value, r.content, r.user_id, r.agent_id, r.thread_id, r.role, r.seq,
             r.timestamp.isoformat(), r.created_at.isoformat(), None if r.expires_at is None else r.expires_at.isoformat(),
             r.status.value, dump_json(r.metadata) if r.metadata else "{}", r.index_text)
            for r in recs
        ]
        schema = self.records.schema
        table = pa.Table.from_arrays([pa.array([row[c] for row in rows], type=schema.field(c).type) for c in range(len(schema))], schema=schema)
        return _Scope(
            self.rids + [r.record_id for r in recs],
            np.concatenate([self.vers, np.asarray([added.first_ver + i + 1 for i in take], dtype=self.vers.dtype)]),
            np.vstack([self.matrix, added.unit_rows[take]]).astype(np.float32, copy=False),
            pa.concat_tables([self.records, table]),
            np.concatenate([self.expires_us, np.asarray(
                [_NO_EXPIRY if r.expires_at is None else to_micros(r.expires_at) for r in recs], dtype=self.expires_us.dtype
            )]),
            self.types, self.filter,
        )

    def alive(self, at_us: int) -> np.ndarray:
        """Which rows are alive at ``at_us`` (the reference's ``expires_at > alive_at``)."""
        return self.expires_us > at_us

    def row(self, rid: str) -> tuple[Any, ...] | None:
        """The record row of ``rid`` as ``fetchall`` returns it, or None when not in the scope."""
        if self._pos is None:
            self._pos = {r: i for i, r in enumerate(self.rids)}
        at = self._pos.get(rid)
        if at is None:
            return None
        return tuple(column[at].as_py() for column in self.records.columns)

    def nearest(self, query: np.ndarray, k: int, alive_at_us: int | None = None) -> list[tuple[str, float]]:
        """Exact top ``k`` ``(rid, distance)`` by ``(round(distance, 6), rid)`` among the rows
        alive at ``alive_at_us`` (None: all): cosine distance of unit float32 vectors computed
        as the reference store does (``1 - matrix @ query``)."""
        if not self.rids:
            return []
        dist = np.float32(1.0) - self.matrix @ query
        keep = np.arange(len(dist))
        if alive_at_us is not None:
            alive = self.alive(alive_at_us)
            if not alive.all():
                dist = np.where(alive, dist, np.float32(np.inf))
                keep = np.flatnonzero(alive)
                if not len(keep):
                    return []
        if len(keep) > k:
            part = np.argpartition(dist, k - 1)[:k]
            keep = np.flatnonzero(dist <= float(dist[part].max()) + 2e-6)  # and whatever rounds to a tie
        rids = self.rids
        ranked = sorted((round(float(dist[i]), 6), rids[i], float(dist[i])) for i in keep)
        return [(rid, d) for _, rid, d in ranked[:k]]


@dataclass(frozen=True)
class _Added:
    """The records one write inserted, for the kept scopes to take in (``_Scope.extended``)."""

    records: list[Record]
    """As reads return them (``seq`` and stored metadata)."""
    unit_rows: np.ndarray
    """Their vectors as stored (unit length; zero where ``missing``)."""
    missing: np.ndarray
    first_ver: int
    """The write clock before them: record ``i`` has ``ver`` ``first_ver + i + 1``."""
    other_types: frozenset[str]
    """The types the write patched or deleted records of: scopes of these types are not extended."""


_Nearest = tuple[list[tuple[str, float]], bool, float]
"""Rows ``(rid, distance)`` of one scan, whether its LIMIT cut it short, and the last distance."""


def _nearest(
    con: duckdb.DuckDBPyConnection, distance: str, table: str, where: str, params: list[Any], limit: int,
    drop: set[str] | frozenset[str] = frozenset(),
) -> _Nearest:
    """The ``limit`` rows of ``table`` passing ``where`` with the smallest ``distance``, by bare
    distance (ties unordered), minus the ids in ``drop``."""
    rows = con.execute(
        f"SELECT r.rid, {distance} AS dist FROM {table} r WHERE {where} ORDER BY dist LIMIT {int(limit)}", params
    ).fetchall()
    found = [(rid, float(d)) for rid, d in rows if rid not in drop]
    return found, len(rows) == limit, float(rows[-1][1]) if rows else 0.0


def _top_k_if_exact(sources: list[_Nearest], k: int) -> list[tuple[str, float]] | None:
    """The top ``k`` of ``sources`` by ``(round(distance, 6), rid)``, or None when a source cut
    short by its LIMIT could hold an unfetched row that ties with (or beats) the k-th: every
    unfetched row is at least as far as its source's last one."""
    pairs = sorted((pair for found, _, _ in sources for pair in found), key=lambda p: (round(p[1], 6), p[0]))
    cut = round(pairs[k - 1][1], 6) if len(pairs) >= k else None
    if all(not short or (cut is not None and round(last, 6) > cut) for _, short, last in sources):
        return pairs[:k]
    return None


def _by_seq(record: Record) -> int:
    return record.seq


def _row_seq(row: tuple[Any, ...]) -> int:
    return int(row[7])  # RECORD_COLUMNS: seq is the eighth


_SAME_TEXT = object()
"""A patch's keyword text when it leaves content and ``index_text`` as they were (``_moved``)."""
_CARRIED_DELTA_ROWS = 20_000
"""A keyword delta up to this many rows is brought along by a write (``_carried_delta``); a
larger one is read again (a store without a BM25 snapshot has every row in it)."""


def _patched_text(patch: RecordPatch) -> Any:
    """The keyword text (``coalesce(index_text, content)``) a patch leaves: its own, None when
    it resets ``index_text`` to content it does not name, or ``_SAME_TEXT``."""
    if isinstance(patch.index_text, str):
        return patch.index_text
    if isinstance(patch.content, str):
        return patch.content
    return None if patch.index_text is None else _SAME_TEXT


_ID_ROWS = 4_096
"""Rows kept for queries by id (``DuckDBStore._id_rows``); past it they start again."""


class _Tx:
    """One write transaction's statements, sent to DuckDB in as few ``execute`` calls as its
    reads allow: each call costs ~0.3 ms whatever it runs, so statements whose result is not
    needed wait and go with the next read or with ``COMMIT`` (one call runs them in order, and
    stops at the first that fails; the caller then rolls back). ``BEGIN`` goes with the first
    call."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self._sql = ["BEGIN TRANSACTION"]

    def run(self, sql: str) -> None:
        """Run ``sql`` (its result unread) before the next read or the commit."""
        self._sql.append(sql)

    def read(self, sql: str) -> duckdb.DuckDBPyConnection:
        """Run the waiting statements, then ``sql``; the connection holds its result."""
        self._sql.append(sql)
        return self._send()

    def insert_arrow(self, table: pa.Table) -> None:
        """Insert ``table``'s rows into ``am_records`` through Arrow (many rows: literals would
        cost more to write and parse). The view is registered inside the transaction (``BEGIN``
        is sent first), so a rollback cannot leave it behind."""
        self.flush()
        self.con.register("am_new_rows", table)
        try:
            self.read("INSERT INTO am_records SELECT * FROM am_new_rows")
        finally:
            self.con.unregister("am_new_rows")

    def flush(self) -> None:
        """Run the waiting statements now (their errors surface here)."""
        if self._sql:
            self._send()

    def commit(self) -> None:
        self._sql.append("COMMIT")
        self._send()

    def _send(self) -> duckdb.DuckDBPyConnection:
        sql, self._sql = "; ".join(self._sql), []
        try:
            return self.con.execute(sql)
        except duckdb.ConstraintException as exc:  # the primary key saw a stored id
            raise _DuplicateAdd from exc


_VALUES_MAX_ROWS = 8
"""Adds of at most this many records are inserted as SQL literals with the rest of the batch's
statements (``_values_insert``); larger ones through Arrow."""

_RECORD_NAMES = ("rid, rtype, content, user_id, agent_id, thread_id, role, seq, ts, created, expires, expires_us, "
                 "status, metadata, ver, has_vec, vec, index_text")


def _values_insert(columns: ValidatedColumns, unit_rows: np.ndarray, missing: np.ndarray, seq: int, ver: int) -> str:
    """The ``INSERT`` of ``columns`` as literals, row for row what ``_arrow_table`` makes of them.
    For a few rows it is cheaper than an Arrow insert: at 100k records, 3 rows took ~4 ms through
    Arrow (``register``, the scan, ``unregister``) and ~2 ms as literals (2 shared vCPUs, load 5)."""
    dim = unit_rows.shape[1]

    def text(value: str | None) -> str:
        return "NULL" if value is None else sql_str(value)

    rows = []
    for i in range(len(columns)):
        expires = columns.expires_at[i]
        metadata = columns.metadata[i]
        vec = "NULL" if missing[i] else f"{sql_str(vector_literal(unit_rows[i]))}::FLOAT[{dim}]"
        rows.append("(" + ", ".join((
            sql_str(columns.record_id[i]), sql_str(columns.record_type[i].value), sql_str(columns.content[i]),
            text(columns.user_id[i]), text(columns.agent_id[i]), text(columns.thread_id[i]), text(columns.role[i]),
            str(seq + i + 1), sql_str(columns.timestamp[i].isoformat()), sql_str(columns.created_at[i].isoformat()),
            text(None if expires is None else expires.isoformat()), "NULL" if expires is None else str(to_micros(expires)),
            sql_str(columns.status[i].value), sql_str(dump_json(metadata) if metadata else "{}"), str(ver + i + 1),
            "FALSE" if missing[i] else "TRUE", vec, text(columns.index_text[i]),
        )) + ")")
    return f"INSERT INTO am_records ({_RECORD_NAMES}) VALUES {', '.join(rows)}"


def _inserted_rows(columns: ValidatedColumns, missing: np.ndarray, seq: int) -> list[tuple[Any, ...]]:
    """The rows ``_values_insert`` inserts, as a query by id reads them (``_COLS`` and ``has_vec``)."""
    rows = []
    for i in range(len(columns)):
        expires = columns.expires_at[i]
        metadata = columns.metadata[i]
        rows.append((
            columns.record_id[i], columns.record_type[i].value, columns.content[i], columns.user_id[i], columns.agent_id[i],
            columns.thread_id[i], columns.role[i], seq + i + 1, columns.timestamp[i].isoformat(), columns.created_at[i].isoformat(),
            None if expires is None else expires.isoformat(), columns.status[i].value, dump_json(metadata) if metadata else "{}",
            columns.index_text[i], not bool(missing[i]),
        ))
    return rows


def _counters_sql(seq: int, ver: int) -> str:
    return (
        f"UPDATE am_meta SET value = CASE key WHEN 'seq' THEN '{int(seq)}' ELSE '{int(ver)}' END "
        "WHERE key IN ('seq', 'ver')"
    )


def _stale_ids(con: duckdb.DuckDBPyConnection, watermark: int) -> set[str]:
    """Ids whose snapshot rows (taken at ``watermark``) no longer match the live rows. Filtered
    in Python: as a SQL anti-join it turns a 7 ms HNSW query into a 16 ms one at 100k rows."""
    return {rid for (rid,) in con.execute(f"SELECT DISTINCT rid FROM am_stale WHERE clock > {int(watermark)}").fetchall()}


def _merge_with_rows(
    con: duckdb.DuckDBPyConnection, ids: list[tuple[str, float]], rows: list[Any], k: int, *, ascending: bool,
    cache: dict[str, tuple[Any, ...]] | None = None, scope: _Scope | None = None,
) -> list[Any]:
    """The best ``k`` of snapshot hits ``(rid, value)`` and live ``rows`` (value last), as full
    record rows with the value appended; only the snapshot hits that make the cut are read, and
    only those neither in ``cache`` (rows read since the last write; the ones read here are
    added) nor in ``scope`` (a small scope read whole)."""
    sign = 1.0 if ascending else -1.0
    merged: list[tuple[float, str, float, Any]] = [(round(sign * v, 6), rid, v, None) for rid, v in ids]
    merged += [(round(sign * float(row[-1]), 6), row[0], float(row[-1]), row) for row in rows]
    merged.sort(key=lambda m: (m[0], m[1]))
    top = merged[:k]
    known = {} if cache is None else cache
    wanted = [rid for _, rid, _, row in top if row is None and rid not in known]
    fetched: dict[str, Any] = {}
    if wanted and scope is not None:
        fetched = {rid: row for rid in wanted if (row := scope.row(rid)) is not None}
        wanted = [rid for rid in wanted if rid not in fetched]
    if wanted:
        fetched = {
            row[0]: row
            for row in con.execute(f"SELECT {_COLS} FROM am_records r WHERE r.rid IN ({', '.join(sql_str(w) for w in wanted)})").fetchall()
        }
    if cache is not None:
        cache.update(fetched)
    return [(*((fetched.get(rid) or known[rid]) if row is None else row[:-1]), v) for _, rid, v, row in top]


_CLAIMS: dict[str, int] = {}
"""Files open for writing in this process (path -> id of the store): one writer per file, as
DuckDB's lock already guarantees across processes. The in-memory counters rely on it."""
_CLAIMS_LOCK = threading.Lock()

_WRITE_ATTEMPTS = 3
"""Tries of a write batch that meets a transaction conflict during an index build (``_transact``)."""


class _DuplicateAdd(Exception):
    """An added record id already exists (the batch is rolled back, then reported)."""


class _Cancelled(Exception):
    """The store closed while an index was being built."""


def _index_state(meta: dict[str, str], key: str) -> IndexState | None:
    table = meta.get(f"{key}_table")
    if not table:
        return None
    return IndexState(table, int(meta.get(f"{key}_watermark", "0")), int(meta.get(f"{key}_rows", "0")))


def _drop_snapshot(con: duckdb.DuckDBPyConnection, table: str) -> None:
    table = ident(table)
    if table.startswith("am_fts_"):
        con.execute(f"DROP SCHEMA IF EXISTS fts_main_{table} CASCADE")
    con.execute(f"DROP TABLE IF EXISTS {table}")


@contextlib.contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN … COMMIT, rolled back on any exception (the batch lands whole or not at all)."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


@contextlib.contextmanager
def _mapped_errors() -> Iterator[None]:
    """Translate DuckDB exceptions into the framework's typed errors."""
    try:
        yield
    except AgentMemoryError:
        raise
    except duckdb.TransactionException as exc:
        raise TransientBackendError(f"DuckDB transaction conflict: {exc}") from exc
    except duckdb.InterruptException as exc:
        raise BackendUnavailable(f"DuckDB query interrupted: {exc}") from exc
    except (duckdb.IOException, duckdb.ConnectionException) as exc:
        raise BackendUnavailable(f"DuckDB I/O failure: {exc}") from exc
    except duckdb.Error as exc:
        raise BackendError(f"DuckDB error: {exc}") from exc


__all__ = ["DuckDBStore", "IndexState", "SearchPlan"]
