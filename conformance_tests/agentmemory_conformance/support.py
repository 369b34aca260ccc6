"""Shared helpers of the suite: marks, sync/async drivers, record builders, a fake clock,
store snapshots and the search assertions that know exact from approximate backends.

Expectations are computed here independently of the reference store's helpers, so the suite
stays an oracle of its own (the zarr advice).
"""

from __future__ import annotations

import asyncio
import json
import math
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory.records import Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import ANY, Capability, Hit, MemoryStore, NewRecord, RecordFilter

DIM = 4
"""Vector dimension of the SPI tests: tiny, hand-made vectors make expectations exact."""

CLIENT_DIM = 64
"""Dimension of the ``HashingEmbedder`` behind the client-level tests."""

T0 = datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)
"""A fixed instant every example is anchored at (microseconds included on purpose)."""


# ---- marks -----------------------------------------------------------------------------------
def clause(*ids: str) -> pytest.MarkDecorator:
    """Tag a test with the spec clauses it checks (they group results in the report)."""
    return pytest.mark.agentmemory_clause(*ids)


def requires(*capabilities: Capability) -> pytest.MarkDecorator:
    """Run the test only when the backend declares ``capabilities``; skip with the reason
    otherwise."""
    return pytest.mark.agentmemory_requires(*(c.value for c in capabilities))


def required_capabilities(item: Any) -> set[Capability]:
    """Capabilities a collected test (or ``request.node``) needs."""
    out: set[Capability] = set()
    for mark in item.iter_markers("agentmemory_requires"):
        out.update(Capability(v) for v in mark.args)
    return out


def skip_unless_capable(item: Any, store: MemoryStore, excluded: Mapping[Capability, str]) -> None:
    """``pytest.skip`` with the reason when ``store`` lacks a capability the test needs."""
    declared = store.capabilities()
    for cap in sorted(required_capabilities(item), key=lambda c: c.value):
        if cap in excluded:
            pytest.skip(f"capability {cap.value!r} excluded by the test class: {excluded[cap]}")
        if cap not in declared:
            pytest.skip(f"capability {cap.value!r} not declared by backend {store.name!r}")


# ---- one event loop per store instance ------------------------------------------------------
_LOOPS: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()


def loop_for(owner: Any) -> asyncio.AbstractEventLoop:
    """The event loop that drives ``owner``'s async API (created on first use). One loop per
    store keeps loop-bound connection pools valid across calls."""
    loop = _LOOPS.get(owner)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _LOOPS[owner] = loop
    return loop


def close_loop(owner: Any) -> None:
    """Shut down ``owner``'s loop and its default executor."""
    loop = _LOOPS.pop(owner, None)
    if loop is not None and not loop.is_closed():
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()


class Api:
    """Calls a store's SPI in one mode: ``sync`` methods directly, or their ``a``-prefixed async
    twins on the store's own loop (``run_until_complete``; no pytest-asyncio needed)."""

    def __init__(self, store: MemoryStore, mode: str) -> None:
        if mode not in ("sync", "async"):
            raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
        self.store = store
        self.mode = mode

    def __repr__(self) -> str:
        return f"Api({self.store.name!r}, {self.mode})"

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.mode == "sync":
            return getattr(self.store, name)(*args, **kwargs)
        return loop_for(self.store).run_until_complete(getattr(self.store, "a" + name)(*args, **kwargs))

    def write(self, batch: Any) -> list[Record]:
        """``write`` / ``awrite``."""
        return self._call("write", batch)

    def bulk_add(self, columns: Any) -> int:
        """``bulk_add`` / ``abulk_add``."""
        return self._call("bulk_add", columns)  # type: ignore[no-any-return,unused-ignore]

    def query(self, flt: Any = None, **kwargs: Any) -> list[Record]:
        """``query`` / ``aquery`` (``flt`` defaults to everything)."""
        return self._call("query", RecordFilter() if flt is None else flt, **kwargs)

    def count(self, flt: Any = None) -> int:
        """``count`` / ``acount``."""
        return self._call("count", RecordFilter() if flt is None else flt)

    def links(self, **kwargs: Any) -> list[Link]:
        """``links`` / ``alinks``."""
        return self._call("links", **kwargs)

    def vector_search(self, vector: Any, flt: Any = None, k: int = 10) -> list[Hit]:
        """``vector_search`` / ``avector_search``."""
        return self._call("vector_search", vector, RecordFilter() if flt is None else flt, k)

    def keyword_search(self, text: Any, flt: Any = None, k: int = 10) -> list[Hit]:
        """``keyword_search`` / ``akeyword_search``."""
        return self._call("keyword_search", text, RecordFilter() if flt is None else flt, k)


