"""Moving a local store to Oracle and back (issue #16's Oracle leg) — only against a real Oracle
Database 23ai, when ``AGENTMEMORY_ORACLE_DSN`` is set (see ``test_live.py`` and the README).
Without a DSN the module is skipped LOUDLY. The same functions are proven between the local
backends, offline, by ``tests/test_transfer.py``."""

from __future__ import annotations

import os
import uuid
import warnings
from pathlib import Path

import pytest

DSN = os.environ.get("AGENTMEMORY_ORACLE_DSN", "").strip()
SKIP_REASON = (
    "ORACLE MIGRATION CHECKS NOT RUN: AGENTMEMORY_ORACLE_DSN is not set. Set AGENTMEMORY_ORACLE_DSN, "
    "AGENTMEMORY_ORACLE_USER and AGENTMEMORY_ORACLE_PASSWORD to run them against Oracle Database 23ai "
    "(see backends/oracle/README.md)."
)
if not DSN:
    warnings.warn(SKIP_REASON, UserWarning, stacklevel=1)
    pytest.skip(SKIP_REASON, allow_module_level=True)

import numpy as np  # noqa: E402
from agentmemory_conformance.catalogue import NASTY_METADATA  # noqa: E402
from agentmemory_conformance.support import assert_same  # noqa: E402
from agentmemory_oracle import OracleStore  # noqa: E402

from agentmemory import AgentMemory, HashingEmbedder  # noqa: E402
from agentmemory.spi import Order, RecordFilter  # noqa: E402
from agentmemory.transfer import export_records, import_records, migrate, read_dump, write_dump  # noqa: E402

USER = os.environ.get("AGENTMEMORY_ORACLE_USER") or None
PASSWORD = os.environ.get("AGENTMEMORY_ORACLE_PASSWORD") or None
CFG = {"extract_memories": False, "enable_context_summary": False}


def test_local_store_moves_to_oracle_and_back(tmp_path: Path) -> None:
    oracle = OracleStore(user=USER, password=PASSWORD, dsn=DSN, pool_min=0, pool_max=2,
                         memory_store_key=f"migrate-{uuid.uuid4()}")
    with AgentMemory(f"duckdb://{tmp_path / 'dev.duckdb'}", embedder=HashingEmbedder(), memory_extraction_config=CFG) as dev:
        thread = dev.create_thread("t1", user_id="maya", agent_id="ops", metadata={"big": 2**53 + 1})
        thread.add_messages([{"role": "user", "content": f"the ledger enrichment step fails, try {i}"} for i in range(30)])
        old = dev.add_memory("prefers cron", user_id="maya", memory_type="preference", metadata=NASTY_METADATA)
        new = dev.add_memory("prefers LangGraph now", user_id="maya", memory_type="preference", ttl_days=30)
        dev.link_records(new, old, "supersedes")
        prod = AgentMemory(oracle, embedder=HashingEmbedder(), memory_extraction_config=CFG)
        try:
            report = migrate(dev, prod, batch_size=7)
            assert report.vectors == "kept" and report.links_written == 1
            records = dev.store.query(RecordFilter(), order=Order.SEQ_ASC)
            assert_same(prod.store.query(RecordFilter(), order=Order.SEQ_ASC), records, seq=False, what="records")
            assert_same(prod.store.links(), dev.store.links(), what="links")
            ids = [r.record_id for r in records]
            got, want = prod.store.read_vectors(ids), dev.store.read_vectors(ids)
            assert sorted(got) == sorted(want) and all(np.allclose(got[k], want[k], atol=1e-6) for k in want)
            assert prod.search("which step fails?", user_id="maya", strategy="vector")[0].record.record_id == \
                dev.search("which step fails?", user_id="maya", strategy="vector")[0].record.record_id
            again = migrate(dev, prod)
            assert again.records_written == 0 and again.records_unchanged == len(records)
            dump = tmp_path / "prod.jsonl.gz"
            write_dump(export_records(prod), dump)
            with AgentMemory("memory://", embedder=HashingEmbedder(), memory_extraction_config=CFG) as back:
                import_records(back, read_dump(dump))
                assert_same(back.store.query(RecordFilter(), order=Order.SEQ_ASC), records, seq=False, what="round trip")
        finally:
            prod.close()
            oracle.drop()
