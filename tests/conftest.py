"""Shared fixtures for the core's behaviour tests.

Every test runs against the in-process reference store (``memory://``) with the deterministic
``HashingEmbedder(64)`` and an injectable fake clock. Most API tests take the ``mem`` fixture,
which is parametrised over the sync API and its ``*_async`` twins: ``await mem.add_memory(...)``
calls ``add_memory`` in the ``sync`` run and ``add_memory_async`` in the ``async`` run, and wraps
returned ``Thread`` handles the same way, so one test body checks both drivers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from agentmemory import AgentMemory, HashingEmbedder, Thread
from agentmemory.spi import RecordFilter
from agentmemory.testing import ScriptedServer

T0 = datetime(2024, 1, 1, 12, 0, tzinfo=timezone.utc)
DIM = 64


class FakeClock:
    """A settable clock: ``clock()`` returns the current fake time; ``advance`` moves it."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move the clock forward by ``timedelta(**delta)`` and return the new time."""
        self.now = self.now + timedelta(**delta)
        return self.now


class Twin:
    """Calls ``target.name`` (sync mode) or awaits ``target.name_async`` (async mode).

    Attributes that are not methods, and the plain helpers in ``SYNC_ONLY``, pass through
    unchanged (call them without ``await``). In async mode any other method without an
    ``_async`` twin is an error, so the async run really goes through the async code path.
    """

    SYNC_ONLY = frozenset({"extraction_config", "now", "expires_at", "build_search", "wait_for_memory_extraction"})

    def __init__(self, target: Any, mode: str) -> None:
        self._target = target
        self._mode = mode

    @property
    def raw(self) -> Any:
        """The wrapped object itself."""
        return self._target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr) or inspect.isclass(attr) or name in self.SYNC_ONLY:
            return attr
        mode = self._mode
        target = self._target

        async def call(*args: Any, **kwargs: Any) -> Any:
            if mode == "async":
                twin = getattr(target, name + "_async", None)
                if twin is None:
                    raise AssertionError(f"{type(target).__name__}.{name} has no async twin")
                result = await twin(*args, **kwargs)
            else:
                result = attr(*args, **kwargs)
            return wrap(result, mode)

        return call


def wrap(value: Any, mode: str) -> Any:
    """Wrap ``Thread`` handles so their methods follow the same mode."""
    if isinstance(value, Thread):
        return Twin(value, mode)
    return value


NO_INTELLIGENCE = {"extract_memories": False, "enable_context_summary": False}
"""Client config of the core tests: no extraction or summaries, so only explicit writes happen."""


def make_memory(clock: FakeClock | None = None, **kwargs: Any) -> AgentMemory:
    """A fresh client on a fresh reference store; extraction and summaries are off unless a
    ``memory_extraction_config`` is given."""
    kwargs.setdefault("memory_extraction_config", NO_INTELLIGENCE)
    return AgentMemory("memory://", embedder=HashingEmbedder(DIM), clock=clock or FakeClock(), **kwargs)


def dump(client: AgentMemory) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Everything in the store (expired records too) and every link, for before/after checks."""
    records = [
        (r.record_id, r.record_type.value, r.content, r.status.value, r.user_id, r.agent_id, r.thread_id,
         repr(sorted(r.metadata.items())), r.expires_at)
        for r in client.store.query(RecordFilter())
    ]
    links = [(x.link_id, x.source_id, x.target_id, x.link_type.value) for x in client.store.links()]
    return records, links


@pytest.fixture
def clock() -> FakeClock:
    """The fake clock shared by ``client``/``mem``."""
    return FakeClock()


@pytest.fixture
def client(clock: FakeClock) -> AgentMemory:
    """A plain (sync) client on a fresh reference store."""
    mem = make_memory(clock)
    yield mem
    mem.close()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    """Which driver a ``mem`` test runs."""
    return str(request.param)


@pytest.fixture
def mem(client: AgentMemory, mode: str) -> Twin:
    """``client`` wrapped so that each call goes through the sync API or the async twin."""
    return Twin(client, mode)


@pytest.fixture
def twin(mode: str) -> Callable[[Any], Twin]:
    """``twin(obj)``: wrap another client or thread in the current ``mode``."""
    return lambda target: Twin(target, mode)


@pytest.fixture
def twin_of() -> Callable[[Any, str], Twin]:
    """``twin_of(obj, mode)``: wrap an object in an explicit mode (for sync-vs-async comparisons)."""
    return Twin


@pytest.fixture
def make_client(clock: FakeClock) -> Callable[..., AgentMemory]:
    """Factory for clients with other settings (retention, config) on the shared clock."""
    made: list[AgentMemory] = []

    def factory(**kwargs: Any) -> AgentMemory:
        mem = make_memory(clock, **kwargs)
        made.append(mem)
        return mem

    yield factory
    for mem in made:
        mem.close()


@pytest.fixture
def snapshot() -> Callable[[AgentMemory], Any]:
    """``snapshot(client)``: the whole store (records and links), to prove nothing was written."""
    return dump


def ids(results: Any) -> list[str]:
    """Record ids of search results or records, in order."""
    return [getattr(item, "record", item).record_id for item in results]


@pytest.fixture(name="ids")
def ids_fixture() -> Callable[[Any], list[str]]:
    """``ids(results)``: record ids of search results or records, in order."""
    return ids


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    """One scripted OpenAI-compatible server per test module (closing one costs its poll interval)."""
    srv = ScriptedServer()
    yield srv
    srv.close()
