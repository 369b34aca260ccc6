"""SPI examples: lifecycle, record CRUD, ordering and windows, batch order and atomicity."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from agentmemory.errors import (
    AgentMemoryError,
    BackendUnavailable,
    Conflict,
    InvalidArgument,
    NotFound,
)
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import UNSET, Capability, MemoryStore, Order, RecordFilter, RecordPatch, SchemaPolicy, WriteBatch

from ..support import (
    DIM,
    E1,
    E2,
    E3,
    T0,
    Api,
    assert_vector_ids,
    clause,
    ids,
    link,
    new,
    rec,
    requires,
    snapshot,
    vec,
    without_seq,
)


class LifecycleTests:
    """Opening, closing and the errors around them."""

    @clause("spi.lifecycle")
    def test_open_validates_dimension(self, build_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
        """``open`` rejects a dimension that is not a positive int with ``InvalidArgument``.

        Troubleshooting: the base class validates this; do not override ``open`` itself.
        """
        store = build_store(tmp_path / "s", dimension=None)
        for bad in (0, -3, 2.5, "4", True, None):
            with pytest.raises(InvalidArgument):
                store.open(dimension=bad)  # type: ignore[arg-type]
        store.open(dimension=DIM)
        assert store.is_open and store.dimension == DIM

    @clause("spi.lifecycle")
    def test_calls_before_open_and_after_close_raise_backend_unavailable(self, build_store: Callable[..., MemoryStore], tmp_path: Path) -> None:
        """Every operation on an unopened or closed store raises ``BackendUnavailable``.

        Troubleshooting: ``close`` must release resources and leave the store unusable, not
        silently reconnect.
        """
        store = build_store(tmp_path / "s", dimension=None)
        with pytest.raises(BackendUnavailable):
            store.query(RecordFilter())
        store.open(dimension=DIM)
        store.write(WriteBatch(add=[new(rec("m1"))]))
        store.close()
        assert not store.is_open
        for call in (
            lambda: store.query(RecordFilter()),
            lambda: store.count(RecordFilter()),
            lambda: store.links(),
            lambda: store.write(WriteBatch(add=[new(rec("m2"))])),
            lambda: store.vector_search(E1, RecordFilter(), 3),
        ):
            with pytest.raises(BackendUnavailable):
                call()
        store.close()  # closing twice is harmless

    @clause("spi.lifecycle")
    def test_open_twice_same_dimension_is_noop_other_dimension_conflicts(self, store: MemoryStore) -> None:
        """Re-opening an open store with its dimension changes nothing; another dimension is a
        ``Conflict``."""
        store.write(WriteBatch(add=[new(rec("m1"))]))
        store.open(dimension=DIM)
        assert ids(store.query(RecordFilter())) == ["m1"]
        with pytest.raises(Conflict):
            store.open(dimension=DIM + 1)
        assert store.dimension == DIM

    @clause("spi.lifecycle")
    def test_info_and_declarations(self, store: MemoryStore) -> None:
        """``info()``, ``name``, ``spec_version``, ``capabilities()`` and ``min_recall_at_10``
        describe the backend consistently."""
        from agentmemory.spi import SPEC_VERSION, Capability

        info = store.info()
        assert info.name == store.name and isinstance(store.name, str) and store.name
        assert info.dimension == DIM
        assert store.spec_version == SPEC_VERSION, (
            f"backend targets spec {store.spec_version!r}, this suite checks {SPEC_VERSION!r}"
        )
        caps = store.capabilities()
        assert isinstance(caps, frozenset) and all(isinstance(c, Capability) for c in caps)
        assert 0.0 < store.min_recall_at_10 <= 1.0
        if Capability.APPROXIMATE_SEARCH not in caps:
            assert store.min_recall_at_10 == 1.0, "an exact backend must keep min_recall_at_10 = 1.0"


class RecordCrudTests:
    """Adding, reading, patching and deleting records."""

    @clause("spi.write", "2.record-types")
    def test_add_round_trips_every_field(self, api: Api) -> None:
        """Every field of every record type comes back exactly as written (seq assigned).

        Troubleshooting: store timestamps with microseconds and their instant (UTC); keep
        metadata as JSON, nested values and types intact; ``role`` only on messages.
        """
        meta = {"s": "x", "n": 1, "f": 0.5, "b": True, "null": None, "list": [1, "a", None], "nested": {"k": {"deep": [1, 2]}}}
        records = [
            rec("msg", type=RecordType.MESSAGE, user="u", agent="a", thread="t", role="assistant", metadata=meta),
            rec("mem", type=RecordType.MEMORY, user="u", expires=T0 + timedelta(days=3), status=RecordStatus.INVALID),
            rec("fact", type=RecordType.FACT, agent="a", ts=T0 - timedelta(days=400, microseconds=7)),
            rec("guide", type=RecordType.GUIDELINE, thread="t"),
            rec("pref", type=RecordType.PREFERENCE, user="u", agent="a"),
            rec("@user:u", type=RecordType.USER, user="u"),
            rec("@agent:a", type=RecordType.AGENT, agent="a"),
            rec("@thread:t", type=RecordType.THREAD, content="", user="u", agent="a", thread="t"),
            rec("@summary:t", type=RecordType.SUMMARY, content="", thread="t", metadata={"$agent_memory": {"topics": ["x"]}}),
        ]
        added = api.write(WriteBatch(add=[new(r) for r in records]))
        assert [without_seq(r) for r in added] == records, "write must return the added records as given"
        seqs = [r.seq for r in added]
        assert all(isinstance(s, int) for s in seqs)
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"seq must increase within a batch: {seqs}"
        got = {r.record_id: r for r in api.query()}
        assert set(got) == {r.record_id for r in records}
        for original, returned in zip(records, added):
            stored = got[original.record_id]
            assert stored == returned, f"stored {original.record_id!r} differs from what write returned"
            assert stored.timestamp == original.timestamp and stored.created_at == original.created_at

    @clause("spi.write")
    def test_seq_increases_across_batches_and_deletes(self, api: Api) -> None:
        """``seq`` is store-wide insertion order: later batches get larger values, even after
        the newest record was deleted (summaries remember the last covered seq)."""
        first = api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))]))
        api.write(WriteBatch(delete=["b"]))
        second = api.write(WriteBatch(add=[new(rec("c"))]))
        assert second[0].seq > max(r.seq for r in first)

    @clause("spi.write", "spi.errors")
    def test_duplicate_ids(self, api: Api, store: MemoryStore) -> None:
        """Adding an existing id is a ``Conflict``; the same id twice in one batch is
        ``InvalidArgument``; either way nothing of the batch is written."""
        api.write(WriteBatch(add=[new(rec("a", content="original"))]))
        before = snapshot(store)
        with pytest.raises(Conflict):
            api.write(WriteBatch(add=[new(rec("z")), new(rec("a", content="dup"))]))
        with pytest.raises(InvalidArgument):
            api.write(WriteBatch(add=[new(rec("y")), new(rec("y"))]))
        assert snapshot(store) == before

    @clause("spi.write")
    def test_patch_each_field(self, api: Api) -> None:
        """A patch changes exactly the fields it sets (metadata is replaced, not merged);
        ``seq``, ids, scope and type never change."""
        base = rec("a", user="u", metadata={"keep": 1, "old": True}, expires=T0 + timedelta(days=1))
        [added] = api.write(WriteBatch(add=[new(base)]))
        later = T0 + timedelta(hours=5)
        api.write(WriteBatch(patch=[RecordPatch("a", content="new text")]))
        api.write(WriteBatch(patch=[RecordPatch("a", metadata={"keep": 2})]))
        api.write(WriteBatch(patch=[RecordPatch("a", status=RecordStatus.INVALID)]))
        api.write(WriteBatch(patch=[RecordPatch("a", timestamp=later)]))
        api.write(WriteBatch(patch=[RecordPatch("a", expires_at=None)]))
        [got] = api.query(RecordFilter(record_ids=("a",)))
        expected = added.model_copy(
            update={"content": "new text", "metadata": {"keep": 2}, "status": RecordStatus.INVALID, "timestamp": later, "expires_at": None}
        )
        assert got == expected
        api.write(WriteBatch(patch=[RecordPatch("a", expires_at=T0 + timedelta(days=9), status=RecordStatus.VALID)]))
        [got] = api.query(RecordFilter(record_ids=("a",)))
        assert got.expires_at == T0 + timedelta(days=9) and got.status is RecordStatus.VALID
        assert got.content == "new text" and got.seq == added.seq

    @clause("spi.write", "spi.vector-search")
    def test_patch_vector_replaces_or_removes_it(self, api: Api, store: MemoryStore) -> None:
        """A patch with a vector moves the record in vector space; ``vector=None`` takes it out
        of vector search (the record stays readable); ``UNSET`` keeps it."""
        api.write(WriteBatch(add=[new(rec("a"), E1), new(rec("b"), E2)]))
        api.write(WriteBatch(patch=[RecordPatch("a", content="moved", vector=E3)]))
        assert_vector_ids(store, api.vector_search(E3, k=1), ["a"])
        api.write(WriteBatch(patch=[RecordPatch("a", content="again", vector=UNSET)]))
        assert_vector_ids(store, api.vector_search(E3, k=1), ["a"])
        api.write(WriteBatch(patch=[RecordPatch("a", vector=None)]))
        assert_vector_ids(store, api.vector_search(E3, k=10), ["b"])
        assert ids(api.query()) == ["a", "b"]

    @clause("spi.write", "spi.errors")
    def test_missing_targets_raise_not_found_and_write_nothing(self, api: Api, store: MemoryStore) -> None:
        """Patching, deleting or linking a missing record, or deleting a missing link, raises
        ``NotFound`` and leaves the store as it was (adds earlier in the batch included)."""
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))]))
        before = snapshot(store)
        for batch in (
            WriteBatch(add=[new(rec("x"))], patch=[RecordPatch("ghost", content="c")]),
            WriteBatch(add=[new(rec("x"))], delete=["ghost"]),
            WriteBatch(add=[new(rec("x"))], add_links=[link("l1", "a", "ghost")]),
            WriteBatch(add=[new(rec("x"))], delete_links=["no-such-link"]),
            WriteBatch(add=[new(rec("x"))], patch=[RecordPatch("a", content="changed")], delete=["b", "ghost"]),
        ):
            with pytest.raises(NotFound):
                api.write(batch)
            assert snapshot(store) == before, f"a failed batch left changes behind: {batch}"

    @clause("spi.write")
    def test_delete_removes_record_vector_and_links(self, api: Api) -> None:
        """Deleting a record removes it from reads, vector search and every link touching it."""
        api.write(WriteBatch(add=[new(rec("a"), E1), new(rec("b"), E2), new(rec("c"), E3)], add_links=[link("l1", "a", "b"), link("l2", "b", "c"), link("l3", "a", "c")]))
        api.write(WriteBatch(delete=["b"]))
        assert ids(api.query()) == ["a", "c"]
        assert ids(api.links()) == ["l3"]
        assert "b" not in ids(api.vector_search(E2, k=10))
        assert api.count() == 2

    @clause("spi.write")
    def test_empty_batch_is_a_noop(self, api: Api, store: MemoryStore) -> None:
        """An empty batch writes nothing and returns ``[]``."""
        api.write(WriteBatch(add=[new(rec("a"))]))
        before = snapshot(store)
        assert api.write(WriteBatch()) == []
        assert snapshot(store) == before


class BatchOrderTests:
    """A batch applies adds, patches, link deletes, link adds, record deletes, in that order,
    whole or not at all."""

    @clause("spi.batch-order")
    def test_patch_and_link_records_added_in_the_same_batch(self, api: Api) -> None:
        """Patches and links may refer to records added earlier in the same batch."""
        api.write(
            WriteBatch(
                add=[new(rec("a")), new(rec("b"))],
                patch=[RecordPatch("a", content="patched", status=RecordStatus.INVALID)],
                add_links=[link("l1", "b", "a")],
            )
        )
        [a] = api.query(RecordFilter(record_ids=("a",)))
        assert a.content == "patched" and a.status is RecordStatus.INVALID
        assert ids(api.links()) == ["l1"]

    @clause("spi.batch-order")
    def test_link_deletes_run_before_link_adds(self, api: Api) -> None:
        """Deleting a link and re-adding one between the same records in one batch works (the
        client's link update does exactly this)."""
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))], add_links=[link("l1", "a", "b")]))
        api.write(WriteBatch(delete_links=["l1"], add_links=[link("l1", "a", "b", "supersedes", metadata={"v": 2})]))
        [got] = api.links()
        assert got.link_type.value == "supersedes" and got.metadata == {"v": 2}

    @clause("spi.batch-order")
    def test_record_deletes_run_last_and_take_links_along(self, api: Api) -> None:
        """A link added in a batch that also deletes one of its records is gone afterwards;
        a patch of a record deleted in the same batch is not an error."""
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b")), new(rec("c"))]))
        api.write(
            WriteBatch(
                patch=[RecordPatch("b", content="soon gone")],
                add_links=[link("l1", "a", "b"), link("l2", "a", "c")],
                delete=["b"],
            )
        )
        assert ids(api.query()) == ["a", "c"]
        assert ids(api.links()) == ["l2"]

    @clause("spi.batch-order", "9.atomic")
    def test_failure_late_in_a_batch_applies_nothing(self, api: Api, store: MemoryStore) -> None:
        """A batch that fails in its last step (a conflicting link) leaves no trace of its
        adds, patches or link deletes.

        Troubleshooting: run the whole batch in one transaction and roll back on any error.
        """
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))], add_links=[link("l1", "a", "b")]))
        before = snapshot(store)
        with pytest.raises(Conflict):
            api.write(
                WriteBatch(
                    add=[new(rec("c"), E2), new(rec("d"), E3)],
                    patch=[RecordPatch("a", content="changed", vector=E3)],
                    delete_links=["l1"],
                    add_links=[link("l2", "c", "d"), link("l3", "d", "c")],
                )
            )
        assert snapshot(store) == before
        # the store stays usable after the failed batch
        api.write(WriteBatch(add=[new(rec("c"))]))
        assert ids(api.query()) == ["a", "b", "c"]


