"""Shared helpers of the Oracle backend tests (no server needed).

- ``bind_names``/``check_binds``: every ``:name`` in a statement's SQL has a bind and vice versa;
- ``HOSTILE``: caller strings full of SQL, JSON-path and Oracle Text metacharacters, each tagged
  with a marker (``ZQ<n>``) so a test can prove the marker never reaches SQL text;
- ``run_plan``: drives a plan generator with scripted results, recording every statement.
"""

from __future__ import annotations

import array
import re
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

import numpy as np
import oracledb
import pytest
from agentmemory_oracle import ddl
from agentmemory_oracle import sql as q
from agentmemory_oracle.names import StoreNames

from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType

MARKER = "ZQ"
_PAYLOADS = [
    "x' OR '1'='1",
    'a"b',
    "--comment",
    "a; DROP TABLE t",
    "$.k?(@ == $v)",
    ":b0",
    "/* c */",
    "é漢字🙂",
    "%_\\",
    "{brace} ACCUM NEAR((a,b)) ~!",
    "line\nbreak\ttab",
    "'); EXECUTE IMMEDIATE 'x",
]
HOSTILE = [f"{MARKER}{i}{payload}" for i, payload in enumerate(_PAYLOADS)]
"""Hostile strings; all valid ids (no NUL, no edge whitespace, not starting with '@')."""

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
NAMES = StoreNames.for_store("t_store")

_LITERAL = re.compile(r"'(?:[^']|'')*'|\"[^\"]*\"")
_BIND = re.compile(r"(?<![\w:]):([A-Za-z_][A-Za-z0-9_]*)")


def bind_names(sql: str) -> set[str]:
    """Bind placeholders in ``sql``, ignoring string literals and quoted identifiers."""
    return set(_BIND.findall(_LITERAL.sub("''", sql)))


def check_binds(stmt: q.Statement) -> None:
    """Assert the statement's SQL and binds name the same placeholders and types are bound."""
    names = bind_names(stmt.sql)
    if isinstance(stmt, q.ExecuteMany):
        assert stmt.rows, "ExecuteMany without rows"
        for row in stmt.rows:
            assert set(row) == names, f"row binds {sorted(row)} != SQL binds {sorted(names)}\n{stmt.sql}"
        assert set(stmt.types) <= names
    else:
        assert set(stmt.binds) == names, f"binds {sorted(stmt.binds)} != SQL binds {sorted(names)}\n{stmt.sql}"
        assert set(stmt.types) <= set(stmt.binds)


def assert_no_marker_in_sql(stmts: Iterable[q.Statement]) -> None:
    """No hostile marker in any SQL text."""
    for stmt in stmts:
        assert MARKER not in stmt.sql, f"caller data leaked into SQL text:\n{stmt.sql}"


def bind_values(stmt: q.Statement) -> list[Any]:
    """All bind values of a statement (every row of an ExecuteMany)."""
    if isinstance(stmt, q.ExecuteMany):
        return [v for row in stmt.rows for v in row.values()]
    return list(stmt.binds.values())


