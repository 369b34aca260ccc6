"""SPI examples: values come back exactly — every field of every record and hit, with its JSON
type and its instant, from every read — and time comparisons are between instants, whatever
the offsets they are written in. Each read is compared with the reference store's answer to
the same writes (``support.assert_reads_agree``)."""

from __future__ import annotations

from datetime import timedelta, timezone
from typing import Any

import numpy as np

from agentmemory.bulk import RecordColumns
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import Capability, MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..support import (
    E1,
    E2,
    E3,
    T0,
    Api,
    assert_reads_agree,
    assert_same,
    clause,
    ids,
    new,
    rec,
    reference_twin,
    vec,
    write_both,
)

PLUS530 = timezone(timedelta(hours=5, minutes=30))
MINUS8 = timezone(timedelta(hours=-8))
PLUS14 = timezone(timedelta(hours=14))

TYPED_METADATA: dict[str, Any] = {
    "int": 1,
    "float": 1.0,
    "half": 0.5,
    "negative": -2.5,
    "large_float": 1e300,
    "true": True,
    "false": False,
    "null": None,
    "str_int": "1",
    "big": 2**53 + 1,
    "int64_max": 2**63 - 1,
    "int64_min": -(2**63),
    "ids": [2**53 + 1, 7],
    "list": [1, 1.0, True, None, "1", [0], {"f": 2.0, "g": "x"}],
    "nested": {"i": 7, "f": 7.0, "b": False, "o": {}},
    "empty_list": [],
    "empty_object": {},
}
"""Every JSON type where a lossy store goes wrong: ints that are not floats (and above 2**53,
where a float64 rounds them), floats that look like ints, booleans that are not numbers."""

FLOATY_METADATA: dict[str, Any] = {"int": 1.0, "big": float(2**53), "true": 1, "ids": [float(2**53), 7], "nested": {"f": 7}}
"""The values a store that stores JSON numbers as doubles (or booleans as ints) returns."""


