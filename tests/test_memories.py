"""Memory-like records: add (every type, thread defaults, scope checks, linking), update
(re-embedding), delete, list (scope present vs omitted, filters, invalid ones)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from agentmemory import Conflict, InvalidArgument, LinkType, NotFound, RecordStatus, RecordType


@pytest.mark.parametrize("memory_type", ["memory", "fact", "guideline", "preference"])
async def test_add_memory_each_type(mem, memory_type):
    rid = await mem.add_memory(f"a {memory_type} record", memory_type=memory_type, user_id="u1",
                               metadata={"source": "test"})
    rec = await mem.get_memory(rid)
    assert rec.record_type is RecordType(memory_type)
    assert rec.content == f"a {memory_type} record"
    assert (rec.user_id, rec.agent_id, rec.thread_id) == ("u1", None, None)
    assert rec.status is RecordStatus.VALID
    assert rec.metadata == {"source": "test"}
    assert rec.created_at == rec.timestamp


async def test_add_memory_accepts_the_enum_and_explicit_fields(mem, clock):
    rid = await mem.add_memory("typed", memory_type=RecordType.FACT, memory_id="fixed-id", agent_id="a1",
                               timestamp="2020-02-02T02:02:02", status="invalid")
    assert rid == "fixed-id"
    rec = await mem.get_memory(rid)
    assert rec.record_type is RecordType.FACT and rec.agent_id == "a1" and rec.user_id is None
    assert rec.timestamp == datetime(2020, 2, 2, 2, 2, 2, tzinfo=timezone.utc)  # naive means UTC
    assert rec.created_at == clock.now
    assert rec.status is RecordStatus.INVALID


async def test_add_memory_duplicate_id_conflicts(mem, client, snapshot):
    await mem.add_memory("one", memory_id="m1")
    before = snapshot(client)
    with pytest.raises(Conflict):
        await mem.add_memory("two", memory_id="m1")
    assert snapshot(client) == before


async def test_add_memory_in_thread_takes_thread_scope(mem):
    t = await mem.create_thread("t1", user_id="u1", agent_id="a1")
    via_thread = await t.add_memory("thread handle memory", memory_type="preference")
    via_client = await mem.add_memory("client memory in thread", thread_id="t1")
    for rid in (via_thread, via_client):
        rec = await mem.get_memory(rid)
        assert (rec.user_id, rec.agent_id, rec.thread_id) == ("u1", "a1", "t1")
    # matching explicit scope is accepted
    rid = await mem.add_memory("explicit same scope", thread_id="t1", user_id="u1", agent_id="a1")
    assert (await mem.get_memory(rid)).thread_id == "t1"


async def test_add_memory_scope_mismatch_with_thread(mem, client, snapshot):
    await mem.create_thread("t1", user_id="u1", agent_id="a1")
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", thread_id="t1", user_id="u2")
    assert err.value.argument == "user_id"
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", thread_id="t1", agent_id="a2")
    assert err.value.argument == "agent_id"
    with pytest.raises(NotFound):
        await mem.add_memory("x", thread_id="missing-thread")
    assert snapshot(client) == before


async def test_thread_add_memory_rejects_unknown_options(mem):
    t = await mem.create_thread("t1")
    with pytest.raises(InvalidArgument) as err:
        await t.add_memory("x", user_id="someone-else")
    assert err.value.argument == "user_id"


async def test_add_memory_with_link(mem):
    old = await mem.add_memory("User drinks coffee", user_id="u1")
    new = await mem.add_memory("User drinks tea now", user_id="u1", memory_id_to_link=old, link_type="supersedes")
    assert (await mem.get_memory(old)).status is RecordStatus.INVALID
    assert (await mem.get_memory(new)).status is RecordStatus.VALID
    (link,) = await mem.list_record_links(new)
    assert (link.source_id, link.target_id, link.link_type) == (new, old, LinkType.SUPERSEDES)
    # a non-lifecycle link leaves the target valid
    other = await mem.add_memory("Tea is healthy", user_id="u1", memory_id_to_link=new, link_type=LinkType.SUPPORTS)
    assert (await mem.get_memory(new)).status is RecordStatus.VALID
    assert {x.link_type for x in await mem.list_record_links(other)} == {LinkType.SUPPORTS}


async def test_add_memory_link_arguments_go_together(mem, client, snapshot):
    target = await mem.add_memory("target")
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", memory_id_to_link=target)
    assert err.value.argument == "link_type"
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", link_type="supersedes")
    assert err.value.argument == "link_type"
    with pytest.raises(InvalidArgument) as err:
        await mem.add_memory("x", memory_id_to_link=target, link_type="replaces")
    assert err.value.argument == "link_type"
    with pytest.raises(NotFound):
        await mem.add_memory("x", memory_id_to_link="missing", link_type="supersedes")
    assert snapshot(client) == before


async def test_update_memory_reembeds_content(mem):
    rid = await mem.add_memory("User owns a red bicycle", user_id="u1", metadata={"v": 1})
    await mem.add_memory("User enjoys jazz concerts", user_id="u1")
    updated = await mem.update_memory(rid, content="User plays chess tournaments")
    assert updated.content == "User plays chess tournaments"
    assert updated.metadata == {"v": 1}
    hits = await mem.search("User plays chess tournaments", user_id="u1")
    assert hits[0].record.record_id == rid
    assert hits[0].distance == pytest.approx(0.0, abs=1e-5)
    stale = await mem.search("red bicycle", user_id="u1", record_types=["memory"])
    assert all(h.record.content != "User owns a red bicycle" for h in stale)


async def test_update_memory_metadata_and_status(mem):
    rid = await mem.add_memory("fact", metadata={"a": 1})
    rec = await mem.update_memory(rid, metadata={"b": 2})
    assert rec.metadata == {"b": 2} and rec.content == "fact"
    rec = await mem.update_memory(rid, status="invalid")
    assert rec.status is RecordStatus.INVALID
    rec = await mem.update_memory(rid, metadata=None)
    assert rec.metadata == {}
    with pytest.raises(NotFound):
        await mem.update_memory("missing", content="x")
    with pytest.raises(InvalidArgument) as err:
        await mem.update_memory(rid, status="archived")
    assert err.value.argument == "status"


async def test_update_memory_keeps_invalidation_reason(mem):
    old = await mem.add_memory("old")
    await mem.add_memory("new", memory_id_to_link=old, link_type="supersedes", memory_id="new")
    rec = await mem.update_memory(old, metadata={"note": "edited"})
    assert rec.metadata["note"] == "edited"
    results = await mem.search("old", user_id=None)
    assert "is_superseded_by new" in next(r for r in results if r.record.record_id == old).formatted_content


async def test_update_memory_does_not_touch_messages(mem):
    t = await mem.create_thread("t1")
    (mid,) = await t.add_messages([{"role": "user", "content": "a message"}])
    with pytest.raises(NotFound):
        await mem.update_memory(mid, content="x")
    assert await mem.delete_memory(mid) == 0
    assert (await t.get_message(mid)).content == "a message"


async def test_delete_memory_returns_count(mem):
    rid = await mem.add_memory("to delete", user_id="u1")
    assert await mem.delete_memory(rid) == 1
    assert await mem.delete_memory(rid) == 0
    assert await mem.delete_memory("never-existed") == 0
    with pytest.raises(NotFound):
        await mem.get_memory(rid)
    assert await mem.search("to delete", user_id="u1") == []


async def test_thread_memory_methods_confined_to_thread(mem):
    a = await mem.create_thread("a", user_id="u1")
    b = await mem.create_thread("b", user_id="u1")
    in_a = await a.add_memory("memory of a")
    loose = await mem.add_memory("memory of no thread", user_id="u1")
    for rid in (in_a, loose):
        with pytest.raises(NotFound):
            await b.update_memory(rid, content="changed")
        assert await b.delete_memory(rid) == 0
    assert (await mem.get_memory(in_a)).content == "memory of a"
    rec = await a.update_memory(in_a, content="memory of a, edited")
    assert rec.content == "memory of a, edited"
    assert await a.delete_memory(in_a) == 1


async def test_list_memories_scope_present_vs_omitted(mem):
    m1 = await mem.add_memory("u1 only", user_id="u1")
    m2 = await mem.add_memory("u1 with agent", user_id="u1", agent_id="a1")
    m3 = await mem.add_memory("u2 with agent", user_id="u2", agent_id="a1")
    m4 = await mem.add_memory("no scope at all")
    await mem.create_thread("t1", user_id="u1", agent_id="a1")
    m5 = await mem.add_memory("in thread", thread_id="t1")
    assert [r.record_id for r in await mem.list_memories()] == [m1, m2, m3, m4, m5]
    assert [r.record_id for r in await mem.list_memories(user_id="u1")] == [m1, m2, m5]
    assert [r.record_id for r in await mem.list_memories(user_id=None)] == [m4]
    assert [r.record_id for r in await mem.list_memories(agent_id=None)] == [m1, m4]
    assert [r.record_id for r in await mem.list_memories(agent_id="a1")] == [m2, m3, m5]
    assert [r.record_id for r in await mem.list_memories(user_id="u1", agent_id="a1", thread_id=None)] == [m2]
    assert [r.record_id for r in await mem.list_memories(thread_id="t1")] == [m5]
    assert [r.record_id for r in await mem.list_memories(limit=2, offset=1)] == [m2, m3]


async def test_list_memories_types_metadata_and_invalid(mem):
    f = await mem.add_memory("a fact", memory_type="fact", metadata={"tags": ["x", "y"], "n": 1})
    p = await mem.add_memory("a preference", memory_type="preference", metadata={"tags": ["y"], "n": 2})
    g = await mem.add_memory("a guideline", memory_type="guideline", memory_id_to_link=f, link_type="refines")
    t = await mem.create_thread("t1")
    await t.add_messages([{"role": "user", "content": "a message is not a memory"}])
    assert [r.record_id for r in await mem.list_memories(memory_types=["fact", "preference"])] == [f, p]
    assert [r.record_id for r in await mem.list_memories(memory_types="guideline")] == [g]
    assert [r.record_id for r in await mem.list_memories(metadata_filter={"tags": {"$array_contains": "y"}})] == [f, p]
    assert [r.record_id for r in await mem.list_memories(metadata_filter={"n": 2})] == [p]
    assert [r.record_id for r in await mem.list_memories()] == [f, p, g]
    assert [r.record_id for r in await mem.list_memories(include_invalid=False)] == [p, g]
    with pytest.raises(InvalidArgument) as err:
        await mem.list_memories(memory_types=["message"])
    assert err.value.argument == "memory_types"
