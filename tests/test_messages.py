"""Thread messages: order and ids, atomic batches, ``get_messages`` windows, and
get/update/delete confined to the thread."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentmemory import Conflict, InvalidArgument, Message, NotFound, RecordType


def msgs(n: int, start: int = 0) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"} for i in range(start, start + n)]


async def test_add_messages_returns_ids_in_order(mem):
    t = await mem.create_thread("t1", user_id="u1", agent_id="a1")
    given = await t.add_messages([
        {"role": "user", "content": "first", "id": "m1", "metadata": {"k": 1}},
        Message(role="assistant", content="second"),
        {"role": "system", "content": "third", "timestamp": "2023-05-01T10:00:00Z"},
        {"role": "tool", "content": "fourth"},
    ])
    assert len(given) == 4 and given[0] == "m1" and len(set(given)) == 4
    stored = await t.get_messages()
    assert [m.record_id for m in stored] == given
    assert [m.content for m in stored] == ["first", "second", "third", "fourth"]
    assert [m.role for m in stored] == ["user", "assistant", "system", "tool"]
    assert all(m.record_type is RecordType.MESSAGE for m in stored)
    assert all((m.user_id, m.agent_id, m.thread_id) == ("u1", "a1", "t1") for m in stored)
    assert stored[0].metadata == {"k": 1}
    assert stored[2].timestamp == datetime(2023, 5, 1, 10, tzinfo=timezone.utc)
    assert stored[1].timestamp == stored[1].created_at  # defaults to the client clock
    more = await t.add_messages(msgs(2))
    assert [m.record_id for m in await t.get_messages()] == given + more
    assert await t.add_messages([]) == []


async def test_add_messages_is_atomic(mem, client, snapshot):
    t = await mem.create_thread("t1")
    await t.add_messages([{"role": "user", "content": "kept", "id": "old"}])
    before = snapshot(client)
    bad_batches = [
        ([*msgs(3), {"role": "wizard", "content": "x"}], "messages[3].role"),
        ([*msgs(2), {"role": "user", "content": ""}], "messages[2].content"),
        ([*msgs(2), {"role": "user", "content": "x", "metadata": {"n": float("nan")}}], "messages[2].metadata"),
        ([*msgs(1), {"role": "user", "content": "x", "timestamp": "yesterday"}], "messages[1].timestamp"),
        ([*msgs(1), {"role": "user", "content": "x", "id": "@sys"}], "messages[1].id"),
        ([*msgs(1), {"role": "user"}], "messages[1].content"),
        ([*msgs(1), {"role": "user", "content": "x", "extra": 1}], "messages[1].extra"),
        ([*msgs(1), "just text"], "messages[1]"),
        ([{"role": "user", "content": "a", "id": "d"}, {"role": "user", "content": "b", "id": "d"}], "messages"),
        ("not a list", "messages"),
        ({"role": "user", "content": "x"}, "messages"),
    ]
    for batch, argument in bad_batches:
        with pytest.raises(InvalidArgument) as err:
            await t.add_messages(batch)
        assert err.value.argument == argument, batch
        assert snapshot(client) == before, batch
    # an id clashing with a stored record: the whole batch is refused
    with pytest.raises(Conflict):
        await t.add_messages([*msgs(2), {"role": "user", "content": "dup", "id": "old"}])
    assert snapshot(client) == before


async def test_get_messages_windows(mem):
    t = await mem.create_thread("t1")
    added = await t.add_messages(msgs(25))
    newest = await t.get_messages()
    assert [m.record_id for m in newest] == added[-20:]  # no bounds: the newest 20, oldest first
    assert [m.record_id for m in await t.get_messages(start=22)] == added[22:]
    assert [m.record_id for m in await t.get_messages(start=22, end=-1)] == added[22:]
    assert [m.record_id for m in await t.get_messages(start=22, end=None)] == added[22:]
    assert [m.record_id for m in await t.get_messages(3, 7)] == added[3:7]
    assert [m.record_id for m in await t.get_messages(end=2)] == added[:2]
    assert await t.get_messages(5, 5) == []
    assert await t.get_messages(start=100) == []
    assert [m.record_id for m in await t.get_messages(20, 100)] == added[20:]
    assert [m.record_id for m in await t.get_messages(0, -1)] == added


async def test_get_messages_is_per_thread(mem):
    a = await mem.create_thread("a", user_id="u1")
    b = await mem.create_thread("b", user_id="u1")
    ma = await a.add_messages(msgs(2))
    mb = await b.add_messages(msgs(3))
    ma += await a.add_messages(msgs(1, 5))
    assert [m.record_id for m in await a.get_messages()] == ma
    assert [m.record_id for m in await b.get_messages()] == mb


@pytest.mark.parametrize(
    ("start", "end", "argument"),
    [(-1, None, "start"), (2, 1, "end"), (0, -2, "end"), ("1", None, "start"), (0, 1.5, "end"), (True, None, "start")],
)
async def test_get_messages_bad_bounds(mem, start, end, argument):
    t = await mem.create_thread("t1")
    await t.add_messages(msgs(3))
    with pytest.raises(InvalidArgument) as err:
        await t.get_messages(start, end)
    assert err.value.argument == argument


async def test_message_get_update_delete_confined_to_thread(mem, client):
    a = await mem.create_thread("a", user_id="u1")
    b = await mem.create_thread("b", user_id="u1")
    (mid,) = await a.add_messages([{"role": "user", "content": "original words", "id": "m1", "metadata": {"x": 1}}])
    got = await a.get_message(mid)
    assert got.content == "original words" and got.role == "user"
    with pytest.raises(NotFound):
        await b.get_message(mid)
    with pytest.raises(NotFound):
        await b.update_message(mid, content="hijack")
    assert await b.delete_message(mid) == 0
    assert (await a.get_message(mid)).content == "original words"

    updated = await a.update_message(mid, content="replacement sentence")
    assert updated.content == "replacement sentence" and updated.metadata == {"x": 1}
    updated = await a.update_message(mid, metadata={"y": 2})
    assert updated.content == "replacement sentence" and updated.metadata == {"y": 2}
    hits = await mem.search("replacement sentence", user_id="u1", record_types=["message"])
    # re-embedded: the new words (indexed with the message's role and date) are its nearest match
    assert hits[0].record.record_id == mid and hits[0].distance is not None and hits[0].distance < 0.2

    assert await a.delete_message(mid) == 1
    assert await a.delete_message(mid) == 0
    with pytest.raises(NotFound):
        await a.get_message(mid)
    assert await a.get_messages() == []


async def test_delete_message_keeps_derived_memories(mem):
    t = await mem.create_thread("t1", user_id="u1")
    (mid,) = await t.add_messages([{"role": "user", "content": "I live in Lisbon"}])
    mem_id = await t.add_memory("User lives in Lisbon")
    assert await t.delete_message(mid) == 1
    assert (await mem.get_memory(mem_id)).content == "User lives in Lisbon"


async def test_message_methods_do_not_touch_memories(mem):
    t = await mem.create_thread("t1")
    mem_id = await t.add_memory("a memory, not a message")
    with pytest.raises(NotFound):
        await t.get_message(mem_id)
    assert await t.delete_message(mem_id) == 0
    assert await t.delete_memory(mem_id) == 1


async def test_list_messages_across_threads(mem):
    a = await mem.create_thread("a", user_id="u1")
    b = await mem.create_thread("b", user_id="u2")
    ma = await a.add_messages(msgs(2))
    mb = await b.add_messages(msgs(2))
    assert [m.record_id for m in await mem.list_messages()] == ma + mb
    assert [m.record_id for m in await mem.list_messages(user_id="u2")] == mb
    assert [m.record_id for m in await mem.list_messages(thread_id="a", limit=1, offset=1)] == ma[1:]
