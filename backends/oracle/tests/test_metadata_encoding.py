"""Metadata survives python-oracledb exactly as the reference store keeps it (issue #20, item 1).

Every value of the conformance suite's nasty-metadata catalogue, plus numbers chosen to break an
Oracle NUMBER (``1e-300``, ``1e308``, ``1.0``, ``2**53 + 1``, a 127-digit integer, …), is bound
the way the store binds it and passed through what python-oracledb would do with that bind: a
``DB_TYPE_JSON`` bind through the driver's own OSON encoder and decoder (the codec of a thin
connection, no server needed), plain text verbatim (a CLOB keeps the characters it is given).
The record read back must equal the reference store's record field by field with exact JSON
types. Native JSON binds failed this (DPY-4003 on ``1e-300``; ``1.0`` came back as ``1``).
"""

from __future__ import annotations

from typing import Any

import oracledb
import pytest
from agentmemory_conformance.catalogue import NASTY_METADATA
from agentmemory_conformance.support import assert_same
from agentmemory_oracle import sql as q
from agentmemory_oracle.names import StoreNames

from agentmemory.records import Link, LinkType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, RecordPatch, WriteBatch

N = StoreNames.for_store("enc")
NUMBERS: dict[str, Any] = {
    "one-as-float": 1.0,
    "tiny": 1e-300,
    "subnormal": 5e-324,
    "huge": 1e308,
    "negative-zero": -0.0,
    "sum": 0.1 + 0.2,
    "above-2**53": 2**53 + 1,
    "forty-one-digits": 10**40 + 1,
    "past-number-range": 10**126,
    "negative-big": -(10**60) - 7,
    "in-a-list": [1.0, 1, 1e-300, True, None],
}
CASES: dict[str, dict[str, Any]] = {
    **{f"nasty[{key}]": {key: value} for key, value in NASTY_METADATA.items()},
    **{f"number[{key}]": {key: value} for key, value in NUMBERS.items()},
    "whole-catalogue": {**NASTY_METADATA, **NUMBERS},
}


@pytest.fixture(scope="module")
def oson() -> Any:
    """python-oracledb's OSON codec: an unconnected thin connection's ``encode_oson`` and
    ``decode_oson`` (what ``Connection.encode_oson`` calls; the constructor differs by release)."""
    from oracledb import thin_impl

    attempts: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {"is_async": False}),
        (("", oracledb.ConnectParams()._impl), {}),
    ]
    for args, kwargs in attempts:
        try:
            return thin_impl.ThinConnImpl(*args, **kwargs)
        except TypeError:
            continue
    pytest.fail(f"cannot build python-oracledb {oracledb.__version__}'s OSON codec without a server")


def through_driver(value: Any, bind_type: str | None, oson: Any) -> Any:
    """What a column gives back for ``value`` bound with ``bind_type`` (``sql`` bind types)."""
    if bind_type == "json":
        return oson.decode_oson(oson.encode_oson(value))
    assert bind_type is None and isinstance(value, str), f"metadata bound as {bind_type!r}: {value!r}"
    return value


def reference_records(metadata: dict[str, Any], h: Any) -> tuple[Any, Any]:
    """The record and link the reference store keeps for ``metadata``."""
    ref = InMemoryStore()
    ref.open(dimension=4)
    record = h.rec("r", metadata=metadata)
    other = h.rec("o")
    ref.write(WriteBatch(add=[NewRecord(record), NewRecord(other)]))
    lnk = Link(link_id="l", source_id="r", target_id="o", link_type=LinkType.SUPPORTS, created_at=h.T0, metadata=metadata)
    ref.write(WriteBatch(add_links=[lnk]))
    [kept] = ref.query(RecordFilter(record_ids=("r",)))
    [kept_link] = ref.links(link_ids=["l"])
    return kept, kept_link


@pytest.mark.parametrize("metadata", list(CASES.values()), ids=list(CASES))
def test_record_insert_round_trips_exactly(metadata: dict[str, Any], oson: Any, h: Any) -> None:
    want, _ = reference_records(metadata, h)
    row = q.record_row(h.rec("r", metadata=metadata), 1)
    stmt = q.insert_records(N, [row])
    stored = {c: through_driver(row[c], stmt.types.get(c), oson) for c in ("metadata", "md_keys")}
    assert stored["md_keys"] == row["md_keys"]  # the filter facts: strings only, native JSON
    fetched = tuple(stored["metadata"] if c == "metadata" else row[c] for c in q.RECORD_COLUMNS)
    assert_same(q.record_from_row(fetched), want, seq=False, what="record read back")


@pytest.mark.parametrize("metadata", list(CASES.values()), ids=list(CASES))
def test_patch_and_link_round_trip_exactly(metadata: dict[str, Any], oson: Any, h: Any) -> None:
    want, want_link = reference_records(metadata, h)
    fields, _ = q.patch_shape(RecordPatch("r", metadata=metadata))
    row = q.patch_row(RecordPatch("r", metadata=metadata))
    update = q.update_records(N, fields, [row])
    patched = through_driver(row["metadata"], update.types.get("metadata"), oson)
    assert q.read_json_object(patched) == want.metadata
    assert_same(q.read_json_object(patched), want.metadata, what="patched metadata")
    lrow = q.link_row(want_link)
    insert = q.insert_links(N, [lrow])
    stored = through_driver(lrow["metadata"], insert.types.get("metadata"), oson)
    fetched = tuple(stored if c == "metadata" else lrow[c] for c in q.LINK_COLUMNS)
    assert_same(q.link_from_row(fetched), want_link, what="link read back")


def test_native_json_binds_would_lose_numbers(oson: Any) -> None:
    """Why metadata is text: the driver's OSON encoder makes floats Oracle NUMBERs."""
    with pytest.raises(oracledb.DatabaseError, match="DPY-4003"):
        oson.encode_oson({"tiny": 1e-300})
    back = oson.decode_oson(oson.encode_oson({"one": 1.0}))
    assert type(back["one"]) is not float


def test_metadata_text_is_ascii_json(h: Any) -> None:
    text = q.record_row(h.rec("r", metadata={"ünïcødé": "日本語 🧠", "n": 1.0}), 1)["metadata"]
    assert text.isascii() and text == '{"\\u00fcn\\u00efc\\u00f8d\\u00e9":"\\u65e5\\u672c\\u8a9e \\ud83e\\udde0","n":1.0}'
    assert q.read_json_object(text) == {"ünïcødé": "日本語 🧠", "n": 1.0}
    for bad in ("[1]", "1", '"x"'):
        with pytest.raises(ValueError):
            q.read_json_object(bad)
    with pytest.raises(ValueError, match="not JSON text"):
        q.read_json_object({"native": "json"})


def test_filters_read_only_the_fact_column() -> None:
    """Metadata filters never read the metadata text: they match hashed facts in ``md_keys``
    (native JSON of strings), so the storage change cannot alter filter semantics."""
    binds = q.Binds()
    flt = RecordFilter(metadata_filter={"tiny": 1e-300, "a": {"b": {"$not": 1.0}}, "l": {"$array_contains": 2**53 + 1}})
    where = q.record_predicate(flt, "r", binds)
    assert "JSON_EXISTS(r.md_keys, " in where and "r.metadata" not in where
    assert all(isinstance(v, str) and v.isascii() and ":" in v for v in binds.values.values())
