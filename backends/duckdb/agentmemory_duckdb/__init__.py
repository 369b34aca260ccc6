"""agentmemory-duckdb: the embedded default backend (one DuckDB file, VSS HNSW + FTS).

Import-light: ``DuckDBStore`` (and duckdb itself) is imported on first attribute access, so the
plugin entry point costs nothing until the backend is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["DuckDBStore", "__version__"]

if TYPE_CHECKING:
    from .store import DuckDBStore


def __getattr__(name: str) -> Any:
    """Import ``DuckDBStore`` lazily."""
    if name == "DuckDBStore":
        from .store import DuckDBStore

        return DuckDBStore
    raise AttributeError(f"module 'agentmemory_duckdb' has no attribute {name!r}")
