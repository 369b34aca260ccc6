"""``OracleStore``: the agentmemory store SPI on Oracle AI Database 23ai+ (python-oracledb thin).

Construct it from a pool you already have (the seed documents' style)::

    pool = oracledb.create_pool(user=..., password=..., dsn="localhost:1521/FREEPDB1")
    store = OracleStore(pool=pool, memory_store_id="T_CARD_CONTENT")

or from connection parameters (the store then owns a sync pool and, per event loop, an
``oracledb.create_pool_async`` pool for the native async twins)::

    store = OracleStore(user="am", password="...", dsn="localhost:1521/FREEPDB1")
    store = OracleStore.from_uri("oracle://am:secret@localhost:1521/FREEPDB1?memory_store_id=DEMO")

Every operation is a plan from ``plans`` run by a sync or async driver here: one transaction per
``WriteBatch`` (commit at the end, rollback on any error), LOBs fetched as values, metadata bound
as JSON text (``md_keys`` fact documents as ``DB_TYPE_JSON``), vectors as ``array('f')``, driver
errors mapped to agentmemory's typed errors.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
import warnings
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import numpy as np
import oracledb

from agentmemory.analysis import Analyzer, normalize_language
from agentmemory.errors import AgentMemoryError, BackendError, BackendUnavailable, InvalidArgument
from agentmemory.records import Link, Record
from agentmemory.spi import (
    Capability,
    Hit,
    MemoryStore,
    Order,
    RecordFilter,
    SchemaPolicy,
    StoreInfo,
    WriteBatch,
)

from . import ddl, plans
from . import sql as q
from .errors import map_error
from .names import StoreNames, store_id_for_key

log = logging.getLogger(__name__)

_PROCESS_RUN = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
"""Tells this process's ``in_directory`` stores from earlier runs' on the same database."""

MIN_SERVER_RELEASE = (23, 4)
"""Oracle Database 23ai release 23.4: the first with the ``VECTOR`` type and vector indexes
(23.2/23.3 were the pre-release "23c" Free builds without them)."""
_DB_TYPES = {
    "json": oracledb.DB_TYPE_JSON,
    "vector": oracledb.DB_TYPE_VECTOR,
    "timestamp": oracledb.DB_TYPE_TIMESTAMP,
}
_INT_OPTIONS = (
    "pool_min",
    "pool_max",
    "pool_increment",
    "exact_search_threshold",
    "target_accuracy",
    "hnsw_neighbors",
    "hnsw_efconstruction",
)
_BOOL_OPTIONS = ("vector_index", "text_index", "metadata_index")


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise InvalidArgument(name, f"must be an int, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidArgument(name, f"must be an int, got {value!r}") from None


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidArgument(name, f"must be a bool, got {value!r}")


def _input_sizes(types: Mapping[str, str]) -> dict[str, Any]:
    return {name: _DB_TYPES[kind] for name, kind in types.items()}


# ---- drivers ----------------------------------------------------------------------------------
def _execute_sync(conn: Any, stmt: q.Statement) -> Any:
    cursor = conn.cursor()
    try:
        sizes = _input_sizes(stmt.types)
        if isinstance(stmt, q.ExecuteMany):
            if not stmt.rows:
                return []
            if sizes:
                cursor.setinputsizes(**sizes)
            cursor.executemany(stmt.sql, stmt.rows, arraydmlrowcounts=stmt.rowcounts)
            return list(cursor.getarraydmlrowcounts()) if stmt.rowcounts else []
        if sizes:
            cursor.setinputsizes(**sizes)
        if isinstance(stmt, q.Fetch):
            cursor.execute(stmt.sql, stmt.binds or None, fetch_lobs=False)
            return cursor.fetchall()
        cursor.execute(stmt.sql, stmt.binds or None)
        return cursor.rowcount
    finally:
        cursor.close()


async def _execute_async(conn: Any, stmt: q.Statement) -> Any:
    cursor = conn.cursor()
    try:
        sizes = _input_sizes(stmt.types)
        if isinstance(stmt, q.ExecuteMany):
            if not stmt.rows:
                return []
            if sizes:
                cursor.setinputsizes(**sizes)
            await cursor.executemany(stmt.sql, stmt.rows, arraydmlrowcounts=stmt.rowcounts)
            return list(cursor.getarraydmlrowcounts()) if stmt.rowcounts else []
        if sizes:
            cursor.setinputsizes(**sizes)
        if isinstance(stmt, q.Fetch):
            await cursor.execute(stmt.sql, stmt.binds or None, fetch_lobs=False)
            return await cursor.fetchall()
        await cursor.execute(stmt.sql, stmt.binds or None)
        return cursor.rowcount
    finally:
        cursor.close()


def drive_sync(conn: Any, plan: plans.Plan[Any], operation: str = "operation") -> Any:
    """Run ``plan`` on a sync connection; driver errors are mapped and thrown into the plan."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value
        result, error = None, None
        try:
            result = _execute_sync(conn, stmt)
        except oracledb.Error as exc:
            error = map_error(exc, operation=operation)
            error.__cause__ = exc
        except (TypeError, ValueError, OverflowError) as exc:  # the driver refused a bind value
            error = BackendError(f"Oracle {operation}: python-oracledb rejected a statement: {exc}")
            error.__cause__ = exc


