"""SPI examples: lifecycle, record CRUD, ordering and windows, batch order and atomicity."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agentmemory.bulk import RecordColumns
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
    assert_reads_agree,
    assert_same,
    assert_vector_ids,
    clause,
    files_under,
    ids,
    is_approximate,
    link,
    new,
    rec,
    reference_twin,
    requires,
    snapshot,
    vec,
    write_both,
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
        ``Conflict``.

        Troubleshooting: the base class handles re-opening; ``_open`` must raise
        ``Conflict`` for stored vectors of another dimension.
        """
        store.write(WriteBatch(add=[new(rec("m1"))]))
        store.open(dimension=DIM)
        assert ids(store.query(RecordFilter())) == ["m1"]
        with pytest.raises(Conflict):
            store.open(dimension=DIM + 1)
        assert store.dimension == DIM

    @clause("spi.lifecycle")
    def test_info_and_declarations(self, store: MemoryStore) -> None:
        """``info()``, ``name``, ``spec_version``, ``capabilities()`` and ``min_recall_at_10``
        describe the backend consistently.

        Troubleshooting: set ``name``, keep ``spec_version`` at the SPI's, and leave
        ``min_recall_at_10`` at 1.0 unless you declare ``APPROXIMATE_SEARCH``.
        """
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
        assert_same(added, records, seq=False, what="write() result")
        seqs = [r.seq for r in added]
        assert all(isinstance(s, int) for s in seqs)
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), f"seq must increase within a batch: {seqs}"
        got = {r.record_id: r for r in api.query()}
        assert set(got) == {r.record_id for r in records}
        for original, returned in zip(records, added):
            stored = got[original.record_id]
            assert_same(stored, returned, what="query() after write")

    @clause("spi.write")
    def test_seq_increases_across_batches_and_deletes(self, api: Api) -> None:
        """``seq`` is store-wide insertion order: later batches get larger values, even after
        the newest record was deleted (summaries remember the last covered seq).

        Troubleshooting: keep the seq counter in storage (not ``max(seq) + 1``), so deleting
        the newest record never frees its value.
        """
        first = api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))]))
        api.write(WriteBatch(delete=["b"]))
        second = api.write(WriteBatch(add=[new(rec("c"))]))
        assert second[0].seq > max(r.seq for r in first)

    @clause("spi.write", "spi.errors")
    def test_duplicate_ids(self, api: Api, store: MemoryStore) -> None:
        """Adding an existing id is a ``Conflict``; the same id twice in one batch is
        ``InvalidArgument``; either way nothing of the batch is written.

        Troubleshooting: a primary key on the record id, the whole batch rolled back on the
        violation.
        """
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
        ``seq``, ids, scope and type never change.

        Troubleshooting: a metadata patch replaces the whole object (no JSON merge);
        ``expires_at=None`` clears it.
        """
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
        assert_same(got, expected, what="patched record")
        api.write(WriteBatch(patch=[RecordPatch("a", expires_at=T0 + timedelta(days=9), status=RecordStatus.VALID)]))
        [got] = api.query(RecordFilter(record_ids=("a",)))
        assert got.expires_at == T0 + timedelta(days=9) and got.status is RecordStatus.VALID
        assert got.content == "new text" and got.seq == added.seq

    @clause("spi.write", "spi.vector-search")
    def test_patch_vector_replaces_or_removes_it(self, api: Api, store: MemoryStore) -> None:
        """A patch with a vector moves the record in vector space; ``vector=None`` takes it out
        of vector search (the record stays readable); ``UNSET`` keeps it.

        Troubleshooting: ``vector=None`` deletes the vector (and its index entry); ``UNSET``
        keeps it; store patched vectors normalised like added ones.
        """
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
        ``NotFound`` and leaves the store as it was (adds earlier in the batch included).

        Troubleshooting: check every target inside the transaction and roll back on
        ``NotFound``.
        """
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
        """Deleting a record removes it from reads, vector search and every link touching it.

        Troubleshooting: delete the row, its vector/index entries and its links (either end)
        together.
        """
        api.write(WriteBatch(add=[new(rec("a"), E1), new(rec("b"), E2), new(rec("c"), E3)], add_links=[link("l1", "a", "b"), link("l2", "b", "c"), link("l3", "a", "c")]))
        api.write(WriteBatch(delete=["b"]))
        assert ids(api.query()) == ["a", "c"]
        assert ids(api.links()) == ["l3"]
        assert "b" not in ids(api.vector_search(E2, k=10))
        assert api.count() == 2

    @clause("spi.write", "spi.vector-search", "spi.keyword-search")
    def test_a_reused_id_starts_fresh(self, api: Api, store: MemoryStore) -> None:
        """A deleted record leaves nothing behind for a new record with its id: re-added without
        a vector it is in no vector or keyword search; re-added with another vector only that
        vector counts; its old links stay gone; it gets a new, larger ``seq``.

        Troubleshooting: delete the row's vector, keyword-index entry and links in the same
        transaction as the row, and key index entries by something a re-added record cannot
        inherit (not just the record id).
        """
        ref = reference_twin(store)
        [first, _] = write_both(api, ref, WriteBatch(
            add=[new(rec("a", content="zebra stripes", metadata={"v": 1}), E1), new(rec("b", content="plain words"), E2)],
            add_links=[link("l1", "a", "b")],
        ))
        write_both(api, ref, WriteBatch(delete=["a"]))
        [again] = write_both(api, ref, WriteBatch(add=[new(rec("a", content="zebra crossing"), None)]))
        assert ids(api.vector_search(E1, k=10)) == ["b"], "the deleted record's vector came back with its id"
        if Capability.KEYWORD_SEARCH in store.capabilities():
            assert api.keyword_search("zebra", k=10) == [], "a record re-added without a vector must not be keyword-searchable"
        assert api.links() == [], "the deleted record's links came back with its id"
        [stored] = api.query(RecordFilter(record_ids=("a",)))
        assert stored.seq > first.seq and stored.seq == again.seq
        assert_reads_agree(api, ref, RecordFilter(), vector=E1, text="zebra stripes crossing", what="re-added without a vector")
        write_both(api, ref, WriteBatch(delete=["a"]))
        write_both(api, ref, WriteBatch(add=[new(rec("a", content="zebra again", type=RecordType.FACT), E3)]))
        for probe in (E1, E3):
            assert_reads_agree(api, ref, RecordFilter(), vector=probe, text="zebra stripes again", what="re-added with another vector")

    @clause("spi.write")
    def test_a_patch_changes_only_what_it_sets(self, api: Api, store: MemoryStore) -> None:
        """Each field patched alone (content, metadata, status, timestamp, expiry, vector, and
        nothing at all) leaves every other field, the vector and the keyword terms as they were,
        and every read filters on the patched values (no filter column keeps the old status,
        metadata or expiry); two patches of one record in one batch apply in order.

        Troubleshooting: build the UPDATE from the fields that are set (``UNSET`` means "keep");
        ``expires_at=None`` and ``vector=None`` are values (clear), not "keep".
        """
        ref = reference_twin(store)
        zone = timezone(timedelta(hours=-3, minutes=-30))
        write_both(api, ref, WriteBatch(add=[
            new(rec("a", type=RecordType.MESSAGE, content="alpha beta", user="u", agent="g", thread="t", role="user",
                    ts=T0.astimezone(zone), expires=T0 + timedelta(days=10), status=RecordStatus.INVALID,
                    metadata={"keep": [1, 2.0], "n": 1}), vec(1, 2, 0, 0)),
            new(rec("b", content="gamma words"), E2),
        ]))
        probe, text = vec(1, 1, 1, 1), "alpha gamma delta"
        for patch in (
            RecordPatch("a"),
            RecordPatch("a", content="alpha gamma delta"),
            RecordPatch("a", metadata={"n": 2}),
            RecordPatch("a", status=RecordStatus.VALID),
            RecordPatch("a", timestamp=(T0 + timedelta(minutes=7)).astimezone(zone)),
            RecordPatch("a", expires_at=(T0 + timedelta(days=20)).astimezone(zone)),
            RecordPatch("a", vector=vec(0, 0, 1, 1)),
            RecordPatch("a", metadata={}),
            RecordPatch("a", content="  alpha padded\tcontent cafe\u0301 \n"),
        ):
            write_both(api, ref, WriteBatch(patch=[patch]))
            for flt in (
                RecordFilter(),
                RecordFilter(alive_at=T0 + timedelta(days=15)),
                RecordFilter(expired_at=T0 + timedelta(days=15)),
                RecordFilter(statuses=frozenset({RecordStatus.VALID})),
                RecordFilter(metadata_filter={"n": 1}),
                RecordFilter(user_id="u", thread_id="t", record_types=frozenset({RecordType.MESSAGE})),
            ):
                assert_reads_agree(api, ref, flt, vector=probe, text=text, what=f"after {patch}")
        write_both(api, ref, WriteBatch(patch=[RecordPatch("a", content="first words"), RecordPatch("a", content="second words", metadata={"m": True})]))
        [a] = api.query(RecordFilter(record_ids=("a",)))
        assert a.content == "second words" and a.metadata == {"m": True}
        assert_reads_agree(api, ref, RecordFilter(), vector=probe, text="first second", what="after two patches in one batch")

    @clause("spi.write")
    def test_empty_batch_is_a_noop(self, api: Api, store: MemoryStore) -> None:
        """An empty batch writes nothing and returns ``[]``.

        Troubleshooting: the base class returns early; ``_write`` is never called with an
        empty batch.
        """
        api.write(WriteBatch(add=[new(rec("a"))]))
        before = snapshot(store)
        assert api.write(WriteBatch()) == []
        assert snapshot(store) == before


