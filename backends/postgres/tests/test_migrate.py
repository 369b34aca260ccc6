"""Moving up and back: ``migrate`` DuckDB -> PostgreSQL -> DuckDB keeps every record, link and
vector exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory.spi import RecordFilter

pytest.importorskip("agentmemory_duckdb")


def _everything(store: Any) -> tuple[list[Any], list[Any], dict[str, np.ndarray]]:
    records = store.query(RecordFilter())
    return records, store.links(), store.read_vectors([r.record_id for r in records])


def test_duckdb_to_postgres_and_back_is_equal(tmp_path: Path, make_pg_store: Any) -> None:
    from agentmemory_conformance.support import assert_same
    from agentmemory_duckdb import DuckDBStore

    from agentmemory import AgentMemory, HashingEmbedder
    from agentmemory.transfer import migrate

    embedder = HashingEmbedder(64)
    config = {"extract_memories": False, "enable_context_summary": False}
    source = AgentMemory(store=DuckDBStore(tmp_path / "a.duckdb"), embedder=embedder, memory_extraction_config=config)
    old = source.add_memory("lives in Lisbon", user_id="u1", metadata={"n": 1, "f": 1.0, "big": 2**53 + 1})
    source.add_memory("moved to Porto", user_id="u1", memory_id="newer", memory_id_to_link=old, link_type="supersedes")
    source.add_memory("likes jazz and piano", user_id="u2", agent_id="a")
    middle = AgentMemory(store=make_pg_store(), embedder=embedder, memory_extraction_config=config)
    back = AgentMemory(store=DuckDBStore(tmp_path / "b.duckdb"), embedder=embedder, memory_extraction_config=config)
    migrate(source, middle)
    migrate(middle, back)
    want = _everything(source.store)
    for mem in (middle, back):
        records, links, vectors = _everything(mem.store)
        assert_same(records, want[0], seq=False, what=f"records in {mem.store.name}")
        assert_same(links, want[1], what=f"links in {mem.store.name}")
        assert vectors.keys() == want[2].keys()
        for rid, vec in vectors.items():
            assert np.array_equal(vec, want[2][rid]), rid
    for mem in (source, middle, back):
        mem.close()
