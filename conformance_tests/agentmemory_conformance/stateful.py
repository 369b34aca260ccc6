"""Model-based testing: a Hypothesis state machine drives the backend under test and the
reference store (``InMemoryStore``) side by side and compares every observable result.

Each step picks the sync or the async API (async calls run on one event loop per store
instance), so a bug on one path only is found. Writes (single and mixed batches, mid-batch
faults), reads (filters, order, windows, seq bounds), links, vector and keyword search and,
for ``PERSISTENCE`` backends, close-and-reopen are all rules. Records, links and hits are
compared field by field with exact JSON types (``support.assert_same``). Keyword search is
compared hit by hit: the same ids in the same order with the reference's BM25 scores (every
backend scores the shared analyser's terms with ``agentmemory.bm25``); vector search exactly
for exact backends and against the declared ``min_recall_at_10`` (mean over the run) for
approximate ones. Runs reuse deleted ids, grow past 100 records (bulk steps: windows and
unlimited async reads over many rows) and mix time zones in every time field and bound.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentmemory.bulk import RecordColumns
from agentmemory.errors import AgentMemoryError, Conflict, NotFound
from agentmemory.records import SEARCHABLE_TYPES, Link, LinkType, Record, RecordStatus, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import (
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
from .support import DIM, T0, Api, assert_hits_ordered, assert_same, assert_vector_hits, close_loop, loop_for

PROFILE_SETTINGS: dict[str, dict[str, Any]] = {
    "smoke": {"max_examples": 8, "stateful_step_count": 15, "phases": (Phase.explicit, Phase.reuse, Phase.generate)},
    "ci": {"max_examples": 40, "stateful_step_count": 30},
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
FRESH_IDS = ("o'brien", 'q"uote;--', "per%cent_", "ünï-✓", "back\\slash", "{json}", "emoji-🧠")
"""Ids full of SQL, JSON and unicode metacharacters are valid ids; fresh ids cycle through them."""
MISSING_IDS = ("ghost", "r'ghost")
USERS = (None, "u1", "u10")
"""``u10`` shares a prefix with ``u1`` (LIKE bugs)."""
AGENTS = (None, "a1")
THREADS = (None, "t1", "t'2")
WORDS = ("apple", "banana", "cherry", "falcon", "guitar", "harbor", "island", "jungle", "Running", "runs",
         "snake_case", "ünïcødé", "日本語", "Café")
"""Keyword words: plain ones, two that stem alike (``running``/``runs``), one joined by ``_``
(one term for the shared analyser), accented and non-Latin ones (no folding), mixed case."""
ZONES = (timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8)), timezone(timedelta(hours=14)))
"""Offsets every time value is drawn in: the same instant in two zones is one instant."""
INSTANTS = tuple(T0 + timedelta(days=d) for d in range(4))
instants = st.tuples(st.sampled_from(INSTANTS), st.sampled_from(ZONES)).map(lambda p: p[0].astimezone(p[1]))
"""One of ``INSTANTS`` expressed in one of ``ZONES``."""
expiries = st.one_of(st.none(), st.tuples(st.sampled_from(INSTANTS[1:]), st.sampled_from(ZONES)).map(lambda p: p[0].astimezone(p[1])))
MODES = st.sampled_from(["sync", "async"])

contents = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
small_values = st.one_of(st.integers(-2, 2), st.sampled_from(["x", "y", "it's"]), st.booleans(), st.none())
metadatas = st.dictionaries(
    st.sampled_from(["k", "n", "tags", "a.b"]),
    st.one_of(small_values, st.lists(st.sampled_from(["x", "y", "z"]), max_size=3), st.fixed_dictionaries({"d": small_values})),
    max_size=3,
)
vectors = st.lists(st.integers(-2, 2), min_size=DIM, max_size=DIM).filter(any).map(lambda v: np.asarray(v, dtype=np.float32))
metadata_filters = st.one_of(
    st.fixed_dictionaries({"k": small_values}),
    st.fixed_dictionaries({"n": st.integers(-2, 2)}),
    st.fixed_dictionaries({"tags": st.sampled_from(["x", "y"]).map(lambda v: {"$array_contains": v})}),
    st.fixed_dictionaries({"tags": st.just({"$array_contains_any": ["y", "z"]})}),
    st.fixed_dictionaries({"k": small_values.map(lambda v: {"$not": v})}),
    st.fixed_dictionaries({"a.b": st.fixed_dictionaries({"d": small_values})}),
)


def chance(data: st.DataObject, percent: int) -> bool:
    """True with about ``percent`` % probability (shrinks towards False)."""
    return data.draw(st.integers(0, 99)) >= 100 - percent


def draw_record(data: st.DataObject, rid: str) -> NewRecord:
    """A new record with id ``rid``; searchable types get a vector (mostly)."""
    rtype = data.draw(st.sampled_from(list(RecordType)), label="record_type")
    if rtype in (RecordType.THREAD, RecordType.SUMMARY):
        content = data.draw(st.sampled_from(["", "apple"]))
    else:
        content = data.draw(contents)
    record = Record(
        record_id=rid,
        record_type=rtype,
        content=content,
        user_id=data.draw(st.sampled_from(USERS)),
        agent_id=data.draw(st.sampled_from(AGENTS)),
        thread_id=data.draw(st.sampled_from(THREADS)),
        role=data.draw(st.sampled_from(["user", "assistant"])) if rtype is RecordType.MESSAGE else None,
        timestamp=data.draw(instants),
        created_at=data.draw(instants),
        expires_at=data.draw(expiries),
        status=data.draw(st.sampled_from(list(RecordStatus))),
        metadata=data.draw(metadatas),
    )
    vector = data.draw(vectors) if rtype in SEARCHABLE_TYPES and not chance(data, 10) else None
    return NewRecord(record=record, vector=vector)


def draw_patch(data: st.DataObject, rid: str) -> RecordPatch:
    """A patch of ``rid`` with a random, non-empty subset of fields."""
    fields: dict[str, Any] = {}
    while not fields:
        if chance(data, 50):
            fields["content"] = data.draw(contents)
        if chance(data, 40):
            fields["metadata"] = data.draw(metadatas)
        if chance(data, 40):
            fields["status"] = data.draw(st.sampled_from(list(RecordStatus)))
        if chance(data, 25):
            fields["timestamp"] = data.draw(instants)
        if chance(data, 30):
            fields["expires_at"] = data.draw(expiries)
        if chance(data, 30):
            fields["vector"] = data.draw(st.one_of(st.none(), vectors))
    return RecordPatch(rid, **fields)


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
        self.fresh = 0
        self.deleted: set[str] = set()
        """Ids deleted during the run: new records reuse them (stale vectors, index rows)."""
        self.bulked = False
        self.recalls: list[float] = []

    def _build(self) -> MemoryStore:
        store = type(self).factory(self.path)
        store.open(dimension=DIM)
        return store

    def api(self, mode: str) -> Api:
        """The SUT's API in ``mode``."""
        return Api(self.sut, mode)

    # ---- drawing ids from the current state ----------------------------------------------------
    def _ids(self) -> list[str]:
        return sorted(r.record_id for r in self.model.query(RecordFilter()))

    def existing_id(self, data: st.DataObject, missing: int = 10) -> str:
        """Mostly a stored id, sometimes (``missing`` %) a missing one (NotFound paths)."""
        stored = self._ids()
        if stored and not chance(data, missing):
            return data.draw(st.sampled_from(stored), label="existing id")
        return data.draw(st.sampled_from(MISSING_IDS), label="missing id")

    def new_id(self, data: st.DataObject) -> str:
        """Mostly a fresh id, sometimes a stored one (Conflict paths) or a deleted one (its old
        vector, index rows and links must not come back)."""
        stored = self._ids()
        if stored and chance(data, 8):
            return data.draw(st.sampled_from(stored), label="taken id")
        reusable = sorted(self.deleted - set(stored))
        if reusable and chance(data, 25):
            return data.draw(st.sampled_from(reusable), label="deleted id")
        return self._fresh_id()

    def _forget(self, batch: WriteBatch, added: list[Record]) -> None:
        """Remember the ids a successful ``batch`` deleted (and that it re-added)."""
        self.deleted.difference_update(r.record_id for r in added)
        self.deleted.update(batch.delete)

    def _fresh_id(self) -> str:
        self.fresh += 1
        n = self.fresh
        return FRESH_IDS[n % len(FRESH_IDS)] + str(n // len(FRESH_IDS)) if n % 2 else f"r{n}"

    def draw_link(self, data: st.DataObject) -> Link:
        """A link between (mostly) stored records, with a fresh or (sometimes) taken link id."""
        taken = [lk.link_id for lk in self.model.links()]
        if taken and chance(data, 10):
            lid = data.draw(st.sampled_from(taken), label="taken link id")
        else:
            self.fresh += 1
            lid = f"l'{self.fresh}" if self.fresh % 3 == 0 else f"l{self.fresh}"
        src = self.existing_id(data)
        dst = src if chance(data, 5) else self.existing_id(data)
        return Link(
            link_id=lid, source_id=src, target_id=dst, link_type=data.draw(st.sampled_from(list(LinkType))),
            created_at=data.draw(instants), metadata=data.draw(metadatas),
        )

    def existing_link_id(self, data: st.DataObject) -> str:
        """Mostly a stored link id, sometimes a missing one."""
        taken = [lk.link_id for lk in self.model.links()]
        if taken and not chance(data, 15):
            return data.draw(st.sampled_from(taken), label="link id")
        return "no-such-link"

    def draw_filter(self, data: st.DataObject) -> dict[str, Any]:
        """Filter fields, each condition optional; ``seq_bound`` names a record whose seq bounds
        the read (each store's own seq values are used)."""
        spec: dict[str, Any] = {}
        for dim, values in (("user_id", USERS), ("agent_id", AGENTS), ("thread_id", THREADS)):
            if chance(data, 30):
                spec[dim] = data.draw(st.sampled_from(values), label=dim)
        if chance(data, 15):
            spec["record_types"] = frozenset(data.draw(st.lists(st.sampled_from(list(RecordType)), min_size=2, max_size=6)))
        if chance(data, 10):
            spec["record_ids"] = tuple(sorted({self.existing_id(data) for _ in range(data.draw(st.integers(0, 3)))}))
        if chance(data, 15):
            spec["statuses"] = frozenset({data.draw(st.sampled_from(list(RecordStatus)))})
        if chance(data, 15):
            spec["metadata_filter"] = data.draw(metadata_filters)
        if chance(data, 25):
            spec["alive_at"] = data.draw(instants)
        elif chance(data, 10):
            spec["expired_at"] = data.draw(instants)
        if chance(data, 10) and self.seq_model:
            spec["seq_bound"] = (data.draw(st.sampled_from(["min_seq", "max_seq"])), data.draw(st.sampled_from(sorted(self.seq_model))))
        return spec

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
        assert_same(got, expected, seq=False, what=f"write[{mode}] result")
        self._forget(batch, expected)
        for m_rec, s_rec in zip(expected, got):
            assert s_rec.seq > self.max_seq, f"seq {s_rec.seq} of {s_rec.record_id!r} is not above earlier seq {self.max_seq}"
            self.max_seq = s_rec.seq
            self.seq_sut[s_rec.record_id] = s_rec.seq
            self.seq_model[m_rec.record_id] = m_rec.seq

    @rule(data=st.data(), mode=MODES)
    def add(self, data: st.DataObject, mode: str) -> None:
        """Add 1-3 records (mostly fresh ids; taken ones give Conflict, repeats InvalidArgument)."""
        n = data.draw(st.integers(1, 3), label="how many")
        self._apply(WriteBatch(add=[draw_record(data, self.new_id(data)) for _ in range(n)]), mode)

    @rule(data=st.data(), mode=MODES)
    def patch(self, data: st.DataObject, mode: str) -> None:
        """Patch one record (missing ids: NotFound)."""
        self._apply(WriteBatch(patch=[draw_patch(data, self.existing_id(data))]), mode)

    @rule(data=st.data(), mode=MODES)
    def delete(self, data: st.DataObject, mode: str) -> None:
        """Delete records and their links."""
        rids = sorted({self.existing_id(data) for _ in range(data.draw(st.integers(1, 2)))})
        self._apply(WriteBatch(delete=rids), mode)

    @initialize(data=st.data(), mode=MODES)
    def seed(self, data: st.DataObject, mode: str) -> None:
        """Start every run with a few records (and links), so reads have something to see."""
        n = data.draw(st.integers(2, 8), label="seed records")
        self._apply(WriteBatch(add=[draw_record(data, self.new_id(data)) for _ in range(n)]), mode)
        for _ in range(data.draw(st.integers(0, 2), label="seed links")):
            self._apply(WriteBatch(add_links=[self.draw_link(data)]), mode)

    @rule(data=st.data(), mode=MODES)
    def add_link(self, data: st.DataObject, mode: str) -> None:
        """Link two records (self links, missing ends, duplicate pairs all error)."""
        self._apply(WriteBatch(add_links=[self.draw_link(data)]), mode)

    @rule(data=st.data(), mode=MODES)
    def delete_link(self, data: st.DataObject, mode: str) -> None:
        """Delete a link."""
        self._apply(WriteBatch(delete_links=[self.existing_link_id(data)]), mode)

    def _draw_batch(self, data: st.DataObject, *, links: bool) -> WriteBatch:
        # one "poisoned" batch in five refers to something missing; the others should succeed
        missing = 30 if chance(data, 20) else 0
        adds = [draw_record(data, self.new_id(data)) for _ in range(data.draw(st.integers(0, 2)))]
        pts = [draw_patch(data, self.existing_id(data, missing)) for _ in range(data.draw(st.integers(0, 2)))] if self._ids() else []
        add_links = [self.draw_link(data) for _ in range(data.draw(st.integers(0, 2)))] if links and len(self._ids()) > 1 else []
        delete_links = sorted({self.existing_link_id(data) for _ in range(data.draw(st.integers(0, 1)))}) if links and self.model.links() else []
        deletes = sorted({self.existing_id(data, missing) for _ in range(data.draw(st.integers(0, 1)))}) if self._ids() else []
        return WriteBatch(add=adds, patch=pts, add_links=add_links, delete_links=delete_links, delete=deletes)

    @rule(data=st.data(), mode=MODES)
    def mixed_batch(self, data: st.DataObject, mode: str) -> None:
        """Every section at once: order and atomicity."""
        self._apply(self._draw_batch(data, links=True), mode, exact_error=False)

    @rule(data=st.data(), mode=MODES)
    def faulty_batch(self, data: st.DataObject, mode: str) -> None:
        """A batch that fails inside the backend part-way must leave no trace."""
        batch = self._draw_batch(data, links=True)
        sections = [s for s in SECTIONS if len(getattr(batch, s))]
        if not sections:
            return
        section = data.draw(st.sampled_from(sections), label="section")
        fail_at = data.draw(st.integers(0, len(getattr(batch, section)) - 1), label="fail_at")
        armed = arm(batch, section, fail_at)
        note(f"faulty write[{mode}] at {section}[{fail_at}]: {batch}")
        try:
            got = self.api(mode).write(armed)
        except AgentMemoryError:
            return  # injected (or the batch's own error before the fault): nothing may be written
        # the backend finished without reaching the faulty item: it must equal the reference
        assert not getattr(armed, section).fired, "the injected fault fired but the write reported success"
        expected = self.model.write(batch)
        assert_same(got, expected, seq=False, what=f"faulty write[{mode}] result")
        self._forget(batch, expected)
        for m_rec, s_rec in zip(expected, got):
            self.seq_model[m_rec.record_id] = m_rec.seq
            self.seq_sut[s_rec.record_id] = s_rec.seq
            self.max_seq = max(self.max_seq, s_rec.seq)

    @precondition(lambda self: not self.bulked)
    @rule(seed=st.integers(0, 2**16), n=st.integers(90, 110), taken=st.integers(0, 9), columnar=st.booleans(), mode=MODES)
    def add_many(self, seed: int, n: int, taken: int, columnar: bool, mode: str) -> None:
        """Add ``n`` generated records at once (once per run), through ``bulk_add`` or one
        ``write``: runs cross 100 records (windows and unlimited reads over many rows, in both
        modes). One step in ten ends with an id already stored: nothing of it may land."""
        import random

        self.bulked = True
        rnd = random.Random(seed)
        columnar = columnar and n > 0
        rows = [self._generated(rnd, self._fresh_id(), vector=True if columnar else None) for _ in range(n)]
        stored = self._ids()
        if taken == 0 and stored:
            clash = rows[-2].record.model_copy(update={"record_id": rnd.choice(stored)})
            rows[-2] = NewRecord(record=clash, vector=rows[-2].vector)
        if not columnar:
            self._apply(WriteBatch(add=rows), mode)
            return
        columns = RecordColumns(
            record_id=[r.record.record_id for r in rows], content=[r.record.content for r in rows],
            record_type=[r.record.record_type for r in rows], timestamp=[r.record.timestamp for r in rows],
            created_at=[r.record.created_at for r in rows], user_id=[r.record.user_id for r in rows],
            agent_id=[r.record.agent_id for r in rows], thread_id=[r.record.thread_id for r in rows],
            role=[r.record.role for r in rows], expires_at=[r.record.expires_at for r in rows],
            status=[r.record.status for r in rows], metadata=[r.record.metadata for r in rows],
            vectors=np.stack([r.vector for r in rows if r.vector is not None]),
        )
        note(f"bulk_add[{mode}] of {n} rows (seed {seed}, clash: {taken == 0 and bool(stored)})")
        try:
            expected = self.model.bulk_add(columns)
            model_error: AgentMemoryError | None = None
        except AgentMemoryError as exc:
            model_error = exc
        try:
            got = self.api(mode).bulk_add(columns)
            sut_error: AgentMemoryError | None = None
        except AgentMemoryError as exc:
            sut_error = exc
        if model_error is not None:
            assert isinstance(sut_error, type(model_error)), f"the reference raised {model_error!r}; the backend: {sut_error!r}"
            return
        assert sut_error is None, f"the backend raised {sut_error!r} on rows the reference accepted"
        assert got == expected == n
        ids = tuple(columns.record_id)
        for store, seqs in ((self.model, self.seq_model), (self.sut, self.seq_sut)):
            for r in store.query(RecordFilter(record_ids=ids)):
                seqs[r.record_id] = r.seq
        new_seqs = [self.seq_sut[rid] for rid in ids]
        assert new_seqs == sorted(new_seqs) and new_seqs[0] > self.max_seq, f"bulk_add seq values {new_seqs[:3]}... not after {self.max_seq} in row order"
        self.max_seq = new_seqs[-1]
        self.deleted.difference_update(ids)

    def _generated(self, rnd: Any, rid: str, *, vector: bool | None) -> NewRecord:
        """A record drawn from ``rnd`` (bulk steps: cheap for Hypothesis, shrinks by seed).
        ``vector=True``: always a searchable type with a vector; None: mostly."""
        rtype = rnd.choice(sorted(SEARCHABLE_TYPES) if vector else list(RecordType))
        empty_ok = rtype in (RecordType.THREAD, RecordType.SUMMARY)
        content = "" if empty_ok and rnd.random() < 0.5 else " ".join(rnd.choices(WORDS, k=rnd.randint(1, 4)))
        zone = rnd.choice(ZONES)
        meta_values: list[Any] = [rnd.randint(-2, 2), rnd.choice(["x", "y", "it's"]), rnd.random() < 0.5, None, 2**53 + rnd.randint(1, 3), 0.5]
        record = Record(
            record_id=rid, record_type=rtype, content=content,
            user_id=rnd.choice(USERS), agent_id=rnd.choice(AGENTS), thread_id=rnd.choice(THREADS),
            role=rnd.choice(["user", "assistant"]) if rtype is RecordType.MESSAGE else None,
            timestamp=rnd.choice(INSTANTS).astimezone(zone), created_at=rnd.choice(INSTANTS).astimezone(rnd.choice(ZONES)),
            expires_at=rnd.choice((None, None, *INSTANTS[1:])) and rnd.choice(INSTANTS[1:]).astimezone(zone),
            status=rnd.choice(list(RecordStatus)),
            metadata={key: rnd.choice(meta_values) for key in rnd.sample(["k", "n", "tags", "a.b"], rnd.randint(0, 2))},
        )
        has_vector = vector or (vector is None and rtype in SEARCHABLE_TYPES and rnd.random() < 0.9)
        vec = None
        if has_vector:
            values = [0] * DIM
            while not any(values):
                values = [rnd.randint(-2, 2) for _ in range(DIM)]
            vec = np.asarray(values, dtype=np.float32)
        return NewRecord(record=record, vector=vec)

    @precondition(lambda self: Capability.CONCURRENT_WRITERS in self.caps)
    @rule(data=st.data(), how=st.sampled_from(["threads", "asyncio"]))
    def concurrent_writes(self, data: st.DataObject, how: str) -> None:
        """2-4 independent batches (fresh adds, patches of distinct records) at once, from
        threads or asyncio tasks: all land, none is lost; the reference then applies them in
        the order of the seq values the backend assigned."""
        stored = self._ids()
        targets = data.draw(st.lists(st.sampled_from(stored), unique=True, max_size=2), label="patched") if stored else []
        batches = [WriteBatch(patch=[draw_patch(data, rid)]) for rid in targets]
        batches += [WriteBatch(add=[draw_record(data, self._fresh_id())]) for _ in range(data.draw(st.integers(1, 3), label="adds"))]
        note(f"concurrent[{how}]: {batches}")
        if how == "threads":
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=len(batches)) as pool:
                results = list(pool.map(self.sut.write, batches))
        else:
            import asyncio

            async def together() -> list[list[Record]]:
                return list(await asyncio.gather(*(self.sut.awrite(b) for b in batches)))

            results = loop_for(self.sut).run_until_complete(together())
        for batch in batches:
            if batch.patch:
                self.model.write(batch)
        added = sorted(((recs[0], batch) for recs, batch in zip(results, batches) if batch.add), key=lambda x: x[0].seq)
        for s_rec, batch in added:
            [m_rec] = self.model.write(batch)
            assert_same(s_rec, m_rec, seq=False, what=f"concurrent write[{how}] result")
            assert s_rec.seq > self.max_seq, f"seq {s_rec.seq} reused or out of order"
            self.max_seq = s_rec.seq
            self.seq_sut[s_rec.record_id] = s_rec.seq
            self.seq_model[m_rec.record_id] = m_rec.seq

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

    @rule(data=st.data(), order=st.sampled_from(list(Order)), limit=st.sampled_from([None, None, 1, 2, 3, 5, 0]), offset=st.sampled_from([0, 0, 0, 1, 2]), mode=MODES)
    def query(self, data: st.DataObject, order: Order, limit: int | None, offset: int, mode: str) -> None:
        """``query`` returns the same records in the same order."""
        mflt, sflt = self._filters(self.draw_filter(data))
        note(f"query[{mode}] {sflt} order={order.value} limit={limit} offset={offset}")
        expected = self.model.query(mflt, order=order, limit=limit, offset=offset)
        got = self.api(mode).query(sflt, order=order, limit=limit, offset=offset)
        assert_same(got, expected, seq=False, what=f"query[{mode}]")

    @rule(data=st.data(), mode=MODES)
    def count(self, data: st.DataObject, mode: str) -> None:
        """``count`` agrees."""
        mflt, sflt = self._filters(self.draw_filter(data))
        note(f"count[{mode}] {sflt}")
        assert self.api(mode).count(sflt) == self.model.count(mflt)

    @rule(data=st.data(), mode=MODES)
    def read_links(self, data: st.DataObject, mode: str) -> None:
        """``links`` agrees."""
        rids = [self.existing_id(data) for _ in range(data.draw(st.integers(0, 3)))] if chance(data, 70) else None
        lids = [self.existing_link_id(data) for _ in range(data.draw(st.integers(0, 2)))] if chance(data, 30) else None
        note(f"links[{mode}] record_ids={rids} link_ids={lids}")
        assert_same(self.api(mode).links(record_ids=rids, link_ids=lids), self.model.links(record_ids=rids, link_ids=lids), what=f"links[{mode}]")

    @rule(vector=vectors, data=st.data(), k=st.integers(1, 6), mode=MODES)
    def vector_search(self, vector: np.ndarray, data: st.DataObject, k: int, mode: str) -> None:
        """Vector search: exact backends match the reference; approximate ones never return an
        ineligible record and keep the declared recall on average."""
        mflt, sflt = self._filters(self.draw_filter(data))
        note(f"vector_search[{mode}] {vector.tolist()} {sflt} k={k}")
        model_hits = self.model.vector_search(vector, mflt, 10_000)
        expected = [(h.record.record_id, float(h.distance or 0.0)) for h in model_hits]
        hits = self.api(mode).vector_search(vector, sflt, k)
        if Capability.APPROXIMATE_SEARCH in self.caps:
            want = {rid for rid, _ in expected[:k]}
            if want:
                self.recalls.append(len(want & {h.record.record_id for h in hits}) / len(want))
            # per query: eligibility, distances and order; recall is judged on the mean
            assert_vector_hits(self.sut, hits, expected, k, recall_floor=0.0)
        else:
            assert_vector_hits(self.sut, hits, expected, k)
        by_id = {h.record.record_id: h.record for h in model_hits}
        for hit in hits:
            assert_same(hit.record, by_id[hit.record.record_id], seq=False, what=f"vector_search[{mode}] hit")

    @precondition(lambda self: Capability.KEYWORD_SEARCH in self.caps)
    @rule(words=st.lists(st.sampled_from(WORDS + ("zebra",)), min_size=1, max_size=3), data=st.data(), k=st.integers(1, 6), mode=MODES)
    def keyword_search(self, words: list[str], data: st.DataObject, k: int, mode: str) -> None:
        """Keyword search: the reference's hits, in its order, with its BM25 scores, at every
        ``k``."""
        mflt, sflt = self._filters(self.draw_filter(data))
        text = " ".join(words)
        note(f"keyword_search[{mode}] {text!r} {sflt} k={k}")
        expected = self.model.keyword_search(text, mflt, 10_000)
        full = self.api(mode).keyword_search(text, sflt, 10_000)
        assert_same(full, expected, seq=False, what=f"keyword_search[{mode}]({text!r})")
        top = self.api(mode).keyword_search(text, sflt, k)
        assert_same(top, expected[:k], seq=False, what=f"keyword_search[{mode}]({text!r}, k={k})")
        assert_hits_ordered(full, by="score")

    # ---- invariants --------------------------------------------------------------------------
    @invariant()
    def same_state(self) -> None:
        """Records (in seq order, with the seq values the backend returned) and links agree."""
        expected = self.model.query(RecordFilter())
        got = self.sut.query(RecordFilter())
        assert_same(got, expected, seq=False, what="stored records")
        for r in got:
            assert self.seq_sut.get(r.record_id) == r.seq, f"seq of {r.record_id!r} changed from {self.seq_sut.get(r.record_id)} to {r.seq}"
        assert_same(self.sut.links(), self.model.links(), what="stored links")

    def _check_recall_floor(self) -> None:
        if len(self.recalls) >= 5:
            mean = sum(self.recalls) / len(self.recalls)
            assert mean >= self.sut.min_recall_at_10 - 1e-9, f"mean recall {mean:.3f} < declared {self.sut.min_recall_at_10}"


