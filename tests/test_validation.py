"""Every bad argument raises ``InvalidArgument`` whose ``.argument`` names it, and writes nothing.

Each case is a call site (a lambda over the ``mem`` twin, a thread handle ``t`` and the bad
value) and the argument name the error must carry. Every case runs through the sync API and
the async twin, and compares the whole store before and after.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument

BAD_IDS = {
    "empty": "",
    "leading-space": " x",
    "trailing-space": "x\n",
    "too-long": "a" * 129,
    "reserved": "@thread:t1",
    "non-str": 5,
    "bytes": b"m1",
    "nul": "a\x00b",
    "surrogate": "a\ud800b",
}

BAD_CONTENT = {
    "empty": "",
    "blank": "  \n ",
    "huge": "x" * 1_000_001,
    "nul": "a\x00b",
    "surrogate": "a\ud800b",
    "non-str": 5,
    "none": None,
}

BAD_METADATA = {
    "nan": {"a": float("nan")},
    "inf": {"a": {"b": float("inf")}},
    "object": {"a": object()},
    "set": {"a": {1, 2}},
    "bytes": {"a": b"x"},
    "dollar-key": {"$x": 1},
    "reserved-key": {"$agent_memory": {"config": {}}},
    "int-key": {1: "a"},
    "empty-key": {"": 1},
    "text": "color=red",
    "list": ["a"],
    "nul-value": {"a": "b\x00"},
    "nul-key": {"a\x00": 1},
    "surrogate": {"a": "\ud800"},
    "huge": {"a": "x" * 1_000_001},
}


@pytest.fixture
async def world(mem):
    """A thread ``t1`` of u1/a1 with a message ``msg1``, memories ``m1``/``m2`` and link ``l1``."""
    t = await mem.create_thread("t1", user_id="u1", agent_id="a1")
    await t.add_messages([{"role": "user", "content": "hello there", "id": "msg1"}])
    await mem.add_memory("first memory", user_id="u1", memory_id="m1")
    await mem.add_memory("second memory", user_id="u1", memory_id="m2")
    await mem.link_records("m1", "m2", "supports", link_id="l1")
    await mem.add_user("u1", "a user")
    return mem, t


async def check(world, client, snapshot, call, bad: Any, argument: str) -> None:
    mem, t = world
    before = snapshot(client)
    with pytest.raises(InvalidArgument) as err:
        await call(mem, t, bad)
    named = err.value.argument
    assert named == argument or named.startswith((argument + " ", argument + ".")), (
        f"expected argument {argument!r}, got {err.value.argument!r}: {err.value}")
    assert err.value.problem and argument in str(err.value)
    assert snapshot(client) == before, "a rejected call wrote something"


def site_ids(sites: list[Any]) -> list[str]:
    """Test ids: the first element of each case (plain tuple or ``pytest.param``)."""
    return [str(getattr(case, "values", case)[0]) for case in sites]



ID_SITES = [
    ("create_thread.thread_id", lambda m, t, v: m.create_thread(v), "thread_id"),
    ("create_thread.user_id", lambda m, t, v: m.create_thread("t9", user_id=v), "user_id"),
    ("create_thread.agent_id", lambda m, t, v: m.create_thread("t9", agent_id=v), "agent_id"),
    ("get_thread", lambda m, t, v: m.get_thread(v), "thread_id"),
    ("update_thread", lambda m, t, v: m.update_thread(v, metadata={}), "thread_id"),
    ("delete_thread", lambda m, t, v: m.delete_thread(v), "thread_id"),
    ("list_threads.user_id", lambda m, t, v: m.list_threads(user_id=v), "user_id"),
    ("list_threads.agent_id", lambda m, t, v: m.list_threads(agent_id=v), "agent_id"),
    ("add_user", lambda m, t, v: m.add_user(v, "info"), "user_id"),
    ("add_agent", lambda m, t, v: m.add_agent(v, "info"), "agent_id"),
    ("delete_user", lambda m, t, v: m.delete_user(v), "user_id"),
    ("delete_agent", lambda m, t, v: m.delete_agent(v), "agent_id"),
    ("add_memory.memory_id", lambda m, t, v: m.add_memory("x", memory_id=v), "memory_id"),
    ("add_memory.user_id", lambda m, t, v: m.add_memory("x", user_id=v), "user_id"),
    ("add_memory.agent_id", lambda m, t, v: m.add_memory("x", agent_id=v), "agent_id"),
    ("add_memory.thread_id", lambda m, t, v: m.add_memory("x", thread_id=v), "thread_id"),
    ("add_memory.memory_id_to_link", lambda m, t, v: m.add_memory("x", memory_id_to_link=v, link_type="supports"),
     "memory_id_to_link"),
    ("thread.add_memory.memory_id", lambda m, t, v: t.add_memory("x", memory_id=v), "memory_id"),
    ("get_memory", lambda m, t, v: m.get_memory(v), "memory_id"),
    ("update_memory", lambda m, t, v: m.update_memory(v, content="x"), "memory_id"),
    ("thread.update_memory", lambda m, t, v: t.update_memory(v, content="x"), "memory_id"),
    ("delete_memory", lambda m, t, v: m.delete_memory(v), "memory_id"),
    ("thread.delete_memory", lambda m, t, v: t.delete_memory(v), "memory_id"),
    ("list_memories.user_id", lambda m, t, v: m.list_memories(user_id=v), "user_id"),
    ("list_memories.agent_id", lambda m, t, v: m.list_memories(agent_id=v), "agent_id"),
    ("list_memories.thread_id", lambda m, t, v: m.list_memories(thread_id=v), "thread_id"),
    ("list_messages.thread_id", lambda m, t, v: m.list_messages(thread_id=v), "thread_id"),
    ("link_records.source_id", lambda m, t, v: m.link_records(v, "m2", "supports"), "source_id"),
    ("link_records.target_id", lambda m, t, v: m.link_records("m2", v, "supports"), "target_id"),
    ("link_records.link_id", lambda m, t, v: m.link_records("m1", "m2", "supports", link_id=v), "link_id"),
    ("update_record_link", lambda m, t, v: m.update_record_link(v, link_type="supports"), "link_id"),
    ("delete_record_link", lambda m, t, v: m.delete_record_link(v), "link_id"),
    ("list_record_links", lambda m, t, v: m.list_record_links(v), "record_id"),
    ("search.user_id", lambda m, t, v: m.search("x", user_id=v), "user_id"),
    ("search.agent_id", lambda m, t, v: m.search("x", user_id="u1", agent_id=v), "agent_id"),
    ("search.thread_id", lambda m, t, v: m.search("x", user_id="u1", thread_id=v), "thread_id"),
    ("thread.search.thread_id", lambda m, t, v: t.search("x", thread_id=v), "thread_id"),
    ("thread.get_message", lambda m, t, v: t.get_message(v), "message_id"),
    ("thread.update_message", lambda m, t, v: t.update_message(v, content="x"), "message_id"),
    ("thread.delete_message", lambda m, t, v: t.delete_message(v), "message_id"),
    ("add_messages.id", lambda m, t, v: t.add_messages([{"role": "user", "content": "x", "id": v}]), "messages[0].id"),
]



def id_cases() -> list[Any]:
    """Every id call site crossed with every bad id."""
    return [
        pytest.param(site, call, argument, bad, id=f"{site}-{name}")
        for site, call, argument in ID_SITES
        for name, bad in BAD_IDS.items()
    ]


@pytest.mark.parametrize(("site", "call", "argument", "bad"), id_cases())
async def test_bad_ids(world, client, snapshot, site, call, argument, bad):
    await check(world, client, snapshot, call, bad, argument)


CONTENT_SITES = [
    ("add_memory", lambda m, t, v: m.add_memory(v), "content"),
    ("thread.add_memory", lambda m, t, v: t.add_memory(v), "content"),
    ("update_memory", lambda m, t, v: m.update_memory("m1", content=v), "content"),
    ("thread.update_message", lambda m, t, v: t.update_message("msg1", content=v), "content"),
    ("add_user", lambda m, t, v: m.add_user("u9", v), "information"),
    ("add_agent", lambda m, t, v: m.add_agent("a9", v), "information"),
    ("add_messages", lambda m, t, v: t.add_messages([{"role": "user", "content": "ok"}, {"role": "user", "content": v}]),
     "messages[1].content"),
    ("search", lambda m, t, v: m.search(v, user_id="u1"), "query"),
    ("thread.search", lambda m, t, v: t.search(v), "query"),
]


@pytest.mark.parametrize("bad", list(BAD_CONTENT.values()), ids=list(BAD_CONTENT))
@pytest.mark.parametrize(("site", "call", "argument"), CONTENT_SITES, ids=site_ids(CONTENT_SITES))
async def test_bad_content(world, client, snapshot, site, call, argument, bad):
    await check(world, client, snapshot, call, bad, argument)


METADATA_SITES = [
    ("add_memory", lambda m, t, v: m.add_memory("x", metadata=v), "metadata"),
    ("thread.add_memory", lambda m, t, v: t.add_memory("x", metadata=v), "metadata"),
    ("update_memory", lambda m, t, v: m.update_memory("m1", metadata=v), "metadata"),
    ("create_thread", lambda m, t, v: m.create_thread("t9", metadata=v), "metadata"),
    ("update_thread", lambda m, t, v: m.update_thread("t1", metadata=v), "metadata"),
    ("add_user", lambda m, t, v: m.add_user("u9", "info", metadata=v), "metadata"),
    ("add_agent", lambda m, t, v: m.add_agent("a9", "info", metadata=v), "metadata"),
    ("link_records", lambda m, t, v: m.link_records("m1", "m2", "supports", metadata=v), "metadata"),
    ("update_record_link", lambda m, t, v: m.update_record_link("l1", metadata=v), "metadata"),
    ("thread.update_message", lambda m, t, v: t.update_message("msg1", metadata=v), "metadata"),
    ("add_messages", lambda m, t, v: t.add_messages([{"role": "user", "content": "x", "metadata": v}]),
     "messages[0].metadata"),
]


@pytest.mark.parametrize("bad", list(BAD_METADATA.values()), ids=list(BAD_METADATA))
@pytest.mark.parametrize(("site", "call", "argument"), METADATA_SITES, ids=site_ids(METADATA_SITES))
async def test_bad_metadata(world, client, snapshot, site, call, argument, bad):
    await check(world, client, snapshot, call, bad, argument)


OTHER_CASES = [
    # unknown types
    ("memory_type.unknown", lambda m, t, v: m.add_memory("x", memory_type="opinion"), "memory_type"),
    ("memory_type.message", lambda m, t, v: m.add_memory("x", memory_type="message"), "memory_type"),
    ("memory_type.none", lambda m, t, v: m.add_memory("x", memory_type=None), "memory_type"),
    ("thread.memory_type", lambda m, t, v: t.add_memory("x", memory_type="user"), "memory_type"),
    ("list_memories.memory_types", lambda m, t, v: m.list_memories(memory_types=["fact", "rumour"]), "memory_types"),
    ("search.record_types", lambda m, t, v: m.search("x", user_id="u1", record_types=["memory", "bogus"]),
     "record_types"),
    ("link_records.link_type", lambda m, t, v: m.link_records("m1", "m2", "replaces"), "link_type"),
    ("link_records.link_type.none", lambda m, t, v: m.link_records("m1", "m2", None), "link_type"),
    ("update_record_link.link_type", lambda m, t, v: m.update_record_link("l1", link_type="x"), "link_type"),
    ("add_memory.link_type", lambda m, t, v: m.add_memory("x", memory_id_to_link="m1", link_type="is_superseded_by"),
     "link_type"),
    ("add_memory.status", lambda m, t, v: m.add_memory("x", status="archived"), "status"),
    ("update_memory.status", lambda m, t, v: m.update_memory("m1", status=None), "status"),
    # search numbers and budgets
    *[(f"max_results={v!r}", lambda m, t, _, v=v: m.search("x", user_id="u1", max_results=v), "max_results")
      for v in (0, -1, 1001, "5", True, 2.0, None)],
    *[(f"num_hops={v!r}", lambda m, t, _, v=v: m.search("x", user_id="u1", num_hops=v), "num_hops")
      for v in (-1, 6, "1", True, 1.0)],
    *[(f"max_linked_results={v!r}", lambda m, t, _, v=v: m.search("x", user_id="u1", max_linked_results=v),
       "max_linked_results") for v in (-1, "3", False)],
    *[(f"token_budget={v!r}", lambda m, t, _, v=v: m.search("x", user_id="u1", token_budget=v), "token_budget")
      for v in ("100", 10.5, True)],
    *[(f"soft_token_budget={v!r}", lambda m, t, _, v=v: t.search("x", soft_token_budget=v), "soft_token_budget")
      for v in ("100", 10.5, False)],
    ("search.strategy", lambda m, t, v: m.search("x", user_id="u1", strategy="semantic"), "strategy"),
    ("search.exact_agent_match", lambda m, t, v: m.search("x", user_id="u1", exact_agent_match="yes"),
     "exact_agent_match"),
    ("search.exact_thread_match", lambda m, t, v: t.search("x", exact_thread_match=1), "exact_thread_match"),
    ("search.include_invalid_results", lambda m, t, v: m.search("x", user_id="u1", include_invalid_results=None),
     "include_invalid_results"),
    ("thread.search.exact_user_match", lambda m, t, v: t.search("x", exact_user_match="no"), "exact_user_match"),
    # list windows
    *[(f"list_memories.limit={v!r}", lambda m, t, _, v=v: m.list_memories(limit=v), "limit") for v in (-1, 10_001, "5")],
    ("list_memories.offset", lambda m, t, v: m.list_memories(offset=-1), "offset"),
    ("list_messages.limit", lambda m, t, v: m.list_messages(limit=None), "limit"),
    ("list_threads.limit", lambda m, t, v: m.list_threads(limit=1.5), "limit"),
    ("list_threads.offset", lambda m, t, v: m.list_threads(offset="1"), "offset"),
    ("list_users.limit", lambda m, t, v: m.list_users(limit=-3), "limit"),
    ("list_agents.offset", lambda m, t, v: m.list_agents(offset=-3), "offset"),
    # timestamps
    *[(f"add_memory.timestamp={v!r}", lambda m, t, _, v=v: m.add_memory("x", timestamp=v), "timestamp")
      for v in ("not a date", "2024-13-45", 12345, 1.5e9, object())],
    *[(f"add_messages.timestamp={v!r}",
       lambda m, t, _, v=v: t.add_messages([{"role": "user", "content": "x", "timestamp": v}]), "messages[0].timestamp")
      for v in ("garbage", "2024-02-30T10:00:00", [2024])],
    # roles
    *[(f"add_messages.role={v!r}", lambda m, t, _, v=v: t.add_messages([{"role": v, "content": "x"}]), "messages[0].role")
      for v in ("wizard", "", "USER", None, 5)],
    ("add_messages.missing_role", lambda m, t, v: t.add_messages([{"content": "x"}]), "messages[0].role"),
    # thread settings
    ("create_thread.unknown_setting", lambda m, t, v: m.create_thread("t9", extract_everything=True),
     "extract_everything"),
    ("create_thread.config_type", lambda m, t, v: m.create_thread("t9", memory_extraction_config=5),
     "memory_extraction_config"),
    ("create_thread.config_dict", lambda m, t, v: m.create_thread("t9", memory_extraction_config={"bogus": 1}),
     "memory_extraction_config"),
    ("update_thread.config_type", lambda m, t, v: m.update_thread("t1", memory_extraction_config="on"),
     "memory_extraction_config"),
    # deletes
    ("delete_user.cascade", lambda m, t, v: m.delete_user("u1", cascade=None), "cascade"),
    ("delete_agent.cascade", lambda m, t, v: m.delete_agent("a1", cascade=1), "cascade"),
]


@pytest.mark.parametrize(("case", "call", "argument"), OTHER_CASES, ids=site_ids(OTHER_CASES))
async def test_bad_arguments(world, client, snapshot, case, call, argument):
    await check(world, client, snapshot, call, None, argument)


@pytest.mark.parametrize("where", ["create_thread", "update_thread", "get_thread"])
async def test_setting_errors_name_the_setting(world, client, snapshot, where):
    calls = {
        "create_thread": lambda m, t, v: m.create_thread("t9", extract_memories="maybe"),
        "update_thread": lambda m, t, v: m.update_thread("t1", extract_memories="maybe"),
        "get_thread": lambda m, t, v: m.get_thread("t1", extract_memories="maybe"),
    }
    mem, t = world
    with pytest.raises(InvalidArgument) as err:
        await calls[where](mem, t, None)
    assert err.value.argument.split(".")[-1] == "extract_memories"


async def test_list_memories_include_invalid_named(world, client, snapshot):
    await check(world, client, snapshot, lambda m, t, v: m.list_memories(include_invalid="yes"), None,
                "include_invalid")


async def test_numeric_message_timestamp_rejected(world, client, snapshot):
    await check(world, client, snapshot,
                lambda m, t, v: t.add_messages([{"role": "user", "content": "x", "timestamp": 12345}]), None,
                "messages[0].timestamp")


async def test_thread_search_cannot_drop_the_user_scope(world, client, snapshot):
    await check(world, client, snapshot, lambda m, t, v: t.search("x", exact_user_match=False), None,
                "exact_user_match")


def test_client_construction_errors():
    emb = HashingEmbedder(8)
    for kwargs, argument in [
        ({"store": 5}, "store"),
        ({"store": "no-scheme-here"}, "store"),
        ({"store": "memory://", "schema_policy": "drop_everything"}, "schema_policy"),
        ({"store": "memory://", "memory_extraction_config": "on"}, "memory_extraction_config"),
        ({"store": "memory://somewhere"}, "store"),
    ]:
        with pytest.raises(InvalidArgument) as err:
            AgentMemory(embedder=emb, **kwargs)
        assert err.value.argument == argument, kwargs


def test_invalid_argument_is_a_value_error():
    err = InvalidArgument("thing", "is bad")
    assert isinstance(err, ValueError)
    assert (err.argument, err.problem) == ("thing", "is bad")
    assert "thing" in str(err) and "is bad" in str(err)
