"""Writes during a background index build never fail with a transaction conflict (#31).

DuckDB 1.4 fails the commit of a key's second deletion while a transaction older than its first
one is open ("write-write conflict on key"), and it runs an ``UPDATE … RETURNING`` and every
update of the ``vec`` column as a delete and insert of the row. A build's statements are such
transactions: a 10k-message ingest through ``add_messages`` (which patches the thread record at
every call) failed once with ``TransientBackendError`` on the thread record.

The build is held deterministically inside its snapshot transaction: the BM25 snapshot's terms
function (a Python UDF the snapshot ``INSERT … SELECT`` calls) waits until the test lets it go.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from agentmemory_duckdb import DuckDBStore

from agentmemory import AgentMemory, HashingEmbedder
from agentmemory.records import RecordType
from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

DIM = 8
WAIT_S = 30.0  # a bound on waiting for the builder, never a measured time


class HeldBuildStore(DuckDBStore):
    """Its first BM25 snapshot copy stops inside the snapshot transaction until ``release``;
    ``_wait_for_build`` (the store waiting out a build after a conflict) releases it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.held = threading.Event()
        self.release = threading.Event()
        self.waited_for_build = 0

    def _terms_column(self, content: pa.Array) -> pa.Array:
        if len(content) and not self.held.is_set():
            self.held.set()
            assert self.release.wait(WAIT_S), "the test never released the build"
        return super()._terms_column(content)

    def _wait_for_build(self) -> None:
        self.waited_for_build += 1
        self.release.set()
        super()._wait_for_build()


def _held_store(tmp_path: Path) -> HeldBuildStore:
    store = HeldBuildStore(tmp_path / "held.duckdb", fts_min_rows=5, vector_index_min_rows=1_000_000)
    store.open(dimension=DIM)
    return store


def _hold_build(store: HeldBuildStore) -> None:
    assert store.held.wait(WAIT_S), "no background build started"
    assert store._building == 1


def test_add_messages_during_a_build_patch_the_thread_record(tmp_path: Path) -> None:
    """The reported failure: every ``add_messages`` patches the thread record (its metadata);
    the second such patch while the build's snapshot transaction is open failed to commit."""
    store = _held_store(tmp_path)
    client = AgentMemory(store=store, embedder=HashingEmbedder(DIM))
    try:
        thread = client.create_thread(thread_id="t0", user_id="u", agent_id="a")
        for i in range(4):  # past fts_min_rows: the write that crosses it starts the builder
            thread.add_messages([{"role": "user", "content": f"I like apples {i}"}, {"role": "assistant", "content": f"noted {i}"}])
        _hold_build(store)
        for i in range(4, 8):
            thread.add_messages([{"role": "user", "content": f"I like pears {i}"}, {"role": "assistant", "content": f"noted {i}"}])
        assert store._building == 1 and store.waited_for_build == 0  # no conflict: nothing waited
        store.release.set()
        assert store.wait_for_indexes(WAIT_S)
        assert len(thread.get_messages(0, -1)) == 16
    finally:
        store.release.set()
        client.close()


def test_vector_patches_during_a_build_wait_for_it(tmp_path: Path, h: Any) -> None:
    """Updating a vector always deletes and re-inserts the key in DuckDB: the second vector
    patch of a record during a build conflicts whatever the statement; the store retries the
    whole batch once the build is over (the failed try left nothing behind), and the batch
    lands exactly once."""
    store = _held_store(tmp_path)
    try:
        rng = np.random.default_rng(0)
        store.write(WriteBatch(add=[h.new(f"r{i}", rng.normal(size=DIM), content=f"note {i}", user_id="u") for i in range(8)]))
        _hold_build(store)
        store.write(WriteBatch(patch=[RecordPatch("r0", vector=rng.normal(size=DIM).astype(np.float32))]))
        last = rng.normal(size=DIM).astype(np.float32)
        added = store.write(WriteBatch(add=[h.new("r8", content="added with the patch", user_id="u")],
                                       patch=[RecordPatch("r0", vector=last, metadata={"n": 2})]))
        assert store.waited_for_build == 1 and not store._building
        assert [r.record_id for r in added] == ["r8"]
        assert store.count(RecordFilter(user_id="u")) == 9
        (row,) = store.query(RecordFilter(record_ids=("r0",)))
        assert row.metadata == {"n": 2} and row.record_type is RecordType.MEMORY
        np.testing.assert_allclose(store.read_vectors(["r0"])["r0"], last / np.linalg.norm(last), rtol=1e-5)
        assert store.settle()["keyword"]
    finally:
        store.release.set()
        store.close()