def make_state_machine(factory: Callable[[Path], MemoryStore], base_dir: Path) -> type[StoreComparison]:
    """A ``StoreComparison`` bound to a store factory and a directory for its stores."""
    return type("BoundStoreComparison", (StoreComparison,), {"factory": staticmethod(factory), "base_dir": Path(base_dir)})


SHRINK_SECONDS: dict[str, int] = {"smoke": 20, "ci": 60, "remote": 60, "nightly": 300}
"""How long a profile lets Hypothesis shrink a failing run (its own limit is 300 s, which a
slow backend reaches on every failure); the failure is reported, shrunk or not, after that."""


def run_comparison(
    factory: Callable[[Path], MemoryStore], base_dir: Path, *, profile: str = "ci", nodeid: str | None = None
) -> None:
    """Run the state machine with a suite profile (``smoke``, ``ci``, ``remote``, ``nightly``).

    The run uses one seed (``--hypothesis-seed`` when given, a random one otherwise); a failure
    carries a note with the one-line command that replays it (``nodeid``: the test to name)."""
    import random

    from hypothesis import core
    from hypothesis.internal.conjecture import engine

    machine = make_state_machine(factory, base_dir)
    forced = core.global_force_seed
    seed = forced if forced is not None else random.SystemRandom().getrandbits(63)
    shrink_limit = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    core.global_force_seed = seed  # type: ignore[assignment]
    if shrink_limit is not None:
        engine.MAX_SHRINKING_SECONDS = SHRINK_SECONDS.get(profile, shrink_limit)
    try:
        run_state_machine_as_test(machine, settings=profile_settings(profile))
    except BaseException as exc:
        target = f"'{nodeid}'" if nodeid else "<this test>"
        exc.add_note(f"replay this run: pytest {target} --hypothesis-seed={seed} --agentmemory-profile {profile}")
        raise
    finally:
        core.global_force_seed = forced
        if shrink_limit is not None:
            engine.MAX_SHRINKING_SECONDS = shrink_limit


_ = UNSET
