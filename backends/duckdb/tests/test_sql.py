"""SQL generation: values are inlined as literals, so hostile strings must round-trip and must
never change a query's meaning; the metadata pre-filter must only ever drop rows the reference
matcher would drop."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore
from agentmemory_duckdb._sql import dump_json, necessary_substrings, sql_str

from agentmemory.filters import metadata_matches
from agentmemory.spi import RecordFilter, RecordPatch, WriteBatch

HOSTILE = ["a'b", "x' OR '1'='1", "back\\slash", "%_%", "q\"uote", "naïve — ünïcode 🙂", "semi;colon --", "x$(y)"]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_strings_round_trip_through_every_path(store: DuckDBStore, h: Any, value: str) -> None:
    other = "plain"
    store.write(
        WriteBatch(
            add=[
                h.new(value, np.ones(4), f"text {value}", user_id=value, thread_id=value, metadata={"k": value, value: [value]}),
                h.new(other, np.ones(4), "text plain", user_id=other, metadata={"k": other}),
            ]
        )
    )
    assert [r.record_id for r in store.query(RecordFilter(user_id=value))] == [value]
    assert [r.record_id for r in store.query(RecordFilter(record_ids=(value,)))] == [value]
    assert [r.record_id for r in store.query(RecordFilter(metadata_filter={"k": value}))] == [value]
    assert [r.record_id for r in store.query(RecordFilter(metadata_filter={value: {"$array_contains": value}}))] == [value]
    assert [h.record.record_id for h in store.vector_search(np.ones(4), RecordFilter(thread_id=value), 5)] == [value]
    store.write(WriteBatch(patch=[RecordPatch(value, content=f"new {value}", metadata={"k": value + value})]))
    (rec,) = store.query(RecordFilter(record_ids=(value,)))
    assert rec.content == f"new {value}" and rec.metadata == {"k": value + value}
    from agentmemory.records import Link, LinkType

    store.write(WriteBatch(add_links=[Link(link_id=value, source_id=value, target_id=other, link_type=LinkType.SUPPORTS, created_at=h.T0, metadata={"m": value})]))
    assert [x.link_id for x in store.links(record_ids=[value])] == [value]
    store.write(WriteBatch(delete=[value]))
    assert store.count(RecordFilter()) == 1 and store.links() == []


def test_sql_str_quotes() -> None:
    assert sql_str("a'b") == "'a''b'"
    with pytest.raises(ValueError):
        sql_str("nul\x00")


METAS: list[dict[str, Any]] = [
    {}, {"a": 1}, {"a": 1.0}, {"a": True}, {"a": "x"}, {"a": ["x", "y"]}, {"a": {"b": "x"}}, {"a": None},
    {"b": "a"}, {"a": "x\"y"}, {"a": ["é"]}, {"n": {"a": "x"}}, {"a": [1, True]},
]
FILTERS: list[dict[str, Any]] = [
    {"a": 1}, {"a": True}, {"a": "x"}, {"a": {"$array_contains": "x"}}, {"a": {"$array_contains": ["x", "y"]}},
    {"a": {"$array_contains_any": ["y", "z"]}}, {"a": {"$not": "x"}}, {"a": {"b": "x"}}, {"a": None},
    {"a": "x\"y"}, {"a": {"$array_contains": "é"}}, {"n": {"a": "x"}}, {"a": {"$array_contains": True}},
]


@pytest.mark.parametrize("flt", FILTERS, ids=[str(f) for f in FILTERS])
def test_prefilter_is_only_a_necessary_condition(flt: dict[str, Any]) -> None:
    for meta in METAS:
        if metadata_matches(meta, flt):
            text = dump_json(meta)
            missing = [s for s in necessary_substrings(flt) if s not in text]
            assert not missing, (meta, flt, missing)
