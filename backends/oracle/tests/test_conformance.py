"""The shared conformance suite against a real Oracle Database 23ai+ — only when one is given.

Set ``AGENTMEMORY_ORACLE_DSN`` (e.g. ``localhost:1521/FREEPDB1``) plus ``AGENTMEMORY_ORACLE_USER``
and ``AGENTMEMORY_ORACLE_PASSWORD``; see ``backends/oracle/README.md`` for Oracle Database Free.
Every test gets its own memory store (a table prefix derived from its directory with
``memory_store_key``) and the tables
are dropped after the test. Without a DSN this module is skipped LOUDLY: the skip reason shows in
``pytest -ra`` and a warning is printed, because an unrun suite must never look like a pass.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DSN = os.environ.get("AGENTMEMORY_ORACLE_DSN", "").strip()
SKIP_REASON = (
    "ORACLE CONFORMANCE SUITE NOT RUN: AGENTMEMORY_ORACLE_DSN is not set. The Oracle backend is "
    "only unit-tested here; set AGENTMEMORY_ORACLE_DSN, AGENTMEMORY_ORACLE_USER and "
    "AGENTMEMORY_ORACLE_PASSWORD to run the full suite against Oracle Database 23ai+ "
    "(see backends/oracle/README.md)."
)
if not DSN:
    warnings.warn(SKIP_REASON, UserWarning, stacklevel=1)
    pytest.skip(SKIP_REASON, allow_module_level=True)

from agentmemory_conformance import BackendConformance  # noqa: E402
from agentmemory_oracle import OracleStore  # noqa: E402

USER = os.environ.get("AGENTMEMORY_ORACLE_USER") or None
PASSWORD = os.environ.get("AGENTMEMORY_ORACLE_PASSWORD") or None
RUN = f"{os.getpid()}-{time.time_ns()}"
"""Part of every store key, so leftovers of an interrupted run never collide with this one."""


class _OracleFactory(BackendConformance):
    options: dict[str, Any] = {}
    created: list[str]

    @pytest.fixture(autouse=True)
    def _drop_stores_after_test(self) -> Iterator[None]:
        """Drop every store this test made, after the suite has closed them."""
        self.created = []
        yield
        for store_id in dict.fromkeys(self.created):
            OracleStore(user=USER, password=PASSWORD, dsn=DSN, memory_store_id=store_id).drop()

    def make_store(self, path: Path) -> OracleStore:
        store = OracleStore(
            user=USER,
            password=PASSWORD,
            dsn=DSN,
            memory_store_key=f"{RUN}:{path}",  # same path = same tables (reopen keeps data)
            pool_min=0,
            pool_max=4,
            **self.options,
        )
        self.created.append(store.memory_store_id)
        return store


class TestOracleConformance(_OracleFactory):
    """Default options: exact search for small scopes (all of the suite's data), Oracle Text."""


class TestOracleConformanceApproximate(_OracleFactory):
    """Every vector query through ``FETCH APPROX`` on the HNSW index (``exact_search_threshold=0``),
    so the suite checks the approximate path against its recall floor, not only exact ranking."""

    options = {"exact_search_threshold": 0}
