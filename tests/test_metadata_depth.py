"""Metadata nests at most ``MAX_METADATA_DEPTH`` (64) levels of objects and arrays, metadata
filters at most ``MAX_FILTER_DEPTH`` (128): deeper input is ``InvalidArgument`` naming the
argument, and nothing is written (issue #14: thousands of levels raised a bare RecursionError).
The limit is checked once, where metadata is validated, so every write path and every backend
gets it."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.bulk import RecordColumns
from agentmemory.records import Record, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch
from agentmemory.validation import MAX_FILTER_DEPTH, MAX_METADATA_DEPTH, nested_deeper_than

OFF = {"extract_memories": False, "enable_context_summary": False}
T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)


def nest(levels: int, leaf: Any = 1, *, key: str = "k") -> dict[str, Any]:
    """An object ``levels`` deep whose innermost object holds ``leaf``."""
    value: Any = {key: leaf}
    for _ in range(levels - 1):
        value = {key: value}
    return value


def nest_lists(levels: int) -> dict[str, Any]:
    """``{"k": [[...[1]...]]}``: the object plus ``levels - 1`` arrays."""
    value: Any = [1]
    for _ in range(levels - 2):
        value = [value]
    return {"k": value}


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"a": 1}
    value["self"] = value
    return value


TOO_DEEP = {
    "65 objects": nest(MAX_METADATA_DEPTH + 1),
    "5000 objects": nest(5_000),
    "65 arrays": nest_lists(MAX_METADATA_DEPTH + 1),
    "5000 arrays": nest_lists(5_000),
    "cyclic": cyclic(),
}


def test_depth_is_counted_from_one_without_recursion() -> None:
    assert not nested_deeper_than({}, 1)
    assert nested_deeper_than({"a": {}}, 1)
    assert not nested_deeper_than({"a": {"b": [1]}}, 3)
    assert nested_deeper_than({"a": {"b": [1]}}, 2)
    assert nested_deeper_than(nest(100_000), MAX_METADATA_DEPTH)
    assert not nested_deeper_than(nest(MAX_METADATA_DEPTH), MAX_METADATA_DEPTH)
    assert nested_deeper_than(cyclic(), MAX_METADATA_DEPTH)


@pytest.fixture(params=["memory", "duckdb", "hnswlib"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    uri = {"memory": "memory://", "duckdb": f"duckdb://{tmp_path / 'm.duckdb'}", "hnswlib": f"hnswlib://{tmp_path / 'h'}"}
    memory = AgentMemory(uri[str(request.param)], embedder=HashingEmbedder(16), memory_extraction_config=OFF)
    yield memory
    memory.close()


def everything(memory: AgentMemory) -> list[Record]:
    return memory.store.query(RecordFilter())


@pytest.mark.parametrize("shape", list(TOO_DEEP))
def test_too_deep_metadata_is_refused_on_every_write(client: AgentMemory, shape: str) -> None:
    deep = TOO_DEEP[shape]
    thread = client.create_thread("t1", user_id="u1")
    mid = client.add_memory("Maya likes tea", user_id="u1", memory_id="m1")
    other = client.add_memory("Maya likes coffee", user_id="u1", memory_id="m2")
    before = everything(client)
    writes = {
        "metadata": [
            lambda: client.add_memory("x", user_id="u1", metadata=deep),
            lambda: client.update_memory(mid, metadata=deep),
            lambda: client.create_thread("t2", user_id="u1", metadata=deep),
            lambda: client.update_thread("t1", metadata=deep),
            lambda: client.add_user("u1", "Maya", metadata=deep),
            lambda: client.link_records(mid, other, "supports", metadata=deep),
            lambda: thread.add_memory("x", metadata=deep),
        ],
        "messages[1].metadata": [
            lambda: thread.add_messages([{"role": "user", "content": "hi"}, {"role": "user", "content": "x", "metadata": deep}]),
        ],
    }
    for argument, calls in writes.items():
        for call in calls:
            with pytest.raises(InvalidArgument) as err:
                call()
            assert err.value.argument == argument
            assert "64" in str(err.value) or shape == "cyclic"
    assert everything(client) == before
    assert client.list_record_links() == []


def test_metadata_at_the_limit_round_trips(client: AgentMemory) -> None:
    at_limit = nest(MAX_METADATA_DEPTH)
    lists = nest_lists(MAX_METADATA_DEPTH)
    rid = client.add_memory("deep but allowed", user_id="u1", metadata=at_limit)
    lid = client.add_memory("deep lists", user_id="u1", metadata=lists)
    assert client.get_memory(rid).metadata == at_limit
    assert client.get_memory(lid).metadata == lists
    hits = client.search("deep", user_id="u1", metadata_filter=at_limit)
    assert [h.record.record_id for h in hits] == [rid]


@pytest.mark.parametrize("depth", [MAX_FILTER_DEPTH + 1, 5_000])
async def test_too_deep_filters_are_refused(client: AgentMemory, depth: int) -> None:
    client.add_memory("a memory", user_id="u1", metadata={"k": 1})
    deep = nest(depth)
    not_chain: Any = {"$array_contains": 1}
    for _ in range(depth - 2):
        not_chain = {"$not": not_chain}
    for flt in (deep, {"k": not_chain}):
        with pytest.raises(InvalidArgument) as err:
            client.search("a memory", user_id="u1", metadata_filter=flt)
        assert err.value.argument == "metadata_filter"
        with pytest.raises(InvalidArgument):
            await client.search_async("a memory", user_id="u1", metadata_filter=flt)
        with pytest.raises(InvalidArgument):
            client.list_memories(user_id="u1", metadata_filter=flt)
        with pytest.raises(InvalidArgument):
            client.store.query(RecordFilter(metadata_filter=flt))


def test_a_filter_at_its_limit_works(client: AgentMemory) -> None:
    rid = client.add_memory("a memory", user_id="u1", metadata=nest(MAX_METADATA_DEPTH - 1, [1, 2]))
    reach = nest(MAX_METADATA_DEPTH - 1, {"$not": {"$array_contains_any": [3]}})
    assert [h.record.record_id for h in client.search("a memory", user_id="u1", metadata_filter=reach)] == [rid]
    not_chain: Any = {"$array_contains_any": [1]}
    for _ in range(MAX_FILTER_DEPTH - 3):  # k object + 125 $not objects + the operator's object + its list
        not_chain = {"$not": not_chain}
    assert nested_deeper_than({"k": not_chain}, MAX_FILTER_DEPTH - 1)
    assert not nested_deeper_than({"k": not_chain}, MAX_FILTER_DEPTH)
    client.search("a memory", user_id="u1", metadata_filter={"k": not_chain})


# ---- the SPI: a backend gets the same check through MemoryStore.write and bulk_add --------------


def _record(rid: str, metadata: Any) -> Record:
    return Record(record_id=rid, record_type=RecordType.MEMORY, content="text", timestamp=T0, created_at=T0).model_copy(
        update={"metadata": metadata})


@pytest.mark.parametrize("shape", list(TOO_DEEP))
def test_the_spi_refuses_too_deep_metadata(shape: str) -> None:
    store = InMemoryStore()
    store.open(dimension=4)
    store.write(WriteBatch(add=[NewRecord(_record("r0", {}), None)]))
    deep = TOO_DEEP[shape]
    vector = np.ones(4, dtype=np.float32)
    attempts = [
        lambda: store.write(WriteBatch(add=[NewRecord(_record("r1", {"ok": 1}), vector), NewRecord(_record("r2", deep), vector)])),
        lambda: store.write(WriteBatch(patch=[RecordPatch("r0", metadata=deep)])),
        lambda: store.bulk_add(RecordColumns(record_id=["r1", "r2"], content=["a", "b"], record_type="memory", timestamp=T0,
                                             metadata=[{"ok": 1}, deep])),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidArgument) as err:
            attempt()
        assert err.value.argument in ("metadata", "columns.metadata[1]")
    assert [(r.record_id, r.metadata) for r in store.query(RecordFilter())] == [("r0", {})]
