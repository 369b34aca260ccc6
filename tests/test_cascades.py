"""Profiles and actor deletion (the right-to-be-forgotten path), and scope isolation between
two users with near-identical content."""

from __future__ import annotations

import pytest

from agentmemory import Conflict, InvalidArgument, NotFound, RecordStatus, RecordType


async def populate(mem, user: str, agent: str) -> dict[str, str]:
    """A user with a profile, a thread with messages, thread and loose memories, links."""
    await mem.add_user(user, f"{user} is a gardener who grows tomatoes")
    t = await mem.create_thread(f"{user}-thread", user_id=user, agent_id=agent)
    await t.add_messages([
        {"role": "user", "content": f"my tomatoes have yellow leaves, says {user}"},
        {"role": "assistant", "content": "yellow tomato leaves often mean overwatering"},
    ])
    tm = await t.add_memory(f"{user} grows tomatoes on a balcony", memory_type="fact")
    loose = await mem.add_memory(f"{user} prefers organic fertiliser", user_id=user, memory_type="preference")
    older = await mem.add_memory(f"{user} used chemical fertiliser", user_id=user)
    await mem.link_records(loose, older, "supersedes")
    await mem.link_records(tm, loose, "supports")
    return {"thread": f"{user}-thread", "thread_memory": tm, "loose": loose, "older": older}


async def test_profiles_add_list_conflict(mem):
    assert await mem.add_user("u1", "likes tea", metadata={"tier": "gold"}) == "u1"
    await mem.add_user("u2", "likes coffee")
    await mem.add_agent("bot", "a helpful agent")
    users = await mem.list_users()
    assert [(p.actor_id, p.information, p.metadata) for p in users] == [
        ("u1", "likes tea", {"tier": "gold"}), ("u2", "likes coffee", {})]
    assert users[0].actor_type is RecordType.USER
    assert [p.actor_id for p in await mem.list_agents()] == ["bot"]
    assert [p.actor_id for p in await mem.list_users(limit=1, offset=1)] == ["u2"]
    with pytest.raises(Conflict):
        await mem.add_user("u1", "again")
    with pytest.raises(InvalidArgument) as err:
        await mem.add_user("u3", "")
    assert err.value.argument == "information"
    with pytest.raises(InvalidArgument) as err:
        await mem.add_agent("@bot", "x")
    assert err.value.argument == "agent_id"


async def test_delete_user_cascade_forgets_everything(mem, client, snapshot):
    mine = await populate(mem, "alice", "agent-1")
    theirs = await populate(mem, "bob", "agent-1")
    # alice's memory supersedes one of bob's: deleting alice must restore bob's record
    cross = await mem.add_memory("alice says bob switched to compost", user_id="alice",
                                 memory_id_to_link=theirs["older"], link_type="refines")
    assert cross
    bob_before = [r for r in snapshot(client)[0] if r[4] == "bob" or r[6] == "bob-thread"]
    removed = await mem.delete_user("alice")
    assert removed == 8  # profile, thread, 2 messages, 4 memories
    records, links = snapshot(client)
    assert not any("alice" in repr(r) for r in records)
    assert all(x[1] not in {mine["thread_memory"], mine["loose"], mine["older"], cross} for x in links)
    assert all(x[2] not in {mine["thread_memory"], mine["loose"], mine["older"], cross} for x in links)
    for query in ("tomatoes", "fertiliser", "alice", "yellow leaves"):
        assert await mem.search(query, user_id="alice", max_results=100) == []
    assert await mem.list_memories(user_id="alice") == []
    assert await mem.list_messages(user_id="alice") == []
    assert await mem.list_threads(user_id="alice") == []
    assert [p.actor_id for p in await mem.list_users()] == ["bob"]
    with pytest.raises(NotFound):
        await mem.get_thread(mine["thread"])
    # bob is untouched; his older record stays invalid through his own supersedes link
    bob_after = [r for r in records if r[4] == "bob" or r[6] == "bob-thread"]
    assert [r[0] for r in bob_after] == [r[0] for r in bob_before]
    assert (await mem.get_memory(theirs["older"])).status is RecordStatus.INVALID  # bob's own supersedes link
    assert len(await mem.search("tomatoes", user_id="bob", max_results=100)) >= 4
    assert await mem.delete_user("alice") == 0