class ExactValueTests:
    """Exact round trips through every read, and instants across time zones."""

    @clause("2.metadata", "spi.write", "7.metadata-filter")
    def test_metadata_keeps_its_json_types(self, api: Api, store: MemoryStore) -> None:
        """Metadata values keep their JSON type through ``write``, ``bulk_add``, patches and every
        read (query, vector and keyword hits): ``1`` stays an int (not ``1.0``), ``1.0`` stays a
        float, ``True`` stays a bool (not ``1``), ints above 2**53 and up to the int64 range keep
        every digit. Filters compare exactly too: ``2**53 + 1`` never matches ``2**53``.

        Troubleshooting: store metadata as JSON text (or a JSON type that keeps ints and floats
        apart) and decode it with ``json.loads``; never pass it through a float64 or a SQL
        number column; compare filter values with ``agentmemory.filters.metadata_matches_json``.
        """
        ref = reference_twin(store)
        write_both(api, ref, WriteBatch(add=[
            new(rec("typed", content="typed ledger values", metadata=TYPED_METADATA), E1),
            new(rec("floaty", content="floaty ledger values", metadata=FLOATY_METADATA), E2),
        ]))
        columns = RecordColumns(record_id=["bulk"], content=["bulk ledger values"], record_type="fact", timestamp=T0,
                                metadata=[TYPED_METADATA], vectors=np.stack([E3]))
        assert api.bulk_add(columns) == ref.bulk_add(columns) == 1
        assert_reads_agree(api, ref, RecordFilter(), vector=E1, text="ledger values", what="typed metadata")
        [typed] = api.query(RecordFilter(record_ids=("typed",)))
        assert_same(typed.metadata, TYPED_METADATA, what="metadata of 'typed'")
        [floaty] = api.query(RecordFilter(record_ids=("floaty",)))
        assert_same(floaty.metadata, FLOATY_METADATA, what="metadata of 'floaty'")
        patched = {"int": 2, "float": 2.0, "big": 2**53 + 3, "flag": False, "deep": {"n": [2**62, 0.25]}}
        write_both(api, ref, WriteBatch(patch=[RecordPatch("floaty", metadata=patched)]))
        [floaty] = api.query(RecordFilter(record_ids=("floaty",)))
        assert_same(floaty.metadata, patched, what="patched metadata of 'floaty'")
        write_both(api, ref, WriteBatch(patch=[RecordPatch("floaty", metadata=FLOATY_METADATA)]))
        for flt, expected in (
            ({"big": 2**53 + 1}, ["typed", "bulk"]),
            ({"big": 2**53}, ["floaty"]),
            ({"ids": {"$array_contains": 2**53 + 1}}, ["typed", "bulk"]),
            ({"ids": {"$array_contains_any": [2**53, 3]}}, ["floaty"]),
            ({"true": True}, ["typed", "bulk"]),
            ({"true": 1}, ["floaty"]),
            ({"int": 1}, ["typed", "floaty", "bulk"]),
            ({"nested": {"f": 7}}, ["typed", "floaty", "bulk"]),
            ({"null": None}, ["typed", "bulk"]),
            ({"null": {"$not": None}}, ["floaty"]),
            ({"int64_max": 2**63 - 1, "int64_min": -(2**63)}, ["typed", "bulk"]),
            ({"str_int": 1}, []),
            ({"list": {"$array_contains": {"f": 2, "g": "x"}}}, ["typed", "bulk"]),
            ({"list": {"$array_contains": {"f": 2, "g": "y"}}}, []),
            ({"list": {"$array_contains": {"f": 2}}}, []),
            ({"list": {"$array_contains": [[0], None]}}, ["typed", "bulk"]),
            ({"list": {"$array_contains": True}}, ["typed", "bulk"]),
            ({"ids": {"$array_contains": True}}, []),
            ({"ids": {"$not": [2**53 + 1, 7]}}, ["floaty"]),
            ({"nested": {"o": {}, "b": False}}, ["typed", "bulk"]),
        ):
            assert ids(api.query(RecordFilter(metadata_filter=flt))) == expected, f"metadata_filter={flt!r} [{api.mode}]"
            assert_reads_agree(api, ref, RecordFilter(metadata_filter=flt), vector=E2, text="ledger", what=f"metadata_filter={flt!r}")

    @clause("spi.write", "spi.vector-search", "spi.keyword-search", "2.record-types")
    def test_every_field_is_exact_in_every_read(self, api: Api, store: MemoryStore) -> None:
        """Records with every field set (times in three offsets with microseconds, expiry,
        role, status, nested metadata) come back identical from ``write``, ``query``, vector
        hits and keyword hits, and hits carry exactly the reference's distance (vector, score
        None) or BM25 score (keyword, distance None). After each kind of patch every read
        returns the patched record: no index serves a stale copy.

        Troubleshooting: build hits from the live row (not a copy cached with the index) and
        return times as aware datetimes of the same instant.
        """
        ref = reference_twin(store)
        far = T0 + timedelta(days=400, microseconds=11)
        write_both(api, ref, WriteBatch(add=[
            new(rec("msg", type=RecordType.MESSAGE, content="ledger entry from Maya", user="u", agent="a", thread="t",
                    role="assistant", ts=(T0 + timedelta(microseconds=1)).astimezone(PLUS530),
                    created=(T0 - timedelta(days=1, microseconds=999_999)).astimezone(MINUS8),
                    expires=far.astimezone(PLUS14), metadata={"k": [1, {"x": None}], "n": 2}), vec(1, 2, 0, 0)),
            new(rec("fact", type=RecordType.FACT, content="ledger closes on Fridays", user="u",
                    status=RecordStatus.INVALID, metadata={"n": 2.5}), vec(0, 1, 1, 0)),
            new(rec("pref", type=RecordType.PREFERENCE, content="prefers a paper ledger", agent="a"), vec(-1, 0, 0, 1)),
            new(rec("@user:u", type=RecordType.USER, content="user keeps a ledger", user="u"), vec(0, 0, 0, 3)),
            new(rec("@thread:t", type=RecordType.THREAD, content="", user="u", agent="a", thread="t", metadata={"title": "ledger"}), None),
        ]))
        probe, text = vec(1, 1, 0, 0), "ledger Maya Fridays"
        assert_reads_agree(api, ref, RecordFilter(), vector=probe, text=text, what="after add")
        later = (T0 + timedelta(hours=3, microseconds=5)).astimezone(MINUS8)
        for patch in (
            RecordPatch("msg", content="ledger rewritten by Maya"),
            RecordPatch("fact", metadata={"n": 3, "new": True, "gone": None, "list": [None, {}]}),
            RecordPatch("pref", status=RecordStatus.INVALID),
            RecordPatch("msg", timestamp=later),
            RecordPatch("fact", expires_at=later.astimezone(PLUS14)),
            RecordPatch("pref", vector=vec(1, 1, 0, 0.1)),
            RecordPatch("@user:u", content="user Maya keeps two ledgers", vector=vec(0, 2, 0, 1)),
        ):
            write_both(api, ref, WriteBatch(patch=[patch]))
            assert_reads_agree(api, ref, RecordFilter(), vector=probe, text=text, what=f"after {patch}")

    @clause("2.ttl", "spi.query")
    def test_expiry_and_bounds_compare_as_instants_in_any_zone(self, api: Api, store: MemoryStore) -> None:
        """``expires_at`` values and ``alive_at``/``expired_at`` bounds written in different UTC
        offsets compare as instants, to the microsecond, in ``query``, ``count``, vector and
        keyword search; both bounds together select what expires in between.

        Troubleshooting: compare UTC instants (e.g. microseconds since the epoch), never the
        ISO text or a local wall-clock time.
        """
        ref = reference_twin(store)
        t = T0 + timedelta(days=1)
        write_both(api, ref, WriteBatch(add=[
            new(rec("utc-at", content="expiring note", expires=t), E1),
            new(rec("ist-at", content="expiring note", expires=t.astimezone(PLUS530)), E1),
            new(rec("pst-before", content="expiring note", expires=(t - timedelta(microseconds=1)).astimezone(MINUS8)), E2),
            new(rec("lint-after", content="expiring note", expires=(t + timedelta(microseconds=1)).astimezone(PLUS14)), E3),
            new(rec("never", content="expiring note"), vec(1, 1)),
        ]))
        for zone in (timezone.utc, PLUS530, MINUS8, PLUS14):
            bound = t.astimezone(zone)
            assert ids(api.query(RecordFilter(alive_at=bound))) == ["lint-after", "never"], f"alive_at={bound.isoformat()}"
            assert ids(api.query(RecordFilter(expired_at=bound))) == ["utc-at", "ist-at", "pst-before"], f"expired_at={bound.isoformat()}"
            for flt in (
                RecordFilter(alive_at=bound),
                RecordFilter(expired_at=bound),
                RecordFilter(alive_at=(t - timedelta(microseconds=1)).astimezone(zone), expired_at=(t + timedelta(microseconds=1)).astimezone(zone)),
            ):
                assert_reads_agree(api, ref, flt, vector=E1, text="expiring", what=f"zone {zone}")

    @clause("2.ttl", "spi.write")
    def test_clearing_expiry_revives_a_record_in_every_read(self, api: Api, store: MemoryStore) -> None:
        """A patch with ``expires_at=None`` makes a record that ``alive_at`` hid visible again to
        ``query``, ``count``, vector and keyword search, and ``expired_at`` no longer selects it;
        a later expiry revives it too, an earlier one hides it again.

        Troubleshooting: clear (or rewrite) every column and index entry that holds the expiry,
        in the same transaction as the record.
        """
        ref = reference_twin(store)
        write_both(api, ref, WriteBatch(add=[
            new(rec("ttl", content="phoenix feather", expires=T0 + timedelta(hours=1)), E1),
            new(rec("keep", content="phoenix ash"), E2),
        ]))
        later = (T0 + timedelta(hours=2)).astimezone(PLUS530)
        alive, expired = RecordFilter(alive_at=later), RecordFilter(expired_at=later)
        assert ids(api.query(alive)) == ["keep"] and ids(api.query(expired)) == ["ttl"]
        for patch, visible in (
            (RecordPatch("ttl", expires_at=None), ["ttl", "keep"]),
            (RecordPatch("ttl", expires_at=(T0 + timedelta(hours=3)).astimezone(MINUS8)), ["ttl", "keep"]),
            (RecordPatch("ttl", expires_at=T0 + timedelta(minutes=30)), ["keep"]),
            (RecordPatch("ttl", expires_at=None, content="phoenix reborn"), ["ttl", "keep"]),
        ):
            write_both(api, ref, WriteBatch(patch=[patch]))
            assert ids(api.query(alive)) == visible, f"after {patch} [{api.mode}]"
            for flt in (alive, expired):
                assert_reads_agree(api, ref, flt, vector=E1, text="phoenix", what=f"after {patch}")


_ = Capability