async def drive_async(conn: Any, plan: plans.Plan[Any], operation: str = "operation") -> Any:
    """Run ``plan`` on an async connection (same contract as ``drive_sync``)."""
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value
        result, error = None, None
        try:
            result = await _execute_async(conn, stmt)
        except oracledb.Error as exc:
            error = map_error(exc, operation=operation)
            error.__cause__ = exc
        except (TypeError, ValueError, OverflowError) as exc:  # the driver refused a bind value
            error = BackendError(f"Oracle {operation}: python-oracledb rejected a statement: {exc}")
            error.__cause__ = exc


# ---- the store ----------------------------------------------------------------------------------
class OracleStore(MemoryStore):
    """Records, links, vector (HNSW through ``FETCH APPROX``, exact fallback) and Oracle Text
    keyword search in one named Oracle memory store (a set of tables sharing a prefix).

    ``language`` is the keyword analyzer (``agentmemory.analysis``: a Snowball language, default
    ``english``, or ``none``): ``chunk_text`` holds the analysed terms and queries are analysed
    alike (from each record's ``indexed_text``: ``index_text`` when set, else the content). It
    is persisted in the meta row; opening with another one, or with code whose analyzer
    fingerprint differs, re-analyses every chunk during ``open``."""

    name = "oracle"
    spec_version = "1.1"
    """SPI 1.1: ``Record.index_text`` is stored (the record table's ``index_text`` CLOB, schema
    version 4; NULL = the content) and returned by every read, and ``chunk_text`` holds the
    analysed terms of the record's ``indexed_text``, so keyword search scores the index text in
    place of the content. A content patch without ``index_text`` resets it to NULL; ``bulk_add``
    (the SPI's default, through ``write``) carries the column."""
    min_recall_at_10 = 0.9
    """Approximate search (only above ``exact_search_threshold`` candidates) targets 95% accuracy."""

    def __init__(
        self,
        pool: Any = None,
        *,
        connection: Any = None,
        async_pool: Any = None,
        user: str | None = None,
        password: str | None = None,
        dsn: str | None = None,
        memory_store_id: str | None = None,
        memory_store_key: str | None = None,
        pool_min: int | str = 1,
        pool_max: int | str = 8,
        pool_increment: int | str = 1,
        exact_search_threshold: int | str = 1000,
        target_accuracy: int | str = 95,
        hnsw_neighbors: int | str = 16,
        hnsw_efconstruction: int | str = 200,
        vector_index: bool | str = True,
        text_index: bool | str = True,
        metadata_index: bool | str = True,
        language: str | None = None,
        **connect_params: Any,
    ) -> None:
        super().__init__()
        if pool is not None and connection is not None:
            raise InvalidArgument("connection", "pass either pool= or connection=, not both")
        source = pool if pool is not None else connection
        if source is not None and isinstance(source, (oracledb.AsyncConnectionPool, oracledb.AsyncConnection)):
            raise InvalidArgument("pool", "pass async pools as async_pool=; pool= takes a sync pool or connection")
        if source is not None and not hasattr(source, "cursor") and not hasattr(source, "acquire"):
            raise InvalidArgument(
                "pool", f"must be an oracledb ConnectionPool or Connection, got {type(source).__name__}"
            )
        if async_pool is not None and not isinstance(async_pool, oracledb.AsyncConnectionPool):
            raise InvalidArgument(
                "async_pool", f"must be an oracledb.AsyncConnectionPool, got {type(async_pool).__name__}"
            )
        if source is None and not dsn:
            raise InvalidArgument("dsn", "give pool= (or connection=), or connection parameters with dsn=")
        if memory_store_key is not None:
            if memory_store_id is not None:
                raise InvalidArgument("memory_store_key", "give memory_store_id or memory_store_key, not both")
            memory_store_id = store_id_for_key(memory_store_key)
        self._names = StoreNames.for_store(memory_store_id)
        self._source = source
        self._async_source = async_pool
        self._user, self._password, self._dsn = user, password, dsn
        self._connect_params = dict(connect_params)
        self._pool_min = _as_int("pool_min", pool_min)
        self._pool_max = _as_int("pool_max", pool_max)
        self._pool_increment = _as_int("pool_increment", pool_increment)
        if self._pool_min < 0 or self._pool_max < max(1, self._pool_min):
            raise InvalidArgument("pool_max", "need 0 <= pool_min <= pool_max and pool_max >= 1")
        threshold = _as_int("exact_search_threshold", exact_search_threshold)
        if threshold < 0:
            raise InvalidArgument("exact_search_threshold", "must be >= 0")
        try:
            self._index_options = ddl.IndexOptions(
                vector_index=_as_bool("vector_index", vector_index),
                hnsw_neighbors=_as_int("hnsw_neighbors", hnsw_neighbors),
                hnsw_efconstruction=_as_int("hnsw_efconstruction", hnsw_efconstruction),
                target_accuracy=_as_int("target_accuracy", target_accuracy),
                text_index=_as_bool("text_index", text_index),
                metadata_index=_as_bool("metadata_index", metadata_index),
            )
        except ValueError as exc:
            raise InvalidArgument("index options", str(exc)) from None
        self._exact_threshold = threshold
        self._language = None if language is None else normalize_language(language)
        self._analyzer = Analyzer.for_language(self._language)
        """The keyword analyzer of ``chunk_text``; on open, the store's unless ``language`` was given."""
        self._pool: Any = None  # the sync pool or connection in use
        self._owns_pool = False
        self._conn_lock = threading.Lock()  # serialises a single shared connection
        self._async_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._async_lock = threading.Lock()
        self._features: set[str] = set()
        self._schema_version: int | None = None
        self._server_version: str | None = None
        self.open_warnings: list[str] = []

    # ---- construction ---------------------------------------------------------------------------
    @classmethod
    def from_uri(cls, uri: str) -> OracleStore:
        """``oracle://user:password@host[:port]/service[?memory_store_id=X&option=value]``.

        Percent-encode special characters of the password. ``?dsn=...`` overrides the host part
        (for a TNS alias or a full connect descriptor). ``?memory_store_key=...`` derives the store
        id from any string (the conformance suite's ``{tmp}`` per-test path).
        """
        parts = urlsplit(uri)
        if parts.scheme != "oracle":
            raise InvalidArgument("store", f"expected an oracle:// URI, got {uri!r}")
        options: dict[str, Any] = dict(parse_qsl(parts.query, keep_blank_values=True))
        unknown = set(options) - {"dsn", "memory_store_id", "memory_store_key", "language", *_INT_OPTIONS, *_BOOL_OPTIONS}
        if unknown:
            raise InvalidArgument("store", f"unknown oracle:// option(s): {', '.join(sorted(unknown))}")
        if parts.username:
            options["user"] = unquote(parts.username)
        if parts.password is not None:
            options["password"] = unquote(parts.password)
        if "dsn" not in options:
            host = parts.hostname or ""
            service = parts.path.lstrip("/")
            if not host:
                raise InvalidArgument("store", f"{uri!r} names no host (oracle://user:pass@host:port/service)")
            host_part = f"[{host}]" if ":" in host else host
            port = parts.port or 1521
            options["dsn"] = f"{host_part}:{port}/{service}" if service else f"{host_part}:{port}"
        return cls(**options)

    @classmethod
    def in_directory(cls, directory: Any, **options: Any) -> OracleStore:
        """A store on the database of ``AGENTMEMORY_ORACLE_DSN`` (``AGENTMEMORY_ORACLE_USER``,
        ``AGENTMEMORY_ORACLE_PASSWORD``) whose tables are derived from ``directory`` and this process
        (the same directory reopens the same tables; another process, e.g. a later test run
        reusing a temporary path, gets new ones); ``BackendUnavailable`` when no DSN is set. The
        tables stay after the process ends: ``drop()`` removes a store's tables."""
        dsn = os.environ.get("AGENTMEMORY_ORACLE_DSN", "").strip()
        if not dsn and "dsn" not in options:
            raise BackendUnavailable(
                "ORACLE NOT RUN: set AGENTMEMORY_ORACLE_DSN (and AGENTMEMORY_ORACLE_USER, "
                "AGENTMEMORY_ORACLE_PASSWORD) to build Oracle stores; see backends/oracle/README.md"
            )
        options.setdefault("dsn", dsn)
        options.setdefault("user", os.environ.get("AGENTMEMORY_ORACLE_USER") or None)
        options.setdefault("password", os.environ.get("AGENTMEMORY_ORACLE_PASSWORD") or None)
        options.setdefault("pool_min", 0)
        options.setdefault("memory_store_key", f"in_directory:{_PROCESS_RUN}:{directory}")
        return cls(**options)

    # ---- connections ----------------------------------------------------------------------------
    def _make_pool(self) -> Any:
        try:
            return oracledb.create_pool(
                user=self._user,
                password=self._password,
                dsn=self._dsn,
                min=self._pool_min,
                max=self._pool_max,
                increment=self._pool_increment,
                **self._connect_params,
            )
        except oracledb.Error as exc:
            raise map_error(exc, operation="connect") from exc

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        pool = self._pool
        if pool is None:
            raise BackendUnavailable(f"store {self.name!r} is not open")
        if not hasattr(pool, "acquire"):  # a single shared connection
            with self._conn_lock:
                yield pool
            return
        try:
            conn = pool.acquire()
        except oracledb.Error as exc:
            raise map_error(exc, operation="connect") from exc
        try:
            yield conn
        finally:
            try:
                pool.release(conn)
            except oracledb.Error:  # a dead connection: the pool drops it
                log.debug("release of a broken connection failed", exc_info=True)

    def _run(self, plan: plans.Plan[Any], operation: str, *, write: bool = False) -> Any:
        with self._connection() as conn:
            try:
                result = drive_sync(conn, plan, operation)
                if write:
                    conn.commit()
                return result
            except BaseException as exc:
                if write:
                    try:
                        conn.rollback()
                    except oracledb.Error:
                        log.debug("rollback failed", exc_info=True)
                if isinstance(exc, oracledb.Error):
                    raise map_error(exc, operation=operation) from exc
                raise

    def _async_pool(self) -> Any:
        """The async pool for the running event loop, or None to fall back to worker threads."""
        if self._async_source is not None:
            return self._async_source
        if self._source is not None or not self._dsn:
            return None  # built from a caller's sync pool: no credentials for an async pool
        loop = asyncio.get_running_loop()
        with self._async_lock:
            pool = self._async_pools.get(loop)
            if pool is None:
                try:
                    pool = oracledb.create_pool_async(
                        user=self._user,
                        password=self._password,
                        dsn=self._dsn,
                        min=0,
                        max=self._pool_max,
                        increment=1,
                        **self._connect_params,
                    )
                except oracledb.Error as exc:
                    raise map_error(exc, operation="connect") from exc
                self._async_pools[loop] = pool
            return pool

    async def _arun(self, plan: plans.Plan[Any], operation: str, *, write: bool = False) -> Any:
        self._check_open()
        pool = self._async_pool()
        if pool is None:
            return await asyncio.to_thread(self._run, plan, operation, write=write)
        try:
            conn = await pool.acquire()
        except oracledb.Error as exc:
            raise map_error(exc, operation="connect") from exc
        try:
            result = await drive_async(conn, plan, operation)
            if write:
                await conn.commit()
            return result
        except BaseException as exc:
            if write:
                try:
                    await conn.rollback()
                except oracledb.Error:
                    log.debug("async rollback failed", exc_info=True)
            if isinstance(exc, oracledb.Error):
                raise map_error(exc, operation=operation) from exc
            raise
        finally:
            try:
                await pool.release(conn)
            except oracledb.Error:
                log.debug("async release failed", exc_info=True)

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def analyzer(self) -> Analyzer:
        """The keyword analyzer in force (``agentmemory.analysis``): after ``open``, the store's."""
        return self._analyzer

    def capabilities(self) -> frozenset[Capability]:
        caps = {Capability.PERSISTENCE, Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS}
        opened = self._schema_version is not None
        if (opened and "text_index" in self._features) or (not opened and self._index_options.text_index):
            caps.add(Capability.KEYWORD_SEARCH)
        if (opened and "vector_index" in self._features) or (not opened and self._index_options.vector_index):
            caps.add(Capability.APPROXIMATE_SEARCH)
        return frozenset(caps)

    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        if self._source is not None:
            self._pool, self._owns_pool = self._source, False
        else:
            self._pool, self._owns_pool = self._make_pool(), True
        try:
            with self._connection() as conn:
                self._check_server(conn)
            result: plans.OpenResult = self._run(
                plans.open_plan(
                    self._names, dimension, schema_policy, self._index_options, datetime.now(timezone.utc),
                    language=self._language,
                ),
                "open",
                write=True,
            )
        except BaseException:
            self._release_pools()
            raise
        self._schema_version = result.schema_version
        self._analyzer = Analyzer.for_language(result.language or self._language)
        self._features = set(result.features)
        self.open_warnings = list(result.warnings)
        for message in result.warnings:
            warnings.warn(f"agentmemory-oracle ({self._names.store_id}): {message}", RuntimeWarning, stacklevel=3)
        if self._index_options.vector_index and "vector_index" not in self._features:
            log.warning("store %s: no usable HNSW index; vector search is exact", self._names.store_id)
        if self._index_options.text_index and "text_index" not in self._features:
            log.warning("store %s: no usable Oracle Text index; keyword search is disabled", self._names.store_id)

    def _check_server(self, conn: Any) -> None:
        """Require Oracle Database 23.4+ (VECTOR type) and warn when the session does not sort binary."""
        version = str(getattr(conn, "version", "") or "")
        self._server_version = version or None
        check_server_version(version)
        try:
            rows = drive_sync(
                conn,
                _single(
                    q.Fetch(
                        "SELECT parameter, value FROM nls_session_parameters "
                        "WHERE parameter IN ('NLS_COMP', 'NLS_SORT')"
                    )
                ),
                "open",
            )
        except AgentMemoryError:
            return
        odd = {str(p): str(v) for p, v in rows or [] if str(v).upper() != "BINARY"}
        if odd:
            warnings.warn(
                f"agentmemory-oracle: session NLS settings {odd} are not BINARY; id comparisons may be "
                "linguistic. Use sessions with NLS_COMP=BINARY and NLS_SORT=BINARY.",
                RuntimeWarning,
                stacklevel=4,
            )

    def _release_pools(self) -> None:
        pool, owned = self._pool, self._owns_pool
        self._pool, self._owns_pool = None, False
        if owned and pool is not None:
            try:
                pool.close(force=True)
            except oracledb.Error:
                log.debug("closing the pool failed", exc_info=True)
        with self._async_lock:
            async_pools = list(self._async_pools.items())
            self._async_pools = weakref.WeakKeyDictionary()
        for loop, async_pool in async_pools:
            _close_async_pool(loop, async_pool)

    def _close(self) -> None:
        self._release_pools()
        self._schema_version = None

    async def aclose(self) -> None:
        """Close this loop's async pool natively, then the sync side."""
        try:
            loop = asyncio.get_running_loop()
            with self._async_lock:
                pool = self._async_pools.pop(loop, None)
            if pool is not None:
                await pool.close(force=True)
        except oracledb.Error:
            log.debug("closing the async pool failed", exc_info=True)
        await asyncio.to_thread(self.close)

    def info(self) -> StoreInfo:
        return StoreInfo(
            name=self.name,
            dimension=self.dimension,
            path=self._dsn,
            extra={
                "memory_store_id": self._names.store_id,
                "schema_version": self._schema_version,
                "language": self._analyzer.language,
                "analyzer": self._analyzer.fingerprint,
                "server_version": self._server_version,
                "features": sorted(self._features),
                "exact_search_threshold": self._exact_threshold,
                "warnings": list(self.open_warnings),
            },
        )

    @property
    def memory_store_id(self) -> str:
        """The (upper-cased) store id; tables are named ``<ID>_RECORD`` and so on."""
        return self._names.store_id

    def drop(self) -> list[str]:
        """Drop every table and sequence of this memory store (irreversible); returns their names.

        Works on an open or a never-opened store; an open store is closed first.
        """
        if self.is_open:
            self.close()
        temporary = self._pool is None
        if temporary:
            self._pool, self._owns_pool = (
                (self._source, False) if self._source is not None else (self._make_pool(), True)
            )
        try:
            return list(self._run(plans.drop_plan(self._names), "drop", write=True))
        finally:
            if temporary:
                self._release_pools()

    def _planner(self) -> plans.VectorPlanner:
        return plans.VectorPlanner(
            index_available="vector_index" in self._features,
            exact_threshold=self._exact_threshold,
            target_accuracy=self._index_options.target_accuracy,
        )

    def index_thresholds(self) -> dict[str, int]:
        """``"vector"``: the HNSW index answers (``FETCH APPROX``) from ``exact_search_threshold
        + 1`` candidates; ``"keyword"``: Oracle Text from the first record. Only the indexes the
        store has (before ``open``: the ones it will try to create)."""
        opened = self._schema_version is not None
        out: dict[str, int] = {}
        if (opened and "vector_index" in self._features) or (not opened and self._index_options.vector_index):
            out["vector"] = self._exact_threshold + 1
        if (opened and "text_index" in self._features) or (not opened and self._index_options.text_index):
            out["keyword"] = 1
        return out

    # ---- SPI ------------------------------------------------------------------------------------
    def _write(self, batch: WriteBatch) -> list[Record]:
        return list(self._run(plans.write_plan(self._names, batch, self._analyzer), "write", write=True))

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return list(self._run(plans.query_plan(self._names, filter, order, limit, offset), "query"))

    def _count(self, filter: RecordFilter) -> int:
        return int(self._run(plans.count_plan(self._names, filter), "count"))

    def _links(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return list(self._run(plans.links_plan(self._names, record_ids, link_ids), "links"))

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return dict(self._run(plans.vectors_plan(self._names, record_ids), "read vectors"))

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return list(self._run(plans.vector_plan(self._names, vector, filter, k, self._planner()), "vector search"))

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return list(self._run(plans.keyword_plan(self._names, text, filter, k, self._analyzer), "keyword search"))

    def _settle(self) -> dict[str, bool]:
        return dict(self._run(plans.settle_plan(self._names, self._features), "settle", write=True))

    async def _awrite(self, batch: WriteBatch) -> list[Record]:
        return list(await self._arun(plans.write_plan(self._names, batch, self._analyzer), "write", write=True))

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return list(await self._arun(plans.query_plan(self._names, filter, order, limit, offset), "query"))

    async def _acount(self, filter: RecordFilter) -> int:
        return int(await self._arun(plans.count_plan(self._names, filter), "count"))

    async def _alinks(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return list(await self._arun(plans.links_plan(self._names, record_ids, link_ids), "links"))

    async def _aread_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return dict(await self._arun(plans.vectors_plan(self._names, record_ids), "read vectors"))

    async def _avector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        plan = plans.vector_plan(self._names, vector, filter, k, self._planner())
        return list(await self._arun(plan, "vector search"))

    async def _akeyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return list(await self._arun(plans.keyword_plan(self._names, text, filter, k, self._analyzer), "keyword search"))

    async def _asettle(self) -> dict[str, bool]:
        return dict(await self._arun(plans.settle_plan(self._names, self._features), "settle", write=True))

    def __repr__(self) -> str:
        return f"OracleStore(memory_store_id={self._names.store_id!r}, dsn={self._dsn!r})"


def server_release(version: str) -> tuple[int, int] | None:
    """``(major, release update)`` of a python-oracledb ``Connection.version`` such as
    ``"23.4.0.24.05"``, or None when it is not in that form."""
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def check_server_version(version: str) -> None:
    """``BackendUnavailable`` naming the release needed when ``version`` is older than 23.4; a
    version that cannot be read is let through (the DDL would then fail on its own)."""
    release = server_release(version)
    if release is None:
        log.debug("cannot read the server version %r; not checking it", version)
        return
    if release < MIN_SERVER_RELEASE:
        needed = ".".join(map(str, MIN_SERVER_RELEASE))
        raise BackendUnavailable(
            f"Oracle Database {version} is too old: agentmemory-oracle needs Oracle Database 23ai, release "
            f"{needed} or later (the VECTOR type and vector indexes arrived in {needed}; the database's "
            f"COMPATIBLE parameter must be {needed}.0 or higher too)"
        )


def _close_async_pool(loop: asyncio.AbstractEventLoop, pool: Any) -> None:
    """Close an async pool we own on its own loop, so its sessions do not outlive the store."""
    if loop.is_closed():
        return
    try:
        if not loop.is_running():
            loop.run_until_complete(pool.close(force=True))
            return
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is not loop:  # e.g. close() from a worker thread while the loop waits for it
            asyncio.run_coroutine_threadsafe(pool.close(force=True), loop).result(timeout=30)
    except Exception:  # noqa: BLE001 - best effort: the pool's sessions end with the process anyway
        log.debug("closing an async pool failed", exc_info=True)


def _single(stmt: q.Statement) -> plans.Plan[Any]:
    """A plan of one statement (returns its result)."""
    result = yield stmt
    return result
