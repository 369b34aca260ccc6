"""Shared helpers of the Oracle backend tests (no server needed).

- ``bind_names``/``check_binds``: every ``:name`` in a statement's SQL has a bind and vice versa;
- ``HOSTILE``: caller strings full of SQL, JSON-path and Oracle Text metacharacters, each tagged
  with a marker (``ZQ<n>``) so a test can prove the marker never reaches SQL text;
- ``run_plan``: drives a plan generator with scripted results, recording every statement.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pytest
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


@pytest.fixture(scope="session")
def h() -> Any:
    """This module: the helpers above, for tests (``--import-mode=importlib`` forbids importing
    conftest by name)."""
    return sys.modules[__name__]


@pytest.fixture(scope="session")
def names() -> StoreNames:
    return NAMES