class BatchOrderTests:
    """A batch applies adds, patches, link deletes, link adds, record deletes, in that order,
    whole or not at all."""

    @clause("spi.batch-order")
    def test_patch_and_link_records_added_in_the_same_batch(self, api: Api) -> None:
        """Patches and links may refer to records added earlier in the same batch.

        Troubleshooting: apply adds before patches and links inside the one transaction.
        """
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
        client's link update does exactly this).

        Troubleshooting: apply the batch sections in the SPI order: adds, patches, link
        deletes, link adds, record deletes.
        """
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b"))], add_links=[link("l1", "a", "b")]))
        api.write(WriteBatch(delete_links=["l1"], add_links=[link("l1", "a", "b", "supersedes", metadata={"v": 2})]))
        [got] = api.links()
        assert got.link_type.value == "supersedes" and got.metadata == {"v": 2}

    @clause("spi.batch-order")
    def test_record_deletes_run_last_and_take_links_along(self, api: Api) -> None:
        """A link added in a batch that also deletes one of its records is gone afterwards;
        a patch of a record deleted in the same batch is not an error; a record added, patched,
        linked and deleted in one batch leaves nothing.

        Troubleshooting: record deletes come last and remove links added earlier in the same
        batch.
        """
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
        api.write(WriteBatch(add=[new(rec("x"))], patch=[RecordPatch("x", content="brief")], add_links=[link("l3", "x", "a")], delete=["x"]))
        assert ids(api.query()) == ["a", "c"] and ids(api.links()) == ["l2"], "a record added and deleted in one batch must be gone"

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
        """Ascending and descending seq order; ``offset`` skips, ``limit`` caps (0 allowed).

        Troubleshooting: ORDER BY seq (ASC or DESC), then OFFSET, then LIMIT; ``limit=0`` is
        an empty page.
        """
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
        """Negative or non-int ``limit``/``offset`` raise ``InvalidArgument``.

        Troubleshooting: the base class validates windows; do not override the public
        ``query``.
        """
        for kwargs in ({"limit": -1}, {"offset": -1}, {"limit": 1.5}, {"offset": "1"}, {"limit": True}):
            with pytest.raises(InvalidArgument):
                api.query(**kwargs)

    @clause("spi.query")
    def test_seq_bounds(self, api: Api) -> None:
        """``min_seq`` is inclusive, ``max_seq`` exclusive.

        Troubleshooting: ``min_seq`` is ``seq >= min_seq``, ``max_seq`` is ``seq <
        max_seq``.
        """
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
        and ``statuses`` filter exactly, and combine with AND.

        Troubleshooting: an empty ``record_ids`` tuple is FALSE, not "no filter"; conditions
        combine with AND.
        """
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
        instant counts as expired); ``expired_at`` selects exactly those.

        Troubleshooting: compare UTC instants: hidden when ``expires_at <= alive_at``;
        selected when ``expires_at <= expired_at``.
        """
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

    @clause("spi.query", "spi.vector-search", "spi.keyword-search")
    def test_empty_type_and_status_sets_match_nothing(self, api: Api) -> None:
        """``record_types=frozenset()``, ``statuses=frozenset()`` and ``record_ids=()`` select no
        record in ``query``, ``count``, vector or keyword search: an empty set is a condition
        nobody meets, not "no filter".

        Troubleshooting: test ``is None`` for "no filter"; an empty ``IN ()`` list must become
        FALSE, not be dropped.
        """
        api.write(WriteBatch(add=[new(rec(f"e{i}", content="common words", type=t, status=s), vec(1, i))
                                  for i, (t, s) in enumerate([(RecordType.MEMORY, RecordStatus.VALID), (RecordType.FACT, RecordStatus.INVALID), (RecordType.MESSAGE, RecordStatus.VALID)])]))
        for flt in (
            RecordFilter(record_types=frozenset()),
            RecordFilter(statuses=frozenset()),
            RecordFilter(record_ids=()),
            RecordFilter(record_types=frozenset(), user_id=None, statuses=frozenset({RecordStatus.VALID})),
            RecordFilter(statuses=frozenset(), metadata_filter={"x": {"$not": 1}}),
        ):
            assert api.query(flt) == [], f"query {flt}"
            assert api.count(flt) == 0, f"count {flt}"
            assert api.vector_search(E1, flt, k=10) == [], f"vector_search {flt}"
            if Capability.KEYWORD_SEARCH in api.store.capabilities():
                assert api.keyword_search("common", flt, k=10) == [], f"keyword_search {flt}"
        assert len(api.query(RecordFilter(record_types=frozenset(RecordType), statuses=frozenset(RecordStatus)))) == 3

    @clause("spi.query", "4.messages")
    def test_windows_at_every_edge(self, api: Api) -> None:
        """Every ``limit`` (None, 0, 1, …, past the end) and ``offset`` (0, 1, …, past the end)
        in both orders, over all records, a filtered subset and nothing, gives the slice of the
        ordered matches; seq bounds combine with order and window.

        Troubleshooting: filter, then order by seq, then skip ``offset``, then take ``limit``
        (``limit=0`` is an empty page, not "no limit"; an offset without a limit skips too).
        """
        order_in = ["w5", "w2", "w8", "w0", "w7", "w1", "w4", "w6", "w3"]
        types = [RecordType.MESSAGE, RecordType.MEMORY, RecordType.FACT]
        for i, name in enumerate(order_in):  # one batch each: seq order differs from id order
            api.write(WriteBatch(add=[new(rec(name, type=types[i % 3]))]))
        subsets = {
            "all": (RecordFilter(), order_in),
            "messages": (RecordFilter(record_types=frozenset({RecordType.MESSAGE})), order_in[::3]),
            "none": (RecordFilter(user_id="nobody"), []),
        }
        for name, (flt, matches) in subsets.items():
            n = len(matches)
            for order in Order:
                ordered = matches if order is Order.SEQ_ASC else matches[::-1]
                for limit in sorted({0, 1, 2, max(n - 1, 0), n, n + 1}) + [None]:
                    for offset in sorted({0, 1, max(n - 1, 0), n, n + 3}):
                        want = ordered[offset:] if limit is None else ordered[offset:offset + limit]
                        got = ids(api.query(flt, order=order, limit=limit, offset=offset))
                        assert got == want, f"{name} order={order.value} limit={limit} offset={offset}: got {got}, expected {want}"
        seq = {r.record_id: r.seq for r in api.query()}
        bounded = RecordFilter(min_seq=seq[order_in[2]], max_seq=seq[order_in[7]])
        assert ids(api.query(bounded, order=Order.SEQ_DESC, limit=3, offset=1)) == order_in[2:7][::-1][1:4]
        assert ids(api.query(bounded, limit=2, offset=4)) == order_in[6:7]
        assert api.count(bounded) == 5

    @clause("spi.query", "spi.async-parity", "spi.links", "spi.vector-search", "spi.keyword-search")
    def test_unlimited_reads_return_every_row(self, api: Api, store: MemoryStore) -> None:
        """Over 260 records and 130 links, reads without a limit return every match in both
        modes: ``query`` (both orders, with an offset, with a filter), ``count``, ``links``, and
        vector and keyword search with a large ``k``, exactly as the reference does.

        Troubleshooting: do not page with a hidden default size (100, 128, …) in the sync or
        async path; fetch until the result set ends.
        """
        n = 260
        rng = np.random.default_rng(5)
        words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
        columns = RecordColumns(
            record_id=[f"row{i:03d}" for i in range(n)],
            content=[f"common {words[i % 7]} {words[(i * 3) % 7]}" for i in range(n)],
            record_type=[RecordType.MEMORY if i % 2 else RecordType.MESSAGE for i in range(n)],
            role=[None if i % 2 else "user" for i in range(n)],
            user_id=["u1" if i % 3 else "u2" for i in range(n)],
            timestamp=T0,
            vectors=rng.integers(-3, 4, size=(n, DIM)).astype(np.float32) + np.float32(0.5),
        )
        ref = reference_twin(store)
        assert api.bulk_add(columns) == ref.bulk_add(columns) == n
        chain = [link(f"l{i:03d}", f"row{i:03d}", f"row{i + 1:03d}") for i in range(130)]
        write_both(api, ref, WriteBatch(add_links=chain))
        all_ids = list(columns.record_id)
        assert ids(api.query()) == all_ids, f"query() returned {len(api.query())} of {n} rows"
        assert ids(api.query(order=Order.SEQ_DESC)) == all_ids[::-1]
        assert ids(api.query(offset=100)) == all_ids[100:]
        assert ids(api.query(order=Order.SEQ_DESC, offset=150)) == all_ids[::-1][150:]
        assert api.count() == n
        assert_same(api.links(), ref.links(), what=f"links() [{api.mode}]")
        assert len(api.links(record_ids=all_ids)) == 130
        assert len(api.links(link_ids=[lk.link_id for lk in chain])) == 130
        for flt in (RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(record_types=frozenset({RecordType.MESSAGE}))):
            assert_reads_agree(api, ref, flt, vector=vec(1, 0.5, -0.25, 2), text="common alpha", k=400, what="260 rows")

    @clause("spi.query", "spi.vector-search", "spi.keyword-search")
    def test_record_ids_select_a_set(self, api: Api, store: MemoryStore) -> None:
        """``record_ids`` is a set: repeated ids give one row, missing ids are ignored, rows come
        in seq order (not the order of the ids), long lists (over 64 ids) work, and it ANDs with
        the other conditions in every read.

        Troubleshooting: de-duplicate the ids (``IN`` over a list, not a join that repeats rows)
        and keep ORDER BY seq.
        """
        ref = reference_twin(store)
        names = [f"r{i:02d}" for i in range(79, -1, -1)]  # inserted in descending id order
        write_both(api, ref, WriteBatch(add=[new(rec(name, content=f"shared word {name}", user="u1" if int(name[1:]) % 2 else "u2",
                                                     type=RecordType.FACT if int(name[1:]) % 3 else RecordType.MEMORY),
                                                 vec(1, int(name[1:]) / 10)) for name in names]))
        wanted = ("r05", "r03", "r05", "ghost", "r70", "r03")
        assert ids(api.query(RecordFilter(record_ids=wanted))) == ["r70", "r05", "r03"]
        assert api.count(RecordFilter(record_ids=wanted)) == 3
        many = tuple(names[::-1]) + ("ghost",) * 5 + ("r01",)
        for flt in (
            RecordFilter(record_ids=wanted),
            RecordFilter(record_ids=many),
            RecordFilter(record_ids=many, user_id="u1"),
            RecordFilter(record_ids=wanted, record_types=frozenset({RecordType.FACT})),
            RecordFilter(record_ids=("ghost",)),
        ):
            assert_reads_agree(api, ref, flt, vector=vec(1, 3), text="shared word", k=100, what="record_ids")

    @clause("spi.query", "spi.vector-search", "spi.keyword-search", "7.scope", "2.ttl")
    def test_every_filter_field_in_every_read(self, api: Api, store: MemoryStore) -> None:
        """Each filter field alone and in combinations (ids, types, the three scope states,
        statuses, metadata, ``alive_at``, ``expired_at``, both seq bounds) selects exactly what
        the reference selects in ``query``, ``count``, vector search and keyword search, with
        the same hits, distances and scores.

        Troubleshooting: apply one filter (the same compiled condition) to every read path; a
        search must filter before it cuts at ``k``.
        """
        ref = reference_twin(store)
        types = [RecordType.MEMORY, RecordType.FACT, RecordType.MESSAGE, RecordType.PREFERENCE, RecordType.USER]
        batch = []
        for i in range(30):
            rtype = types[i % 5]
            batch.append(new(rec(
                f"f{i:02d}", type=rtype, content=f"filter word {['red', 'green', 'blue'][i % 3]} {'extra ' * (i % 4)}".strip(),
                user=[None, "u1", "u2"][i % 3], agent=[None, "a1"][i % 2], thread=[None, "t1", "t2", None][i % 4],
                status=RecordStatus.INVALID if i % 7 == 0 else RecordStatus.VALID,
                expires=None if i % 4 else (T0 + timedelta(hours=i)).astimezone(timezone(timedelta(hours=i % 5 - 2))),
                metadata={"n": i % 4, "tags": ["x", "y"][: i % 3], "flag": i % 2 == 0},
            ), vec(1, i % 5, (i * 7) % 3, 1)))
        write_both(api, ref, WriteBatch(add=batch))
        seq_api = {r.record_id: r.seq for r in api.query()}
        seq_ref = {r.record_id: r.seq for r in ref.query(RecordFilter())}
        mid = T0 + timedelta(hours=12)
        cases: list[dict[str, Any]] = [
            {"record_ids": ("f01", "f02", "f03", "f20")},
            {"record_types": frozenset({RecordType.FACT, RecordType.USER})},
            {"user_id": None}, {"user_id": "u1"}, {"agent_id": None}, {"agent_id": "a1"}, {"thread_id": None}, {"thread_id": "t2"},
            {"statuses": frozenset({RecordStatus.INVALID})}, {"statuses": frozenset({RecordStatus.VALID})},
            {"metadata_filter": {"n": 1}}, {"metadata_filter": {"tags": {"$array_contains": "y"}, "flag": True}},
            {"alive_at": mid}, {"expired_at": mid}, {"alive_at": T0, "expired_at": mid},
            {"user_id": "u2", "agent_id": None, "statuses": frozenset({RecordStatus.VALID}), "alive_at": mid},
            {"record_types": frozenset({RecordType.MESSAGE}), "thread_id": "t1", "metadata_filter": {"n": {"$not": 3}}},
        ]
        for spec in cases:
            assert_reads_agree(api, ref, RecordFilter(**spec), vector=vec(1, 2, 1, 0), text="filter red extra", k=50, what=str(spec))
        for lo, hi in (("f05", None), (None, "f12"), ("f05", "f12"), ("f12", "f05")):
            api_flt = RecordFilter(min_seq=seq_api[lo] if lo else None, max_seq=seq_api[hi] if hi else None, user_id="u1")
            ref_flt = RecordFilter(min_seq=seq_ref[lo] if lo else None, max_seq=seq_ref[hi] if hi else None, user_id="u1")
            want = ids(ref.query(ref_flt))
            assert ids(api.query(api_flt)) == want, f"seq bounds {lo}..{hi}"
            assert api.count(api_flt) == len(want)
            got, expected = set(ids(api.vector_search(E1, api_flt, k=50))), set(ids(ref.vector_search(E1, ref_flt, 50)))
            assert got <= expected and (got == expected or is_approximate(store)), f"vector search with seq bounds {lo}..{hi}: {sorted(got)} vs {sorted(expected)}"
            if Capability.KEYWORD_SEARCH in store.capabilities():
                assert_same(api.keyword_search("filter", api_flt, k=50), ref.keyword_search("filter", ref_flt, 50), seq=False, what=f"keyword seq bounds {lo}..{hi}")

    @clause("spi.query")
    def test_count_matches_query_for_every_filter(self, api: Api) -> None:
        """``count(f) == len(query(f))`` for assorted filters.

        Troubleshooting: build ``count`` from the same compiled filter as ``query``.
        """
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
        last_seq = max(r.seq for r in store.query(RecordFilter()))
        store.close()
        again = build_store(store_path)
        assert snapshot(again) == before
        [c] = again.write(WriteBatch(add=[new(rec("c"), E3)]))
        assert c.seq > last_seq
        assert_vector_ids(again, again.vector_search(vec(0, 1, 0.1), RecordFilter(), 1), ["b"])

    @clause("9.persistence", "2.metadata")
    @requires(Capability.PERSISTENCE)
    def test_reopen_keeps_exact_values_and_search(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """After close and reopen, records keep their JSON types and instants, links theirs,
        and query, vector and keyword search (sync and async) answer exactly as the reference
        does, including for records patched and deleted before the close.

        Troubleshooting: rebuild every derived index (vector, keyword, scope columns) from the
        committed rows on open, with the same analyser.
        """
        store = build_store(store_path)
        ref = reference_twin(store)
        zone = timezone(timedelta(hours=-9, minutes=-30))
        batches = [
            WriteBatch(add=[
                new(rec("a", content="durable ledger", user="u", ts=T0.astimezone(zone), expires=T0 + timedelta(days=2),
                        metadata={"n": 1, "f": 1.0, "big": 2**53 + 1, "b": False, "l": [None, 2.5]}), vec(1, 2)),
                new(rec("b", type=RecordType.MESSAGE, content="durable message", thread="t"), E2),
                new(rec("c", content="durable but deleted"), E3),
                new(rec("d", content="durable later patched"), vec(1, 1, 1)),
            ], add_links=[link("l1", "a", "b", "supports", metadata={"w": 0.5}, created=T0.astimezone(zone))]),
            WriteBatch(patch=[RecordPatch("d", content="durable patched ledger", vector=vec(0, 1, 1))], delete=["c"]),
        ]
        for batch in batches:
            store.write(batch)
            ref.write(batch)
        store.close()
        again = build_store(store_path)
        for mode in ("sync", "async"):
            api = Api(again, mode)
            assert_same(api.links(), ref.links(), what="links after reopen")
            for flt in (RecordFilter(), RecordFilter(user_id="u"), RecordFilter(alive_at=T0 + timedelta(days=3))):
                assert_reads_agree(api, ref, flt, vector=vec(1, 1), text="durable ledger", what="after reopen")

    @clause("9.persistence", "9.concurrency")
    @requires(Capability.PERSISTENCE)
    def test_second_instance_on_an_open_path(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """A second instance opened on the path of one still open is either refused with
        ``BackendUnavailable`` (one writer per path; the first stays usable) or shares the
        data: records written through either are read through both, each once, with distinct
        ``seq`` values.

        Troubleshooting: a backend that keeps counters (``seq``, a write clock) in the
        instance must refuse a second writer on the same storage (a lock or a registry of
        open paths), or take them from the storage on every write.
        """
        first = build_store(store_path)
        first.write(WriteBatch(add=[new(rec("a"), E1)]))
        try:
            second = build_store(store_path)
        except BackendUnavailable:
            first.write(WriteBatch(add=[new(rec("b"), E2)]))
            assert ids(first.query(RecordFilter())) == ["a", "b"], "the first instance lost records after a refused second open"
            return
        second.write(WriteBatch(add=[new(rec("b"), E2)]))
        first.write(WriteBatch(add=[new(rec("c"), E3)]))
        for name, store in (("first", first), ("second", second)):
            rows = store.query(RecordFilter())
            assert sorted(ids(rows)) == ["a", "b", "c"], f"the {name} instance reads {ids(rows)}"
            assert len({r.seq for r in rows}) == 3, f"duplicate seq values through the {name} instance: {[r.seq for r in rows]}"

    @clause("9.persistence")
    @requires(Capability.PERSISTENCE)
    def test_reopen_after_a_single_record_or_change(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """A store holding one record, reopened, finds it by query, vector and keyword search;
        so after each reopen that follows a single change (a patch, a delete beside an add, the
        last delete): the first reads after ``open`` answer as the reference does.

        Troubleshooting: derive "nothing written since the last index build" from what the
        file holds, not from counters that start at zero (or one) on open: a store whose whole
        content is one record (or one change) must not look unchanged and answer from an empty
        or stale index.
        """
        first = build_store(store_path)
        ref = reference_twin(first)
        first.close()
        steps = [
            WriteBatch(add=[new(rec("a", content="solitary lighthouse keeper"), vec(1, 2))]),
            WriteBatch(patch=[RecordPatch("a", content="solitary lighthouse patched", vector=vec(2, 1))]),
            WriteBatch(add=[new(rec("b", content="lighthouse relief crew"), vec(0, 1, 1))], delete=["a"]),
            WriteBatch(delete=["b"]),
        ]
        for i, batch in enumerate(steps):
            store = build_store(store_path)
            store.write(batch)
            ref.write(batch)
            store.close()
            again = build_store(store_path)
            for flt in (RecordFilter(), RecordFilter(user_id=None)):
                assert_reads_agree(Api(again, "sync"), ref, flt, vector=vec(1, 1), text="solitary lighthouse",
                                   what=f"reopened after step {i}")
            again.close()

    @clause("9.persistence")
    @requires(Capability.PERSISTENCE)
    def test_schema_policies_on_reopen(self, build_store: Callable[..., MemoryStore], store_path: Path, tmp_path: Path) -> None:
        """``REQUIRE_EXISTING`` opens existing data and fails (typed) on empty storage;
        ``RECREATE`` wipes; another dimension over stored vectors is a ``Conflict``.

        Troubleshooting: ``RECREATE`` drops records, links, vectors and indexes;
        ``REQUIRE_EXISTING`` never creates storage.
        """
        store = build_store(store_path)
        store.write(WriteBatch(add=[new(rec("a"), E1), new(rec("b"), E2)], add_links=[link("l1", "a", "b")]))
        store.close()
        kept = build_store(store_path, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
        assert ids(kept.query(RecordFilter())) == ["a", "b"]
        kept.close()
        other = build_store(store_path, dimension=None)
        with pytest.raises(Conflict):
            other.open(dimension=DIM + 2)
        wiped = build_store(store_path, schema_policy=SchemaPolicy.RECREATE)
        assert wiped.query(RecordFilter()) == [] and wiped.links() == []
        assert wiped.vector_search(E1, RecordFilter(), 5) == []
        if Capability.KEYWORD_SEARCH in wiped.capabilities():
            assert wiped.keyword_search("content", RecordFilter(), 5) == []
        wiped.write(WriteBatch(add=[new(rec("a", content="new a"), E2)]))
        [hit] = wiped.vector_search(E1, RecordFilter(), 5)
        assert hit.record.content == "new a" and abs(float(hit.distance or 0.0) - 1.0) < 1e-4, "RECREATE kept the old vector"
        assert wiped.links() == []
        fresh_path = tmp_path / "never-created"
        fresh = build_store(fresh_path, dimension=None)
        before = files_under(fresh_path)
        with pytest.raises(AgentMemoryError):
            fresh.open(dimension=DIM, schema_policy=SchemaPolicy.REQUIRE_EXISTING)
        assert files_under(fresh_path) == before, (
            f"a refused REQUIRE_EXISTING open created storage at {fresh_path}: {files_under(fresh_path)}"
        )


    @clause("9.persistence")
    @requires(Capability.PERSISTENCE, Capability.KEYWORD_SEARCH)
    def test_a_closed_store_opened_again_reads_its_storage_afresh(self, build_store: Callable[..., MemoryStore], store_path: Path) -> None:
        """``open`` after ``close`` on the same store object serves what the storage holds now:
        nothing a search remembered from before the close (term counts, scopes, statistics) may
        answer for a record that ``RECREATE`` replaced with other words under the same id.

        Troubleshooting: reset every per-connection memo in ``_open``, not only in ``__init__``;
        a memo keyed by a write counter is not enough, because ``RECREATE`` starts the counter
        again.
        """
        store = build_store(store_path)
        store.write(WriteBatch(add=[new(rec("a", content="amber lighthouse"), E1)]))
        assert ids(store.keyword_search("amber", RecordFilter(), 5)) == ["a"]
        store.close()
        store.open(dimension=DIM, schema_policy=SchemaPolicy.RECREATE)
        store.write(WriteBatch(add=[new(rec("a", content="violet harbour"), E2)]))
        assert ids(store.keyword_search("violet", RecordFilter(), 5)) == ["a"], "the reopened store answered from the replaced record's words"
        assert store.keyword_search("amber", RecordFilter(), 5) == [], "the reopened store still finds the replaced record's words"
        [hit] = store.vector_search(E2, RecordFilter(), 5)
        assert hit.record.content == "violet harbour" and abs(float(hit.distance or 0.0)) < 1e-4
