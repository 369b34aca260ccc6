"""One implementation, two drivers: the sync API and the ``*_async`` twins must behave the same.

The same operation sequence runs on two fresh clients, one through the sync methods, one
through the async twins; every answer and the final store content must be identical. The
drivers themselves (``run_sync``/``run_async``, ``Gather``) are checked directly too.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

import pytest

from agentmemory import AgentMemory, NotFound, Thread
from agentmemory.effects import Call, Gather, run_async, run_sync

CLIENT_OPERATIONS = [
    "create_thread", "get_thread", "update_thread", "delete_thread", "list_threads",
    "add_user", "add_agent", "list_users", "list_agents", "delete_user", "delete_agent",
    "add_memory", "get_memory", "update_memory", "delete_memory", "list_memories", "list_messages",
    "link_records", "update_record_link", "delete_record_link", "list_record_links",
    "search", "purge_expired", "close",
]
THREAD_OPERATIONS = [
    "add_messages", "get_messages", "get_message", "update_message", "delete_message",
    "add_memory", "update_memory", "delete_memory", "search",
]


@pytest.mark.parametrize(("cls", "name"), [(AgentMemory, n) for n in CLIENT_OPERATIONS]
                         + [(Thread, n) for n in THREAD_OPERATIONS])
def test_every_operation_has_an_async_twin_with_the_same_signature(cls, name):
    sync = getattr(cls, name)
    twin = getattr(cls, name + "_async")
    assert inspect.iscoroutinefunction(twin)
    a, b = inspect.signature(sync).parameters, inspect.signature(twin).parameters
    assert list(a) == list(b)
    assert all(a[p].default == b[p].default and a[p].kind == b[p].kind for p in a)


def comparable(value: Any) -> Any:
    """Answers in a form that can be compared across clients (thread handles by their ids)."""
    if hasattr(value, "raw") and isinstance(value.raw, Thread):
        value = value.raw
    if isinstance(value, Thread):
        return ("thread", value.thread_id, value.user_id, value.agent_id, value.metadata)
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump()
    return value


async def scenario(mem, clock) -> list[Any]:
    """A sequence touching every kind of operation; returns every answer."""
    out: list[Any] = []
    t = await mem.create_thread("t1", user_id="u1", agent_id="a1", metadata={"m": 1}, memory_extraction_window=3)
    out.append(t)
    out.append(await t.add_messages([
        {"role": "user", "content": "I moved to Lisbon last year", "id": "msg1"},
        {"role": "assistant", "content": "Lisbon is lovely in spring", "id": "msg2"},
        {"role": "user", "content": "I prefer window seats on flights", "id": "msg3"},
    ]))
    out.append(await t.get_messages(1, -1))
    out.append(await t.update_message("msg2", content="Lisbon is lovely all year"))
    out.append(await t.delete_message("msg3"))
    out.append(await mem.add_user("u1", "Ana, a designer"))
    out.append(await mem.add_agent("a1", "travel helper"))
    out.append(await t.add_memory("User lives in Lisbon", memory_id="home", memory_type="fact"))
    out.append(await mem.add_memory("User lived in Porto", user_id="u1", memory_id="old-home", ttl_days=10))
    out.append(await mem.add_memory("User prefers window seats", user_id="u1", memory_id="seat",
                                    memory_type="preference", metadata={"tags": ["travel", "flight"]}))
    out.append(await mem.link_records("home", "old-home", "supersedes", link_id="l1"))
    out.append(await mem.link_records("seat", "home", "supports", link_id="l2"))
    out.append(await mem.update_record_link("l2", link_type="refines"))
    out.append(await mem.update_memory("seat", metadata={"tags": ["travel"]}))
    out.append(await mem.list_memories(user_id="u1"))
    out.append(await mem.list_memories(metadata_filter={"tags": {"$array_contains": "travel"}}))
    out.append(await mem.search("where does the user live", user_id="u1", num_hops=2))
    out.append(await t.search("window seat", exact_thread_match=False, strategy="hybrid", token_budget=200))
    out.append(await mem.search("Lisbon", user_id="u1", strategy="keyword", include_invalid_results=False))
    out.append(await mem.update_thread("t1", extract_memories=False, memory_extraction_window=None))
    out.append(await mem.list_threads(user_id="u1"))
    out.append(await mem.list_record_links())
    out.append(await mem.delete_record_link("l2"))
    try:
        await mem.get_memory("missing")
    except NotFound as exc:
        out.append(("NotFound", str(exc)))
    clock.advance(days=11)
    out.append(await mem.purge_expired())
    out.append(await mem.delete_memory("seat"))
    out.append(await mem.list_users())
    out.append(await mem.list_agents())
    out.append(await mem.list_messages(thread_id="t1"))
    out.append(await mem.delete_thread("t1"))
    out.append(await mem.delete_user("u1"))
    return [comparable(x) for x in out]


async def test_sync_and_async_drivers_give_identical_results(make_client, clock, twin_of, snapshot):
    start = clock.now
    sync_client = make_client()
    sync_answers = await scenario(twin_of(sync_client, "sync"), clock)
    clock.now = start
    async_client = make_client()
    async_answers = await scenario(twin_of(async_client, "async"), clock)
    assert len(sync_answers) == len(async_answers) == 31
    for i, (a, b) in enumerate(zip(sync_answers, async_answers)):
        assert a == b, f"answer {i} differs"
    assert snapshot(sync_client) == snapshot(async_client)
    # the scenario is not vacuous: searches found linked records, purge removed the expired one
    assert sync_answers[1] == ["msg1", "msg2", "msg3"]
    assert any(r["linked_results"] for r in sync_answers[16])
    assert sync_answers[24] == 1 and sync_answers[29] == 4


def test_run_sync_and_run_async_drive_the_same_generator():
    class Target:
        def __init__(self) -> None:
            self.log: list[str] = []

        def double(self, x: int) -> int:
            self.log.append("sync")
            return 2 * x

        async def adouble(self, x: int) -> int:
            self.log.append("async")
            return 2 * x

    def op(target: Target, x: int):
        a = yield Call(target, "double", (x,))
        b = yield Call(target, "double", (), {"x": a})
        return a + b

    target = Target()
    assert run_sync(op(target, 3)) == 18
    assert asyncio.run(run_async(op(target, 3))) == 18
    assert target.log == ["sync", "sync", "async", "async"]


def test_errors_propagate_through_both_drivers():
    class Target:
        def fail(self) -> None:
            raise NotFound("memory", "x")

        async def afail(self) -> None:
            raise NotFound("memory", "x")

    def op(target: Target):
        yield Call(target, "fail")
        return "unreachable"

    with pytest.raises(NotFound):
        run_sync(op(Target()))
    with pytest.raises(NotFound):
        asyncio.run(run_async(op(Target())))


def test_gather_keeps_order_and_limits_concurrency():
    class Slow:
        def __init__(self) -> None:
            self.active = 0
            self.peak = 0
            self.lock = threading.Lock()

        def _enter(self) -> None:
            with self.lock:
                self.active += 1
                self.peak = max(self.peak, self.active)

        def _leave(self) -> None:
            with self.lock:
                self.active -= 1

        def work(self, i: int) -> int:
            self._enter()
            time.sleep(0.02)
            self._leave()
            return i * i

        async def awork(self, i: int) -> int:
            self._enter()
            await asyncio.sleep(0.02)
            self._leave()
            return i * i

    def one(target: Slow, i: int):
        value = yield Call(target, "work", (i,))
        return value

    def many(target: Slow, limit: int):
        results = yield Gather(tuple(one(target, i) for i in range(8)), limit=limit)
        return results

    for limit in (1, 3):
        s = Slow()
        assert run_sync(many(s, limit)) == [i * i for i in range(8)]
        assert 1 <= s.peak <= limit
        a = Slow()
        assert asyncio.run(run_async(many(a, limit))) == [i * i for i in range(8)]
        assert a.peak == limit  # the async driver runs exactly ``limit`` at once


class _Where:
    """Records the thread each call ran on; ``fail`` names the calls that raise."""

    def __init__(self, fail: tuple[int, ...] = ()) -> None:
        self.names: list[str] = []
        self.started: list[int] = []
        self.ended: list[int] = []
        self.fail = fail

    def work(self, i: int) -> int:
        self.names.append(threading.current_thread().name)
        self.started.append(i)
        time.sleep(0.002)
        self.ended.append(i)
        if i in self.fail:
            raise ValueError(f"op {i}")
        return i


def _call(target: Any, i: int):
    return (yield Call(target, "work", (i,)))


def _gather(target: Any, n: int, limit: int = 4):
    return (yield Gather(tuple(_call(target, i) for i in range(n)), limit=limit))


def test_sync_gathers_reuse_one_pool_of_threads():
    """A card gathers on every call: its searches must reuse the driver's worker threads, not
    start new ones each time (a thread start cost more than an in-process store's search)."""
    from agentmemory.effects import POOL_WORKERS

    where = _Where()
    for _ in range(25):
        assert run_sync(_gather(where, 4)) == [0, 1, 2, 3]
    assert len(where.names) == 100
    assert 1 < len(set(where.names)) <= POOL_WORKERS


def test_a_gather_inside_a_gather_runs_without_waiting_for_the_pool():
    """Sub-operations that gather again run their own ops in their worker, one by one: more
    nested work than the pool has threads still finishes."""
    from agentmemory.effects import POOL_WORKERS

    where = _Where()

    def outer():
        return (yield Gather(tuple(_gather(where, 3) for _ in range(POOL_WORKERS * 2)), limit=POOL_WORKERS * 2))

    assert run_sync(outer()) == [[0, 1, 2]] * (POOL_WORKERS * 2)


def test_a_failed_gather_raises_the_first_failure_once_no_op_runs():
    """The first failure in op order is raised, and only once no op is still running: nothing
    touches the store behind the caller's back after the call returned."""
    where = _Where(fail=(2, 5))
    with pytest.raises(ValueError, match="op 2"):
        run_sync(_gather(where, 8, limit=3))
    ended = list(where.ended)
    time.sleep(0.02)
    assert sorted(where.started) == sorted(ended) == sorted(where.ended)
