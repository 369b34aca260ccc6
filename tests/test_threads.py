"""Threads: create, get (live overrides), update (persisted, None clears), list, delete cascade,
and the extraction-settings resolution order call → live → thread → client → default."""

from __future__ import annotations

import pytest

from agentmemory import (
    Conflict,
    InvalidArgument,
    MemoryExtractionConfig,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
    NotFound,
    RecordStatus,
)


async def test_create_thread_generates_an_id_and_persists_scope(mem):
    a = await mem.create_thread(user_id="u1", agent_id="a1", metadata={"topic": "travel"})
    b = await mem.create_thread(user_id="u1")
    assert a.thread_id and b.thread_id and a.thread_id != b.thread_id
    again = await mem.get_thread(a.thread_id)
    assert (again.thread_id, again.user_id, again.agent_id) == (a.thread_id, "u1", "a1")
    assert again.metadata == {"topic": "travel"}


async def test_create_thread_with_explicit_id_and_duplicate_conflicts(mem, client, snapshot):
    t = await mem.create_thread("t1", user_id="u1")
    assert t.thread_id == "t1"
    before = snapshot(client)
    with pytest.raises(Conflict):
        await mem.create_thread("t1", user_id="u2")
    assert snapshot(client) == before
    assert (await mem.get_thread("t1")).user_id == "u1"


async def test_get_thread_missing_raises_not_found(mem):
    with pytest.raises(NotFound):
        await mem.get_thread("nope")


async def test_live_overrides_apply_to_the_handle_only(mem):
    await mem.create_thread("t1", user_id="u1", extract_memories=True, memory_extraction_frequency=4)
    live = await mem.get_thread("t1", extract_memories=False, extraction_mode="background")
    cfg = live.extraction_config()
    assert cfg.extract_memories is False
    assert cfg.extraction_mode is MemoryExtractionMode.BACKGROUND
    assert cfg.memory_extraction_frequency == 4  # persisted value still shows through
    plain = await mem.get_thread("t1")
    assert plain.extraction_config().extract_memories is True
    assert plain.extraction_config().extraction_mode is MemoryExtractionMode.INLINE
    (info,) = await mem.list_threads()
    assert info.memory_extraction_config == {"extract_memories": True, "memory_extraction_frequency": 4}


async def test_get_thread_unknown_override_is_invalid(mem):
    await mem.create_thread("t1")
    with pytest.raises(InvalidArgument) as err:
        await mem.get_thread("t1", not_a_setting=1)
    assert err.value.argument == "not_a_setting"


async def test_update_thread_persists_metadata_and_settings(mem):
    await mem.create_thread("t1", user_id="u1", metadata={"a": 1})
    info = await mem.update_thread("t1", metadata={"b": 2}, memory_extraction_custom_instructions="only orders")
    assert info.metadata == {"b": 2}
    assert info.memory_extraction_config == {"memory_extraction_custom_instructions": "only orders"}
    t = await mem.get_thread("t1")
    assert t.metadata == {"b": 2}
    assert t.extraction_config().memory_extraction_custom_instructions == "only orders"
    # metadata omitted: kept; another field added: merged with the persisted ones
    info = await mem.update_thread("t1", extract_memories=False)
    assert info.metadata == {"b": 2}
    assert info.memory_extraction_config == {
        "memory_extraction_custom_instructions": "only orders",
        "extract_memories": False,
    }


async def test_update_thread_none_clears_one_field_so_client_value_applies(make_client, twin):
    mem = twin(make_client(memory_extraction_config={"memory_extraction_window": 9, "extract_memories": True}))
    await mem.create_thread("t1", memory_extraction_window=3, extract_memories=False)
    t = await mem.get_thread("t1")
    assert t.extraction_config().memory_extraction_window == 3
    info = await mem.update_thread("t1", memory_extraction_window=None)
    assert info.memory_extraction_config == {"extract_memories": False}
    cfg = (await mem.get_thread("t1")).extraction_config()
    assert cfg.memory_extraction_window == 9  # the client's value applies again
    assert cfg.extract_memories is False  # the other thread value is kept


async def test_update_thread_config_none_clears_all_fields(make_client, twin):
    mem = twin(make_client(memory_extraction_config={"memory_extraction_window": 9}))
    await mem.create_thread("t1", metadata={"k": "v"}, memory_extraction_window=3, extract_memories=False)
    info = await mem.update_thread("t1", memory_extraction_config=None)
    assert info.memory_extraction_config == {}
    assert info.metadata == {"k": "v"}
    cfg = (await mem.get_thread("t1")).extraction_config()
    assert cfg.memory_extraction_window == 9
    assert cfg.extract_memories is True  # the default


async def test_update_thread_config_object_sets_its_explicit_fields(mem):
    await mem.create_thread("t1", memory_extraction_window=3, extract_memories=False)
    info = await mem.update_thread("t1", memory_extraction_config={"enable_context_summary": False})
    assert info.memory_extraction_config == {
        "memory_extraction_window": 3, "extract_memories": False, "enable_context_summary": False,
    }
    # a field set explicitly to None on the object clears the thread's value
    info = await mem.update_thread("t1", memory_extraction_config=MemoryExtractionConfig(extract_memories=None))
    assert info.memory_extraction_config == {"memory_extraction_window": 3, "enable_context_summary": False}


async def test_update_thread_missing_is_not_found(mem):
    with pytest.raises(NotFound):
        await mem.update_thread("nope", metadata={})