class ClientApi:
    """Calls the public client (or a ``Thread``) in one mode: ``name`` or ``name_async``."""

    def __init__(self, target: Any, mode: str, loop_owner: Any) -> None:
        self._target = target
        self._mode = mode
        self._loop_owner = loop_owner

    @property
    def target(self) -> Any:
        """The wrapped client or thread."""
        return self._target

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if self._mode == "sync":
                result = getattr(self._target, name)(*args, **kwargs)
            else:
                coro = getattr(self._target, name + "_async")(*args, **kwargs)
                result = loop_for(self._loop_owner).run_until_complete(coro)
            if type(result).__name__ == "Thread":
                return ClientApi(result, self._mode, self._loop_owner)
            return result

        return call


# ---- builders --------------------------------------------------------------------------------
def vec(*values: float) -> np.ndarray:
    """A float32 vector from literal values (padded with zeros to ``DIM``)."""
    data = list(values) + [0.0] * (DIM - len(values))
    return np.asarray(data, dtype=np.float32)


E1, E2, E3, E4 = vec(1), vec(0, 1), vec(0, 0, 1), vec(0, 0, 0, 1)


def rec(
    record_id: str,
    *,
    type: RecordType | str = RecordType.MEMORY,
    content: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    thread: str | None = None,
    role: str | None = None,
    ts: datetime | None = None,
    created: datetime | None = None,
    expires: datetime | None = None,
    status: RecordStatus = RecordStatus.VALID,
    metadata: Mapping[str, Any] | None = None,
) -> Record:
    """A record with sensible defaults (content names the id, times at ``T0``)."""
    rtype = RecordType(type)
    if role is None and rtype is RecordType.MESSAGE:
        role = "user"
    return Record(
        record_id=record_id,
        record_type=rtype,
        content=f"content of {record_id}" if content is None else content,
        user_id=user,
        agent_id=agent,
        thread_id=thread,
        role=role,
        timestamp=ts or T0,
        created_at=created or T0,
        expires_at=expires,
        status=status,
        metadata=dict(metadata or {}),
    )


def new(record: Record, vector: Any = "default") -> NewRecord:
    """``NewRecord`` with a vector: ``"default"`` gives searchable types ``E1`` and the others
    none; pass an array or None explicitly otherwise."""
    if isinstance(vector, str):
        from agentmemory.records import SEARCHABLE_TYPES

        vector = E1 if record.record_type in SEARCHABLE_TYPES else None
    return NewRecord(record=record, vector=vector)


def link(
    link_id: str,
    source: str,
    target: str,
    type: LinkType | str = LinkType.SUPPORTS,
    *,
    metadata: Mapping[str, Any] | None = None,
    created: datetime | None = None,
) -> Link:
    """A link with defaults (created at ``T0``)."""
    return Link(
        link_id=link_id,
        source_id=source,
        target_id=target,
        link_type=LinkType(type),
        created_at=created or T0,
        metadata=dict(metadata or {}),
    )


class FakeClock:
    """An injectable clock for TTL tests: starts at ``start`` and moves only when told."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)``; returns the new time."""
        self.now = self.now + timedelta(**delta)
        return self.now


# ---- observing a store -----------------------------------------------------------------------
PROBES = (E1, E2, E3, E4, vec(1, 1, 1, 1), vec(-1, 2, 0, 1))


@dataclass(frozen=True)
class Snapshot:
    """Everything observable about a store: records (with seq) and links in their exact,
    type-tagged form (``exact_form``: ``1`` never equals ``1.0`` or ``True``), and
    vector-search results for a few probe vectors (which expose stored vectors)."""

    records: tuple[Any, ...]
    links: tuple[Any, ...]
    probes: tuple[tuple[tuple[str, float], ...], ...]


def snapshot(store: MemoryStore) -> Snapshot:
    """Observe ``store`` through its sync API."""
    records = tuple(exact_form(r) for r in store.query(RecordFilter()))
    links = tuple(exact_form(lk) for lk in store.links())
    probes: list[tuple[tuple[str, float], ...]] = []
    if records and store.dimension == DIM:
        for probe in PROBES:
            hits = store.vector_search(probe, RecordFilter(), 10_000)
            probes.append(tuple(sorted((h.record.record_id, round(h.distance or 0.0, 4)) for h in hits)))
    return Snapshot(records, links, tuple(probes))


