"""Entry-point plugin: registers the ``postgres`` backend by dotted path (imports nothing heavy)."""

from __future__ import annotations

from agentmemory.hookspecs import Register, hookimpl


@hookimpl
def agentmemory_register_backends(register: Register) -> None:
    """``postgresql://user@host/db?schema=name``: PostgreSQL + pgvector, for several processes and
    hosts. Both URI schemes libpq accepts name it: ``postgresql://`` and ``postgres://``."""
    register(
        "postgres",
        "agentmemory_postgres.store:PostgresStore",
        description="PostgreSQL + pgvector: records, links, HNSW cosine search and BM25 in one schema",
        install_hint="pip install agentmemory-postgres",
    )
    register(
        "postgresql",
        "agentmemory_postgres.store:PostgresStore",
        description="the postgres backend under libpq's other URI scheme (postgresql://)",
        install_hint="pip install agentmemory-postgres",
    )
