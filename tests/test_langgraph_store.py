"""AgentMemoryStore against the behaviour LangGraph's own store tests expect (batch order, get/put/
delete, search with filters and pagination, list_namespaces, vector search, index fields, TTL,
namespace validation), in sync and async form, plus the agentmemory side of the mapping (scope,
cards, cascades, another backend, use from a LangGraph graph)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchItem,
    SearchOp,
)

from agentmemory import AgentMemory, HashingEmbedder, InvalidArgument, MemoryRetentionConfig
from agentmemory.integrations.langgraph import AgentMemoryStore

DIM = 128
NO_EXTRACTION = {"extract_memories": False, "enable_context_summary": False}


class Driver:
    """Calls ``store.name`` (sync) or awaits ``store.aname`` (async), so one test body checks both."""

    def __init__(self, store: AgentMemoryStore, mode: str) -> None:
        self.raw = store
        self.mode = mode

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.raw, ("a" + name) if self.mode == "async" else name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = target(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return call


@pytest.fixture
def memory(clock: Any) -> Iterator[AgentMemory]:
    mem = AgentMemory("memory://", embedder=HashingEmbedder(DIM), clock=clock, memory_extraction_config=NO_EXTRACTION)
    yield mem
    mem.close()


@pytest.fixture(params=["sync", "async"])
def store(request: pytest.FixtureRequest, memory: AgentMemory) -> Driver:
    return Driver(AgentMemoryStore(memory), request.param)


# ---- batches ------------------------------------------------------------------------------------
async def test_batch_order(store: Driver) -> None:
    await store.put(("test", "foo"), "key1", {"data": "value1"})
    await store.put(("test", "bar"), "key2", {"data": "value2"})
    results = await store.batch(
        [
            GetOp(namespace=("test", "foo"), key="key1"),
            PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
            SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(namespace=("test",), key="key3"),
        ]
    )
    assert len(results) == 5
    assert isinstance(results[0], Item) and results[0].value == {"data": "value1"}
    assert results[0].key == "key1" and results[0].namespace == ("test", "foo")
    assert results[1] is None
    assert [i.key for i in results[2]] == ["key1"] and results[2][0].value == {"data": "value1"}
    assert ("test", "foo") in results[3] and ("test", "bar") in results[3]
    assert results[4] is None

    reordered = await store.batch(
        [
            SearchOp(namespace_prefix=("test",), filter=None, limit=5, offset=0),
            GetOp(namespace=("test", "bar"), key="key2"),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=5, offset=0),
            PutOp(namespace=("test",), key="key3", value={"data": "value3"}),
            GetOp(namespace=("test", "foo"), key="key1"),
            GetOp(namespace=("test",), key="key3"),  # reads see the state before the batch's puts
        ]
    )
    assert len(reordered[0]) == 2
    assert reordered[1].value == {"data": "value2"} and reordered[3] is None
    assert reordered[4].value == {"data": "value1"} and reordered[5] is None
    item3 = await store.get(("test",), "key3")
    assert item3 is not None and item3.value == {"data": "value3"}


async def test_batch_puts_last_one_wins_and_none_deletes(store: Driver) -> None:
    results = await store.batch(
        [
            PutOp(("test",), "key1", {"data": "value1"}),
            PutOp(("test",), "key2", {"data": "value2"}),
            PutOp(("test",), "key3", None),
            PutOp(("test",), "key1", {"data": "final"}),
        ]
    )
    assert results == [None, None, None, None]
    assert (await store.get(("test",), "key1")).value == {"data": "final"}
    assert (await store.get(("test",), "key2")).value == {"data": "value2"}
    assert await store.get(("test",), "key3") is None
    await store.batch([PutOp(("test",), "key2", None)])
    assert await store.get(("test",), "key2") is None


async def test_batch_search_and_list_ops(store: Driver) -> None:
    for ns, key, value in [
        (("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
        (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
        (("test", "baz"), "key3", {"data": "value3", "tag": "b"}),
    ]:
        await store.put(ns, key, value)
    results = await store.batch(
        [
            SearchOp(("test",), filter={"tag": "a"}),
            SearchOp(("test",), limit=2),
            SearchOp(("test", "foo")),
            ListNamespacesOp(max_depth=1),
            ListNamespacesOp(match_conditions=(MatchCondition("suffix", ("baz",)),)),
        ]
    )
    assert [i.key for i in results[0]] == ["key1", "key2"]
    assert len(results[1]) == 2
    assert [(i.namespace, i.key) for i in results[2]] == [(("test", "foo"), "key1")]
    assert results[3] == [("test",)]
    assert results[4] == [("test", "baz")]


# ---- basic operations ------------------------------------------------------------------------------
async def test_put_get_update_delete(store: Driver, clock: Any) -> None:
    ns = ("test", "documents")
    await store.put(ns, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = await store.get(ns, "doc1")
    assert item.namespace == ns and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    assert item.created_at == item.updated_at == clock()
    clock.advance(seconds=5)
    await store.put(ns, "doc1", {"title": "Updated", "content": "Hello, LangGraph!"})
    updated = await store.get(ns, "doc1")
    assert updated.value == {"title": "Updated", "content": "Hello, LangGraph!"}
    assert updated.created_at == item.created_at and updated.updated_at > item.updated_at
    assert await store.get(("test", "other_documents"), "doc1") is None
    await store.delete(ns, "doc1")
    assert await store.get(ns, "doc1") is None
    await store.delete(ns, "never-there")  # deleting a missing item is not an error


async def test_values_round_trip_exactly(store: Driver) -> None:
    value = {"nested": {"a": [1, 2.5, None, True], "$odd": "ok"}, "unicode": "héllo ✓", "empty": {}}
    await store.put(("types",), "k", value)
    assert (await store.get(("types",), "k")).value == value
    await store.put(("types",), "empty", {})
    assert (await store.get(("types",), "empty")).value == {}


async def test_bad_input_is_refused_before_writing(store: Driver) -> None:
    for ns in [(), ("langgraph", "x"), ("a.b",), ("",), ("ok", 3)]:
        with pytest.raises(InvalidNamespaceError):
            await store.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        await store.get(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        await store.search(("a.b",))
    with pytest.raises(InvalidArgument) as err:
        await store.put(("test",), "k", {"v": float("nan")})
    assert err.value.argument == "value"
    with pytest.raises(InvalidArgument) as err:
        await store.put(("test",), "k", {"v": 1}, ttl=-1)
    assert err.value.argument == "ttl"
    assert await store.search(("test",)) == []


# ---- search --------------------------------------------------------------------------------------
DOCS = [
    (("test", "docs"), "doc1", {"title": "First Doc", "author": "Alice", "tags": ["important"], "score": 4.5, "meta": {"lang": "en"}}),
    (("test", "docs"), "doc2", {"title": "Second Doc", "author": "Bob", "tags": ["draft"], "score": 3.0, "meta": {"lang": "de"}}),
    (("test", "images"), "img1", {"title": "Image 1", "author": "Alice", "tags": ["final"], "score": 3.5, "meta": {"lang": "en"}}),
]


async def test_search_filters_and_pagination(store: Driver) -> None:
    for ns, key, value in DOCS:
        await store.put(ns, key, value)
    assert [i.key for i in await store.search(("test",))] == ["doc1", "doc2", "img1"]  # insertion order
    assert {i.namespace for i in await store.search(("test", "docs"))} == {("test", "docs")}
    assert [i.key for i in await store.search(("test",), filter={"author": "Alice"})] == ["doc1", "img1"]
    assert [i.key for i in await store.search(("test",), limit=2)] == ["doc1", "doc2"]
    assert [i.key for i in await store.search(("test",), offset=2)] == ["img1"]
    assert [i.key for i in await store.search(("test",), filter={"author": "Alice"}, limit=1, offset=1)] == ["img1"]
    assert await store.search(("nothing",)) == []
    results = await store.search(("test",))
    assert all(isinstance(i, SearchItem) and i.score is None for i in results)


@pytest.mark.parametrize(
    ("flt", "keys"),
    [
        ({"score": {"$gt": 3.4}}, ["doc1", "img1"]),
        ({"score": {"$gt": 3.5}}, ["doc1"]),
        ({"score": {"$lt": 3.0}}, []),
        ({"score": {"$gte": 3.5}}, ["doc1", "img1"]),
        ({"score": {"$lt": 3.5}}, ["doc2"]),
        ({"score": {"$lte": 3.5}}, ["doc2", "img1"]),
        ({"author": {"$ne": "Alice"}}, ["doc2"]),
        ({"author": {"$eq": "Bob"}}, ["doc2"]),
        ({"meta": {"lang": "en"}}, ["doc1", "img1"]),
        ({"tags": ["draft"]}, ["doc2"]),
        ({"score": {"$gte": 3.0, "$lt": 4.0}, "author": "Alice"}, ["img1"]),
        ({"missing": {"$ne": "x"}}, ["doc1", "doc2", "img1"]),
        ({"score": 4.5}, ["doc1"]),
    ],
)
async def test_filter_operators_match_langgraph(store: Driver, flt: dict[str, Any], keys: list[str]) -> None:
    for ns, key, value in DOCS:
        await store.put(ns, key, value)
    assert [i.key for i in await store.search(("test",), filter=flt)] == keys


async def test_vector_search_ranks_updates_and_skips_unindexed(store: Driver) -> None:
    for key, text in [("doc1", "short text"), ("doc2", "longer text document"), ("doc3", "longest text document here"),
                      ("doc4", "birds sing at dawn")]:
        await store.put(("test",), key, {"text": text})
    results = await store.search(("test",), query="longer document")
    assert results[0].key == "doc2"
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    first = results[0].score
    await store.put(("test",), "doc2", {"text": "new text about dogs"})
    after = next(r.score for r in await store.search(("test",), query="longer document") if r.key == "doc2")
    assert after < first
    assert (await store.search(("test",), query="new text about dogs"))[0].key == "doc2"
    await store.put(("test",), "doc5", {"text": "new text about dogs"}, index=False)
    assert "doc5" not in [r.key for r in await store.search(("test",), query="new text about dogs", limit=3)]
    everything = await store.search(("test",), query="new text about dogs", limit=10)
    assert everything[-1].key == "doc5" and everything[-1].score is None  # unindexed ones come last
    assert "doc5" in [r.key for r in await store.search(("test",))]


async def test_vector_search_with_filters_and_pages(store: Driver) -> None:
    for key, value in [("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
                       ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
                       ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
                       ("doc4", {"text": "blue car", "color": "blue", "score": 3.5})]:
        await store.put(("test",), key, value)
    results = await store.search(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results] == ["doc1", "doc2"]
    assert (await store.search(("test",), query="car", filter={"color": "red"}))[0].key == "doc2"
    results = await store.search(("test",), query="blue car", filter={"score": {"$gt": 3.2}})
    assert results[0].key == "doc4" and {r.key for r in results} == {"doc1", "doc3", "doc4"}
    page1 = await store.search(("test",), query="apple car", limit=2)
    page2 = await store.search(("test",), query="apple car", limit=2, offset=2)
    assert len(page1) == len(page2) == 2 and not {r.key for r in page1} & {r.key for r in page2}
    assert page1[-1].score >= page2[0].score


async def test_scores_are_cosine_similarity(memory: AgentMemory, store: Driver) -> None:
    await store.put(("test",), "doc", {"key0": "aaa"}, index=["key0", "key1"])
    for query in ("aaa", "bbb", "poisson"):
        results = await store.search((), query=query)
        expected = float(np.dot(memory.embedder.embed([query], is_query=True)[0], memory.embedder.embed(["aaa"])[0]))
        assert len(results) == 1 and results[0].score == pytest.approx(expected, abs=1e-4)
    for query in ("", None):  # an empty query is a plain filter search
        assert [r.score for r in await store.search(("test",), query=query)] == [None]


async def test_index_fields_from_config_and_per_put(memory: AgentMemory) -> None:
    store = AgentMemoryStore(memory, index={"dims": DIM, "fields": ["key0", "key1"]})
    store.put(("test",), "doc1", {"key0": "zebra", "key1": "xylophone", "key2": "quartz"})
    store.put(("test",), "doc2", {"key0": "walrus", "key1": "umbrella", "key2": "zebra"})
    assert store.search(("test",), query="zebra")[0].key == "doc1"  # doc2's zebra is not indexed
    store.put(("test",), "doc3", {"key0": "nothing", "key2": "quartz quartz"}, index=["key2"])
    assert store.search(("test",), query="quartz")[0].key == "doc3"
    # the indexed text is the record's content, so agentmemory shows it, not JSON
    rows = {r.metadata["langgraph"]["key"]: r.content for r in memory.list_memories()}
    assert rows["doc1"] == "zebra\nxylophone" and rows["doc3"] == "quartz quartz"
    with pytest.raises(InvalidArgument):
        AgentMemoryStore(memory, index={"dims": DIM + 1, "fields": ["a"]})
    with pytest.raises(InvalidArgument):
        AgentMemoryStore(memory, index={"dims": DIM, "embed": lambda texts: []})


# ---- namespaces -------------------------------------------------------------------------------------
async def test_list_namespaces(store: Driver) -> None:
    namespaces = [
        ("test", "documents", "public"), ("test", "documents", "private"),
        ("test", "images", "public"), ("test", "images", "private"),
        ("prod", "documents", "public"), ("prod", "documents", "private"),
    ]
    for ns in namespaces:
        await store.put(ns, "dummy", {"content": "dummy"})
    assert await store.list_namespaces() == sorted(namespaces)
    assert await store.list_namespaces(prefix=("test",)) == sorted(n for n in namespaces if n[0] == "test")
    assert await store.list_namespaces(suffix=("public",)) == sorted(n for n in namespaces if n[-1] == "public")
    assert await store.list_namespaces(prefix=("test", "*", "public")) == [("test", "documents", "public"), ("test", "images", "public")]
    assert await store.list_namespaces(prefix=("test",), suffix=("private",)) == [("test", "documents", "private"), ("test", "images", "private")]
    assert await store.list_namespaces(max_depth=2) == [("prod", "documents"), ("test", "documents"), ("test", "images")]
    assert await store.list_namespaces(limit=3) == sorted(namespaces)[:3]
    assert await store.list_namespaces(limit=3, offset=3) == sorted(namespaces)[3:]
    for ns in namespaces:
        await store.delete(ns, "dummy")
    assert await store.list_namespaces() == []


# ---- TTL ----------------------------------------------------------------------------------------------
async def test_ttl_expiry_refresh_and_sweep(memory: AgentMemory, clock: Any) -> None:
    for mode in ("sync", "async"):
        store = Driver(AgentMemoryStore(memory, ttl={"default_ttl": 10, "refresh_on_read": True}), mode)
        ns = (mode,)
        await store.put(ns, "default", {"v": 1})  # 10 minutes
        await store.put(ns, "short", {"v": 2}, ttl=1)
        await store.put(ns, "forever", {"v": 3}, ttl=None)
        clock.advance(minutes=2)
        assert await store.get(ns, "short") is None  # expired: invisible at once, before any sweep
        assert [i.key for i in await store.search(ns)] == ["default", "forever"]
        clock.advance(minutes=7)  # 9 of 10 minutes: a read refreshes the TTL
        assert await store.get(ns, "default") is not None
        clock.advance(minutes=7)
        assert await store.get(ns, "default", refresh_ttl=False) is not None  # refreshed at minute 9
        clock.advance(minutes=4)
        assert await store.get(ns, "default") is None
        assert ns in await store.list_namespaces()  # "forever" keeps the namespace
        assert await store.sweep_ttl() == 2
        assert [i.key for i in await store.search(ns)] == ["forever"]


async def test_search_refreshes_ttl_unless_told_not_to(memory: AgentMemory, clock: Any) -> None:
    store = AgentMemoryStore(memory)
    store.put(("s",), "a", {"v": 1}, ttl=5)
    store.put(("s",), "b", {"v": 2}, ttl=5)
    clock.advance(minutes=4)
    store.search(("s",), filter={"v": 1})
    await store.asearch(("s",), filter={"v": 2}, refresh_ttl=False)
    clock.advance(minutes=2)
    assert [i.key for i in store.search(("s",))] == ["a"]
    clock.advance(minutes=6)
    assert store.search(("s",)) == [] and store.list_namespaces() == []


def test_ttl_is_clamped_by_retention_and_put_after_expiry_recreates(clock: Any) -> None:
    memory = AgentMemory("memory://", embedder=HashingEmbedder(DIM), clock=clock, retention=MemoryRetentionConfig(max_ttl_days=1))
    store = AgentMemoryStore(memory)
    store.put(("r",), "k", {"v": 1}, ttl=10 * 24 * 60)
    clock.advance(days=1, seconds=1)
    assert store.get(("r",), "k") is None
    store.put(("r",), "k", {"v": 2})
    item = store.get(("r",), "k")
    assert item.value == {"v": 2} and item.created_at == clock()
    memory.close()


def test_ttl_sweeper_thread(memory: AgentMemory, clock: Any) -> None:
    store = AgentMemoryStore(memory, ttl={"sweep_interval_minutes": 0.001})
    store.put(("sw",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=2)
    store.start_ttl_sweeper()
    try:
        import time

        deadline = time.monotonic() + 20
        while memory.store.count(_all_filter()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.store.count(_all_filter()) == 0
    finally:
        assert store.stop_ttl_sweeper(timeout=5)


def _all_filter() -> Any:
    from agentmemory.spi import RecordFilter

    return RecordFilter(metadata_filter={"langgraph": {"item": True}})


# ---- the agentmemory side of the mapping --------------------------------------------------------------
def test_namespace_labels_map_onto_user_scope(memory: AgentMemory) -> None:
    store = AgentMemoryStore(memory, user_id_label=1, agent_id="assistant")
    store.put(("memories", "alice"), "m1", {"content": "Alice loves spicy ramen"}, index=["content"])
    store.put(("memories", "bob"), "m1", {"content": "Bob loves plain rice"}, index=["content"])
    rec = {r.user_id: r for r in memory.list_memories()}
    assert set(rec) == {"alice", "bob"} and rec["alice"].agent_id == "assistant"
    assert rec["alice"].content == "Alice loves spicy ramen" and rec["alice"].record_type.value == "memory"
    # agentmemory's own search is scoped by user and finds the LangGraph item
    hits = memory.search("ramen", user_id="alice", agent_id="assistant")
    assert [h.content for h in hits] == ["Alice loves spicy ramen"]
    assert all(h.record.user_id == "bob" for h in memory.search("ramen", user_id="bob"))
    # a prefix that fixes the user label only sees that user; a shorter one sees both
    assert [i.value["content"] for i in store.search(("memories", "alice"), query="loves")] == ["Alice loves spicy ramen"]
    assert len(store.search(("memories",), query="loves")) == 2
    # right to be forgotten: the cascade removes the user's LangGraph items too
    memory.delete_user("alice")
    assert store.get(("memories", "alice"), "m1") is None
    assert store.get(("memories", "bob"), "m1") is not None


def test_fixed_scopes_are_isolated(memory: AgentMemory) -> None:
    alice = AgentMemoryStore(memory, user_id="alice")
    bob = AgentMemoryStore(memory, user_id="bob")
    alice.put(("prefs",), "food", {"likes": "ramen"})
    bob.put(("prefs",), "food", {"likes": "rice"})
    assert alice.get(("prefs",), "food").value == {"likes": "ramen"}
    assert bob.get(("prefs",), "food").value == {"likes": "rice"}
    assert [i.value for i in bob.search(("prefs",))] == [{"likes": "rice"}]
    assert bob.list_namespaces() == [("prefs",)]
    bob.delete(("prefs",), "food")
    assert alice.get(("prefs",), "food") is not None


def test_items_reach_the_users_context_card(memory: AgentMemory) -> None:
    store = AgentMemoryStore(memory, user_id_label=1, index={"fields": ["content"]})
    store.put(("memories", "maya"), "role", {"content": "Maya owns the nightly invoice reconciliation workflow"})
    thread = memory.create_thread("card", user_id="maya")
    thread.add_messages([{"role": "user", "content": "Which workflow do I own?"}])
    card = thread.get_context_card(max_relevant_results=3)
    assert "Maya owns the nightly invoice reconciliation workflow" in card.content


def test_runs_on_another_backend_and_persists(tmp_path: Path) -> None:
    pytest.importorskip("agentmemory_duckdb")
    uri = f"duckdb://{tmp_path}/store.duckdb"
    memory = AgentMemory(uri, embedder=HashingEmbedder(DIM))
    store = AgentMemoryStore(memory, user_id_label=1)
    store.put(("memories", "u1"), "a", {"text": "red apple", "n": 1})
    store.put(("memories", "u1"), "b", {"text": "blue car", "n": 2}, ttl=60)
    store.put(("other", "u2"), "c", {"text": "green apple", "n": 3})
    memory.close()
    memory = AgentMemory(uri, embedder=HashingEmbedder(DIM))
    store = AgentMemoryStore(memory, user_id_label=1)
    assert store.get(("memories", "u1"), "a").value == {"text": "red apple", "n": 1}
    assert [i.key for i in store.search(("memories",), query="car")][0] == "b"
    assert [i.key for i in store.search((), filter={"n": {"$gte": 2}})] == ["b", "c"]
    assert store.list_namespaces() == [("memories", "u1"), ("other", "u2")]
    memory.close()


def test_a_langgraph_graph_uses_it_as_its_store(memory: AgentMemory) -> None:
    class State(TypedDict):
        user: str
        text: str
        found: list[str]

    def remember(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        runtime.store.put(("memories", state["user"]), "fact-1", {"content": state["text"]})
        return {}

    def recall(state: State, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        items = runtime.store.search(("memories", state["user"]), query="what food")
        return {"found": [i.value["content"] for i in items]}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=AgentMemoryStore(memory, user_id_label=1, index={"fields": ["content"]}))
    out = graph.invoke({"user": "ann", "text": "Ann's favourite food is dumplings", "found": []})
    assert out["found"] == ["Ann's favourite food is dumplings"]
    assert memory.list_memories(user_id="ann")[0].content == "Ann's favourite food is dumplings"