def files_under(path: Path) -> list[str] | None:
    """What lies at ``path`` (``None``: nothing; else the relative paths below it, sorted): a
    refused open must leave a store's path as it found it."""
    if not path.exists():
        return None
    if path.is_file():
        return [path.name]
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def ids(items: Iterable[Record | Hit | Link]) -> list[str]:
    """The ids of records, hits or links, in order."""
    out = []
    for item in items:
        if isinstance(item, Hit):
            out.append(item.record.record_id)
        elif isinstance(item, Link):
            out.append(item.link_id)
        else:
            out.append(item.record_id)
    return out


def without_seq(record: Record) -> Record:
    """``record`` with ``seq`` zeroed (seq values are the store's own business)."""
    return record.model_copy(update={"seq": 0})


# ---- exact comparison ------------------------------------------------------------------------
_RECORD_FIELDS = ("record_id", "record_type", "content", "user_id", "agent_id", "thread_id", "role", "seq",
                  "timestamp", "created_at", "expires_at", "status", "metadata")
_LINK_FIELDS = ("link_id", "source_id", "target_id", "link_type", "created_at", "metadata")
DISTANCE_TOLERANCE = 1e-4
"""Absolute tolerance on cosine distances (float32 storage)."""
SCORE_TOLERANCE = 1e-6
"""Relative tolerance on keyword scores: every backend scores with ``agentmemory.bm25`` over
the shared analyser's terms, so scores agree to float noise."""


def exact_form(value: Any, *, seq: bool = True) -> Any:
    """A hashable, type-tagged form of a record, link, hit or JSON value in which equality is
    exact: ``1``, ``1.0`` and ``True`` differ, lists never equal tuples, datetimes compare as
    instants (and must be time-zone aware); ``seq=False`` leaves records' ``seq`` out. Hits
    keep their distance and score rounded (``DISTANCE_TOLERANCE``, 6 significant digits)."""
    if isinstance(value, Record):
        return ("Record",) + tuple(
            (name, exact_form(getattr(value, name))) for name in _RECORD_FIELDS if seq or name != "seq"
        )
    if isinstance(value, Link):
        return ("Link",) + tuple((name, exact_form(getattr(value, name))) for name in _LINK_FIELDS)
    if isinstance(value, Hit):
        dist = None if value.distance is None else round(float(value.distance), 4)
        score = None if value.score is None else float(f"{float(value.score):.6g}")
        return ("Hit", exact_form(value.record, seq=seq), dist, score)
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            return ("naive-datetime", value.isoformat())
        return ("datetime", value.astimezone(timezone.utc).isoformat())
    if isinstance(value, Mapping):
        return (type(value).__name__ if type(value) is not dict else "dict",) + tuple(
            sorted((str(k), type(k).__name__, exact_form(v)) for k, v in value.items())
        )
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(exact_form(v) for v in value)
    if value is None:
        return None
    return (type(value).__name__, value)


def _describe_value(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _value_difference(got: Any, want: Any, where: str) -> str | None:
    """Where and how two JSON-like values differ (types included), or None when exactly equal."""
    if isinstance(want, datetime) or isinstance(got, datetime):
        if not (isinstance(got, datetime) and isinstance(want, datetime)):
            return f"{where}: got {_describe_value(got)}, expected {_describe_value(want)}"
        if got.tzinfo is None or got.utcoffset() is None:
            return f"{where}: got the naive datetime {got.isoformat()}, expected an aware one ({want.isoformat()})"
        if got != want:
            return f"{where}: got the instant {got.isoformat()}, expected {want.isoformat()}"
        return None
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping) or type(got) is not dict and type(want) is dict:
            return f"{where}: got {_describe_value(got)}, expected an object {want!r}"
        missing = [k for k in want if k not in got]
        extra = [k for k in got if k not in want]
        if missing or extra:
            return f"{where}: keys differ (missing {missing}, unexpected {extra}) in {got!r}, expected {want!r}"
        for key in want:
            diff = _value_difference(got[key], want[key], f"{where}[{key!r}]")
            if diff:
                return diff
        return None
    if isinstance(want, (list, tuple)):
        if type(got) is not type(want):
            return f"{where}: got {_describe_value(got)}, expected {_describe_value(want)}"
        if len(got) != len(want):
            return f"{where}: got {len(got)} items {got!r}, expected {len(want)}: {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            diff = _value_difference(g, w, f"{where}[{i}]")
            if diff:
                return diff
        return None
    if type(got) is not type(want) or got != want:
        return f"{where}: got {_describe_value(got)}, expected {_describe_value(want)}"
    return None


