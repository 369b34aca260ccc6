"""SPI examples: scope (three states per dimension, every combination), metadata filters and
record types, through every read: ``query``, ``count``, vector and keyword search."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agentmemory.errors import InvalidArgument
from agentmemory.records import RecordType
from agentmemory.spi import ANY, Capability, MemoryStore, RecordFilter, WriteBatch

from ..support import (
    E1,
    Api,
    assert_reads_agree,
    clause,
    ids,
    new,
    rec,
    reference_twin,
    requires,
    scope_matches,
    vec,
    write_both,
)

USERS = ("u1", "u10", None)
"""``u10`` shares a prefix with ``u1``: a ``LIKE 'u1%'`` bug leaks across users."""
AGENTS = ("a1", "a2", None)
THREADS = ("t1", None)
SCOPE_STATES: dict[str, tuple[Any, ...]] = {
    "user_id": (ANY, "u1", "u10", None),
    "agent_id": (ANY, "a1", None),
    "thread_id": (ANY, "t1", None),
}


def _scope_id(user: Any, agent: Any, thread: Any) -> str:
    return f"r-{user or '_'}-{agent or '_'}-{thread or '_'}"


CASE_IDS = ("Bob", "bob", "BOB", "bób", "bo\u0301b", "Straße", "STRASSE", "strasse", "İstanbul", "i\u0307stanbul", "istanbul")
"""Ids equal under case folding, accent stripping, Unicode normalisation or ``ß``/``ss``
folding, yet different ids."""


class ScopeTests:
    """Scope per dimension: unconstrained (``ANY``), equal to an id, or absent (``None``)."""

    def _scope_seed(self, api: Api) -> list[Any]:
        records = []
        for i, (user, agent, thread) in enumerate(itertools.product(USERS, AGENTS, THREADS)):
            rtype = [RecordType.MEMORY, RecordType.MESSAGE, RecordType.FACT][i % 3]
            records.append(rec(_scope_id(user, agent, thread), type=rtype, user=user, agent=agent, thread=thread, content=f"scoped words {i}"))
        api.write(WriteBatch(add=[new(r, vec(1, i * 0.01)) for i, r in enumerate(records)]))
        return records

    @clause("2.scope", "7.scope", "9.scope-boundary")
    def test_every_scope_combination_in_query_and_count(self, api: Api) -> None:
        """For every combination of the three states in the three dimensions, ``query`` and
        ``count`` return exactly the records in scope.

        Troubleshooting: ``None`` means IS NULL (not "any"); an id means equality (never a
        prefix or LIKE match).
        """
        records = self._scope_seed(api)
        for user, agent, thread in itertools.product(*SCOPE_STATES.values()):
            flt = RecordFilter(user_id=user, agent_id=agent, thread_id=thread)
            expected = [r.record_id for r in records if scope_matches(r, user, agent, thread)]
            assert ids(api.query(flt)) == expected, f"scope user={user!r} agent={agent!r} thread={thread!r}"
            assert api.count(flt) == len(expected), f"count with scope user={user!r} agent={agent!r} thread={thread!r}"

    @clause("2.scope", "7.scope", "9.scope-boundary")
    def test_every_scope_combination_in_vector_search(self, api: Api, store: MemoryStore) -> None:
        """Vector search never returns a record outside its scope, for every combination.

        Troubleshooting: apply the scope before the top-k cut (an index that filters
        afterwards must over-fetch or fall back to exact).
        """
        records = self._scope_seed(api)
        for user, agent, thread in itertools.product(*SCOPE_STATES.values()):
            flt = RecordFilter(user_id=user, agent_id=agent, thread_id=thread)
            expected = {r.record_id for r in records if scope_matches(r, user, agent, thread)}
            got = ids(api.vector_search(E1, flt, k=100))
            assert set(got) <= expected, f"vector search leaked {set(got) - expected} for user={user!r} agent={agent!r} thread={thread!r}"
            if Capability.APPROXIMATE_SEARCH not in store.capabilities():
                assert set(got) == expected, f"vector search missed {expected - set(got)}"

    @clause("2.scope", "7.scope", "9.scope-boundary")
    @requires(Capability.KEYWORD_SEARCH)
    def test_every_scope_combination_in_keyword_search(self, api: Api) -> None:
        """Keyword search never returns a record outside its scope, for every combination.

        Troubleshooting: apply the same scope condition to keyword search as to ``query``.
        """
        records = self._scope_seed(api)
        for user, agent, thread in itertools.product(*SCOPE_STATES.values()):
            flt = RecordFilter(user_id=user, agent_id=agent, thread_id=thread)
            expected = {r.record_id for r in records if scope_matches(r, user, agent, thread)}
            got = ids(api.keyword_search("scoped words", flt, k=100))
            assert set(got) == expected, f"keyword search with user={user!r} agent={agent!r} thread={thread!r}: got {sorted(got)}"


    @clause("2.scope", "7.scope", "9.scope-boundary")
    def test_scope_ids_differing_only_in_case_are_different_scopes(self, api: Api, store: MemoryStore) -> None:
        """User, agent and thread ids that differ only in case, accents, Unicode normalisation
        or ``ß``/``ss`` ("Bob", "bob", "BOB", "bób", "Straße", "STRASSE", …) are different
        scopes in ``query``, ``count``, vector and keyword search.

        Troubleshooting: compare scope columns with a binary (case- and accent-sensitive)
        collation; never ``ILIKE``, ``lower()``, ``NOCASE`` or a normalising index.
        """
        ref = reference_twin(store)
        batch = [new(rec(f"u-{i}", user=uid, content=f"scoped note {i}"), vec(1, i / 10)) for i, uid in enumerate(CASE_IDS)]
        batch += [new(rec(f"a-{i}", agent=aid, thread=tid, content=f"scoped note agent {i}"), vec(i / 10, 1))
                  for i, (aid, tid) in enumerate([("Agent", "T1"), ("agent", "t1"), ("AGENT", "t1"), ("agent", "T1")])]
        write_both(api, ref, WriteBatch(add=batch))
        for i, uid in enumerate(CASE_IDS):
            flt = RecordFilter(user_id=uid)
            assert ids(api.query(flt)) == [f"u-{i}"], f"user_id={uid!r} [{api.mode}]"
            assert_reads_agree(api, ref, flt, vector=E1, text="scoped note", what=f"user_id={uid!r}")
        for flt in (RecordFilter(agent_id="agent"), RecordFilter(agent_id="Agent"), RecordFilter(thread_id="t1"),
                    RecordFilter(thread_id="T1", agent_id="agent"), RecordFilter(user_id=None, agent_id="AGENT")):
            assert_reads_agree(api, ref, flt, vector=E1, text="scoped note agent", what="case-exact scope")
        assert ids(api.query(RecordFilter(agent_id="agent"))) == ["a-1", "a-3"]


class MetadataFilterTests:
    """The metadata-filter language: equality (nested), ``$array_contains``,
    ``$array_contains_any``, ``$not``, ANDed over keys."""

    DOCS: dict[str, dict[str, Any]] = {
        "m0": {},
        "m1": {"color": "red", "n": 1, "tags": ["a", "b"], "deep": {"x": {"y": 1}}, "flag": True},
        "m2": {"color": "blue", "n": 1.0, "tags": ["b", "c"], "deep": {"x": {"y": 2}}, "flag": False},
        "m3": {"color": "red", "n": 2, "tags": ["c"], "deep": {"x": 1}, "flag": 1},
        "m4": {"color": None, "n": "1", "tags": "a", "deep": {"x": {"y": 1, "z": 0}}, "list": [1, 2]},
        "m5": {"color": "Red", "tags": [], "list": [2, 1], "it's": "quote", "a.b": "dotted", "a": {"b": "nested"}},
    }
    CASES: list[tuple[dict[str, Any], list[str]]] = [
        ({"color": "red"}, ["m1", "m3"]),
        ({"color": None}, ["m4"]),
        ({"n": 1}, ["m1", "m2"]),
        ({"n": 1.0}, ["m1", "m2"]),
        ({"n": "1"}, ["m4"]),
        ({"flag": True}, ["m1"]),
        ({"flag": 1}, ["m3"]),
        ({"list": [1, 2]}, ["m4"]),
        ({"deep": {"x": {"y": 1}}}, ["m1", "m4"]),
        ({"deep": {"x": 1}}, ["m3"]),
        ({"tags": {"$array_contains": "b"}}, ["m1", "m2"]),
        ({"tags": {"$array_contains": ["b", "c"]}}, ["m2"]),
        ({"tags": {"$array_contains_any": ["a", "c"]}}, ["m1", "m2", "m3"]),
        ({"tags": {"$array_contains": "a"}}, ["m1"]),
        ({"color": {"$not": "red"}}, ["m0", "m2", "m4", "m5"]),
        ({"tags": {"$not": {"$array_contains": "c"}}}, ["m0", "m1", "m4", "m5"]),
        ({"color": "red", "n": 2}, ["m3"]),
        ({"color": "red", "tags": {"$array_contains": "b"}, "deep": {"x": {"y": 1}}}, ["m1"]),
        ({"it's": "quote"}, ["m5"]),
        ({"a.b": "dotted"}, ["m5"]),
        ({"a": {"b": "nested"}}, ["m5"]),
        ({"missing": "x"}, []),
        ({"missing": {"$not": "x"}}, ["m0", "m1", "m2", "m3", "m4", "m5"]),
        ({"color": {"$not": None}}, ["m0", "m1", "m2", "m3", "m5"]),
        ({"n": {"$not": 1}}, ["m0", "m3", "m4", "m5"]),
        ({"flag": {"$not": True}}, ["m0", "m2", "m3", "m4", "m5"]),
        ({"flag": False}, ["m2"]),
        ({"n": True}, []),
        ({"n": 2.0}, ["m3"]),
        ({"list": [2, 1]}, ["m5"]),
        ({"list": {"$array_contains": [1, 2]}}, ["m4", "m5"]),
        ({"list": {"$array_contains": [[1, 2]]}}, []),
        ({"list": {"$array_contains_any": [2, 3]}}, ["m4", "m5"]),
        ({"tags": {"$array_contains_any": ["a", 1]}}, ["m1"]),
        ({"tags": {"$not": {"$array_contains_any": ["a", "b"]}}}, ["m0", "m3", "m4", "m5"]),
        ({"color": ["red"]}, []),
        ({"color": {"$array_contains": "red"}}, []),
        ({"deep": {"x": {"y": 1.0}}}, ["m1", "m4"]),
        ({"deep": {"x": {"$not": {"y": 1}}}}, ["m2", "m3"]),
        ({"deep": {}}, ["m1", "m2", "m3", "m4"]),
        ({"color": "red", "flag": True, "missing": {"$not": 1}}, ["m1"]),
        ({"color": {"$not": "red"}, "tags": {"$array_contains": "c"}}, ["m2"]),
        ({"color": "Red"}, ["m5"]),
        ({"tags": {"$not": ["a", "b"]}}, ["m0", "m2", "m3", "m4", "m5"]),
        ({"tags": []}, ["m5"]),
    ]

    @clause("7.metadata-filter")
    def test_operators(self, api: Api, store: MemoryStore) -> None:
        """Each filter selects exactly the expected records in ``query``, ``count`` and vector
        search (booleans are not numbers, 1 == 1.0, lists compare exactly, a missing key
        satisfies ``$not``, keys with dots or quotes are plain keys).

        Troubleshooting: SQL backends can register ``agentmemory.filters.metadata_matches_json``
        as a UDF to evaluate exactly these rules.
        """
        api.write(WriteBatch(add=[new(rec(rid, metadata=meta)) for rid, meta in self.DOCS.items()]))
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        for flt_spec, expected in self.CASES:
            flt = RecordFilter(metadata_filter=flt_spec)
            assert ids(api.query(flt)) == expected, f"metadata_filter={flt_spec!r}"
            assert api.count(flt) == len(expected), f"count with metadata_filter={flt_spec!r}"
            got = ids(api.vector_search(E1, flt, k=50))
            assert set(got) <= set(expected), f"vector search leaked {set(got) - set(expected)} past metadata_filter={flt_spec!r}"
            if Capability.APPROXIMATE_SEARCH not in store.capabilities():
                assert sorted(got) == expected, f"vector search with metadata_filter={flt_spec!r}"
            if keyword:
                assert sorted(ids(api.keyword_search("content", flt, k=50))) == expected, f"keyword search with metadata_filter={flt_spec!r}"

    @clause("7.metadata-filter", "spi.errors")
    def test_malformed_filters_raise_invalid_argument(self, api: Api) -> None:
        """Unknown operators (also under ``$not`` and in nested objects), operators as keys,
        operators mixed with keys, non-JSON values (also as operator arguments), an empty
        ``$array_contains_any`` and nesting past 128 levels raise ``InvalidArgument`` before
        anything runs.

        Troubleshooting: the base class validates filters; do not translate them before it
        has.
        """
        bad: Any
        too_deep: Any = 1
        for _ in range(200):
            too_deep = {"a": too_deep}
        for bad in (
            too_deep,
            {"$not": {"a": 1}},
            {"a": {"$regex": "x"}},
            {"a": {"$not": 1, "b": 2}},
            {"a": {"$array_contains_any": []}},
            {"a": {"$array_contains_any": "x"}},
            {"a": {"$not": {"$regex": "x"}}},
            {"a": {"$array_contains_any": [float("nan")]}},
            {"a": {"$array_contains": float("inf")}},
            {"a": {"b": {"$regex": "x"}}},
            {"a": float("nan")},
            {"a": object()},
            {"": 1},
            "color=red",
        ):
            with pytest.raises(InvalidArgument):
                api.query(RecordFilter(metadata_filter=bad))
            with pytest.raises(InvalidArgument):
                api.vector_search(E1, RecordFilter(metadata_filter=bad), k=3)


class RecordTypeTests:
    """Record types as a filter in every read."""

    @clause("2.record-types", "7.record-types")
    def test_type_filter_in_every_read(self, api: Api, store: MemoryStore) -> None:
        """``record_types`` restricts ``query``, ``count``, vector and keyword search; records
        stored without a vector never appear in vector search.

        Troubleshooting: records stored without a vector (threads, summaries) must be absent
        from vector and keyword search.
        """
        types = list(RecordType)
        api.write(
            WriteBatch(add=[new(rec(f"r-{t.value}", type=t, content=f"common {t.value}")) for t in types])
        )
        searchable = {RecordType.MESSAGE, RecordType.MEMORY, RecordType.FACT, RecordType.GUIDELINE, RecordType.PREFERENCE, RecordType.USER, RecordType.AGENT}
        for subset in ({RecordType.FACT}, {RecordType.MESSAGE, RecordType.USER}, {RecordType.THREAD, RecordType.SUMMARY}, set(types)):
            flt = RecordFilter(record_types=frozenset(subset))
            expected = [f"r-{t.value}" for t in types if t in subset]
            assert ids(api.query(flt)) == expected
            assert api.count(flt) == len(expected)
            with_vectors = sorted(f"r-{t.value}" for t in types if t in subset and t in searchable)
            got = ids(api.vector_search(E1, flt, k=50))
            assert set(got) <= set(with_vectors), f"vector search returned {set(got) - set(with_vectors)}"
            if Capability.APPROXIMATE_SEARCH not in store.capabilities():
                assert sorted(got) == with_vectors
            if Capability.KEYWORD_SEARCH in store.capabilities():
                got_kw = ids(api.keyword_search("common", flt, k=50))
                assert set(got_kw) <= set(with_vectors), f"keyword search returned {set(got_kw) - set(with_vectors)}"

    @clause("2.record-types", "spi.errors")
    def test_filter_values_are_validated(self, api: Api) -> None:
        """Malformed scope values in a filter raise ``InvalidArgument``.

        Troubleshooting: the base class validates filter values; do not override the public
        read methods.
        """
        for flt in (
            RecordFilter(user_id=""),
            RecordFilter(agent_id=" a"),
            RecordFilter(thread_id="t\x00"),
            RecordFilter(user_id=5),  # type: ignore[arg-type]
            RecordFilter(record_ids=("",)),
        ):
            with pytest.raises(InvalidArgument):
                api.query(flt)