async def test_delete_user_restores_other_users_record(mem):
    bobs = await mem.add_memory("bob lives in Porto", user_id="bob")
    await mem.add_memory("bob moved to Braga", user_id="alice", memory_id_to_link=bobs, link_type="supersedes")
    assert (await mem.get_memory(bobs)).status is RecordStatus.INVALID
    await mem.delete_user("alice")
    assert (await mem.get_memory(bobs)).status is RecordStatus.VALID


async def test_delete_user_removes_unscoped_records_of_their_threads(mem, client, snapshot):
    """A record written into the user's thread without its own user id still goes."""
    from agentmemory.records import Record
    from agentmemory.spi import NewRecord, WriteBatch

    await mem.create_thread("t1", user_id="alice")
    stray = Record(record_id="stray", record_type=RecordType.MEMORY, content="stray", thread_id="t1",
                   timestamp=client.now(), created_at=client.now())
    client.store.write(WriteBatch(add=[NewRecord(stray, client.embedder.embed(["stray"])[0])]))
    await mem.delete_user("alice")
    assert "stray" not in {r[0] for r in snapshot(client)[0]}


async def test_delete_user_without_cascade_removes_only_the_profile(mem):
    mine = await populate(mem, "alice", "agent-1")
    assert await mem.delete_user("alice", cascade=False) == 1
    assert await mem.list_users() == []
    assert (await mem.get_memory(mine["loose"])).content == "alice prefers organic fertiliser"
    assert (await mem.get_thread(mine["thread"])).user_id == "alice"
    assert await mem.search("gardener", user_id="alice", record_types=["user"]) == []
    with pytest.raises(InvalidArgument) as err:
        await mem.delete_user("alice", cascade="yes")
    assert err.value.argument == "cascade"


async def test_delete_agent_cascade(mem, client, snapshot):
    await populate(mem, "alice", "agent-1")
    await populate(mem, "bob", "agent-2")
    await mem.add_agent("agent-1", "the first agent")
    await mem.add_memory("agent-1 house rule", agent_id="agent-1", memory_type="guideline")
    removed = await mem.delete_agent("agent-1")
    assert removed == 6  # profile, thread, 2 messages, thread memory, guideline
    records, _ = snapshot(client)
    assert not any(r[5] == "agent-1" or r[6] == "alice-thread" for r in records)
    assert await mem.list_agents() == []
    assert await mem.search("house rule", user_id=None, agent_id="agent-1") == []
    assert await mem.list_threads(agent_id="agent-1") == []
    assert [t.thread_id for t in await mem.list_threads()] == ["bob-thread"]
    # alice's loose memories carry no agent id: they stay
    assert {r.content for r in await mem.list_memories(user_id="alice")} == {
        "alice prefers organic fertiliser", "alice used chemical fertiliser"}


async def test_delete_agent_without_cascade(mem):
    await mem.add_agent("bot", "an agent")
    rid = await mem.add_memory("bot rule", agent_id="bot")
    assert await mem.delete_agent("bot", cascade=False) == 1
    assert (await mem.get_memory(rid)).content == "bot rule"


async def test_scope_isolation_between_two_users(mem):
    a = await populate(mem, "alice", "shared-agent")
    b = await populate(mem, "bob", "shared-agent")
    await mem.link_records(a["loose"], b["loose"], "contradicts")  # even a cross-user link
    alice_ids = {r.record_id for r in await mem.list_memories(user_id="alice")}
    alice_ids |= {r.record_id for r in await mem.list_messages(user_id="alice")}
    alice_ids.add("@user:alice")
    for strategy in ("vector", "keyword", "hybrid"):
        for query in ("tomatoes balcony", "organic fertiliser", "bob", "yellow leaves overwatering"):
            hits = await mem.search(query, user_id="alice", strategy=strategy, max_results=100, num_hops=3)
            seen = {h.record.record_id for h in hits}
            seen |= {x.record.record_id for h in hits for x in h.linked_results}
            assert seen <= alice_ids, (strategy, query, seen - alice_ids)
            assert all(h.record.user_id == "alice" for h in hits)
            assert all(x.record.user_id == "alice" for h in hits for x in h.linked_results)
    t = await mem.get_thread(a["thread"])
    hits = await t.search("tomatoes", max_results=100, num_hops=2)
    assert hits and all(h.record.user_id == "alice" for h in hits)
    assert all(r.user_id == "bob" for r in await mem.list_memories(user_id="bob"))
    assert b["loose"] not in {r.record_id for r in await mem.list_memories(user_id="alice")}