class QueryTests:
    """``query`` and ``count``: filters, order and windows."""

    def _query_seed(self, api: Api, n: int = 6) -> list[str]:
        names = [f"r{i}" for i in range(n)]
        for name in names:  # one batch per record: order comes from seq, not from ids
            api.write(WriteBatch(add=[new(rec(name, type=RecordType.MESSAGE, thread="t"))]))
        return names

    @clause("spi.query", "4.messages")
    def test_order_limit_offset(self, api: Api) -> None:
        """Ascending and descending seq order; ``offset`` skips, ``limit`` caps (0 allowed)."""
        # insertion order deliberately differs from id order
        for name in ["m-c", "m-a", "m-d", "m-b"]:
            api.write(WriteBatch(add=[new(rec(name, type=RecordType.MESSAGE))]))
        order = ["m-c", "m-a", "m-d", "m-b"]
        assert ids(api.query()) == order
        assert ids(api.query(order=Order.SEQ_DESC)) == order[::-1]
        assert ids(api.query(limit=2)) == order[:2]
        assert ids(api.query(offset=1, limit=2)) == order[1:3]
        assert ids(api.query(order=Order.SEQ_DESC, offset=1, limit=2)) == order[::-1][1:3]
        assert ids(api.query(offset=3)) == order[3:]
        assert api.query(offset=10) == []
        assert api.query(limit=0) == []
        assert api.count() == 4

    @clause("spi.query", "spi.errors")
    def test_window_arguments_are_validated(self, api: Api) -> None:
        """Negative or non-int ``limit``/``offset`` raise ``InvalidArgument``."""
        for kwargs in ({"limit": -1}, {"offset": -1}, {"limit": 1.5}, {"offset": "1"}, {"limit": True}):
            with pytest.raises(InvalidArgument):
                api.query(**kwargs)

    @clause("spi.query")
    def test_seq_bounds(self, api: Api) -> None:
        """``min_seq`` is inclusive, ``max_seq`` exclusive."""
        names = self._query_seed(api)
        rows = api.query()
        seq = {r.record_id: r.seq for r in rows}
        lo, hi = seq[names[1]], seq[names[4]]
        assert ids(api.query(RecordFilter(min_seq=lo))) == names[1:]
        assert ids(api.query(RecordFilter(max_seq=hi))) == names[:4]
        assert ids(api.query(RecordFilter(min_seq=lo, max_seq=hi))) == names[1:4]
        assert api.count(RecordFilter(min_seq=lo, max_seq=hi)) == 3

    @clause("spi.query")
    def test_record_ids_types_and_statuses(self, api: Api) -> None:
        """``record_ids`` (missing ids ignored, empty tuple matches nothing), ``record_types``
        and ``statuses`` filter exactly, and combine with AND."""
        api.write(
            WriteBatch(
                add=[
                    new(rec("a", type=RecordType.FACT)),
                    new(rec("b", type=RecordType.MEMORY, status=RecordStatus.INVALID)),
                    new(rec("c", type=RecordType.MESSAGE)),
                    new(rec("d", type=RecordType.PREFERENCE, status=RecordStatus.INVALID)),
                ]
            )
        )
        assert ids(api.query(RecordFilter(record_ids=("d", "ghost", "a")))) == ["a", "d"]
        assert api.query(RecordFilter(record_ids=())) == []
        assert api.count(RecordFilter(record_ids=())) == 0
        assert ids(api.query(RecordFilter(record_types=frozenset({RecordType.FACT, RecordType.MESSAGE})))) == ["a", "c"]
        assert ids(api.query(RecordFilter(statuses=frozenset({RecordStatus.INVALID})))) == ["b", "d"]
        both = RecordFilter(statuses=frozenset({RecordStatus.INVALID}), record_types=frozenset({RecordType.MEMORY}), record_ids=("a", "b", "d"))
        assert ids(api.query(both)) == ["b"]
        assert api.count(both) == 1

    @clause("spi.query", "2.ttl")
    def test_alive_at_and_expired_at(self, api: Api, store: MemoryStore) -> None:
        """``alive_at`` hides records whose ``expires_at`` is at or before it (the boundary
        instant counts as expired); ``expired_at`` selects exactly those."""
        t = T0 + timedelta(days=1)
        api.write(
            WriteBatch(
                add=[
                    new(rec("never")),
                    new(rec("before", expires=t - timedelta(microseconds=1))),
                    new(rec("at", expires=t)),
                    new(rec("after", expires=t + timedelta(microseconds=1))),
                ]
            )
        )
        assert ids(api.query(RecordFilter(alive_at=t))) == ["never", "after"]
        assert api.count(RecordFilter(alive_at=t)) == 2
        assert ids(api.query(RecordFilter(expired_at=t))) == ["before", "at"]
        assert_vector_ids(store, api.vector_search(E1, RecordFilter(alive_at=t), k=10), ["after", "never"])

    @clause("spi.query")
    def test_count_matches_query_for_every_filter(self, api: Api) -> None:
        """``count(f) == len(query(f))`` for assorted filters."""
        api.write(
            WriteBatch(
                add=[
                    new(rec(f"r{i}", type=[RecordType.FACT, RecordType.MESSAGE, RecordType.MEMORY][i % 3], user=["u1", "u2", None][i % 3], metadata={"i": i % 2}))
                    for i in range(9)
                ]
            )
        )
        for flt in (
            RecordFilter(),
            RecordFilter(user_id="u1"),
            RecordFilter(user_id=None),
            RecordFilter(metadata_filter={"i": 1}),
            RecordFilter(record_types=frozenset({RecordType.FACT}), metadata_filter={"i": 0}),
        ):
            assert api.count(flt) == len(api.query(flt)), flt


