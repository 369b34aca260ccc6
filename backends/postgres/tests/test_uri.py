"""The one-line switch: ``AgentMemory("postgresql://…")`` (and ``postgres://``) builds this backend."""

from __future__ import annotations

import secrets
from urllib.parse import quote

import pytest
from agentmemory_postgres import PostgresStore

from agentmemory import AgentMemory, HashingEmbedder


@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_a_postgres_uri_opens_this_backend(pg_dsn: str, pg_engine: str, scheme: str) -> None:
    schema = f"amuri_{secrets.token_hex(4)}"
    base = pg_dsn.split("://", 1)[1]
    sep = "&" if "?" in base else "?"
    uri = f"{scheme}://{base}{sep}schema={schema}&vector_engine={quote(pg_engine)}"
    memory = AgentMemory(uri, embedder=HashingEmbedder(16), memory_extraction_config={"extract_memories": False})
    try:
        assert isinstance(memory.store, PostgresStore)
        rid = memory.add_memory("The user lives in Lisbon.", user_id="u")
        assert [r.record.record_id for r in memory.search("Lisbon", user_id="u")] == [rid]
    finally:
        memory.store.drop()  # type: ignore[attr-defined]
        memory.close()
