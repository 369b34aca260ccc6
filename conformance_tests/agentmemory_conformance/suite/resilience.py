"""Faults and concurrency: a failure in the middle of a backend's write leaves nothing behind,
cancelled async calls leave the store usable, and concurrent writers (threads, asyncio tasks)
lose and duplicate nothing (``CONCURRENT_WRITERS``)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from agentmemory.errors import AgentMemoryError, Conflict
from agentmemory.records import LinkType, RecordStatus
from agentmemory.spi import Capability, MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..faults import SECTIONS, FaultPlan, FaultyStore, InjectedFault
from ..support import E1, E2, E3, Api, clause, close_loop, ids, link, loop_for, new, rec, requires, snapshot, vec


def _seed(api: Api) -> None:
    api.write(
        WriteBatch(
            add=[new(rec(r), v) for r, v in (("a", E1), ("b", E2), ("c", E3), ("e", vec(1, 1)))],
            add_links=[link("l1", "a", "b"), link("l2", "b", "c")],
        )
    )


def _big_batch() -> WriteBatch:
    return WriteBatch(
        add=[new(rec(f"n{i}", content=f"new {i}"), vec(1, i)) for i in range(4)],
        patch=[RecordPatch("a", content="patched a", vector=E3), RecordPatch("b", status=RecordStatus.INVALID, metadata={"x": 1})],
        delete_links=["l1", "l2"],
        add_links=[link("l3", "n0", "n1", LinkType.SUPERSEDES), link("l4", "a", "c")],
        delete=["e", "n3"],
    )


class FaultTests:
    """Fault injection through ``FaultyStore``."""

    @clause("9.atomic", "spi.batch-order")
    @pytest.mark.parametrize("section", SECTIONS)
    @pytest.mark.parametrize("position", ["first", "last"])
    def test_fault_mid_batch_leaves_no_partial_write(self, api: Api, store: MemoryStore, section: str, position: str) -> None:
        """An exception raised while the backend is inside a batch (at the first or last item of
        any section) leaves the store exactly as before, and the store stays usable.

        Troubleshooting: apply the batch in one transaction (or on a copy) and roll back on any
        exception, not only on the backend's own errors.
        """
        _seed(api)
        before = snapshot(store)
        batch = _big_batch()
        fail_at = 0 if position == "first" else len(getattr(batch, section)) - 1
        faulty = FaultyStore(store, FaultPlan(on_call=1, where="mid", section=section, fail_at=fail_at))  # type: ignore[arg-type]
        faulty.open(dimension=store.dimension)
        try:
            with pytest.raises(AgentMemoryError):
                Api(faulty, api.mode).write(batch)
        finally:
            close_loop(faulty)
        assert snapshot(store) == before, f"a fault in {section}[{fail_at}] left a partial write"
        added = api.write(_big_batch())
        assert ids(added) == ["n0", "n1", "n2", "n3"]
        assert ids(api.query()) == ["a", "b", "c", "n0", "n1", "n2"]
        assert ids(api.links()) == ["l3", "l4"]

    @clause("9.atomic")
    def test_fault_before_and_after_the_write(self, api: Api, store: MemoryStore) -> None:
        """A fault before the write changes nothing; one after it (an uncertain write) leaves
        the whole batch applied, never a part.

        Troubleshooting: a failure after your write returned must not undo it; one before it
        must leave nothing.
        """
        _seed(api)
        before = snapshot(store)
        faulty = FaultyStore(store, FaultPlan(on_call=1, where="before"))
        faulty.open(dimension=store.dimension)
        try:
            with pytest.raises(InjectedFault):
                Api(faulty, api.mode).write(_big_batch())
            assert snapshot(store) == before
            faulty.plan, faulty.writes = FaultPlan(on_call=1, where="after"), 0
            with pytest.raises(InjectedFault):
                Api(faulty, api.mode).write(_big_batch())
        finally:
            close_loop(faulty)
        assert ids(api.query()) == ["a", "b", "c", "n0", "n1", "n2"]
        assert ids(api.links()) == ["l3", "l4"]

    @clause("9.atomic", "2.links")
    def test_client_operation_is_one_batch(self, memory_factory: Callable[..., Any]) -> None:
        """A client write that is several things at once (a memory, a lifecycle link and the
        target's invalidation) lands whole or not at all when the backend fails inside it.

        Troubleshooting: apply each ``WriteBatch`` in one transaction; never commit its
        sections separately.
        """
        mem = memory_factory()
        old = mem.add_memory("old address", user_id="u")
        faulty = FaultyStore(mem.store, FaultPlan(on_call=1, where="mid", section="patch", fail_at=0))
        from agentmemory import AgentMemory

        client = AgentMemory(store=faulty, embedder=mem.embedder, clock=mem.clock)
        with pytest.raises(AgentMemoryError):
            client.add_memory("new address", user_id="u", memory_id="newer", memory_id_to_link=old, link_type="supersedes")
        assert mem.get_memory(old).status is RecordStatus.VALID
        assert [r.record_id for r in mem.list_memories(user_id="u")] == [old]
        assert mem.list_record_links() == []

    @clause("9.atomic", "spi.async-parity")
    def test_cancelled_async_write_leaves_whole_or_nothing(self, store: MemoryStore) -> None:
        """Cancelling an in-flight ``awrite`` leaves the batch either fully applied or absent,
        and the store usable.

        Troubleshooting: a cancelled ``awrite`` must roll back or finish its transaction,
        never leave half of it.
        """
        api = Api(store, "sync")
        _seed(api)
        loop = loop_for(store)

        async def cancel_soon() -> None:
            task = asyncio.ensure_future(store.awrite(_big_batch()))
            await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, AgentMemoryError):
                pass

        loop.run_until_complete(cancel_soon())
        loop.run_until_complete(asyncio.sleep(0.05))
        present = set(ids(api.query()))
        assert present in ({"a", "b", "c", "e"}, {"a", "b", "c", "n0", "n1", "n2"}), f"partial batch after cancellation: {sorted(present)}"
        api.write(WriteBatch(add=[new(rec("after-cancel"))]))
        assert "after-cancel" in ids(api.query())


class ConcurrencyTests:
    """Concurrent writers from threads and asyncio tasks (``CONCURRENT_WRITERS``)."""

    @clause("9.concurrency")
    @requires(Capability.CONCURRENT_WRITERS)
    def test_threads_lose_and_duplicate_nothing(self, store: MemoryStore) -> None:
        """8 threads × 15 batches of 2 records: every record lands once, seq values are
        unique, and each pair shows up together to concurrent readers.

        Troubleshooting: serialise writers (a lock or the database's transactions) around the
        whole read-modify-write of a batch.
        """
        errors: list[BaseException] = []
        torn: list[str] = []
        stop = threading.Event()

        def writer(t: int) -> None:
            try:
                for i in range(15):
                    store.write(WriteBatch(add=[new(rec(f"w{t}-{i}-a"), vec(1, t, i)), new(rec(f"w{t}-{i}-b"), vec(1, t, -i))]))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        def reader() -> None:
            while not stop.is_set():
                present = set(ids(store.query(RecordFilter())))
                for rid in present:
                    twin = rid[:-1] + ("b" if rid.endswith("a") else "a")
                    if twin not in present:
                        torn.append(rid)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
        watcher = threading.Thread(target=reader)
        watcher.start()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        stop.set()
        watcher.join()
        assert not errors, errors[:3]
        rows = store.query(RecordFilter())
        assert len(rows) == 8 * 15 * 2, f"{8 * 15 * 2 - len(rows)} records lost"
        assert len({r.seq for r in rows}) == len(rows), "duplicate seq values"
        assert store.count(RecordFilter()) == len(rows)
        assert not torn, f"readers saw half a batch: {torn[:5]}"

    @clause("9.concurrency", "spi.index-tier", "spi.delete")
    @requires(Capability.CONCURRENT_WRITERS)
    def test_deletes_while_indexes_build(self, store: MemoryStore) -> None:
        """Records deleted one by one right after the store was filled past its lowest declared
        index threshold (while a backend may be building its first indexes in the background)
        and while ``settle`` builds them are gone from vector and keyword search, before
        ``settle``, during it and after it; every record still there is found.

        Troubleshooting: an index built from a copy of the records must learn of the deletes
        committed after the copy was taken and before it became current, also when it is the
        store's first index (nothing to mark stale yet) and when no later build follows.
        """
        thresholds = store.index_thresholds()
        lowest = min((t for t in thresholds.values() if t <= 5_000), default=0)
        rows = max(320, lowest + 200)
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        all_ids = [f"d{i:05d}" for i in range(rows)]
        deleted: list[str] = []

        def check(when: str) -> None:
            gone = set(deleted)
            live = set(all_ids) - gone
            found = {"vector": ids(store.vector_search(vec(1, 3, 2), RecordFilter(), rows))}
            if keyword:
                found["keyword"] = ids(store.keyword_search("harbour ledger", RecordFilter(), rows))
            for kind, got in found.items():
                back = sorted(set(got) & gone)
                assert not back, f"{kind} search {when} returned {len(back)} deleted records: {back[:5]}"
                assert set(got) == live, f"{kind} search {when} misses {len(live - set(got))} live records"

        store.write(WriteBatch(add=[new(rec(rid, content=f"harbour ledger entry {i}"), vec(1, i % 17, i % 5)) for i, rid in enumerate(all_ids)]))
        for rid in all_ids[0:rows // 2:3]:  # no settle: a background build may be running
            store.write(WriteBatch(delete=[rid]))
            deleted.append(rid)
        for _ in range(20):  # whatever a background build made current meanwhile
            check("after deletes (not settled)")
            time.sleep(0.05)
        errors: list[BaseException] = []
        done = threading.Event()

        def deleter() -> None:
            try:
                for rid in all_ids[rows // 2::3]:
                    if done.is_set() and len(deleted) >= 8:
                        return
                    store.write(WriteBatch(delete=[rid]))
                    deleted.append(rid)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        thread = threading.Thread(target=deleter)
        thread.start()
        try:
            store.settle()
        finally:
            done.set()
            thread.join()
        assert not errors, errors[:3]
        check("after deletes during settle")
        store.settle()
        check("settled")

    @clause("9.concurrency")
    @requires(Capability.CONCURRENT_WRITERS)
    def test_racing_adds_of_one_id_and_concurrent_patches(self, store: MemoryStore) -> None:
        """Threads adding the same id: exactly one wins, the others get ``Conflict``. Threads
        patching their own records: every last patch sticks (no lost update).

        Troubleshooting: the id check and the insert must be atomic (a unique key, not
        check-then-insert).
        """
        outcomes: list[str] = []
        lock = threading.Lock()

        def add_same() -> None:
            try:
                store.write(WriteBatch(add=[new(rec("contested"))]))
                result = "ok"
            except Conflict:
                result = "conflict"
            except BaseException as exc:  # noqa: BLE001
                result = repr(exc)
            with lock:
                outcomes.append(result)

        threads = [threading.Thread(target=add_same) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert sorted(outcomes) == ["conflict"] * 7 + ["ok"], outcomes
        assert ids(store.query(RecordFilter(record_ids=("contested",)))) == ["contested"]

        store.write(WriteBatch(add=[new(rec(f"p{t}")) for t in range(6)]))

        def patcher(t: int) -> None:
            for i in range(20):
                store.write(WriteBatch(patch=[RecordPatch(f"p{t}", content=f"v{i}", metadata={"i": i})]))

        threads = [threading.Thread(target=patcher, args=(t,)) for t in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        for r in store.query(RecordFilter(record_ids=tuple(f"p{t}" for t in range(6)))):
            assert (r.content, r.metadata) == ("v19", {"i": 19}), f"lost update on {r.record_id}: {r.content} {r.metadata}"

    @clause("9.concurrency", "spi.async-parity")
    @requires(Capability.CONCURRENT_WRITERS)
    def test_asyncio_tasks_lose_and_duplicate_nothing(self, store: MemoryStore) -> None:
        """60 concurrent ``awrite`` tasks on one loop, mixed with ``aquery``: all land once.

        Troubleshooting: serialise or isolate concurrent async writes; assign ``seq`` inside
        the transaction.
        """

        async def run() -> None:
            writes = [store.awrite(WriteBatch(add=[new(rec(f"t{i:02d}"), vec(1, i))])) for i in range(60)]
            reads = [store.aquery(RecordFilter()) for _ in range(10)]
            results = await asyncio.gather(*writes, *reads)
            seqs = [r[0].seq for r in results[:60]]
            assert len(set(seqs)) == 60

        loop_for(store).run_until_complete(run())
        rows = store.query(RecordFilter())
        assert sorted(ids(rows)) == [f"t{i:02d}" for i in range(60)]
        assert len({r.seq for r in rows}) == 60
