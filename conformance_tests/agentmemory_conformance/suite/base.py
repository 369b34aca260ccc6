"""The fixtures every suite class shares: a fresh store per test, opened by the suite, driven
through a sync or an async API; a client over a second fresh store for the derived rules."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentmemory.spi import Capability, MemoryStore

from ..support import CLIENT_DIM, DIM, Api, ClientApi, FakeClock, close_loop, skip_unless_capable

StoreFactory = Callable[[Path], MemoryStore]


class ConformanceBase:
    """What a backend's test class provides: ``make_store(path)``.

    ``path`` is a per-test directory that may not exist yet; calling ``make_store`` again with
    the same path must reopen the same data when the backend declares ``PERSISTENCE``. The
    store comes back unopened: the suite opens it (``open(dimension=..., schema_policy=...)``)
    and closes it after the test. ``excluded_capabilities`` may only *narrow* what the backend
    declares, each with a reason that shows in the report.
    """

    excluded_capabilities: ClassVar[Mapping[Capability, str]] = {}

    def make_store(self, path: Path) -> MemoryStore:
        """Return a fresh, unopened store whose data lives under ``path``."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_store(self, path)")

    # ---- fixtures (not meant to be overridden, except ``store_factory`` by the plugin) --------
    @pytest.fixture
    def store_factory(self) -> StoreFactory:
        """How the suite builds stores: the test class's ``make_store``."""
        return self.make_store

    @pytest.fixture
    def build_store(self, store_factory: StoreFactory, request: pytest.FixtureRequest) -> Iterator[Callable[..., MemoryStore]]:
        """Build (and by default open) stores; every one built is closed after the test."""
        built: list[MemoryStore] = []

        def build(path: Path, *, dimension: int | None = DIM, **open_kwargs: Any) -> MemoryStore:
            store = store_factory(path)
            if not isinstance(store, MemoryStore):
                raise TypeError(f"make_store must return a MemoryStore, got {type(store).__name__}")
            built.append(store)
            if dimension is not None:
                store.open(dimension=dimension, **open_kwargs)
            if len(built) == 1:  # capabilities() may need a live connection: ask after open
                _record_backend(request, store)
                skip_unless_capable(request.node, store, self.excluded_capabilities)
            return store

        yield build
        for store in reversed(built):
            try:
                store.close()
            finally:
                close_loop(store)

    @pytest.fixture
    def store_path(self, tmp_path: Path) -> Path:
        """The per-test directory of the main store (not created: backends create it)."""
        return tmp_path / "store"

    @pytest.fixture
    def store(self, build_store: Callable[..., MemoryStore], store_path: Path, request: pytest.FixtureRequest) -> MemoryStore:
        """A fresh store opened with ``DIM``-dimensional vectors; capability-gated tests skip here."""
        return build_store(store_path)

    @pytest.fixture(params=["sync", "async"])
    def api(self, store: MemoryStore, request: pytest.FixtureRequest) -> Api:
        """The store's SPI in sync or async mode (every example test runs in both)."""
        return Api(store, request.param)

    @pytest.fixture
    def clock(self) -> FakeClock:
        """The injected clock of the client-level tests."""
        return FakeClock()

    @pytest.fixture
    def memory_factory(self, build_store: Callable[..., MemoryStore], tmp_path: Path, clock: FakeClock, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
        """Build ``AgentMemory`` clients over fresh stores (``HashingEmbedder``, fake clock,
        extraction off so only explicit writes exist)."""
        from agentmemory import AgentMemory, HashingEmbedder

        made: list[Any] = []

        def make(name: str = "client", **kwargs: Any) -> Any:
            store = build_store(tmp_path / name, dimension=None)
            kwargs.setdefault("embedder", HashingEmbedder(CLIENT_DIM))
            kwargs.setdefault("clock", clock)
            kwargs.setdefault(
                "memory_extraction_config", {"extract_memories": False, "enable_context_summary": False}
            )
            mem = AgentMemory(store=store, **kwargs)
            made.append(mem)
            return mem

        yield make

    @pytest.fixture(params=["sync", "async"])
    def memory(self, memory_factory: Callable[..., Any], request: pytest.FixtureRequest) -> ClientApi:
        """The public client over a fresh store, called in sync or async mode."""
        mem = memory_factory()
        return ClientApi(mem, request.param, mem.store)


def _record_backend(request: pytest.FixtureRequest, store: MemoryStore) -> None:
    """Remember which backend a test ran on (the report's header)."""
    props = request.node.user_properties
    if not any(k == "agentmemory_backend" for k, _ in props):
        props.append(("agentmemory_backend", _describe(store)))


def _describe(store: MemoryStore) -> dict[str, Any]:
    cls = type(store)
    try:
        caps = sorted(c.value for c in store.capabilities())
    except Exception as exc:  # noqa: BLE001 - a broken capabilities() is reported, not fatal here
        caps = [f"<capabilities() failed: {exc!r}>"]
    return {
        "name": store.name,
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "spec_version": store.spec_version,
        "capabilities": caps,
        "min_recall_at_10": store.min_recall_at_10,
    }
