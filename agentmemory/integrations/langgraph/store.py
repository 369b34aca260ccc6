"""``AgentMemoryStore``: LangGraph's ``BaseStore`` (long-term memory) over any agentmemory backend.

How an item is stored — one memory-like record per ``(namespace, key)``:

- **record type**: ``memory_type`` (default ``memory``), so LangGraph items show up in agentmemory
  search and in context cards of the same user like any other memory;
- **scope**: ``user_id`` = the namespace label at ``user_id_label`` (e.g. ``1`` for
  ``("memories", "<user>")``) when the namespace is that long, else the store's fixed ``user_id``;
  the same for ``agent_id`` / ``agent_id_label``. Scope is a hard boundary: a store only sees
  items of its own scope, and a search whose prefix fixes the user label is restricted to that
  user by the backend;
- **content and vector**: the text at the index ``fields`` (LangGraph JSON paths, default
  ``["$"]`` = the whole value as JSON; per put, ``index=[...]`` or ``index=False``), several
  texts joined by newlines into ONE vector embedded by the client's embedder (LangGraph embeds
  each path separately and max-pools; here the item has one vector). Unindexed items keep the JSON
  as content and no vector: found by filters, never by a query;
- **metadata** ``{"langgraph": {"item": true, "namespace": [...], "ns": {"0": label0, ...},
  "depth": n, "key": key, "value": {...}, "indexed": bool, "ttl": minutes | null}}``: namespace
  prefixes and string equality filters are pushed down to the backend as agentmemory metadata
  filters; every LangGraph filter (``$eq $ne $gt $gte $lt $lte``, nested, lists) is then applied
  exactly as LangGraph's ``InMemoryStore`` does;
- **times**: ``created_at`` = the record's ``created_at``, ``updated_at`` = its ``timestamp``;
- **TTL** (minutes): the record's ``expires_at`` (clamped by the client's retention
  ``max_ttl_days``); expired items are invisible at once (``omit_expired`` always holds), reads
  refresh the TTL when ``refresh_ttl`` (default ``ttl_config["refresh_on_read"]``, True), and
  ``sweep_ttl()`` / the optional sweeper thread delete them for good.

Batches follow LangGraph's stores: reads see the state before the batch's writes; several puts
of one key keep the last. Results without a query come in insertion order; with a query, by
cosine similarity (``score``), unindexed matches after the scored ones.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from langgraph.store.base.embed import get_text_at_path, tokenize_path

from ...client import AgentMemory
from ...effects import Call, run_async, run_sync
from ...effects import Op as Effect
from ...embedders.base import embed_op
from ...errors import InvalidArgument
from ...operations.context import OMITTED
from ...operations.links import delete_records_op
from ...operations.retention import expires_at
from ...records import MEMORY_TYPES, Record, RecordStatus, RecordType
from ...spi import ANY, NewRecord, RecordFilter, RecordPatch, ScopeValue, WriteBatch
from ...validation import validate_memory_type, validate_metadata, validate_optional_id
from .namespaces import (
    MAX_CANDIDATES,
    META_KEY,
    check_labels,
    compare_values,
    content_hash,
    does_match,
    pushdown,
    value_of,
)


class AgentMemoryStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are agentmemory records (see the module docstring
    for the mapping). ``memory``: the client (any backend, its embedder). ``index``: LangGraph's
    ``IndexConfig`` — only ``fields`` is used (``dims``, when given, must equal the embedder's
    dimension; ``embed`` is refused: the client's embedder embeds). ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``, ``sweep_interval_minutes``)."""

    supports_ttl: bool = True

    def __init__(
        self,
        memory: AgentMemory,
        *,
        index: Mapping[str, Any] | None = None,
        ttl: TTLConfig | Mapping[str, Any] | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
        user_id_label: int | None = None,
        agent_id_label: int | None = None,
        memory_type: RecordType | str = RecordType.MEMORY,
    ) -> None:
        if not isinstance(memory, AgentMemory):
            raise InvalidArgument("memory", f"must be an AgentMemory client, got {type(memory).__name__}")
        self.memory = memory
        fields: list[str] = ["$"]
        if index is not None:
            if not isinstance(index, Mapping):
                raise InvalidArgument("index", "must be an IndexConfig mapping")
            if index.get("embed") is not None:
                raise InvalidArgument("index", "'embed' is not used: items are embedded by the AgentMemory client's embedder")
            dims = index.get("dims")
            if dims is not None and dims != memory.embedder.dimension:
                raise InvalidArgument("index", f"dims={dims} differs from the embedder's dimension {memory.embedder.dimension}")
            given = index.get("fields")
            if given is not None:
                if isinstance(given, str) or not all(isinstance(f, str) and f for f in given):
                    raise InvalidArgument("index", "'fields' must be a list of JSON paths")
                fields = list(given) or ["$"]
        self.index_config: dict[str, Any] = {"dims": memory.embedder.dimension, "fields": fields}
        self._fields = [(f, f if f == "$" else tokenize_path(f)) for f in fields]
        self.ttl_config: TTLConfig | None = None
        if ttl is not None:
            if not isinstance(ttl, Mapping):
                raise InvalidArgument("ttl", "must be a TTLConfig mapping")
            unknown = sorted(set(ttl) - {"refresh_on_read", "omit_expired", "default_ttl", "sweep_interval_minutes"})
            if unknown:
                raise InvalidArgument("ttl", f"unknown key {unknown[0]!r}")
            default = ttl.get("default_ttl")
            if default is not None:
                self._check_ttl(default)
            self.ttl_config = TTLConfig(**dict(ttl))  # type: ignore[typeddict-item]
        self.user_id = validate_optional_id("user_id", user_id)
        self.agent_id = validate_optional_id("agent_id", agent_id)
        for name, label in (("user_id_label", user_id_label), ("agent_id_label", agent_id_label)):
            if label is not None and (isinstance(label, bool) or not isinstance(label, int) or label < 0):
                raise InvalidArgument(name, f"must be a namespace position (int >= 0) or None, got {label!r}")
        self.user_id_label = user_id_label
        self.agent_id_label = agent_id_label
        self.memory_type = validate_memory_type("memory_type", memory_type)
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    # ---- BaseStore --------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` (reads on the state before the batch's writes; puts last-wins)."""
        return run_sync(self._batch_op(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async ``batch`` (the backend's async API; embeddings in a worker thread)."""
        return await run_async(self._batch_op(list(ops)))

    def setup(self) -> None:
        """Nothing to set up (the client opened the backend); here so code written for LangGraph's
        SQL stores, which call ``setup()`` first, runs unchanged."""

    async def asetup(self) -> None:
        """Async ``setup``."""

    # ---- TTL --------------------------------------------------------------------------------
    def sweep_ttl(self) -> int:
        """Delete expired items for good; returns how many."""
        return run_sync(self._sweep_op())

    async def asweep_ttl(self) -> int:
        """Async ``sweep_ttl``."""
        return await run_async(self._sweep_op())

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> threading.Event:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5) in a daemon
        thread until ``stop_ttl_sweeper``; returns the event that stops it."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        if self._sweeper is not None and self._sweeper.is_alive():
            return self._sweeper_stop
        self._sweeper_stop = stop = threading.Event()

        def loop() -> None:
            while not stop.wait(float(interval) * 60):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    continue

        self._sweeper = threading.Thread(target=loop, name="agentmemory-langgraph-ttl", daemon=True)
        self._sweeper.start()
        return stop

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True when it has stopped."""
        self._sweeper_stop.set()
        if self._sweeper is None:
            return True
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    async def astop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Async ``stop_ttl_sweeper``."""
        return await asyncio.to_thread(self.stop_ttl_sweeper, timeout)

    # ---- mapping ----------------------------------------------------------------------------
    @staticmethod
    def _check_ttl(ttl: Any) -> float:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0 or ttl != ttl or ttl == float("inf"):
            raise InvalidArgument("ttl", f"must be a positive number of minutes or None, got {ttl!r}")
        return float(ttl)

    def _scope_of(self, namespace: tuple[str, ...]) -> tuple[str | None, str | None]:
        """The (user_id, agent_id) an item in ``namespace`` is stored under."""
        user = self.user_id
        agent = self.agent_id
        if self.user_id_label is not None and len(namespace) > self.user_id_label:
            user = validate_optional_id("user_id", namespace[self.user_id_label])
        if self.agent_id_label is not None and len(namespace) > self.agent_id_label:
            agent = validate_optional_id("agent_id", namespace[self.agent_id_label])
        return user, agent

    def _scope_filter(self, prefix: Sequence[str]) -> tuple[ScopeValue, ScopeValue]:
        """The scope a read of ``prefix`` may see: exact where the prefix fixes it."""

        def one(label: int | None, fixed: str | None) -> ScopeValue:
            if label is None:
                return fixed
            if len(prefix) > label and prefix[label] != "*":
                return prefix[label]
            return ANY

        return one(self.user_id_label, self.user_id), one(self.agent_id_label, self.agent_id)

    def _record_id(self, namespace: tuple[str, ...], key: str) -> str:
        user, agent = self._scope_of(namespace)
        return "lgs-" + content_hash(json.dumps([user, agent, list(namespace), key], ensure_ascii=False))[:40]

    def _filter(self, prefix: Sequence[str], now: datetime, *, value: Mapping[str, Any] | None = None, **meta: Any) -> RecordFilter:
        user, agent = self._scope_filter(prefix)
        inner: dict[str, Any] = {"item": True, **meta}
        labels = {str(i): label for i, label in enumerate(prefix) if label != "*"}
        if labels:
            inner["ns"] = labels
        if value:
            inner["value"] = dict(value)
        return RecordFilter(
            record_types=MEMORY_TYPES, user_id=user, agent_id=agent, alive_at=now, metadata_filter={META_KEY: inner}
        )

    @staticmethod
    def _meta(record: Record) -> dict[str, Any]:
        meta = record.metadata.get(META_KEY)
        return meta if isinstance(meta, dict) and meta.get("item") is True else {}

    def _item(self, record: Record, score: float | None = None, search: bool = False) -> Item:
        meta = self._meta(record)
        namespace = tuple(meta.get("namespace") or ())
        value = value_of(meta)
        if search:
            return SearchItem(namespace, meta.get("key", ""), value, record.created_at, record.timestamp, score)
        return Item(value=value, key=meta.get("key", ""), namespace=namespace, created_at=record.created_at, updated_at=record.timestamp)

    def _texts(self, value: Mapping[str, Any], index: Any) -> list[str]:
        if index is False:
            return []
        paths = self._fields if index is None else [(p, p if p == "$" else tokenize_path(p)) for p in index]
        texts: list[str] = []
        for _, tokens in paths:
            texts.extend(t for t in get_text_at_path(value, tokens) if t.strip())
        return texts

    # ---- operations ---------------------------------------------------------------------------
    def _batch_op(self, ops: list[Any]) -> Effect[list[Result]]:
        now = self.memory.now()
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        refresh: dict[str, float] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = yield from self._get_op(op, now, refresh)
            elif isinstance(op, SearchOp):
                results[i] = yield from self._search_op(op, now, refresh)
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_op(op, now)
            elif isinstance(op, PutOp):
                namespace = check_labels(op.namespace, for_write=True)
                puts[(namespace, str(op.key))] = op
            else:
                raise InvalidArgument("ops", f"unknown operation {type(op).__name__}")
        if refresh:
            ctx = self.memory.context()
            patches = [
                RecordPatch(rid, expires_at=expires_at(ctx, minutes / 1440.0, now, now))
                for rid, minutes in sorted(refresh.items())
            ]
            yield Call(self.memory.store, "write", (WriteBatch(patch=patches),))
        if puts:
            yield from self._put_op(list(puts.values()), now)
        return results

    def _refresh(self, op: GetOp | SearchOp, records: Iterable[Record], refresh: dict[str, float]) -> None:
        if not op.refresh_ttl:
            return
        for record in records:
            minutes = self._meta(record).get("ttl")
            if isinstance(minutes, (int, float)) and not isinstance(minutes, bool) and minutes > 0:
                refresh[record.record_id] = float(minutes)

    def _get_op(self, op: GetOp, now: datetime, refresh: dict[str, float]) -> Effect[Item | None]:
        namespace = check_labels(op.namespace, for_write=False)
        flt = RecordFilter(record_ids=(self._record_id(namespace, str(op.key)),), record_types=MEMORY_TYPES, alive_at=now)
        rows: list[Record] = yield Call(self.memory.store, "query", (flt,))
        rows = [r for r in rows if self._meta(r)]
        self._refresh(op, rows, refresh)
        return self._item(rows[0]) if rows else None

    def _search_op(self, op: SearchOp, now: datetime, refresh: dict[str, float]) -> Effect[list[SearchItem]]:
        prefix = check_labels(op.namespace_prefix, for_write=False)
        limit, offset = op.limit, op.offset
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgument("limit", f"must be an int >= 0, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidArgument("offset", f"must be an int >= 0, got {offset!r}")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise InvalidArgument("filter", f"must be a mapping, got {type(op.filter).__name__}")
        value_filter, exact = pushdown(op.filter)
        flt = self._filter(prefix, now, value=value_filter)
        wanted = offset + limit
        if limit == 0:
            return []

        def keep(record: Record) -> bool:
            meta = self._meta(record)
            value = value_of(meta)
            return bool(meta) and all(compare_values(value.get(k), v) for k, v in (op.filter or {}).items())

        scored: list[tuple[Record, float | None]]
        none: float | None = None
        if op.query:
            k = min(wanted, MAX_CANDIDATES)
            if not exact:
                k = min(max((yield Call(self.memory.store, "count", (flt,))), 1), MAX_CANDIDATES)
            vectors = yield from embed_op(self.memory.embedder, [op.query], is_query=True)
            hits = yield Call(self.memory.store, "vector_search", (vectors[0], flt, k))
            scored = [(h.record, 1.0 - float(h.distance or 0.0)) for h in hits if keep(h.record)]
            if len(scored) < wanted:  # unindexed matches follow the scored ones, as in LangGraph
                plain = self._filter(prefix, now, value=value_filter, indexed=False)
                rows: list[Record] = yield Call(self.memory.store, "query", (plain,), {"limit": MAX_CANDIDATES})
                scored += [(r, none) for r in rows if keep(r)][: wanted - len(scored)]
            scored = scored[offset:wanted]
        elif exact:
            rows = yield Call(self.memory.store, "query", (flt,), {"limit": limit, "offset": offset})
            scored = [(r, none) for r in rows if keep(r)]
        else:
            rows = yield Call(self.memory.store, "query", (flt,), {"limit": MAX_CANDIDATES})
            scored = [(r, none) for r in rows if keep(r)][offset:wanted]
        self._refresh(op, (r for r, _ in scored), refresh)
        return [self._item(r, score, search=True) for r, score in scored]  # type: ignore[misc]

    def _list_op(self, op: ListNamespacesOp, now: datetime) -> Effect[list[tuple[str, ...]]]:
        conditions = tuple(op.match_conditions or ())
        for condition in conditions:
            check_labels(tuple(condition.path), for_write=False)
        if op.max_depth is not None and (isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int) or op.max_depth < 1):
            raise InvalidArgument("max_depth", f"must be a positive int or None, got {op.max_depth!r}")
        prefix: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix" and len(condition.path) > len(prefix):
                prefix = tuple(condition.path)
        rows: list[Record] = yield Call(self.memory.store, "query", (self._filter(prefix, now),), {"limit": MAX_CANDIDATES})
        found = {tuple(self._meta(r).get("namespace") or ()) for r in rows}
        found = {ns for ns in found if ns and all(does_match(c, ns) for c in conditions)}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]

    def _put_op(self, puts: list[PutOp], now: datetime) -> Effect[None]:
        plans: list[tuple[str, PutOp, tuple[str, ...], list[str]]] = []
        for op in puts:
            namespace = check_labels(op.namespace, for_write=True)
            if op.value is not None and not isinstance(op.value, Mapping):
                raise InvalidArgument("value", f"must be a mapping or None, got {type(op.value).__name__}")
            if op.ttl is not None:
                self._check_ttl(op.ttl)
            if op.index not in (None, False) and (isinstance(op.index, str) or not isinstance(op.index, list)):
                raise InvalidArgument("index", f"must be None, False or a list of JSON paths, got {op.index!r}")
            texts = [] if op.value is None else self._texts(op.value, op.index)
            plans.append((self._record_id(namespace, str(op.key)), op, namespace, texts))
        ids = tuple(rid for rid, *_ in plans)
        ctx = self.memory.context()
        existing: list[Record] = yield Call(self.memory.store, "query", (RecordFilter(record_ids=ids),))
        by_id = {r.record_id: r for r in existing}
        alive = {rid for rid, r in by_id.items() if r.expires_at is None or r.expires_at > now}
        to_embed = [("\n".join(texts)) for _, op, _, texts in plans if op.value is not None and texts]
        vectors: Any = (yield from embed_op(self.memory.embedder, to_embed)) if to_embed else []
        adds: list[NewRecord] = []
        patches: list[RecordPatch] = []
        deletes: list[str] = []
        v = 0
        for rid, op, namespace, texts in plans:
            if op.value is None:
                if rid in by_id:
                    deletes.append(rid)
                continue
            value = validate_metadata("value", dict(op.value))
            vector = None
            if texts:
                vector, v = vectors[v], v + 1
            content = "\n".join(texts) if texts else json.dumps(value, sort_keys=True, ensure_ascii=False)
            meta = {
                META_KEY: {
                    "item": True,
                    "namespace": list(namespace),
                    "ns": {str(i): label for i, label in enumerate(namespace)},
                    "depth": len(namespace),
                    "key": str(op.key),
                    "value": value,
                    "indexed": bool(texts),
                    "ttl": op.ttl,
                }
            }
            # no TTL: the client's retention default (else its maximum, else never) applies
            expires = expires_at(ctx, OMITTED if op.ttl is None else op.ttl / 1440.0, now, now)
            if rid in alive:
                patches.append(
                    RecordPatch(rid, content=content, metadata=meta, vector=vector, timestamp=now, expires_at=expires, status=RecordStatus.VALID)
                )
                continue
            if rid in by_id:  # expired but not yet purged: replaced by a new item
                deletes.append(rid)
            user, agent = self._scope_of(namespace)
            record = Record(
                record_id=rid,
                record_type=self.memory_type,
                content=content,
                user_id=user,
                agent_id=agent,
                timestamp=now,
                created_at=now,
                expires_at=expires,
                metadata=meta,
            )
            adds.append(NewRecord(record, vector))
        if deletes:
            yield from delete_records_op(ctx, deletes)
        if adds or patches:
            yield Call(self.memory.store, "write", (WriteBatch(add=adds, patch=patches),))

    def _sweep_op(self) -> Effect[int]:
        flt = RecordFilter(record_types=MEMORY_TYPES, expired_at=self.memory.now(), metadata_filter={META_KEY: {"item": True}})
        rows: list[Record] = yield Call(self.memory.store, "query", (flt,))
        if not rows:
            return 0
        count: int = yield from delete_records_op(self.memory.context(), [r.record_id for r in rows])
        return count
