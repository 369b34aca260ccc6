"""Hostile input: the shared catalogue of malformed arguments (typed error, store unchanged)
and of valid-but-nasty values (exact round trip, correct filtering)."""

from __future__ import annotations

import warnings

import pytest

from agentmemory.errors import InvalidArgument
from agentmemory.records import RecordType
from agentmemory.spi import Capability, MemoryStore, RecordFilter, WriteBatch

from ..catalogue import BAD_READS, BAD_WRITES, MAX_CONTENT, NASTY_IDS, NASTY_METADATA, NASTY_TEXTS, BadInput
from ..support import E1, E2, Api, assert_same, assert_vector_ids, clause, ids, link, new, rec, snapshot, vec


def _seed(store: MemoryStore) -> None:
    store.write(WriteBatch(add=[new(rec("a", user="u"), E1), new(rec("b", user="u"), E2)]))


class HostileInputTests:
    """Every entry of the catalogue, through the sync and the async API."""

    @clause("9.bad-input", "spi.errors")
    @pytest.mark.parametrize("case", BAD_WRITES, ids=[c.name for c in BAD_WRITES])
    def test_malformed_writes_raise_and_change_nothing(self, store: MemoryStore, api: Api, case: BadInput) -> None:
        """A malformed write raises ``InvalidArgument`` (naming the argument) and writes
        nothing.

        Troubleshooting: the SPI base class validates; a backend that overrides ``write``
        itself, or converts values before validating, loses this.
        """
        _seed(store)
        before = snapshot(store)
        with pytest.raises(InvalidArgument) as info, warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow note on 1e39 → float32
            case.run(store, api.mode)
        assert info.value.argument, "InvalidArgument must name the argument"
        assert snapshot(store) == before

    @clause("9.bad-input", "spi.errors")
    @pytest.mark.parametrize("case", BAD_READS, ids=[c.name for c in BAD_READS])
    def test_malformed_reads_raise(self, store: MemoryStore, api: Api, case: BadInput) -> None:
        """A malformed read raises ``InvalidArgument`` (never a driver error, never a silently
        different query).

        Troubleshooting: let the base class validate; never catch ``InvalidArgument`` or
        turn it into an empty result.
        """
        _seed(store)
        with pytest.raises(InvalidArgument):
            case.run(store, api.mode)

    @clause("9.bad-input", "2.scope")
    def test_nasty_ids_round_trip(self, api: Api, store: MemoryStore) -> None:
        """Ids full of quotes, wildcards, JSON and unicode are plain values: records, scopes and
        links with such ids round-trip and filter exactly.

        Troubleshooting: bind ids as parameters or escape them (quotes, ``%``, ``_``,
        backslashes are data, not syntax).
        """
        records = [rec(rid, user=rid, thread=rid, type=RecordType.FACT) for rid in NASTY_IDS]
        api.write(WriteBatch(add=[new(r, vec(1, i * 0.1)) for i, r in enumerate(records)]))
        chain = [link(f"link-{rid}", rid, NASTY_IDS[(i + 1) % len(NASTY_IDS)]) for i, rid in enumerate(NASTY_IDS[:-1])]
        api.write(WriteBatch(add_links=chain))
        assert sorted(ids(api.query())) == sorted(NASTY_IDS)
        for r in records:
            assert_same(api.query(RecordFilter(record_ids=(r.record_id,))), [x for x in api.query() if x.record_id == r.record_id])
            assert ids(api.query(RecordFilter(user_id=r.record_id))) == [r.record_id], f"user_id={r.record_id!r}"
            assert api.count(RecordFilter(thread_id=r.record_id)) == 1
            assert_vector_ids(store, api.vector_search(E1, RecordFilter(user_id=r.record_id), k=5), [r.record_id])
        assert sorted(x.link_id for x in api.links()) == sorted(lk.link_id for lk in chain)
        assert {x.link_id for x in api.links(record_ids=["'); DROP TABLE records; --"])} == {
            lk.link_id for lk in chain if "'); DROP TABLE records; --" in (lk.source_id, lk.target_id)
        }
        api.write(WriteBatch(delete=["per%cent_under", "*"]))
        assert sorted(ids(api.query())) == sorted(set(NASTY_IDS) - {"per%cent_under", "*"})
        assert "per%cent_under" not in {x for lk in api.links() for x in (lk.source_id, lk.target_id)}

    @clause("9.bad-input")
    def test_nasty_texts_round_trip_and_search(self, api: Api, store: MemoryStore) -> None:
        """Contents with SQL, JSON, markup and full-text syntax are stored verbatim and are
        harmless in keyword queries.

        Troubleshooting: store text verbatim (no trimming, no normalisation) and pass
        keyword queries through the analyser, never as engine query syntax.
        """
        api.write(WriteBatch(add=[new(rec(f"t{i}", content=text), E1) for i, text in enumerate(NASTY_TEXTS)]))
        assert [r.content for r in api.query()] == list(NASTY_TEXTS)
        if Capability.KEYWORD_SEARCH in store.capabilities():
            for text in NASTY_TEXTS:
                hits = api.keyword_search(text, k=20)
                assert set(ids(hits)) <= {f"t{i}" for i in range(len(NASTY_TEXTS))}
            assert "t2" in ids(api.keyword_search("instructions", k=20))

    @clause("9.bad-input", "7.metadata-filter")
    def test_nasty_metadata_round_trip_and_filter(self, api: Api) -> None:
        """Metadata keys with quotes, dots, brackets and unicode and values of every JSON type
        round-trip exactly; an equality filter on each key finds the record.

        Troubleshooting: keys are plain strings: never build a JSON path from a key (dots,
        brackets, quotes and ``$`` are data).
        """
        api.write(WriteBatch(add=[new(rec("nasty", metadata=NASTY_METADATA)), new(rec("plain", metadata={"other": 1}))]))
        [got] = api.query(RecordFilter(record_ids=("nasty",)))
        assert_same(got.metadata, NASTY_METADATA, what="metadata")
        for key, value in NASTY_METADATA.items():
            assert ids(api.query(RecordFilter(metadata_filter={key: value}))) == ["nasty"], f"filter on key {key!r}"
        assert ids(api.query(RecordFilter(metadata_filter={"a.b.c": {"$not": "dotted key, not a path"}}))) == ["plain"]
        assert ids(api.query(RecordFilter(metadata_filter={"list": {"$array_contains": "two"}}))) == ["nasty"]
        assert ids(api.query(RecordFilter(metadata_filter={"deep": {"l1": {"l2": {"l3": {"l4": {"l5": {"l6": {"l7": {"l8": "bottom"}}}}}}}}}))) == ["nasty"]

    @clause("9.bad-input")
    def test_limits_are_inclusive(self, api: Api) -> None:
        """The largest valid values are accepted and round-trip: 1,000,000-character content,
        128-character ids, reserved internal ids up to 192 characters.

        Troubleshooting: size columns for 1,000,000 characters of content and 192-character
        internal ids.
        """
        big = ("0123456789" * (MAX_CONTENT // 10))[:MAX_CONTENT]
        long_id = "i" * 128
        internal = "@thread:" + "t" * 184
        api.write(WriteBatch(add=[new(rec(long_id, content=big, user="u" * 128)), new(rec(internal, type=RecordType.THREAD, content=""))]))
        got = {r.record_id: r for r in api.query()}
        assert got[long_id].content == big and got[long_id].user_id == "u" * 128
        assert got[internal].content == ""
        with pytest.raises(InvalidArgument):
            api.write(WriteBatch(add=[new(rec("@thread:" + "t" * 185, type=RecordType.THREAD, content=""))]))