async def test_update_thread_unknown_field_is_invalid_and_writes_nothing(mem, client, snapshot):
    await mem.create_thread("t1", extract_memories=False)
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await mem.update_thread("t1", bogus=True)
    assert err.value.argument == "bogus"
    with pytest.raises(InvalidArgument) as err:
        await mem.update_thread("t1", metadata={"$x": 1})
    assert err.value.argument == "metadata"
    assert snapshot(client) == before


def test_extraction_config_resolution_order(make_client):
    client = make_client(memory_extraction_config={
        "memory_extraction_frequency": 1, "memory_extraction_window": 1, "context_summary_update_frequency": 1,
        "extraction_mode": "background",
    })
    client.create_thread("t1", memory_extraction_frequency=2, memory_extraction_window=2,
                         context_summary_update_frequency=2)
    t = client.get_thread("t1", memory_extraction_frequency=3, memory_extraction_window=3)
    cfg = t.extraction_config(MemoryExtractionConfig(memory_extraction_frequency=4))
    assert cfg.memory_extraction_frequency == 4  # call
    assert cfg.memory_extraction_window == 3  # live override
    assert cfg.context_summary_update_frequency == 2  # thread (persisted)
    assert cfg.extraction_mode is MemoryExtractionMode.BACKGROUND  # client
    assert cfg.memory_link_extraction_mode is MemoryLinkExtractionMode.DURING_EXTRACTION  # default (one LLM call per turn)
    assert cfg.extract_memories is True and cfg.enable_context_summary is True


def test_client_level_config_rejects_unknown_fields():
    from agentmemory import AgentMemory, HashingEmbedder

    with pytest.raises(InvalidArgument) as err:
        AgentMemory("memory://", embedder=HashingEmbedder(8), memory_extraction_config={"nope": 1})
    assert err.value.argument == "memory_extraction_config.nope"


async def test_create_thread_with_config_object_and_fields(mem):
    cfg = MemoryExtractionConfig(extract_memories=False, memory_extraction_window=5)
    t = await mem.create_thread("t1", memory_extraction_config=cfg, memory_extraction_window=7)
    resolved = t.extraction_config()
    assert resolved.extract_memories is False
    assert resolved.memory_extraction_window == 7  # keyword field wins over the object


async def test_list_threads_scope_filters(mem):
    await mem.create_thread("t1", user_id="u1", agent_id="a1")
    await mem.create_thread("t2", user_id="u1", agent_id="a2")
    await mem.create_thread("t3", user_id="u2", agent_id="a1")
    await mem.create_thread("t4")
    assert [t.thread_id for t in await mem.list_threads()] == ["t1", "t2", "t3", "t4"]
    assert [t.thread_id for t in await mem.list_threads(user_id="u1")] == ["t1", "t2"]
    assert [t.thread_id for t in await mem.list_threads(agent_id="a1")] == ["t1", "t3"]
    assert [t.thread_id for t in await mem.list_threads(user_id="u1", agent_id="a1")] == ["t1"]
    assert [t.thread_id for t in await mem.list_threads(user_id=None)] == ["t4"]
    assert [t.thread_id for t in await mem.list_threads(limit=2, offset=1)] == ["t2", "t3"]
    assert await mem.list_threads(user_id="nobody") == []


async def test_delete_thread_removes_everything_of_the_thread(mem, client):
    t = await mem.create_thread("t1", user_id="u1")
    other = await mem.create_thread("t2", user_id="u1")
    await t.add_messages([{"role": "user", "content": "alpha message"}, {"role": "assistant", "content": "beta reply"}])
    await other.add_messages([{"role": "user", "content": "alpha message elsewhere"}])
    in_thread = await t.add_memory("thread memory about alpha", memory_id="m-in")
    outside = await mem.add_memory("outside memory about alpha", user_id="u1", memory_id="m-out")
    link = await mem.link_records(in_thread, outside, "supersedes")
    assert (await mem.get_memory("m-out")).status is RecordStatus.INVALID
    removed = await mem.delete_thread("t1")
    assert removed == 4  # thread record, two messages, one memory
    with pytest.raises(NotFound):
        await mem.get_thread("t1")
    assert await mem.list_messages(thread_id="t1") == []
    assert await mem.list_memories(thread_id="t1") == []
    assert await mem.list_record_links("m-out") == []
    assert link.link_id not in {x.link_id for x in await mem.list_record_links()}
    # the target outside the thread is valid again, the other thread is untouched
    assert (await mem.get_memory("m-out")).status is RecordStatus.VALID
    assert len(await mem.list_messages(thread_id="t2")) == 1
    hits = await mem.search("alpha", user_id="u1")
    assert {h.record.thread_id for h in hits} <= {"t2", None}
    assert await mem.delete_thread("t1") == 0


async def test_delete_thread_removes_its_summary(mem, client, snapshot):
    from agentmemory.ids import summary_record_id
    from agentmemory.records import Record, RecordType
    from agentmemory.spi import NewRecord, WriteBatch

    await mem.create_thread("t1", user_id="u1")
    now = client.now()
    summary = Record(record_id=summary_record_id("t1"), record_type=RecordType.SUMMARY, content="running summary",
                     user_id="u1", thread_id="t1", timestamp=now, created_at=now)
    client.store.write(WriteBatch(add=[NewRecord(summary)]))
    assert await mem.delete_thread("t1") == 2
    assert snapshot(client) == ([], [])
