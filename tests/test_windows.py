"""Read windows of any size give the same answer on every backend: an offset or start past the
end (2**63, 10**30) is an empty result, a huge limit or end is no limit. The SPI clamps windows
once (``validation.MAX_WINDOW``), so no backend sees a number its 64-bit columns cannot hold
(issue #14: hnswlib raised a bare OverflowError from SQLite, DuckDB a BackendError)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument
from agentmemory.spi import Order, RecordFilter
from agentmemory.validation import MAX_WINDOW

OFF = {"extract_memories": False, "enable_context_summary": False}
HUGE = [MAX_WINDOW, 2**63 - 1, 2**63, 2**64, 10**30]


@pytest.fixture(params=["memory", "duckdb", "hnswlib"])
def client(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    uri = {"memory": "memory://", "duckdb": f"duckdb://{tmp_path / 'm.duckdb'}", "hnswlib": f"hnswlib://{tmp_path / 'h'}"}
    memory = AgentMemory(uri[str(request.param)], embedder=HashingEmbedder(16), memory_extraction_config=OFF)
    thread = memory.create_thread("t1", user_id="u1")
    thread.add_messages([{"role": "user", "content": f"message {i}"} for i in range(3)])
    memory.add_memory("a memory", user_id="u1")
    memory.add_user("u1", "Maya")
    yield memory
    memory.close()


@pytest.mark.parametrize("big", HUGE, ids=["2**62", "2**63-1", "2**63", "2**64", "10**30"])
async def test_huge_offsets_are_past_the_end(client: AgentMemory, big: int) -> None:
    thread = client.get_thread("t1")
    assert client.list_memories(user_id="u1", offset=big) == []
    assert client.list_messages(user_id="u1", offset=big) == []
    assert client.list_threads(offset=big) == []
    assert client.list_users(offset=big) == []
    assert thread.get_messages(start=big) == []
    assert thread.get_messages(start=big, end=big + 5) == []
    assert await client.list_memories_async(user_id="u1", offset=big) == []
    assert await thread.get_messages_async(start=big) == []


@pytest.mark.parametrize("big", HUGE, ids=["2**62", "2**63-1", "2**63", "2**64", "10**30"])
async def test_huge_ends_and_tails_are_no_limit(client: AgentMemory, big: int) -> None:
    thread = client.get_thread("t1")
    everything = [m.content for m in thread.get_messages(start=0)]
    assert everything == ["message 0", "message 1", "message 2"]
    assert [m.content for m in thread.get_messages(start=0, end=big)] == everything
    assert [m.content for m in thread.get_messages(start=1, end=big)] == everything[1:]
    assert [m.content for m in await thread.get_messages_async(start=0, end=big)] == everything
    assert thread.get_summary(except_last=big).content == ""
    thread.get_context_card(except_last_messages=big, max_recent_messages=big)


@pytest.mark.parametrize("big", HUGE, ids=["2**62", "2**63-1", "2**63", "2**64", "10**30"])
async def test_the_spi_clamps_windows_for_every_backend(client: AgentMemory, big: int) -> None:
    store = client.store
    flt = RecordFilter(thread_id="t1")
    everything = store.query(flt)
    assert len(everything) == 4  # the thread record and three messages
    assert store.query(flt, offset=big) == []
    assert store.query(flt, offset=big, limit=big) == []
    assert store.query(flt, order=Order.SEQ_DESC, offset=big) == []
    assert store.query(flt, limit=big) == everything
    assert store.query(flt, offset=1, limit=big) == everything[1:]
    assert await store.aquery(flt, offset=big) == []
    assert await store.aquery(flt, limit=big) == everything


@pytest.mark.parametrize(("limit", "offset", "argument"), [(-1, 0, "limit"), (None, -1, "offset"), (True, 0, "limit"),
                                                           (None, 2.0, "offset"), ("5", 0, "limit")])
def test_bad_windows_are_still_refused(client: AgentMemory, limit: Any, offset: Any, argument: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        client.store.query(RecordFilter(), limit=limit, offset=offset)
    assert err.value.argument == argument


@pytest.mark.parametrize("name", ["min_seq", "max_seq"])
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**30])
def test_seq_bounds_beyond_64_bits_are_refused(client: AgentMemory, name: str, value: int) -> None:
    with pytest.raises(InvalidArgument) as err:
        client.store.query(RecordFilter(**{name: value}))
    assert err.value.argument == name
    in_range = client.store.count(RecordFilter(**{name: 2**63 - 1}))  # answered: max_seq is exclusive
    assert in_range == (6 if name == "max_seq" else 0)


def test_negative_starts_are_refused(client: AgentMemory) -> None:
    with pytest.raises(InvalidArgument) as err:
        client.get_thread("t1").get_messages(start=-(2**63))
    assert err.value.argument == "start"
