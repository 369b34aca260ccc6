"""The store SPI: the small set of operations a backend implements.

Everything derivable (threads, profiles, summaries, link lifecycle, TTL rules, hops, fusion,
budgets, the card) lives in the core on top of these operations, so it cannot drift between
backends. A backend subclasses ``MemoryStore`` and implements the ``_``-prefixed methods; the
public methods validate arguments once, here, for every backend. Async twins default to running
the sync implementation in a worker thread; a backend with a native async driver overrides the
``_a*`` methods.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Final

import numpy as np

from .bulk import RecordColumns, ValidatedColumns, validate_columns
from .errors import BackendUnavailable, CapabilityNotSupported, InvalidArgument
from .records import Link, Record
from .store_types import (
    ANY,
    UNSET,
    Hit,
    NewRecord,
    Order,
    RecordFilter,
    RecordPatch,
    ScopeValue,
    WriteBatch,
)
from .validation import (
    MAX_WINDOW,
    validate_batch,
    validate_filter,
    validate_id_list,
    validate_k,
    validate_order,
    validate_vector,
    validate_window,
)

SPEC_VERSION: Final = "1.1"
"""The version of this SPI and of the conformance suite that checks it. 1.1 added
``Record.index_text`` and ``RecordPatch.index_text``: keyword search scores a record's
``indexed_text``, not its content."""

__all__ = [
    "ANY",
    "SPEC_VERSION",
    "UNSET",
    "Capability",
    "Hit",
    "MemoryStore",
    "NewRecord",
    "Order",
    "RecordFilter",
    "RecordPatch",
    "SchemaPolicy",
    "ScopeValue",
    "StoreInfo",
    "WriteBatch",
]
"""The SPI and the data it passes around (``store_types``, re-exported here)."""


class Capability(str, Enum):
    """Optional abilities a backend declares. Undeclared ones raise ``CapabilityNotSupported``."""

    KEYWORD_SEARCH = "keyword_search"
    PERSISTENCE = "persistence"
    APPROXIMATE_SEARCH = "approximate_search"
    CONCURRENT_WRITERS = "concurrent_writers"
    READ_VECTORS = "read_vectors"
    """``read_vectors()`` returns the stored embeddings (what export and migrate keep)."""


class SchemaPolicy(str, Enum):
    """What ``open`` may do to the storage schema."""

    REQUIRE_EXISTING = "require_existing"
    CREATE_IF_NECESSARY = "create_if_necessary"
    RECREATE = "recreate"


@dataclass
class StoreInfo:
    """What a backend reports about itself after ``open``."""

    name: str
    dimension: int
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class MemoryStore(ABC):
    """Base class of every backend. Implement the ``_`` methods; call the public ones."""

    name: str = "abstract"
    spec_version: str = SPEC_VERSION
    min_recall_at_10: float = 1.0
    """The recall@10 against exact search that an approximate backend guarantees."""

    def __init__(self) -> None:
        self._dimension: int | None = None
        self._closed = False
        self._open_lock = threading.Lock()

    @classmethod
    def from_uri(cls, uri: str) -> MemoryStore:
        """Build the store from ``<name>://...``. The default accepts only a bare ``name://``;
        backends with a location (a file, a DSN) override it."""
        from urllib.parse import urlsplit

        parts = urlsplit(uri)
        if parts.netloc or parts.path.strip("/") or parts.query:
            raise InvalidArgument("store", f"backend {cls.name!r} takes no location, got {uri!r}")
        return cls()

    @classmethod
    def in_directory(cls, directory: Path, **options: Any) -> MemoryStore:
        """A new, unopened store whose data lives under ``directory`` (which need not exist
        yet; the same directory again reopens the same data): how a tool builds throwaway
        stores without knowing the constructor, e.g. the conformance suite's zero-code run
        (``--agentmemory-backend NAME``), which gives every test its own directory.
        ``options`` are constructor keywords. The default, ``cls(**options)``, fits stores
        that keep nothing on disk; a backend with a location overrides it (a file or directory
        under ``directory``; a server backend derives a fresh store name from it), and raises
        ``BackendUnavailable`` when it cannot build one here (e.g. no server configured)."""
        return cls(**options)

    # ---- lifecycle -------------------------------------------------------------------------
    @property
    def dimension(self) -> int:
        """The vector dimension fixed at ``open``."""
        if self._dimension is None:
            raise BackendUnavailable(f"store {self.name!r} is not open")
        return self._dimension

    @property
    def is_open(self) -> bool:
        """True between ``open`` and ``close``."""
        return self._dimension is not None and not self._closed

    def open(
        self, *, dimension: int, schema_policy: SchemaPolicy = SchemaPolicy.CREATE_IF_NECESSARY
    ) -> None:
        """Open (and per ``schema_policy`` create) the storage for vectors of ``dimension``.

        A store already holding vectors of another dimension raises ``Conflict``. Opening an
        open store with the same dimension is a no-op.
        """
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
            raise InvalidArgument("dimension", f"must be a positive int, got {dimension!r}")
        schema_policy = SchemaPolicy(schema_policy)
        with self._open_lock:
            if self.is_open:
                if dimension != self._dimension:
                    from .errors import Conflict

                    raise Conflict(
                        f"store {self.name!r} is open with dimension {self._dimension}, "
                        f"not {dimension}"
                    )
                return
            self._open(dimension, schema_policy)
            self._dimension = dimension
            self._closed = False

    def close(self) -> None:
        """Release files and connections. Further calls raise ``BackendUnavailable``."""
        with self._open_lock:
            if self._dimension is not None and not self._closed:
                self._close()
            self._closed = True

    def capabilities(self) -> frozenset[Capability]:
        """The optional abilities this instance has (may depend on the live server)."""
        return frozenset()

    def info(self) -> StoreInfo:
        """Name, dimension and location, for reports and ``agentmemory plugins``."""
        return StoreInfo(name=self.name, dimension=self.dimension)

    def require(self, capability: Capability) -> None:
        """Raise ``CapabilityNotSupported`` unless ``capability`` is declared."""
        if capability not in self.capabilities():
            raise CapabilityNotSupported(capability.value, self.name)

    def _check_open(self) -> int:
        if not self.is_open:
            raise BackendUnavailable(f"store {self.name!r} is closed or was never opened")
        assert self._dimension is not None
        return self._dimension

    # ---- public operations (validated once here) --------------------------------------------
    def write(self, batch: WriteBatch) -> list[Record]:
        """Apply ``batch`` atomically; return the added records with their assigned ``seq``."""
        dim = self._check_open()
        validate_batch(batch, dim)
        if batch.is_empty():
            return []
        return self._write(batch)

    def bulk_add(self, columns: RecordColumns) -> int:
        """Add every row of ``columns`` atomically, exactly as one ``write`` of the same records
        would (same checks, consecutive ``seq`` in row order); return how many were added."""
        dim = self._check_open()
        valid = validate_columns(columns, dim)
        return self._bulk_add(valid) if len(valid) else 0

    def query(
        self,
        filter: RecordFilter,
        *,
        order: Order = Order.SEQ_ASC,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Record]:
        """Records matching ``filter`` in ``order``, after skipping ``offset``, at most ``limit``
        (windows of any size: clamped by ``validation.MAX_WINDOW``)."""
        self._check_open()
        limit, offset = validate_window(limit, offset)
        validate_filter(filter)
        order = validate_order(order)
        if offset >= MAX_WINDOW:
            return []
        return self._query(filter, order, limit, offset)

    def count(self, filter: RecordFilter) -> int:
        """How many records match ``filter``."""
        self._check_open()
        validate_filter(filter)
        return self._count(filter)

    def links(
        self, *, record_ids: Sequence[str] | None = None, link_ids: Sequence[str] | None = None
    ) -> list[Link]:
        """Links touching any of ``record_ids`` (either end) and/or with the given ids; all
        links when both are None. Ordered by link id."""
        self._check_open()
        validate_id_list("record_ids", record_ids)
        validate_id_list("link_ids", link_ids)
        return self._links(record_ids, link_ids)

    def read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of those of ``record_ids`` that have one, as float32 arrays in the
        written direction (stores keep them at unit length); ids without a vector, and unknown
        ids, are absent. What export and migrate read so a store moved to one with the same
        embedder is not re-embedded. Optional: needs ``Capability.READ_VECTORS``."""
        self._check_open()
        self.require(Capability.READ_VECTORS)
        validate_id_list("record_ids", record_ids)
        return self._read_vectors(record_ids) if record_ids else {}

    def vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        """The ``k`` records nearest to ``vector`` by cosine distance among those matching
        ``filter`` and having a vector; best first, ties by record id."""
        dim = self._check_open()
        vec = validate_vector("vector", vector, dim)
        validate_k(k)
        validate_filter(filter)
        return self._vector_search(vec, filter, k)

    def keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        """The ``k`` best BM25-style matches of ``text`` among records matching ``filter`` and
        having a vector (the searchable records; threads and summaries are not)."""
        self._check_open()
        self.require(Capability.KEYWORD_SEARCH)
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgument("text", "keyword query must be a non-empty string")
        validate_k(k)
        validate_filter(filter)
        return self._keyword_search(text, filter, k)

    # ---- derived indexes (optional) ---------------------------------------------------------
    def index_thresholds(self) -> dict[str, int]:
        """The indexes this store keeps beside its records, each with the number of records
        with a vector from which it is built and searches may use it (its *indexed path*).

        Keys say what an index serves: ``"vector"`` (``vector_search``) and ``"keyword"``
        (``keyword_search``); a backend may add others. ``{}`` (the default) declares no
        derived index: every read is answered the same way at any size. The values are this
        instance's (constructor options may lower them); the conformance suite's index tier fills
        a store past each one, calls ``settle`` and compares every search with the reference.
        """
        return {}

    def settle(self) -> dict[str, bool]:
        """Bring every index of ``index_thresholds`` up to date now: wait for background
        builds, build the indexes whose threshold the store has reached, fold pending changes
        into the built ones. Returns, per index name, whether that index is now built and
        current (False: the store is below its threshold and searches scan exactly).

        Optional for callers: what a search finds never depends on it, only which path answers
        (keyword scores of records changed since the last build may use that build's corpus
        statistics until the next one). Call it after a bulk import to get the fast path at
        once, or in tests to reach the indexed path deterministically. The default does nothing.
        """
        self._check_open()
        return self._settle()

    @contextmanager
    def deferring_indexes(self) -> Iterator[None]:
        """Hold back automatic index maintenance while the block writes many records (an import,
        a migration), so indexes are not rebuilt again and again as the store grows; what was
        held back resumes after the block (a backend may wait for its next write or search;
        ``settle`` builds it at once). Results never depend on it, only speed. The default does nothing; a backend that rebuilds indexes in
        the background overrides ``_defer_indexes``."""
        self._check_open()
        self._defer_indexes(True)
        try:
            yield
        finally:
            # Always, even when the block closed the store: a backend's hold is state of the store
            # object (a counter), and a reopened store must not stay held forever.
            self._defer_indexes(False)

    def _defer_indexes(self, defer: bool) -> None:
        """Start (True) or end (False) holding back automatic index maintenance (default: none).
        Called with False also after the block closed the store, so it must not need it open."""
        return None

    # ---- async twins --------------------------------------------------------------------------
    async def aopen(
        self, *, dimension: int, schema_policy: SchemaPolicy = SchemaPolicy.CREATE_IF_NECESSARY
    ) -> None:
        """Async ``open``."""
        await asyncio.to_thread(self.open, dimension=dimension, schema_policy=schema_policy)

    async def aclose(self) -> None:
        """Async ``close``."""
        await asyncio.to_thread(self.close)

    async def awrite(self, batch: WriteBatch) -> list[Record]:
        """Async ``write``."""
        dim = self._check_open()
        validate_batch(batch, dim)
        if batch.is_empty():
            return []
        return await self._awrite(batch)

    async def abulk_add(self, columns: RecordColumns) -> int:
        """Async ``bulk_add``."""
        dim = self._check_open()
        valid = validate_columns(columns, dim)
        return await self._abulk_add(valid) if len(valid) else 0

    async def aquery(
        self,
        filter: RecordFilter,
        *,
        order: Order = Order.SEQ_ASC,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Record]:
        """Async ``query``."""
        self._check_open()
        limit, offset = validate_window(limit, offset)
        validate_filter(filter)
        order = validate_order(order)
        if offset >= MAX_WINDOW:
            return []
        return await self._aquery(filter, order, limit, offset)

    async def acount(self, filter: RecordFilter) -> int:
        """Async ``count``."""
        self._check_open()
        validate_filter(filter)
        return await self._acount(filter)

    async def alinks(
        self, *, record_ids: Sequence[str] | None = None, link_ids: Sequence[str] | None = None
    ) -> list[Link]:
        """Async ``links``."""
        self._check_open()
        validate_id_list("record_ids", record_ids)
        validate_id_list("link_ids", link_ids)
        return await self._alinks(record_ids, link_ids)

    async def aread_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Async ``read_vectors``."""
        self._check_open()
        self.require(Capability.READ_VECTORS)
        validate_id_list("record_ids", record_ids)
        return await self._aread_vectors(record_ids) if record_ids else {}

    async def avector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        """Async ``vector_search``."""
        dim = self._check_open()
        vec = validate_vector("vector", vector, dim)
        validate_k(k)
        validate_filter(filter)
        return await self._avector_search(vec, filter, k)

    async def akeyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        """Async ``keyword_search``."""
        self._check_open()
        self.require(Capability.KEYWORD_SEARCH)
        if not isinstance(text, str) or not text.strip():
            raise InvalidArgument("text", "keyword query must be a non-empty string")
        validate_k(k)
        validate_filter(filter)
        return await self._akeyword_search(text, filter, k)

    async def asettle(self) -> dict[str, bool]:
        """Async ``settle``."""
        self._check_open()
        return await self._asettle()

    # ---- what a backend implements ----------------------------------------------------------
    @abstractmethod
    def _open(self, dimension: int, schema_policy: SchemaPolicy) -> None: ...

    @abstractmethod
    def _close(self) -> None: ...

    @abstractmethod
    def _write(self, batch: WriteBatch) -> list[Record]: ...

    def _bulk_add(self, columns: ValidatedColumns) -> int:
        """Default: the rows as one ``WriteBatch``; a backend with a columnar insert overrides
        this (and ``_abulk_add``, whose default goes through ``_awrite``)."""
        return len(self._write(_as_batch(columns)))

    @abstractmethod
    def _query(
        self, filter: RecordFilter, order: Order, limit: int | None, offset: int
    ) -> list[Record]: ...

    def _count(self, filter: RecordFilter) -> int:
        return len(self._query(filter, Order.SEQ_ASC, None, 0))

    @abstractmethod
    def _links(
        self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None
    ) -> list[Link]: ...

    @abstractmethod
    def _vector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]: ...

    def _keyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        raise CapabilityNotSupported(Capability.KEYWORD_SEARCH.value, self.name)

    def _read_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        raise CapabilityNotSupported(Capability.READ_VECTORS.value, self.name)

    def _settle(self) -> dict[str, bool]:
        """Default: no derived index, nothing to bring up to date. A backend that declares
        ``index_thresholds`` overrides this (and ``_asettle`` when it has a native async
        driver; the default runs ``_settle`` in a worker thread)."""
        return {}

    async def _awrite(self, batch: WriteBatch) -> list[Record]:
        return await asyncio.to_thread(self._write, batch)

    async def _abulk_add(self, columns: ValidatedColumns) -> int:
        return len(await self._awrite(_as_batch(columns)))

    async def _aquery(
        self, filter: RecordFilter, order: Order, limit: int | None, offset: int
    ) -> list[Record]:
        return await asyncio.to_thread(self._query, filter, order, limit, offset)

    async def _acount(self, filter: RecordFilter) -> int:
        return await asyncio.to_thread(self._count, filter)

    async def _alinks(
        self, record_ids: Sequence[str] | None, link_ids: Sequence[str] | None
    ) -> list[Link]:
        return await asyncio.to_thread(self._links, record_ids, link_ids)

    async def _avector_search(self, vector: np.ndarray, filter: RecordFilter, k: int) -> list[Hit]:
        return await asyncio.to_thread(self._vector_search, vector, filter, k)

    async def _aread_vectors(self, record_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return await asyncio.to_thread(self._read_vectors, record_ids)

    async def _akeyword_search(self, text: str, filter: RecordFilter, k: int) -> list[Hit]:
        return await asyncio.to_thread(self._keyword_search, text, filter, k)

    async def _asettle(self) -> dict[str, bool]:
        return await asyncio.to_thread(self._settle)


def _as_batch(columns: ValidatedColumns) -> WriteBatch:
    return WriteBatch(add=[NewRecord(record, vector) for record, vector in columns.records()])
