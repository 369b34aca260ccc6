"""Model-based testing: a Hypothesis state machine drives the backend under test and the
reference store (``InMemoryStore``) side by side and compares every observable result.

Each step picks the sync or the async API (async calls run on one event loop per store
instance), so a bug on one path only is found. Writes (single and mixed batches, mid-batch
faults), reads (filters, order, windows, seq bounds), links, vector and keyword search and,
for ``PERSISTENCE`` backends, close-and-reopen are all rules. Keyword search is compared as the
set of matching ids (scores are backend-specific); vector search exactly for exact backends
and against the declared ``min_recall_at_10`` (mean over the run) for approximate ones.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from agentmemory.errors import AgentMemoryError, Conflict, NotFound
from agentmemory.records import SEARCHABLE_TYPES, Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import (
    ANY,
    UNSET,
    Capability,
    MemoryStore,
    NewRecord,
    Order,
    RecordFilter,
    RecordPatch,
    WriteBatch,
)

from .faults import SECTIONS, arm
from .support import DIM, T0, Api, assert_hits_ordered, assert_vector_hits, close_loop, without_seq

PROFILE_SETTINGS: dict[str, dict[str, Any]] = {
    "smoke": {"max_examples": 8, "stateful_step_count": 15, "phases": (Phase.explicit, Phase.reuse, Phase.generate)},
    "ci": {"max_examples": 50, "stateful_step_count": 30},
    "remote": {"max_examples": 30, "stateful_step_count": 30},
    "nightly": {"max_examples": 1000, "stateful_step_count": 50},
}


def profile_settings(profile: str) -> settings:
    """Hypothesis settings of a suite profile (no deadline: backends do real I/O)."""
    if profile not in PROFILE_SETTINGS:
        raise ValueError(f"unknown profile {profile!r}; known: {', '.join(PROFILE_SETTINGS)}")
    return settings(
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
        print_blob=True,
        **PROFILE_SETTINGS[profile],
    )


# ---- strategies --------------------------------------------------------------------------------
RECORD_IDS = ("r0", "r1", "r2", "r3", "r4", "o'brien", 'q"uote;--', "per%cent_", "ünï-✓", "back\\slash")
"""Few ids, so adds collide and deletes hit; SQL and JSON metacharacters are valid ids."""
LINK_IDS = ("l0", "l1", "l2", "l'3")
USERS = (None, "u1", "u10")
AGENTS = (None, "a1")
THREADS = (None, "t1", "t'2")
WORDS = ("apple", "banana", "cherry", "falcon", "guitar", "harbor", "island", "jungle")
"""Distinct, non-stop-word, non-co-stemming words: every tokenizer agrees on matches."""
INSTANTS = tuple(T0 + timedelta(days=d) for d in range(4))
MODES = st.sampled_from(["sync", "async"])

record_ids = st.sampled_from(RECORD_IDS)
link_ids = st.sampled_from(LINK_IDS)
contents = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
small_values = st.one_of(st.integers(-2, 2), st.sampled_from(["x", "y", "it's"]), st.booleans(), st.none())
metadatas = st.dictionaries(
    st.sampled_from(["k", "n", "tags", "a.b"]),
    st.one_of(small_values, st.lists(st.sampled_from(["x", "y", "z"]), max_size=3), st.fixed_dictionaries({"d": small_values})),
    max_size=3,
)
vectors = st.lists(st.integers(-2, 2), min_size=DIM, max_size=DIM).filter(any).map(lambda v: np.asarray(v, dtype=np.float32))
metadata_filters = st.one_of(
    st.none(),
    st.fixed_dictionaries({"k": small_values}),
    st.fixed_dictionaries({"n": st.integers(-2, 2)}),
    st.fixed_dictionaries({"tags": st.sampled_from(["x", "y"]).map(lambda v: {"$array_contains": v})}),
    st.fixed_dictionaries({"tags": st.just({"$array_contains_any": ["y", "z"]})}),
    st.fixed_dictionaries({"k": small_values.map(lambda v: {"$not": v})}),
    st.fixed_dictionaries({"a.b": st.fixed_dictionaries({"d": small_values})}),
)


@st.composite
def records(draw: st.DrawFn) -> NewRecord:
    """A new record with a vector when its type is searchable (mostly)."""
    rtype = draw(st.sampled_from(list(RecordType)))
    rid = draw(record_ids)
    content = draw(contents) if rtype not in (RecordType.THREAD, RecordType.SUMMARY) else draw(st.sampled_from(["", "apple"]))
    record = Record(
        record_id=rid,
        record_type=rtype,
        content=content,
        user_id=draw(st.sampled_from(USERS)),
        agent_id=draw(st.sampled_from(AGENTS)),
        thread_id=draw(st.sampled_from(THREADS)),
        role=draw(st.sampled_from(["user", "assistant"])) if rtype is RecordType.MESSAGE else None,
        timestamp=draw(st.sampled_from(INSTANTS)),
        created_at=T0,
        expires_at=draw(st.sampled_from((None, *INSTANTS[1:]))),
        status=draw(st.sampled_from(list(RecordStatus))),
        metadata=draw(metadatas),
    )
    vector = draw(vectors) if rtype in SEARCHABLE_TYPES and draw(st.integers(0, 9)) > 0 else None
    return NewRecord(record=record, vector=vector)


@st.composite
def patches(draw: st.DrawFn) -> RecordPatch:
    """A patch of a pooled id with a random subset of fields."""
    fields: dict[str, Any] = {}
    if draw(st.booleans()):
        fields["content"] = draw(contents)
    if draw(st.booleans()):
        fields["metadata"] = draw(metadatas)
    if draw(st.booleans()):
        fields["status"] = draw(st.sampled_from(list(RecordStatus)))
    if draw(st.booleans()):
        fields["timestamp"] = draw(st.sampled_from(INSTANTS))
    if draw(st.booleans()):
        fields["expires_at"] = draw(st.sampled_from((None, *INSTANTS[1:])))
    if draw(st.booleans()):
        fields["vector"] = draw(st.one_of(st.none(), vectors))
    return RecordPatch(draw(record_ids), **fields)


links = st.builds(
    lambda lid, src, dst, ltype, meta: Link(link_id=lid, source_id=src, target_id=dst, link_type=ltype, created_at=T0, metadata=meta),
    link_ids, record_ids, record_ids, st.sampled_from(list(LinkType)), metadatas,
)


@st.composite
def filters(draw: st.DrawFn) -> dict[str, Any]:
    """Filter fields; ``seq_anchor``/``seq_bound`` name a record whose seq bounds the read."""
    spec: dict[str, Any] = {
        "user_id": draw(st.sampled_from((ANY, *USERS))),
        "agent_id": draw(st.sampled_from((ANY, *AGENTS))),
        "thread_id": draw(st.sampled_from((ANY, *THREADS))),
    }
    if draw(st.booleans()):
        spec["record_types"] = frozenset(draw(st.lists(st.sampled_from(list(RecordType)), min_size=1, max_size=3)))
    if draw(st.integers(0, 3)) == 0:
        spec["record_ids"] = tuple(draw(st.lists(record_ids, max_size=3, unique=True)))
    if draw(st.integers(0, 3)) == 0:
        spec["statuses"] = frozenset({draw(st.sampled_from(list(RecordStatus)))})
    spec["metadata_filter"] = draw(metadata_filters)
    if draw(st.booleans()):
        spec["alive_at"] = draw(st.sampled_from(INSTANTS))
    elif draw(st.integers(0, 5)) == 0:
        spec["expired_at"] = draw(st.sampled_from(INSTANTS))
    if draw(st.integers(0, 3)) == 0:
        spec["seq_bound"] = (draw(st.sampled_from(["min_seq", "max_seq"])), draw(record_ids))
    return spec


# ---- the machine -------------------------------------------------------------------------------
class StoreComparison(RuleBasedStateMachine):
    """The backend under test and ``InMemoryStore`` in lockstep. Bind ``factory`` and
    ``base_dir`` with ``make_state_machine``."""

    factory: Callable[[Path], MemoryStore]
    base_dir: Path

    def __init__(self) -> None:
        super().__init__()
        self.path = self.base_dir / uuid.uuid4().hex[:12]
        self.model = InMemoryStore()
        self.model.open(dimension=DIM)
        self.sut = self._build()
        self.caps = self.sut.capabilities()
        self.seq_sut: dict[str, int] = {}
        self.seq_model: dict[str, int] = {}
        self.max_seq = 0
        self.recalls: list[float] = []

    def _build(self) -> MemoryStore:
        store = type(self).factory(self.path)
        store.open(dimension=DIM)
        return store

    def api(self, mode: str) -> Api:
        """The SUT's API in ``mode``."""
        return Api(self.sut, mode)

    def teardown(self) -> None:
        try:
            self._check_recall_floor()
        finally:
            try:
                self.sut.close()
            finally:
                close_loop(self.sut)
                self.model.close()
                shutil.rmtree(self.path, ignore_errors=True)

    # ---- writes ------------------------------------------------------------------------------
    def _apply(self, batch: WriteBatch, mode: str, *, exact_error: bool = True) -> None:
        note(f"write[{mode}]: {batch}")
        try:
            expected = self.model.write(batch)
            model_error: AgentMemoryError | None = None
        except AgentMemoryError as exc:
            model_error = exc
        try:
            got = self.api(mode).write(batch)
            sut_error: AgentMemoryError | None = None
        except AgentMemoryError as exc:
            sut_error = exc
        if model_error is not None:
            assert sut_error is not None, f"the reference raised {model_error!r}; the backend wrote the batch"
            if exact_error:
                assert type(sut_error) is type(model_error) or isinstance(sut_error, type(model_error)), (
                    f"expected {type(model_error).__name__}, backend raised {sut_error!r}"
                )
            else:
                assert isinstance(sut_error, (Conflict, NotFound)) and isinstance(model_error, (Conflict, NotFound)) or type(sut_error) is type(model_error), (
                    f"expected {type(model_error).__name__} (or Conflict/NotFound), backend raised {sut_error!r}"
                )
            return
        assert sut_error is None, f"the backend raised {sut_error!r} on a batch the reference accepted"
        assert [without_seq(r) for r in got] == [without_seq(r) for r in expected]
        for m_rec, s_rec in zip(expected, got):
            assert s_rec.seq > self.max_seq, f"seq {s_rec.seq} of {s_rec.record_id!r} is not above earlier seq {self.max_seq}"
            self.max_seq = s_rec.seq
            self.seq_sut[s_rec.record_id] = s_rec.seq
            self.seq_model[m_rec.record_id] = m_rec.seq

    @rule(items=st.lists(records(), min_size=1, max_size=3), mode=MODES)
    def add(self, items: list[NewRecord], mode: str) -> None:
        """Add records (ids collide often: Conflict and in-batch duplicates)."""
        self._apply(WriteBatch(add=items), mode)

    @rule(patch=patches(), mode=MODES)
    def patch(self, patch: RecordPatch, mode: str) -> None:
        """Patch one record (missing ids: NotFound)."""
        self._apply(WriteBatch(patch=[patch]), mode)

    @rule(rids=st.lists(record_ids, min_size=1, max_size=2, unique=True), mode=MODES)
    def delete(self, rids: list[str], mode: str) -> None:
        """Delete records and their links."""
        self._apply(WriteBatch(delete=rids), mode)

    @rule(lk=links, mode=MODES)
    def add_link(self, lk: Link, mode: str) -> None:
        """Link two records (self links, missing ends, duplicate pairs all error)."""
        self._apply(WriteBatch(add_links=[lk]), mode)

    @rule(lid=link_ids, mode=MODES)
    def delete_link(self, lid: str, mode: str) -> None:
        """Delete a link."""
        self._apply(WriteBatch(delete_links=[lid]), mode)

    @rule(
        adds=st.lists(records(), max_size=2),
        pts=st.lists(patches(), max_size=2),
        add_links=st.lists(links, max_size=2),
        delete_links=st.lists(link_ids, max_size=1, unique=True),
        deletes=st.lists(record_ids, max_size=2, unique=True),
        mode=MODES,
    )
    def mixed_batch(self, adds: list[NewRecord], pts: list[RecordPatch], add_links: list[Link], delete_links: list[str], deletes: list[str], mode: str) -> None:
        """Every section at once: order and atomicity."""
        self._apply(WriteBatch(add=adds, patch=pts, add_links=add_links, delete_links=delete_links, delete=deletes), mode, exact_error=False)

    @rule(
        adds=st.lists(records(), min_size=1, max_size=3),
        pts=st.lists(patches(), max_size=2),
        deletes=st.lists(record_ids, max_size=2, unique=True),
        where=st.data(),
        mode=MODES,
    )
    def faulty_batch(self, adds: list[NewRecord], pts: list[RecordPatch], deletes: list[str], where: st.DataObject, mode: str) -> None:
        """A batch that fails inside the backend part-way must leave no trace."""
        batch = WriteBatch(add=adds, patch=pts, delete=deletes)
        section = where.draw(st.sampled_from([s for s in SECTIONS if len(getattr(batch, s))]), label="section")
        fail_at = where.draw(st.integers(0, len(getattr(batch, section)) - 1), label="fail_at")
        armed = arm(batch, section, fail_at)
        note(f"faulty write[{mode}] at {section}[{fail_at}]: {batch}")
        try:
            got = self.api(mode).write(armed)
        except AgentMemoryError:
            return  # injected (or the batch's own error before the fault): nothing may be written
        # the backend finished without reaching the faulty item: it must equal the reference
        assert not getattr(armed, section).fired, "the injected fault fired but the write reported success"
        expected = self.model.write(batch)
        assert [without_seq(r) for r in got] == [without_seq(r) for r in expected]
        for m_rec, s_rec in zip(expected, got):
            self.seq_model[m_rec.record_id] = m_rec.seq
            self.seq_sut[s_rec.record_id] = s_rec.seq
            self.max_seq = max(self.max_seq, s_rec.seq)

    @precondition(lambda self: Capability.PERSISTENCE in self.caps)
    @rule()
    def reopen(self) -> None:
        """Close the backend and open a new instance on the same path."""
        note("reopen")
        self.sut.close()
        close_loop(self.sut)
        self.sut = self._build()

    # ---- reads -------------------------------------------------------------------------------
    def _filters(self, spec: dict[str, Any]) -> tuple[RecordFilter, RecordFilter]:
        spec = dict(spec)
        bound = spec.pop("seq_bound", None)
        model_spec, sut_spec = dict(spec), dict(spec)
        if bound is not None:
            name, rid = bound
            if rid in self.seq_model and rid in self.seq_sut:
                model_spec[name] = self.seq_model[rid]
                sut_spec[name] = self.seq_sut[rid]
        return RecordFilter(**model_spec), RecordFilter(**sut_spec)

    @rule(spec=filters(), order=st.sampled_from(list(Order)), limit=st.one_of(st.none(), st.integers(0, 4)), offset=st.integers(0, 3), mode=MODES)
    def query(self, spec: dict[str, Any], order: Order, limit: int | None, offset: int, mode: str) -> None:
        """``query`` returns the same records in the same order."""
        mflt, sflt = self._filters(spec)
        note(f"query[{mode}] {sflt} order={order.value} limit={limit} offset={offset}")
        expected = self.model.query(mflt, order=order, limit=limit, offset=offset)
        got = self.api(mode).query(sflt, order=order, limit=limit, offset=offset)
        assert [without_seq(r) for r in got] == [without_seq(r) for r in expected]

    @rule(spec=filters(), mode=MODES)
    def count(self, spec: dict[str, Any], mode: str) -> None:
        """``count`` agrees."""
        mflt, sflt = self._filters(spec)
        note(f"count[{mode}] {sflt}")
        assert self.api(mode).count(sflt) == self.model.count(mflt)

    @rule(
        rids=st.one_of(st.none(), st.lists(record_ids, max_size=3)),
        lids=st.one_of(st.none(), st.lists(link_ids, max_size=2)),
        mode=MODES,
    )
    def read_links(self, rids: list[str] | None, lids: list[str] | None, mode: str) -> None:
        """``links`` agrees."""
        note(f"links[{mode}] record_ids={rids} link_ids={lids}")
        assert self.api(mode).links(record_ids=rids, link_ids=lids) == self.model.links(record_ids=rids, link_ids=lids)

    @rule(vector=vectors, spec=filters(), k=st.integers(1, 6), mode=MODES)
    def vector_search(self, vector: np.ndarray, spec: dict[str, Any], k: int, mode: str) -> None:
        """Vector search: exact backends match the reference; approximate ones never return an
        ineligible record and keep the declared recall on average."""
        mflt, sflt = self._filters(spec)
        note(f"vector_search[{mode}] {vector.tolist()} {sflt} k={k}")
        expected = [(h.record.record_id, float(h.distance or 0.0)) for h in self.model.vector_search(vector, mflt, 10_000)]
        hits = self.api(mode).vector_search(vector, sflt, k)
        if Capability.APPROXIMATE_SEARCH in self.caps:
            want = {rid for rid, _ in expected[:k]}
            if want:
                self.recalls.append(len(want & {h.record.record_id for h in hits}) / len(want))
            # per query: eligibility, distances and order; recall is judged on the mean
            assert_vector_hits(self.sut, hits, expected, k, recall_floor=0.0)
            return
        assert_vector_hits(self.sut, hits, expected, k)
        by_id = {h.record.record_id: h.record for h in self.model.vector_search(vector, mflt, 10_000)}
        for hit in hits:
            assert without_seq(hit.record) == without_seq(by_id[hit.record.record_id])

    @precondition(lambda self: Capability.KEYWORD_SEARCH in self.caps)
    @rule(words=st.lists(st.sampled_from(WORDS + ("zebra",)), min_size=1, max_size=3), spec=filters(), k=st.integers(1, 6), mode=MODES)
    def keyword_search(self, words: list[str], spec: dict[str, Any], k: int, mode: str) -> None:
        """Keyword search: the same set of matching ids (scores are the backend's own)."""
        mflt, sflt = self._filters(spec)
        text = " ".join(words)
        note(f"keyword_search[{mode}] {text!r} {sflt} k={k}")
        expected = {h.record.record_id for h in self.model.keyword_search(text, mflt, 10_000)}
        full = self.api(mode).keyword_search(text, sflt, 10_000)
        assert {h.record.record_id for h in full} == expected
        top = self.api(mode).keyword_search(text, sflt, k)
        assert {h.record.record_id for h in top} <= expected and len(top) == min(k, len(expected))
        assert_hits_ordered(full, by="score")

    # ---- invariants --------------------------------------------------------------------------
    @invariant()
    def same_state(self) -> None:
        """Records (in seq order, with the seq values the backend returned) and links agree."""
        expected = self.model.query(RecordFilter())
        got = self.sut.query(RecordFilter())
        assert [without_seq(r) for r in got] == [without_seq(r) for r in expected]
        for r in got:
            assert self.seq_sut.get(r.record_id) == r.seq, f"seq of {r.record_id!r} changed from {self.seq_sut.get(r.record_id)} to {r.seq}"
        assert self.sut.links() == self.model.links()

    def _check_recall_floor(self) -> None:
        if len(self.recalls) >= 5:
            mean = sum(self.recalls) / len(self.recalls)
            assert mean >= self.sut.min_recall_at_10 - 1e-9, f"mean recall {mean:.3f} < declared {self.sut.min_recall_at_10}"


def make_state_machine(factory: Callable[[Path], MemoryStore], base_dir: Path) -> type[StoreComparison]:
    """A ``StoreComparison`` bound to a store factory and a directory for its stores."""
    return type("BoundStoreComparison", (StoreComparison,), {"factory": staticmethod(factory), "base_dir": Path(base_dir)})


def run_comparison(factory: Callable[[Path], MemoryStore], base_dir: Path, *, profile: str = "ci") -> None:
    """Run the state machine with a suite profile (``smoke``, ``ci``, ``remote``, ``nightly``)."""
    machine = make_state_machine(factory, base_dir)
    run_state_machine_as_test(machine, settings=profile_settings(profile))


_ = UNSET