_ITEMS = (Record, Link, Hit)


def difference(got: Any, want: Any, *, seq: bool = True, distance_tol: float = DISTANCE_TOLERANCE,
               score_tol: float = SCORE_TOLERANCE, what: str = "result") -> str | None:
    """The first difference between ``got`` and ``want`` (records, links, hits, or sequences
    of them), compared field by field with exact types, or None when they agree. Hit distances
    agree within ``distance_tol`` (absolute), scores within ``score_tol`` (relative)."""
    if isinstance(want, (list, tuple)) and all(isinstance(w, _ITEMS) for w in want) and (
        want or isinstance(got, (list, tuple)) and all(isinstance(g, _ITEMS) for g in got)
    ):
        if not isinstance(got, (list, tuple)):
            return f"{what}: got {type(got).__name__}, expected a list"
        got_ids, want_ids = _item_ids(got), _item_ids(want)
        if got_ids != want_ids:
            return f"{what}: got {got_ids}, expected {want_ids}"
        for i, (g, w) in enumerate(zip(got, want)):
            diff = difference(g, w, seq=seq, distance_tol=distance_tol, score_tol=score_tol, what=f"{what}[{i}]")
            if diff:
                return diff
        return None
    if isinstance(want, Hit):
        if not isinstance(got, Hit):
            return f"{what}: got {type(got).__name__}, expected a Hit"
        name = f"{what} (hit {want.record.record_id!r})"
        for attr, tol, relative in (("distance", distance_tol, False), ("score", score_tol, True)):
            g, w = getattr(got, attr), getattr(want, attr)
            if w is None or g is None:
                if g is not w:
                    return f"{name}.{attr}: got {g!r}, expected {w!r}"
                continue
            if not isinstance(g, float) or isinstance(g, bool):
                return f"{name}.{attr}: got {_describe_value(g)}, expected a float"
            bound = tol * max(1.0, abs(w)) if relative else tol
            if not math.isfinite(g) or abs(g - w) > bound:
                return f"{name}.{attr}: got {g!r}, expected {w!r} (tolerance {bound:.2g})"
        return difference(got.record, want.record, seq=seq, what=f"{name}.record")
    if isinstance(want, (Record, Link)):
        if type(got) is not type(want):
            return f"{what}: got {type(got).__name__}, expected {type(want).__name__}"
        fields = _RECORD_FIELDS if isinstance(want, Record) else _LINK_FIELDS
        if _quickly_equal(got, want, fields, seq):
            return None
        key = want.record_id if isinstance(want, Record) else want.link_id
        for name in fields:
            if name == "seq" and not seq:
                continue
            g, w = getattr(got, name), getattr(want, name)
            if isinstance(w, Enum):
                if g is not w:
                    return f"{what} {key!r}.{name}: got {_describe_value(g)}, expected {w!r}"
                continue
            diff = _value_difference(g, w, f"{what} {key!r}.{name}")
            if diff:
                return diff
        return None
    return _value_difference(got, want, what)


def _quickly_equal(got: Record | Link, want: Record | Link, fields: tuple[str, ...], seq: bool) -> bool:
    """True when ``got`` certainly equals ``want`` exactly: plain fields equal, times equal and
    aware, metadata equal as sorted JSON text (which keeps ``1``, ``1.0`` and ``true`` apart).
    False means "look closer" (``difference`` then names the first mismatch)."""
    for name in fields:
        if name == "metadata" or name == "seq" and not seq:
            continue
        g, w = getattr(got, name), getattr(want, name)
        if g != w or type(g) is not type(w):
            return False
        if isinstance(g, datetime) and g.utcoffset() is None:
            return False
    try:
        return _json_text(got.metadata) == _json_text(want.metadata)
    except (TypeError, ValueError):
        return False


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, allow_nan=False)


