"""Entry-point plugin: registers the ``duckdb`` backend by dotted path (imports nothing heavy)."""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_backends(register: Register) -> None:
    """``duckdb:///path/memory.duckdb``: one local file, exact + HNSW vector search, BM25."""
    register(
        "duckdb",
        "agentmemory_duckdb.store:DuckDBStore",
        description="one DuckDB file: records, links, HNSW (vss) and BM25 (fts); the embedded default",
        install_hint="pip install agentmemory-duckdb",
    )
