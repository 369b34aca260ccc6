"""agentmemory-postgres: the PostgreSQL + pgvector backend (psycopg 3, sync and async pools).

Import-light: ``PostgresStore`` (and psycopg) is imported on first attribute access, so the
plugin entry point costs nothing until the backend is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["PostgresStore", "__version__"]

if TYPE_CHECKING:
    from .store import PostgresStore


def __getattr__(name: str) -> Any:
    """Import ``PostgresStore`` lazily."""
    if name == "PostgresStore":
        from .store import PostgresStore

        return PostgresStore
    raise AttributeError(f"module 'agentmemory_postgres' has no attribute {name!r}")
