"""Fault injection: make a write fail part-way, inside the backend, and check nothing of it
stays (the zarr ``WrapperStore`` / ``LatencyStore`` idea, turned into failures).

``FaultySequence`` is a batch section that raises when the backend reaches a chosen item (after
the SPI's own validation pass), so the exception fires in the middle of the backend's write.
``FaultyStore`` wraps any store and applies a ``FaultPlan`` to its writes: before delegating,
mid-batch, or after the inner write succeeded (the "uncertain write" a caller must survive).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar, overload

import numpy as np

from agentmemory.errors import TransientBackendError
from agentmemory.records import Link, Record
from agentmemory.spi import Capability, Hit, MemoryStore, Order, RecordFilter, SchemaPolicy, StoreInfo, WriteBatch

T = TypeVar("T")
Section = Literal["add", "patch", "add_links", "delete_links", "delete"]
SECTIONS: tuple[Section, ...] = ("add", "patch", "add_links", "delete_links", "delete")


class InjectedFault(TransientBackendError):
    """The failure the suite injects (a ``TransientBackendError``, as a dropped connection)."""


class FaultySequence(Sequence[T]):
    """A batch section whose item ``fail_at`` raises ``InjectedFault`` once the first full pass
    over the items (the SPI's validation) is done: the fault fires inside the backend."""

    def __init__(self, items: Sequence[T], fail_at: int) -> None:
        self._items = list(items)
        self._fail_at = fail_at
        self._passes = 0
        self.fired = False

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._items)))]
        if index < 0:
            index += len(self._items)
        if self._passes >= 1 and index == self._fail_at:
            self.fired = True
            raise InjectedFault(f"injected fault at item {index} of a batch section")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        armed = self._passes >= 1
        self._passes += 1
        for i, item in enumerate(self._items):
            if armed and i == self._fail_at:
                self.fired = True
                raise InjectedFault(f"injected fault at item {i} of a batch section")
            yield item


def arm(batch: WriteBatch, section: Section, fail_at: int) -> WriteBatch:
    """``batch`` with one section replaced by a ``FaultySequence`` failing at ``fail_at``."""
    items = getattr(batch, section)
    if not 0 <= fail_at < len(items):
        raise ValueError(f"fail_at={fail_at} outside section {section!r} of {len(items)} items")
    return replace(batch, **{section: FaultySequence(items, fail_at)})


@dataclass(frozen=True)
class FaultPlan:
    """When a ``FaultyStore`` write fails: on the ``on_call``-th write (1-based; 0 = every
    write), ``where`` = ``before`` delegating, ``mid`` (inside the backend, at item
    ``fail_at`` of ``section``) or ``after`` the inner write succeeded."""

    on_call: int = 1
    where: Literal["before", "mid", "after"] = "mid"
    section: Section = "add"
    fail_at: int = 0


class FaultyStore(MemoryStore):
    """Wraps a store and makes writes fail according to a ``FaultPlan``; reads pass through.

    It is a ``MemoryStore`` itself, so the client can run on it (``AgentMemory(store=...)``).
    """

    def __init__(self, inner: MemoryStore, plan: FaultPlan | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.plan = plan
        self.writes = 0
        self.faults = 0
        self._count_lock = threading.Lock()
        self.name = inner.name
        self.min_recall_at_10 = inner.min_recall_at_10

    def capabilities(self) -> frozenset[Capability]:
        return self.inner.capabilities()

    def info(self) -> StoreInfo:
        return self.inner.info()

    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None:
        self.inner.open(dimension=dimension, schema_policy=schema_policy)

    def _close(self) -> None:
        self.inner.close()

    def _due(self) -> FaultPlan | None:
        with self._count_lock:
            self.writes += 1
            plan = self.plan
            if plan is None or (plan.on_call and plan.on_call != self.writes):
                return None
            self.faults += 1
            return plan

    def _prepare(self, batch: WriteBatch, plan: FaultPlan | None) -> WriteBatch:
        if plan is None:
            return batch
        if plan.where == "before":
            raise InjectedFault("injected fault before the write")
        if plan.where == "mid" and len(getattr(batch, plan.section)) > plan.fail_at:
            armed = arm(batch, plan.section, plan.fail_at)
            section = getattr(armed, plan.section)
            list(section)  # the validation pass this wrapper already did for the inner store
            return armed
        return batch

    def _write(self, batch: WriteBatch) -> list[Record]:
        plan = self._due()
        result = self.inner._write(self._prepare(batch, plan))
        if plan is not None and plan.where == "after":
            raise InjectedFault("injected fault after the write committed")
        return result

    async def _awrite(self, batch: WriteBatch) -> list[Record]:
        plan = self._due()
        result = await self.inner._awrite(self._prepare(batch, plan))
        if plan is not None and plan.where == "after":
            raise InjectedFault("injected fault after the write committed")
        return result

    def _query(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return self.inner._query(filter, order, limit, offset)

    def _count(self, filter: RecordFilter) -> int:
        return self.inner._count(filter)

    def _links(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return self.inner._links(record_ids, link_ids)

    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return self.inner._vector_search(vector, filter, k)

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return self.inner._keyword_search(text, filter, k)

    async def _aquery(self, filter: RecordFilter, order: Order, limit: int | None, offset: int) -> list[Record]:
        return await self.inner._aquery(filter, order, limit, offset)

    async def _acount(self, filter: RecordFilter) -> int:
        return await self.inner._acount(filter)

    async def _alinks(self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None) -> list[Link]:
        return await self.inner._alinks(record_ids, link_ids)

    async def _avector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return await self.inner._avector_search(vector, filter, k)

    async def _akeyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return await self.inner._akeyword_search(text, filter, k)


_ = Any
