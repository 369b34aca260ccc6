"""Entry point of agentmemory-hnswlib: registers the ``hnswlib`` backend lazily.

Import-light on purpose: the store module (hnswlib, numpy, sqlite3) is imported only when the
backend is first used.
"""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_backends(register: Register) -> None:
    """``hnswlib:///abs/dir``: SQLite records + an hnswlib cosine index in one directory."""
    register(
        "hnswlib",
        "agentmemory_hnswlib.store:HnswlibStore",
        install_hint="pip install agentmemory-hnswlib",
        description="local directory: SQLite (WAL, FTS5) records + hnswlib ANN index; crash-safe",
    )
