"""Metadata filters: hashed facts + boolean tree reproduce ``agentmemory.filters`` exactly, and the
SQL rendering is a fixed JSON_EXISTS template with every key and value in binds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from agentmemory_oracle import mdfilter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory.filters import metadata_matches, validate_metadata_filter

KEYS = st.sampled_from(["a", "b", "tags", "n", "é", "x'y", "$ok"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.0, 1.0, 2.5, 2**53, 2**53 + 1, float(2**53)]),
    st.sampled_from(["", "a", "b", "1", "true", "x'y"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(KEYS.filter(lambda k: not k.startswith("$")), inner, max_size=3)
    ),
    max_leaves=8,
)
META_KEYS = KEYS.filter(lambda k: not k.startswith("$"))
METADATA = st.dictionaries(META_KEYS, VALUES, max_size=4)


def _expr(depth: int) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        VALUES,
        st.builds(lambda v: {"$array_contains": v}, VALUES),
        st.builds(lambda v: {"$array_contains_any": v}, st.lists(VALUES, min_size=1, max_size=3)),
    )
    if depth == 0:
        return leaves
    sub = _expr(depth - 1)
    return st.one_of(
        leaves,
        st.builds(lambda e: {"$not": e}, sub),
        st.dictionaries(META_KEYS, sub, min_size=0, max_size=2),
    )


FILTERS = st.dictionaries(META_KEYS, _expr(2), max_size=3)


def _matches(metadata: dict[str, Any], flt: dict[str, Any]) -> bool:
    return mdfilter.evaluate(mdfilter.compile_filter(flt), mdfilter.metadata_facts(metadata))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metadata=METADATA, flt=FILTERS)
def test_compiled_filter_equals_reference_semantics(metadata: dict[str, Any], flt: dict[str, Any]) -> None:
    validate_metadata_filter(flt)
    try:
        expected = metadata_matches(metadata, flt)
    except OverflowError:  # the reference cannot compare huge ints with floats; nothing to match
        return
    assert _matches(metadata, flt) == expected


@settings(max_examples=200, deadline=None)
@given(metadata=METADATA)
def test_every_metadata_matches_itself_as_a_filter(metadata: dict[str, Any]) -> None:
    # equality filters built from the stored values always match (nested objects by subset)
    assert _matches(metadata, metadata) == metadata_matches(metadata, metadata)


CASES = [
    # (metadata, filter, expected) — each case names one rule of agentmemory.filters
    ({"a": 1}, {"a": 1.0}, True),  # numbers compare numerically
    ({"a": True}, {"a": 1}, False),  # booleans are not numbers
    ({"a": 1}, {"a": True}, False),
    ({"a": "1"}, {"a": 1}, False),  # strings are not numbers
    ({"a": None}, {"a": None}, True),  # JSON null equals null, key must exist
    ({}, {"a": None}, False),
    ({"a": [1, 2]}, {"a": [1, 2]}, True),  # lists: exact, ordered
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": [1, 2]}, {"a": 1}, False),  # no array unwrapping
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1}}, True),  # nested filter objects match by subset
    ({"a": [{"b": 1}]}, {"a": {"b": 1}}, False),  # ...but only on an object
    ({"a": {"b": 1, "c": 2}}, {"a": {"$array_contains": {"b": 1}}}, False),
    ({"a": [{"b": 1, "c": 2}]}, {"a": {"$array_contains": {"b": 1}}}, False),  # elements: deep equality
    ({"a": [{"b": 1, "c": 2}]}, {"a": {"$array_contains": {"c": 2, "b": 1.0}}}, True),
    ({"tags": ["x", "y"]}, {"tags": {"$array_contains": "x"}}, True),
    ({"tags": ["x", "y"]}, {"tags": {"$array_contains": ["x", "y"]}}, True),  # all of them
    ({"tags": ["x"]}, {"tags": {"$array_contains": ["x", "y"]}}, False),
    ({"tags": ["x"]}, {"tags": {"$array_contains": []}}, True),  # vacuous, but must be a list
    ({"tags": "x"}, {"tags": {"$array_contains": []}}, False),
    ({"tags": "x"}, {"tags": {"$array_contains": "x"}}, False),  # a string is not a list
    ({"tags": [[1, 2]]}, {"tags": {"$array_contains": [[1, 2]]}}, True),
    ({"tags": ["x"]}, {"tags": {"$array_contains_any": ["y", "x"]}}, True),
    ({"tags": ["x"]}, {"tags": {"$array_contains_any": ["y"]}}, False),
    ({}, {"tags": {"$not": {"$array_contains": "x"}}}, True),  # missing counts as a match
    ({"tags": ["x"]}, {"tags": {"$not": {"$array_contains": "x"}}}, False),
    ({"tags": "x"}, {"tags": {"$not": {"$array_contains": "x"}}}, True),
    ({"a": 1}, {"a": {"$not": {"$not": 1}}}, True),
    ({}, {"a": {"$not": {"$not": 1}}}, True),  # outer $not: missing matches
    ({"a": {"b": 1}}, {"a": {"b": {"$not": 2}}}, True),
    ({"a": 5}, {"a": {"b": {"$not": 2}}}, False),  # nested needs an object first
    ({"a": {}}, {"a": {}}, True),
    ({"a": []}, {"a": {}}, False),
    ({"x'y": "é"}, {"x'y": "é"}, True),
    ({"a": 2**53 + 1}, {"a": float(2**53)}, False),  # as the reference: numbers compare exactly
    ({"a": 2**53}, {"a": float(2**53)}, True),
    ({"a": -0.0}, {"a": 0}, True),
    ({"a": 2.5}, {"a": 2.5}, True),
]


@pytest.mark.parametrize(("metadata", "flt", "expected"), CASES)
def test_rules(metadata: dict[str, Any], flt: dict[str, Any], expected: bool) -> None:
    validate_metadata_filter(flt)
    assert metadata_matches(metadata, flt) is expected, "case disagrees with the reference itself"
    assert _matches(metadata, flt) is expected


def test_facts_are_hashes_only(h: Any) -> None:
    meta = {"k" + p: {p: [p, {p: 1}]} for p in h.HOSTILE}
    facts = mdfilter.metadata_facts(meta)
    pattern = re.compile(r"[noave]:[0-9a-f]{24}(:[0-9a-f]{24})?\Z")
    assert facts and all(pattern.match(f) for f in facts)
    assert facts == sorted(set(facts))
    assert mdfilter.md_keys_document(meta) == {"k": facts}


def test_render_is_a_fixed_template_with_binds(h: Any) -> None:
    flt = {
        h.HOSTILE[0]: h.HOSTILE[1],
        h.HOSTILE[2]: {"$not": {"$array_contains_any": [h.HOSTILE[3], 1]}},
        h.HOSTILE[4]: {h.HOSTILE[5]: {"$array_contains": [h.HOSTILE[6], h.HOSTILE[7]]}},
    }
    validate_metadata_filter(flt)
    binds: dict[str, str] = {}

    def bind(value: str) -> str:
        name = f"m{len(binds)}"
        binds[name] = value
        return ":" + name

    sql = mdfilter.render(mdfilter.compile_filter(flt), "c.md_keys", bind)
    assert h.MARKER not in sql and not any(h.MARKER in v for v in binds.values())
    templates = re.findall(r"JSON_EXISTS\(c\.md_keys, '([^']*)' PASSING :m\d+ AS \"v\"\)", sql)
    assert len(templates) == len(binds) and set(templates) == {"$.k?(@.string() == $v)"}
    # the SQL/JSON variable is always "v"; placeholders match the binds one to one
    assert sorted(re.findall(r":(m\d+)", sql)) == sorted(binds)
    assert sql.count("(") == sql.count(")")


def test_render_boolean_structure() -> None:
    binds: list[str] = []

    def bind(value: str) -> str:
        binds.append(value)
        return f":m{len(binds) - 1}"

    pred = mdfilter.compile_filter({"a": {"$not": 1}})
    sql = mdfilter.render(pred, "r.md_keys", bind)
    # missing OR (present AND NOT equal)
    assert sql.startswith("(NOT JSON_EXISTS(") and " OR (JSON_EXISTS(" in sql and "AND NOT JSON_EXISTS(" in sql
    assert mdfilter.render(mdfilter.All(()), "x", bind) == "1 = 1"
    assert mdfilter.render(mdfilter.AnyOf(()), "x", bind) == "1 = 0"


def test_canonical_distinguishes_types_and_folds_numbers() -> None:
    c = mdfilter.canonical
    assert c(1) == c(1.0) == c(True + 0) and c(0.0) == c(-0.0)
    assert len({c(True), c(1), c("1"), c(None), c("null"), c([1]), c({"1": 1})}) == 7
    assert c({"a": 1, "b": [2]}) == c({"b": [2.0], "a": 1.0})
    assert c(10**400).startswith("i")  # beyond float range: exact int text
    with pytest.raises(TypeError):
        c(object())


NASTY_NUMBERS = [0, -0.0, 1, 1.0, True, 0.1, 0.1 + 0.2, 1e-300, 5e-324, 1e308, 2**53, 2**53 + 1, float(2**53),
                 10**40 + 1, 10**126, int(1e308), 10**400, -(10**60), "1", None]


def test_numbers_compare_exactly_as_the_reference_after_the_stored_round_trip() -> None:
    """Every pair of awkward numbers (Oracle NUMBER would round or reject several): the facts
    written from the metadata the store keeps (JSON text, read back with ``json.loads``) match
    a filter exactly when ``agentmemory.filters`` says so."""
    from agentmemory_oracle import sql as q

    for stored in NASTY_NUMBERS:
        kept = q.read_json_object(q.metadata_text({"n": stored, "l": [stored]}))
        facts = mdfilter.metadata_facts(kept)
        assert facts == mdfilter.metadata_facts({"n": stored, "l": [stored]})
        for wanted in NASTY_NUMBERS:
            for flt in ({"n": wanted}, {"l": {"$array_contains": wanted}}, {"n": {"$not": wanted}}):
                got = mdfilter.evaluate(mdfilter.compile_filter(flt), facts)
                assert got == metadata_matches(kept, flt), (stored, flt)
