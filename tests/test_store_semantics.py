"""The reference store's guarantees as the client relies on them: atomic batches, lifecycle of
open/close, dimension checks, schema policies, and concurrent writers losing nothing."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone

import numpy as np
import pytest

from agentmemory import AgentMemory, BackendUnavailable, Conflict, HashingEmbedder, NotFound, SchemaPolicy
from agentmemory.records import Link, LinkType, Record, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch

NOW = datetime(2024, 1, 1, tzinfo=timezone.utc)


def record(rid: str) -> NewRecord:
    rec = Record(record_id=rid, record_type=RecordType.MEMORY, content=rid, timestamp=NOW, created_at=NOW)
    return NewRecord(rec, np.ones(4, dtype=np.float32))


def test_batch_is_all_or_nothing():
    store = InMemoryStore()
    store.open(dimension=4)
    store.write(WriteBatch(add=[record("a")]))
    failing = [
        WriteBatch(add=[record("b")], patch=[RecordPatch("missing", content="x")]),
        WriteBatch(add=[record("b")], add_links=[Link(link_id="l", source_id="b", target_id="zz",
                                                      link_type=LinkType.SUPPORTS, created_at=NOW)]),
        WriteBatch(add=[record("b"), record("a")]),
        WriteBatch(add=[record("b")], delete=["missing"]),
        WriteBatch(add=[record("b")], delete_links=["missing"]),
    ]
    for batch in failing:
        with pytest.raises((NotFound, Conflict)):
            store.write(batch)
        assert [r.record_id for r in store.query(RecordFilter())] == ["a"]
        assert store.links() == []


def test_batch_order_lets_one_batch_add_link_and_delete():
    store = InMemoryStore()
    store.open(dimension=4)
    link = Link(link_id="l", source_id="a", target_id="b", link_type=LinkType.SUPERSEDES, created_at=NOW)
    store.write(WriteBatch(add=[record("a"), record("b")], add_links=[link]))
    assert [x.link_id for x in store.links()] == ["l"]
    # link deletes run before link adds: a link can be replaced in one batch
    store.write(WriteBatch(delete_links=["l"], add_links=[link.model_copy(update={"link_type": LinkType.REFINES})]))
    assert store.links()[0].link_type is LinkType.REFINES
    # record deletes run last and take their links along
    store.write(WriteBatch(patch=[RecordPatch("a", content="patched")], delete=["b"]))
    assert [(r.record_id, r.content) for r in store.query(RecordFilter())] == [("a", "patched")]
    assert store.links() == []


def test_closed_store_refuses_work():
    client = AgentMemory("memory://", embedder=HashingEmbedder(8))
    client.add_memory("x")
    client.close()
    with pytest.raises(BackendUnavailable):
        client.add_memory("y")
    with pytest.raises(BackendUnavailable):
        client.list_memories()


async def test_closed_store_refuses_async_work():
    client = AgentMemory("memory://", embedder=HashingEmbedder(8))
    await client.close_async()
    with pytest.raises(BackendUnavailable):
        await client.add_memory_async("y")


def test_dimension_mismatch_and_schema_policies():
    store = InMemoryStore()
    first = AgentMemory(store, embedder=HashingEmbedder(8))
    first.add_memory("kept", memory_id="k")
    first.close()
    with pytest.raises(Conflict):
        AgentMemory(store, embedder=HashingEmbedder(16))
    reopened = AgentMemory(store, embedder=HashingEmbedder(8), schema_policy="create_if_necessary")
    assert reopened.get_memory("k").content == "kept"
    reopened.close()
    fresh = AgentMemory(store, embedder=HashingEmbedder(16), schema_policy=SchemaPolicy.RECREATE)
    assert fresh.list_memories() == []


def test_concurrent_threads_lose_nothing():
    client = AgentMemory("memory://", embedder=HashingEmbedder(16),
                         memory_extraction_config={"extract_memories": False, "enable_context_summary": False})
    thread = client.create_thread("t1", user_id="u1")
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(20):
                client.add_memory(f"memory {n}-{i}", user_id="u1", memory_id=f"m{n}-{i}")
            thread.add_messages([{"role": "user", "content": f"w{n} m{i}"} for i in range(3)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    memories = client.list_memories(limit=1000)
    assert sorted(r.record_id for r in memories) == sorted(f"m{n}-{i}" for n in range(6) for i in range(20))
    messages = thread.get_messages(0, -1)
    assert len(messages) == 18
    # each add_messages batch is contiguous and in order
    by_writer: dict[str, list[int]] = {}
    for pos, m in enumerate(messages):
        by_writer.setdefault(m.content.split()[0], []).append(pos)
    assert all(p == list(range(p[0], p[0] + 3)) for p in by_writer.values())


async def test_concurrent_async_tasks_lose_nothing():
    client = AgentMemory("memory://", embedder=HashingEmbedder(16),
                         memory_extraction_config={"extract_memories": False, "enable_context_summary": False})
    ids = await asyncio.gather(*(client.add_memory_async(f"async memory {i}", user_id="u1") for i in range(60)))
    assert len(set(ids)) == 60
    listed = await client.list_memories_async(user_id="u1", limit=1000)
    assert sorted(r.record_id for r in listed) == sorted(ids)
    seqs = [r.seq for r in listed]
    assert len(set(seqs)) == 60