def _item_ids(items: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, Hit):
            out.append(item.record.record_id)
        elif isinstance(item, Record):
            out.append(item.record_id)
        elif isinstance(item, Link):
            out.append(item.link_id)
        else:
            out.append(item)
    return out


def assert_same(got: Any, want: Any, *, seq: bool = True, distance_tol: float = DISTANCE_TOLERANCE,
                score_tol: float = SCORE_TOLERANCE, what: str = "result") -> None:
    """Assert that ``got`` equals ``want`` field by field with exact JSON types (the suite's one
    comparison of records, links and hits; see ``difference``).

    Troubleshooting: a message such as ``metadata['n']: got 1.0 (float), expected 1 (int)``
    means the backend changed a value's JSON type on the way through storage."""
    diff = difference(got, want, seq=seq, distance_tol=distance_tol, score_tol=score_tol, what=what)
    assert diff is None, diff


def scope_matches(record: Record, user: Any, agent: Any, thread: Any) -> bool:
    """The three-state scope rule (ANY / equal / None = absent), written independently."""
    for want, have in ((user, record.user_id), (agent, record.agent_id), (thread, record.thread_id)):
        if want is ANY:
            continue
        if want is None and have is not None:
            return False
        if want is not None and have != want:
            return False
    return True


def cosine_distance(a: np.ndarray, b: np.ndarray) -> float:
    """1 - cos(a, b) in float64 (the expectation, independent of any store)."""
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    return float(1.0 - a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def exact_ranking(query: np.ndarray, candidates: Mapping[str, np.ndarray]) -> list[tuple[str, float]]:
    """Candidates ranked by cosine distance, ties (within 1e-9) by id."""
    scored = [(rid, cosine_distance(query, v)) for rid, v in candidates.items()]
    scored.sort(key=lambda x: (round(x[1], 9), x[0]))
    return scored


def is_approximate(store: MemoryStore) -> bool:
    """True when the backend declares approximate vector search."""
    return Capability.APPROXIMATE_SEARCH in store.capabilities()


def assert_hits_ordered(hits: Sequence[Hit], *, by: str = "distance") -> None:
    """Hits are best first; equal scores (the same to 6 decimals and within float noise) are
    ordered by record id."""
    for a, b in zip(hits, hits[1:]):
        if by == "distance":
            da, db = float(a.distance), float(b.distance)  # type: ignore[arg-type]
            assert db >= da - 1e-5, f"hits out of order: {a.record.record_id}@{da} before {b.record.record_id}@{db}"
            tie = abs(da - db) <= 1e-7 and round(da, 6) == round(db, 6)
        else:
            sa, sb = float(a.score), float(b.score)  # type: ignore[arg-type]
            assert sb <= sa + 1e-6 * max(1.0, abs(sa)), f"hits out of order: {a.record.record_id}@{sa} before {b.record.record_id}@{sb}"
            tie = abs(sa - sb) <= 1e-9 * max(1.0, abs(sa)) and round(sa, 6) == round(sb, 6)
        if tie:
            assert a.record.record_id < b.record.record_id, (
                f"tied hits must be ordered by record id: {a.record.record_id!r} came before {b.record.record_id!r}"
            )


def assert_vector_ids(store: MemoryStore, hits: Sequence[Any], expected: Sequence[str]) -> None:
    """Vector-search results (SPI hits or client results) are ``expected`` in order: exactly
    for exact backends; for approximate ones a subsequence keeping the order and reaching the
    declared ``min_recall_at_10``."""
    got = [h.record.record_id for h in hits]
    if not is_approximate(store):
        assert got == list(expected), f"vector search returned {got}, expected {list(expected)}"
        return
    position = {rid: i for i, rid in enumerate(expected)}
    assert all(rid in position for rid in got), f"vector search returned ineligible {[r for r in got if r not in position]}"
    assert [position[r] for r in got] == sorted(position[r] for r in got), f"vector search order {got} differs from {list(expected)}"
    if expected:
        recall = len(set(got)) / len(expected)
        assert recall >= store.min_recall_at_10 - 1e-9, f"recall {recall:.2f} < min_recall_at_10={store.min_recall_at_10}: {got} vs {list(expected)}"


def assert_vector_hits(
    store: MemoryStore,
    hits: Sequence[Hit],
    expected: Sequence[tuple[str, float]],
    k: int,
    *,
    recall_floor: float | None = None,
) -> None:
    """Check ``hits`` against the exact ranking ``expected`` (every eligible candidate).

    Exact backends: the same ids in the same order, distances within 1e-4 (ties at the cut may
    be resolved either way only when the distances are equal). Approximate backends: no
    ineligible record, correct distances, best-first order, and recall@k at least
    ``store.min_recall_at_10``.
    """
    want = {rid: d for rid, d in expected}
    got = ids(hits)
    assert len(set(got)) == len(got), f"duplicate hits: {got}"
    for hit in hits:
        rid = hit.record.record_id
        assert rid in want, f"hit {rid!r} is not an eligible candidate (filter or vector ignored)"
        assert hit.distance is not None, f"vector hit {rid!r} carries no distance"
        assert math.isclose(hit.distance, want[rid], abs_tol=1e-4), (
            f"distance of {rid!r}: got {hit.distance}, expected {want[rid]} (cosine distance = 1 - cos)"
        )
    assert_hits_ordered(hits)
    top = list(expected[:k])
    if is_approximate(store):
        assert len(got) <= k
        if top:
            floor = store.min_recall_at_10 if recall_floor is None else recall_floor
            recall = len(set(got) & {rid for rid, _ in top}) / len(top)
            assert recall >= floor - 1e-9, (
                f"recall {recall:.2f} below the declared min_recall_at_10={floor}: "
                f"got {got}, expected {[r for r, _ in top]}"
            )
        return
    assert len(got) == len(top), f"expected {len(top)} hits, got {len(got)}: {got}"
    if top:
        cut = top[-1][1]
        must = [rid for rid, d in top if d < cut - 1e-6]
        missing = [rid for rid in must if rid not in got]
        assert not missing, f"exact search missed {missing}: got {got}, expected {[r for r, _ in top]}"
        for rid in got:
            assert want[rid] <= cut + 1e-6, f"{rid!r} is not among the {k} nearest: got {got}"


# ---- side by side with the reference ---------------------------------------------------------
def reference_twin(store: MemoryStore) -> InMemoryStore:
    """An open ``InMemoryStore`` with ``store``'s dimension and keyword analyser language (the
    store's ``analyzer``, else English): write the same batches to both, then compare reads."""
    language = getattr(getattr(store, "analyzer", None), "language", None)
    twin = InMemoryStore(language=language)
    twin.open(dimension=store.dimension)
    return twin


def assert_reads_agree(
    api: Api,
    ref: MemoryStore,
    flt: RecordFilter,
    *,
    vector: np.ndarray | None = None,
    text: str | None = None,
    k: int = 50,
    what: str = "",
) -> None:
    """``query``, ``count`` and (given a probe) vector and keyword search through ``api`` return
    exactly what the reference ``ref`` returns for ``flt``: records field by field with exact
    types (``seq`` aside: its values are the store's own), hits in the same order with the same
    distances and BM25 scores. Approximate backends: vector hits are eligible, exact in every
    field and keep the declared recall."""
    label = f"{what} [{api.mode}] {flt}"
    want = ref.query(flt)
    assert_same(api.query(flt), want, seq=False, what=f"query {label}")
    assert api.count(flt) == len(want), f"count {label}: got {api.count(flt)}, expected {len(want)}"
    if vector is not None:
        expected = ref.vector_search(vector, flt, 10_000)
        hits = api.vector_search(vector, flt, k)
        if is_approximate(api.store):
            assert_vector_hits(api.store, hits, [(h.record.record_id, float(h.distance or 0.0)) for h in expected], k)
            by_id = {h.record.record_id: h for h in expected}
            for hit in hits:
                assert_same(hit, by_id[hit.record.record_id], seq=False, what=f"vector_search {label}")
        else:
            assert_same(hits, expected[:k], seq=False, what=f"vector_search {label}")
    if text is not None and Capability.KEYWORD_SEARCH in api.store.capabilities():
        assert_same(api.keyword_search(text, flt, k), ref.keyword_search(text, flt, k), seq=False,
                    what=f"keyword_search({text!r}) {label}")


def write_both(api: Api, ref: MemoryStore, batch: Any) -> list[Record]:
    """Apply ``batch`` to the reference and through ``api``; the write results agree exactly
    (``seq`` aside). Returns the backend's result."""
    want = ref.write(batch)
    got = api.write(batch)
    assert_same(got, want, seq=False, what=f"write() [{api.mode}]")
    return got