class PersistenceTests:
    """Data survives close and reopen (``PERSISTENCE``)."""

    @clause("9.persistence")
    @requires(Capability.PERSISTENCE)
    def test_reopen_keeps_everything(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """Records (with seq), links and vectors survive ``close`` and a new instance on the
        same path; new records get larger seq values.

        Troubleshooting: commit before ``close`` returns; rebuild or reload any index on open.
        """
        store = build_store(store_path)
        store.write(
            WriteBatch(
                add=[new(rec("a", user="u", metadata={"k": [1, {"x": None}]}), E1), new(rec("b", type=RecordType.MESSAGE, thread="t"), E2), new(rec("@thread:t", type=RecordType.THREAD, content="", thread="t"), None)],
                add_links=[link("l1", "a", "b", "refines", metadata={"why": "x"})],
            )
        )
        before = snapshot(store)
        store.close()
        again = build_store(store_path)
        assert snapshot(again) == before
        [c] = again.write(WriteBatch(add=[new(rec("c"), E3)]))
        assert c.seq > max(r.seq for r in before.records)
        assert_vector_ids(again, again.vector_search(vec(0, 1, 0.1), RecordFilter(), 1), ["b"])

    @clause("9.persistence")
    @requires(Capability.PERSISTENCE)
    def test_schema_policies_on_reopen(self, build_store: Callable[..., MemoryStore], store_path: Path, tmp_path: Path) -> None:
        """``REQUIRE_EXISTING`` opens existing data and fails (typed) on empty storage;
        ``RECREATE`` wipes; another dimension over stored vectors is a ``Conflict``."""
        store = build_store(store_path)
        store.write(WriteBatch(add=[new(rec("a"), E1)]))
        store.close()
        kept = build_store(store_path, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
        assert ids(kept.query(RecordFilter())) == ["a"]
        kept.close()
        other = build_store(store_path, dimension=None)
        with pytest.raises(Conflict):
            other.open(dimension=DIM + 2)
        wiped = build_store(store_path, schema_policy=SchemaPolicy.RECREATE)
        assert wiped.query(RecordFilter()) == []
        fresh = build_store(tmp_path / "never-created", dimension=None)
        with pytest.raises(AgentMemoryError):
            fresh.open(dimension=DIM, schema_policy=SchemaPolicy.REQUIRE_EXISTING)