def flatten(value: Any) -> Iterable[Any]:
    """Scalars inside nested dicts/lists (dict keys included)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from flatten(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from flatten(v)
    else:
        yield value


def rec(
    record_id: str,
    *,
    type: RecordType = RecordType.MEMORY,
    content: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    metadata: dict[str, Any] | None = None,
    expires: datetime | None = None,
    status: RecordStatus = RecordStatus.VALID,
) -> Record:
    return Record(
        record_id=record_id,
        record_type=type,
        content=f"content of {record_id}" if content is None else content,
        user_id=user,
        agent_id=agent,
        thread_id=thread,
        role="user" if type is RecordType.MESSAGE else None,
        timestamp=T0,
        created_at=T0,
        expires_at=expires,
        status=status,
        metadata=metadata or {},
    )


def link(link_id: str, source: str, target: str, link_type: LinkType = LinkType.SUPPORTS) -> Link:
    return Link(link_id=link_id, source_id=source, target_id=target, link_type=link_type, created_at=T0)


def vec(*values: float, dim: int = 4) -> np.ndarray:
    return np.asarray(list(values) + [0.0] * (dim - len(values)), dtype=np.float32)


Responder = Callable[[q.Statement], Any]


def run_plan(plan: Any, responder: Responder) -> tuple[Any, list[q.Statement]]:
    """Drive ``plan`` like the store's drivers: send results, throw exceptions the responder
    raises (already typed, as the drivers map them). Returns (result, statements)."""
    seen: list[q.Statement] = []
    result: Any = None
    error: BaseException | None = None
    while True:
        try:
            stmt = plan.send(result) if error is None else plan.throw(error)
        except StopIteration as stop:
            return stop.value, seen
        seen.append(stmt)
        check_binds(stmt) if not (isinstance(stmt, q.ExecuteMany) and not stmt.rows) else None
        result, error = None, None
        try:
            result = responder(stmt)
        except Exception as exc:  # noqa: BLE001 - forwarded into the plan like the drivers do
            error = exc


def default_responder(stmt: q.Statement) -> Any:
    """Plausible empty results: no rows, counts of 1 per array-DML row."""
    if isinstance(stmt, q.ExecuteMany):
        return [1] * len(stmt.rows) if stmt.rowcounts else []
    if isinstance(stmt, q.Execute):
        return 0
    return []


# ---- fake python-oracledb objects for the store glue tests ----------------------------------------
class Server:
    """Scripted answers by SQL fragment, plus a log of everything the store sent."""

    def __init__(self, *rules: tuple[str, Any], dimension: int = 4) -> None:
        self.rules = list(rules)
        self.log: list[tuple[str, str, Any]] = []
        steps = ddl.schema_steps(NAMES, dimension)
        self.objects = [(NAMES.meta, "TABLE"), *((s.name, "X") for s in steps)]
        self.base = [
            ("FROM user_objects", self.objects),
            ("SELECT schema_version", [(ddl.SCHEMA_VERSION, dimension)]),
            (
                "FROM user_indexes",
                [(n, "VALID", "VALID") for n in (NAMES.vector_index, NAMES.text_index, NAMES.metadata_index)],
            ),
            ("nls_session_parameters", [("NLS_COMP", "BINARY"), ("NLS_SORT", "BINARY")]),
            ("NEXTVAL", lambda sql, binds: [(i + 1,) for i in range(binds["b0"])]),
        ]
        self.commits = 0
        self.rollbacks = 0

    def answer(self, kind: str, sql: str, binds: Any) -> Any:
        self.log.append((kind, sql, binds))
        for fragment, result in [*self.rules, *self.base]:
            if fragment in sql:
                if isinstance(result, BaseException):
                    raise result
                return result(sql, binds) if callable(result) else result
        return None


def _check_bind_types(sql: str, values: dict[str, Any], sizes: dict[str, Any]) -> None:
    assert set(values) == bind_names(sql), f"binds {sorted(values)} vs SQL {sorted(bind_names(sql))}"
    for name, value in values.items():
        assert not isinstance(value, (np.ndarray, np.generic)), f"numpy value bound to :{name}"
        if name == "metadata":  # JSON text for a CLOB, never native JSON (floats would become NUMBERs)
            assert isinstance(value, str) and name not in sizes, f":metadata bound as {type(value).__name__}"
        if isinstance(value, (dict, list)):
            assert sizes.get(name) is oracledb.DB_TYPE_JSON, f":{name} JSON without DB_TYPE_JSON"
        if isinstance(value, array.array):
            assert value.typecode == "f" and sizes.get(name) is oracledb.DB_TYPE_VECTOR
        if isinstance(value, datetime):
            assert value.tzinfo is None and sizes.get(name) is oracledb.DB_TYPE_TIMESTAMP


class FakeCursor:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.sizes: dict[str, Any] = {}
        self.rows: list[Any] = []
        self.rowcount = 0
        self.counts: list[int] = []
        self.closed = False

    def setinputsizes(self, **sizes: Any) -> None:
        assert all(isinstance(v, oracledb.DbType) for v in sizes.values())
        self.sizes = sizes

    def _run(self, sql: str, params: Any, fetch_lobs: Any) -> None:
        values = params or {}
        _check_bind_types(sql, values, self.sizes)
        if sql.lstrip().startswith("SELECT"):
            assert fetch_lobs is False, "queries must fetch LOBs as values"
        result = self.server.answer("execute", sql, values)
        self.rows = list(result) if isinstance(result, list) else []
        self.rowcount = result if isinstance(result, int) else len(self.rows)

    def execute(self, sql: str, params: Any = None, *, fetch_lobs: Any = None) -> None:
        self._run(sql, params, fetch_lobs)

    def executemany(self, sql: str, rows: list[dict[str, Any]], *, arraydmlrowcounts: bool = False) -> None:
        for row in rows:
            _check_bind_types(sql, row, self.sizes)
        result = self.server.answer("executemany", sql, rows)
        self.counts = list(result) if isinstance(result, list) else [1] * len(rows)
        self.arraydml = arraydmlrowcounts

    def getarraydmlrowcounts(self) -> list[int]:
        assert self.arraydml, "row counts asked without arraydmlrowcounts=True"
        return self.counts

    def fetchall(self) -> list[Any]:
        return self.rows

    def close(self) -> None:
        self.closed = True


class FakeConnection:
    version = "23.6.0.24.10"

    def __init__(self, server: Server) -> None:
        self.server = server

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.server)

    def commit(self) -> None:
        self.server.commits += 1

    def rollback(self) -> None:
        self.server.rollbacks += 1


class FakePool:
    def __init__(self, server: Server, *, fail: oracledb.Error | None = None) -> None:
        self.server = server
        self.fail = fail
        self.out = 0
        self.closed = False

    def acquire(self) -> FakeConnection:
        if self.fail is not None:
            raise self.fail
        self.out += 1
        return FakeConnection(self.server)

    def release(self, conn: FakeConnection) -> None:
        self.out -= 1

    def close(self, force: bool = False) -> None:
        self.closed = True


class FakeAsyncCursor(FakeCursor):
    async def execute(self, sql: str, params: Any = None, *, fetch_lobs: Any = None) -> None:  # type: ignore[override]
        self._run(sql, params, fetch_lobs)

    async def executemany(self, sql: str, rows: list[dict[str, Any]], *, arraydmlrowcounts: bool = False) -> None:  # type: ignore[override]
        FakeCursor.executemany(self, sql, rows, arraydmlrowcounts=arraydmlrowcounts)

    async def fetchall(self) -> list[Any]:  # type: ignore[override]
        return self.rows


class FakeAsyncConnection:
    def __init__(self, server: Server) -> None:
        self.server = server

    def cursor(self) -> FakeAsyncCursor:
        return FakeAsyncCursor(self.server)

    async def commit(self) -> None:
        self.server.commits += 1

    async def rollback(self) -> None:
        self.server.rollbacks += 1


class FakeAsyncPool(oracledb.AsyncConnectionPool):
    def __init__(self, server: Server) -> None:  # no real pool behind it
        self.server = server
        self.acquired = 0
        self.closed = False

    async def acquire(self) -> FakeAsyncConnection:  # type: ignore[override]
        self.acquired += 1
        return FakeAsyncConnection(self.server)

    async def release(self, connection: Any, tag: Any = None) -> None:
        self.acquired -= 1

    async def close(self, force: bool = False) -> None:
        self.closed = True


@pytest.fixture(scope="session")
def h() -> Any:
    """This module: the helpers above, for tests (``--import-mode=importlib`` forbids importing
    conftest by name)."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def names() -> StoreNames:
    return NAMES
