"""SPI examples: links between records (storage only; lifecycle rules are the client's)."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from agentmemory.errors import Conflict, InvalidArgument, NotFound
from agentmemory.records import LinkType
from agentmemory.spi import MemoryStore, WriteBatch

from ..support import T0, Api, assert_same, clause, ids, link, new, rec, reference_twin, snapshot, write_both


class LinkTests:
    """``add_links`` / ``delete_links`` and ``links()`` lookups."""

    def _link_seed(self, api: Api) -> None:
        api.write(WriteBatch(add=[new(rec("a")), new(rec("b")), new(rec("c")), new(rec("d"))]))

    @clause("spi.links", "2.links")
    def test_links_round_trip_every_type(self, api: Api) -> None:
        """Each link type, its metadata and ``created_at`` come back exactly; ``links()`` is
        ordered by link id.

        Troubleshooting: store link metadata as JSON text and ``created_at`` with
        microseconds; order ``links()`` by link id.
        """
        self._link_seed(api)
        written = [
            link("l5", "a", "b", LinkType.SUPERSEDES, metadata={"why": "newer", "n": [1, 2]}),
            link("l4", "a", "c", LinkType.REFINES, created=T0 + timedelta(seconds=1, microseconds=5)),
            link("l3", "a", "d", LinkType.DUPLICATES),
            link("l2", "b", "c", LinkType.SUPPORTS),
            link("l1", "c", "d", LinkType.CONTRADICTS),
        ]
        api.write(WriteBatch(add_links=written))
        got = api.links()
        assert ids(got) == ["l1", "l2", "l3", "l4", "l5"]
        assert_same(got, sorted(written, key=lambda x: x.link_id), what="links()")

    @clause("spi.links")
    def test_lookup_by_either_end_and_by_id(self, api: Api) -> None:
        """``record_ids`` matches links at either end; ``link_ids`` by id; both together AND;
        empty lists match nothing; unknown ids are ignored.

        Troubleshooting: ``record_ids`` matches source OR target; ``record_ids`` and
        ``link_ids`` together AND; an empty list matches nothing.
        """
        self._link_seed(api)
        api.write(WriteBatch(add_links=[link("l1", "a", "b"), link("l2", "b", "c"), link("l3", "c", "d")]))
        assert ids(api.links(record_ids=["b"])) == ["l1", "l2"]
        assert ids(api.links(record_ids=["a", "d"])) == ["l1", "l3"]
        assert ids(api.links(record_ids=["ghost"])) == []
        assert ids(api.links(link_ids=["l3", "l1", "nope"])) == ["l1", "l3"]
        assert ids(api.links(record_ids=["b"], link_ids=["l2", "l3"])) == ["l2"]
        assert api.links(record_ids=[]) == []
        assert api.links(link_ids=[]) == []

    @clause("spi.links", "spi.errors")
    def test_one_link_per_pair_and_unique_link_ids(self, api: Api, store: MemoryStore) -> None:
        """Two records are linked at most once, in either direction (``Conflict``); a link id is
        unique (``Conflict``); a link to itself is ``InvalidArgument``; a missing end is
        ``NotFound``. Nothing is written by a failing batch.

        Troubleshooting: check the pair in both directions (store it ordered, e.g. lo/hi
        columns with a unique key).
        """
        self._link_seed(api)
        api.write(WriteBatch(add_links=[link("l1", "a", "b")]))
        before = snapshot(store)
        for batch, error in (
            (WriteBatch(add_links=[link("l2", "a", "b")]), Conflict),
            (WriteBatch(add_links=[link("l2", "b", "a", LinkType.SUPERSEDES)]), Conflict),
            (WriteBatch(add_links=[link("l1", "c", "d")]), Conflict),
            (WriteBatch(add_links=[link("l2", "c", "d"), link("l3", "d", "c")]), Conflict),
            (WriteBatch(add_links=[link("l2", "c", "ghost")]), NotFound),
            (WriteBatch(add_links=[link("l2", "ghost", "c")]), NotFound),
        ):
            with pytest.raises(error):
                api.write(batch)
            assert snapshot(store) == before, batch
        with pytest.raises(InvalidArgument):
            api.write(WriteBatch(add_links=[link("l2", "c", "c")]))
        assert snapshot(store) == before

    @clause("spi.links")
    def test_delete_link_keeps_records(self, api: Api) -> None:
        """Deleting a link removes only the link; the pair can be linked again afterwards.

        Troubleshooting: a link delete touches the links table only.
        """
        self._link_seed(api)
        api.write(WriteBatch(add_links=[link("l1", "a", "b"), link("l2", "a", "c")]))
        api.write(WriteBatch(delete_links=["l1"]))
        assert ids(api.links()) == ["l2"]
        assert ids(api.query()) == ["a", "b", "c", "d"]
        api.write(WriteBatch(add_links=[link("l9", "b", "a", LinkType.REFINES)]))
        assert ids(api.links(record_ids=["a"])) == ["l2", "l9"]

    @clause("spi.links", "2.links")
    def test_links_are_exact_and_follow_their_records(self, api: Api, store: MemoryStore) -> None:
        """Links come back exactly (created_at as the instant written in any offset, metadata
        with its JSON types) from every lookup; a record's delete removes the links where it is
        source or target, from every lookup, and the freed link ids and pairs can be used again;
        repeated ids in a lookup return each link once.

        Troubleshooting: delete links by ``source_id = ? OR target_id = ?`` in the record
        delete's transaction; de-duplicate the lookup ids.
        """
        ref = reference_twin(store)
        zone = timezone(timedelta(hours=5, minutes=45))
        write_both(api, ref, WriteBatch(add=[new(rec(r)) for r in "abcde"]))
        write_both(api, ref, WriteBatch(add_links=[
            link("l1", "a", "b", LinkType.SUPERSEDES, metadata={"n": 1, "f": 1.0, "big": 2**53 + 1, "ok": True},
                 created=(T0 + timedelta(microseconds=9)).astimezone(zone)),
            link("l2", "c", "b", LinkType.REFINES), link("l3", "b", "d", LinkType.CONTRADICTS),
            link("l4", "d", "e", LinkType.SUPPORTS), link("l5", "e", "a", LinkType.DUPLICATES),
        ]))
        for kwargs in ({}, {"record_ids": ["b"]}, {"record_ids": ["a", "a", "b", "ghost"]}, {"link_ids": ["l4", "l4", "l1"]},
                       {"record_ids": ["b"], "link_ids": ["l1", "l4"]}, {"record_ids": ["e"]}):
            assert_same(api.links(**kwargs), ref.links(**kwargs), what=f"links({kwargs}) [{api.mode}]")
        write_both(api, ref, WriteBatch(delete=["b"]))
        for kwargs in ({}, {"record_ids": ["b"]}, {"record_ids": ["a", "c", "d"]}, {"link_ids": ["l1", "l2", "l3", "l4"]}):
            assert_same(api.links(**kwargs), ref.links(**kwargs), what=f"links({kwargs}) after deleting 'b' [{api.mode}]")
        write_both(api, ref, WriteBatch(add=[new(rec("b"))], add_links=[link("l1", "b", "a", LinkType.REFINES), link("l9", "c", "b")]))
        assert_same(api.links(), ref.links(), what=f"links() after re-adding 'b' [{api.mode}]")

