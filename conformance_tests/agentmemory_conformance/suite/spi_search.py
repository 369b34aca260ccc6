"""SPI examples: vector search (exact or held to the declared recall floor), keyword search,
deterministic tie-breaking, and the capability contract."""

from __future__ import annotations

import numpy as np
import pytest

from agentmemory.bulk import RecordColumns
from agentmemory.errors import CapabilityNotSupported, InvalidArgument
from agentmemory.records import RecordStatus, RecordType
from agentmemory.spi import Capability, MemoryStore, RecordFilter, RecordPatch, WriteBatch

from ..support import (
    DIM,
    E1,
    E2,
    E3,
    E4,
    T0,
    Api,
    assert_hits_ordered,
    assert_reads_agree,
    assert_same,
    assert_vector_hits,
    assert_vector_ids,
    clause,
    exact_ranking,
    ids,
    is_approximate,
    new,
    rec,
    reference_twin,
    requires,
    vec,
    write_both,
)


class VectorSearchTests:
    """``vector_search``: cosine distance, best first, ties by record id, filters applied."""

    @clause("spi.vector-search", "7.strategies")
    def test_nearest_first_with_cosine_distances(self, api: Api, store: MemoryStore) -> None:
        """Hits come nearest first with ``distance = 1 - cos``; magnitude does not matter;
        ``k`` caps the list.

        Troubleshooting: normalise vectors (cosine), return ``1 - cos`` as ``distance``,
        best first.
        """
        vectors = {"x": E1, "y": vec(1, 1), "z": E2, "w": vec(-1), "v": vec(0, 0, 5)}
        api.write(WriteBatch(add=[new(rec(rid), v) for rid, v in vectors.items()]))
        query = vec(2, 0.5)
        expected = exact_ranking(query, vectors)
        for k in (1, 2, 5, 50):
            hits = api.vector_search(query, k=k)
            assert_vector_hits(store, hits, expected, k)
        hits = api.vector_search(query * 1000, k=5)
        assert_vector_hits(store, hits, expected, 5)

    @clause("7.ties", "spi.vector-search")
    def test_ties_break_by_record_id(self, api: Api, store: MemoryStore) -> None:
        """Records at the same distance come in record-id order, whatever the insertion order;
        the cut at ``k`` keeps the smallest ids.

        Troubleshooting: ORDER BY distance, record_id (compare rounded distances: equal vectors
        must compare equal).
        """
        for rid in ["t-c", "t-a", "t-e", "t-b", "t-d"]:
            api.write(WriteBatch(add=[new(rec(rid), vec(0.3, 0.4))]))
        api.write(WriteBatch(add=[new(rec("far"), E4)]))
        assert_vector_ids(store, api.vector_search(vec(0.3, 0.4), k=10), ["t-a", "t-b", "t-c", "t-d", "t-e", "far"])
        assert_vector_ids(store, api.vector_search(vec(6, 8), k=3), ["t-a", "t-b", "t-c"])

    @clause("spi.vector-search")
    def test_filters_apply_before_the_cut(self, api: Api, store: MemoryStore) -> None:
        """``k`` results are taken among records matching the filter, not filtered afterwards:
        a narrow filter still fills ``k`` when enough records match.

        Troubleshooting: approximate indexes must widen the search (or fall back to exact)
        when a filter is selective.
        """
        rng = np.random.default_rng(7)
        records = []
        for i in range(60):
            user = "rare" if i % 10 == 3 else "common"
            records.append(new(rec(f"r{i:02d}", user=user, status=RecordStatus.INVALID if i % 4 == 0 else RecordStatus.VALID), rng.normal(size=DIM).astype(np.float32)))
        api.write(WriteBatch(add=records))
        query = rng.normal(size=DIM).astype(np.float32)
        for flt in (RecordFilter(user_id="rare"), RecordFilter(user_id="common", statuses=frozenset({RecordStatus.VALID}))):
            pool = {n.record.record_id: n.vector for n in records if n.record.user_id == flt.user_id and (flt.statuses is None or n.record.status in flt.statuses)}
            hits = api.vector_search(query, flt, k=5)
            assert_vector_hits(store, hits, exact_ranking(query, pool), 5)  # type: ignore[arg-type]

    @clause("spi.vector-search")
    def test_recall_against_exact_search(self, api: Api, store: MemoryStore) -> None:
        """Over 300 random vectors, recall@10 against brute force reaches
        ``store.min_recall_at_10`` (1.0 for exact backends), with and without a filter.

        Troubleshooting: raise ``ef``/over-fetch, or lower ``min_recall_at_10`` to what the
        index really delivers.
        """
        rng = np.random.default_rng(11)
        vectors = {f"p{i:03d}": rng.normal(size=DIM).astype(np.float32) for i in range(300)}
        api.write(WriteBatch(add=[new(rec(rid, user="even" if int(rid[1:]) % 2 == 0 else "odd"), v) for rid, v in vectors.items()]))
        for flt, pool in (
            (RecordFilter(), vectors),
            (RecordFilter(user_id="odd"), {rid: v for rid, v in vectors.items() if int(rid[1:]) % 2 == 1}),
        ):
            recalls = []
            for _ in range(10):
                query = rng.normal(size=DIM).astype(np.float32)
                truth = [rid for rid, _ in exact_ranking(query, pool)[:10]]
                got = ids(api.vector_search(query, flt, k=10))
                assert set(got) <= set(pool), f"hits outside the filter: {set(got) - set(pool)}"
                recalls.append(len(set(got) & set(truth)) / 10)
            mean = sum(recalls) / len(recalls)
            assert mean >= store.min_recall_at_10 - 1e-9, f"mean recall@10 {mean:.3f} < declared {store.min_recall_at_10} (filter {flt})"

    @clause("spi.vector-search", "7.ties")
    def test_distances_and_every_k(self, api: Api, store: MemoryStore) -> None:
        """Hits carry ``distance = 1 - cos`` exactly as the reference computes it (0 for the same
        direction at any length, 1 orthogonal, 2 opposite) and no score; ``k`` of 1, of the
        number of candidates, past it and 10,000 all cut the same ranking; records without a
        vector never appear.

        Troubleshooting: normalise stored and query vectors (or use a cosine metric), return
        ``1 - cos`` (not the similarity, not L2), and LIMIT after ordering by (distance, id).
        """
        ref = reference_twin(store)
        vectors = {"same": E1, "long": vec(5), "ortho": E2, "opposite": vec(-1), "diagonal": vec(1, 1), "near": vec(1, 0.001),
                   "skew": vec(3, -1, 2, 0.5), "tie-b": vec(0, 0, 1, 1), "tie-a": vec(0, 0, 2, 2)}
        write_both(api, ref, WriteBatch(add=[new(rec(rid, content=f"vector {rid}"), v) for rid, v in vectors.items()]
                                       + [new(rec("no-vector", content="vector none"), None),
                                          new(rec("@thread:t", type=RecordType.THREAD, content=""), None)]))
        n = len(vectors)
        for k in (1, 2, n - 1, n, n + 1, 10_000):
            for probe in (E1, vec(0, 0, 1, 1), vec(-2, 1, 0, 0)):
                assert_reads_agree(api, ref, RecordFilter(), vector=probe, k=k, what=f"k={k}")
        if not is_approximate(store):
            hits = {h.record.record_id: h.distance for h in api.vector_search(E1, k=n)}
            for rid, want in (("same", 0.0), ("long", 0.0), ("ortho", 1.0), ("opposite", 2.0), ("diagonal", 1 - 2**-0.5)):
                assert abs(float(hits[rid] or 0.0) - want) < 1e-6, f"distance of {rid!r}: {hits[rid]}, expected {want}"

    @clause("spi.vector-search", "spi.errors")
    def test_arguments_are_validated(self, api: Api) -> None:
        """Bad query vectors and ``k`` raise ``InvalidArgument``.

        Troubleshooting: the base class validates the vector and ``k``; do not override the
        public ``vector_search``.
        """
        api.write(WriteBatch(add=[new(rec("a"), E1)]))
        for bad in (vec(float("nan")), vec(float("inf")), np.zeros(DIM, dtype=np.float32), np.ones(DIM + 1), np.ones((2, DIM)), "abcd", [1, 2, "x", 4]):
            with pytest.raises(InvalidArgument):
                api.vector_search(bad, k=1)
        for k in (0, -1, 1.5, True, 10_001, None):
            with pytest.raises(InvalidArgument):
                api.vector_search(E1, k=k)  # type: ignore[arg-type]

    @clause("spi.vector-search")
    def test_empty_store_and_empty_pool(self, api: Api, store: MemoryStore) -> None:
        """No candidates → an empty list, not an error (vector and, where declared, keyword
        search).

        Troubleshooting: return ``[]`` when no record qualifies; never raise on an empty
        index (BM25 statistics over no documents must not divide by zero).
        """
        assert api.vector_search(E1, k=3) == []
        keyword = Capability.KEYWORD_SEARCH in store.capabilities()
        if keyword:
            assert api.keyword_search("apple", RecordFilter(), k=3) == [], "keyword search on an empty store"
        api.write(WriteBatch(add=[new(rec("a", user="u"), E1), new(rec("@thread:t", type=RecordType.THREAD, content=""), None)]))
        assert api.vector_search(E2, RecordFilter(user_id="other"), k=3) == []
        if keyword:
            assert api.keyword_search("apple", RecordFilter(user_id="other"), k=3) == []
        assert_vector_ids(store, api.vector_search(E3, k=3), ["a"])

    @clause("spi.vector-search", "spi.bulk_add", "7.scope")
    def test_scoped_searches_between_writes_of_every_kind(self, api: Api, store: MemoryStore) -> None:
        """A search scoped by user and record type, repeated between writes of every kind
        (``bulk_add``, a write of another type, a patch, a delete), always sees the scope as it
        is now, whichever path made the last change.

        Troubleshooting: a store that keeps a scope's rows between searches must drop or
        refresh it after *every* write path that can touch that scope (``bulk_add`` included),
        not only after the ones that say which record types they touched.
        """
        ref = reference_twin(store)
        facts = RecordFilter(user_id="u", record_types=frozenset({RecordType.FACT}))
        messages = RecordFilter(user_id="u", record_types=frozenset({RecordType.MESSAGE}))
        probe = vec(1, 0.2)
        write_both(api, ref, WriteBatch(add=[
            new(rec("f1", user="u", type=RecordType.FACT, content="first fact"), vec(1, 1)),
            new(rec("m1", user="u", type=RecordType.MESSAGE, content="first message"), E2),
        ]))

        def agree(step: str) -> None:
            for flt in (facts, messages):
                assert_reads_agree(api, ref, flt, vector=probe, what=f"after {step}")

        agree("the first write")
        columns = RecordColumns(record_id=["f2", "f3"], content=["bulk fact two", "bulk fact three"],
                                record_type=RecordType.FACT, timestamp=T0, user_id="u",
                                vectors=np.array([[1, 0.1, 0, 0], [0, 1, 1, 0]], dtype=np.float32)[:, :DIM])
        assert api.bulk_add(columns) == 2
        ref.bulk_add(columns)
        # no read in between: the next write of another type must not bring back the scope
        # as it was before the bulk_add
        write_both(api, ref, WriteBatch(add=[new(rec("m2", user="u", type=RecordType.MESSAGE, content="second message"), E3)]))
        agree("a bulk_add of facts, then a write of a message")
        write_both(api, ref, WriteBatch(patch=[RecordPatch("f1", vector=vec(1, 0.25))]))
        write_both(api, ref, WriteBatch(add=[new(rec("m3", user="u", type=RecordType.MESSAGE, content="third message"), E1)]))
        agree("a patch of a fact's vector, then a write of a message")
        write_both(api, ref, WriteBatch(delete=["f2"]))
        write_both(api, ref, WriteBatch(delete=["m1"]))
        agree("a delete of a fact, then a delete of a message")


KEYWORD_DOCS = {
    "k1": "apple banana cherry",
    "k2": "banana banana falcon",
    "k3": "guitar harbor island",
    "k4": "Apple pie with cherry",
    "k5": "jungle kettle lantern",
    "k6": "APPLE apple apple",
}


class KeywordSearchTests:
    """``keyword_search`` (``KEYWORD_SEARCH``): BM25-style matching over searchable records."""

    @clause("spi.keyword-search", "7.strategies")
    @requires(Capability.KEYWORD_SEARCH)
    def test_matching_set_and_order(self, api: Api) -> None:
        """A record matches when it shares a (case-insensitive) word with the query; hits are
        best first with a positive ``score``, ties by record id, at most ``k``.

        Troubleshooting: scores are backend-specific (only the matching set and the order
        rules are compared); disable stemming/stop-word removal that changes which words match.
        """
        api.write(WriteBatch(add=[new(rec(rid, content=text), E1) for rid, text in KEYWORD_DOCS.items()]))
        cases = {"apple": {"k1", "k4", "k6"}, "banana cherry": {"k1", "k2", "k4"}, "zebra": set(), "LANTERN": {"k5"}}
        for text, expected in cases.items():
            hits = api.keyword_search(text, k=10)
            assert set(ids(hits)) == expected, f"keyword_search({text!r})"
            assert all(h.score is not None and h.score > 0 for h in hits)
            assert_hits_ordered(hits, by="score")
        top = api.keyword_search("apple", k=2)
        assert len(top) == 2 and set(ids(top)) <= {"k1", "k4", "k6"}
        assert ids(top)[0] == "k6", "the record repeating the term most should rank first"

    @clause("spi.keyword-search")
    @requires(Capability.KEYWORD_SEARCH)
    def test_terms_are_the_core_analyzers(self, api: Api, store: MemoryStore) -> None:
        """Documents and queries go through the core's keyword analyzer
        (``agentmemory.analysis``; the store's ``analyzer``, else English): inflections meet,
        stop words match nothing, a query of stop words finds nothing; the matching set equals
        the reference store's with the same analyzer.

        Troubleshooting: index ``Analyzer.terms(content)`` joined by spaces with the engine's
        own stemming, stop words and case/accent folding off, and query with
        ``Analyzer.query_terms(text)``.
        """
        from agentmemory.reference_store import InMemoryStore

        language = getattr(getattr(store, "analyzer", None), "language", "english")
        docs = {"s1": "She runs every morning", "s2": "The runner was running late", "s3": "nothing of the sort",
                "s4": "Invoices were invoiced", "s5": "東京 café ünïcødé"}
        batch = WriteBatch(add=[new(rec(rid, content=text), E1) for rid, text in docs.items()])
        api.write(batch)
        ref = InMemoryStore(language=language)
        ref.open(dimension=len(E1))
        ref.write(batch)
        for text in ("running", "RUNS", "invoice", "the of", "東京", "CAFÉ", "ünïcødé sort"):
            want = {h.record.record_id for h in ref.keyword_search(text, RecordFilter(), 10)}
            assert set(ids(api.keyword_search(text, k=10))) == want, f"keyword_search({text!r}) [{language}]"
        if language == "english":
            assert set(ids(api.keyword_search("running", k=10))) == {"s1", "s2"}
            assert api.keyword_search("the of", k=10) == []

    @clause("spi.keyword-search", "spi.async-parity")
    @requires(Capability.KEYWORD_SEARCH)
    def test_non_latin_and_accented_words_match_exactly(self, api: Api, store: MemoryStore) -> None:
        """Words in other scripts (日本語, Ελληνικά, Русский) and accented words (ünïcødé, café)
        match exactly the records holding that word, case-insensitively (full case folding:
        "STRASSE" finds "Straße"), in sync and async search alike: no accent folding ("café"
        does not find "cafe"), no splitting of words joined by ``_``, the same terms, hits and
        scores as the reference.

        Troubleshooting: index ``analyzer.terms(content)`` and query ``analyzer.terms(text)``
        (``agentmemory.analysis``) with the engine's own folding, stemming and tokenising off,
        and keep the text Unicode end to end (no ASCII transliteration, no byte strings).
        """
        ref = reference_twin(store)
        docs = {
            "jp": "日本語 のテキスト", "jp2": "日本 語", "acc": "ünïcødé text", "acc-caps": "ÜNÏCØDÉ Text",
            "plain": "unicode text", "cafe-acc": "naïve café", "cafe": "naive cafe", "snake": "snake_case_word",
            "words": "snake case word", "greek": "Ελληνικά κείμενο", "ru": "Русский текст", "street": "Straße Nummer",
        }
        write_both(api, ref, WriteBatch(add=[new(rec(rid, content=text), vec(1, i)) for i, (rid, text) in enumerate(docs.items())]))
        for text in ("日本語", "のテキスト", "日本", "ünïcødé", "ÜNÏCØDÉ", "unicode", "café", "cafe", "naïve", "snake_case_word",
                     "snake", "Ελληνικά", "ΕΛΛΗΝΙΚΆ", "русский", "text", "STRASSE", "straße", "日本語 ünïcødé café"):
            assert_same(api.keyword_search(text, k=20), ref.keyword_search(text, RecordFilter(), 20), seq=False,
                        what=f"keyword_search({text!r}) [{api.mode}]")
        if ref.analyzer.language == "english":
            for text, expected in (("日本語", {"jp"}), ("ünïcødé", {"acc", "acc-caps"}), ("unicode", {"plain"}), ("café", {"cafe-acc"}),
                                   ("cafe", {"cafe"}), ("snake", {"words"}), ("snake_case_word", {"snake"}), ("Русский", {"ru"}),
                                   ("STRASSE", {"street"})):
                assert set(ids(api.keyword_search(text, k=20))) == expected, f"keyword_search({text!r}) [{api.mode}]"

    @clause("spi.keyword-search", "7.ties")
    @requires(Capability.KEYWORD_SEARCH)
    def test_scores_ties_and_cuts_equal_the_reference(self, api: Api, store: MemoryStore) -> None:
        """BM25 over the shared analyser's terms: for single- and multi-word queries (repeated
        words count once, stop words not at all, stems meet), under filters and at every ``k``,
        the hits, their order, their scores (within 1e-6, relative) and the order of tied
        scores (by record id) are the reference's; corpus statistics (document count, document
        frequency, average length) cover every searchable record, whatever the filter.

        Troubleshooting: score with ``agentmemory.bm25`` (natural-log idf, k1=1.2, b=0.75,
        summing over the distinct query terms) and compute N, df and the average length over all
        records with a vector, not over the filtered ones, not including deleted ones.
        """
        ref = reference_twin(store)
        docs = [
            ("d01", "apple", "u1", RecordType.MEMORY), ("d02", "apple apple banana", "u1", RecordType.FACT),
            ("d03", "apple banana cherry falcon guitar harbor island jungle", "u2", RecordType.FACT),
            ("d04", "The runner was running; she runs daily", "u1", RecordType.MESSAGE),
            ("d05", "invoice 7421 for order ZX-4471", "u2", RecordType.MEMORY), ("d06", "invoices and invoicing", None, RecordType.FACT),
            ("d07", "don't stop the banana", "u1", RecordType.PREFERENCE), ("tie-c", "tie words here", "u2", RecordType.MEMORY),
            ("tie-a", "tie words here", "u1", RecordType.MEMORY), ("tie-b", "tie words here", "u2", RecordType.FACT),
            ("d08", "cherry " * 12 + "apple", None, RecordType.MEMORY), ("d09", "banana split", "u1", RecordType.MESSAGE),
        ]
        write_both(api, ref, WriteBatch(add=[
            new(rec(rid, content=text, user=user, type=rtype, metadata={"g": i % 2},
                    status=RecordStatus.INVALID if i % 5 == 4 else RecordStatus.VALID), vec(1, i))
            for i, (rid, text, user, rtype) in enumerate(docs)
        ] + [new(rec("hidden", content="apple banana tie words", type=RecordType.THREAD), None)]))
        queries = ("apple", "apple apple", "the apple", "APPLE banana", "running", "invoice 7421", "zx 4471", "don't", "tie words",
                   "banana cherry falcon", "the of")
        filters = (RecordFilter(), RecordFilter(user_id="u1"), RecordFilter(record_types=frozenset({RecordType.FACT, RecordType.MEMORY}), metadata_filter={"g": 0}))
        for text in queries:
            for flt in filters:
                for k in (1, 3, 50):
                    assert_same(api.keyword_search(text, flt, k), ref.keyword_search(text, flt, k), seq=False,
                                what=f"keyword_search({text!r}, k={k}) [{api.mode}] {flt}")
        assert ids(api.keyword_search("tie words", k=2)) == ["tie-a", "tie-b"]
        write_both(api, ref, WriteBatch(delete=["d03", "tie-a"]))
        for text in ("apple", "tie words", "banana cherry falcon"):
            assert_same(api.keyword_search(text, RecordFilter(user_id="u2"), 10), ref.keyword_search(text, RecordFilter(user_id="u2"), 10),
                        seq=False, what=f"keyword_search({text!r}) after deletes [{api.mode}]")

    @clause("spi.keyword-search", "spi.write")
    @requires(Capability.KEYWORD_SEARCH)
    def test_vector_patches_keep_keyword_search_right(self, api: Api, store: MemoryStore) -> None:
        """Keyword search covers exactly the records that have a vector: a patch that adds a
        vector makes a record findable by its current content, ``vector=None`` removes it, and
        content patched with, before or after a vector change is what is matched and scored.

        Troubleshooting: keep the keyword index keyed to the records with a vector, and update
        it in the same transaction as every patch that touches content or vector.
        """
        ref = reference_twin(store)
        write_both(api, ref, WriteBatch(add=[new(rec("a", content="zebra stripes"), None), new(rec("b", content="zebra crossing"), E2),
                                             new(rec("c", content="other words"), E3)]))
        for patch in (
            RecordPatch("a", vector=E1),
            RecordPatch("a", vector=None),
            RecordPatch("a", content="zebra zebra herd", vector=E2),
            RecordPatch("a", content="lion pride"),
            RecordPatch("b", vector=None),
            RecordPatch("b", content="zebra pride"),
            RecordPatch("b", vector=vec(1, 1)),
            RecordPatch("a", vector=E3),
        ):
            write_both(api, ref, WriteBatch(patch=[patch]))
            for text in ("zebra", "lion pride", "stripes crossing"):
                assert_reads_agree(api, ref, RecordFilter(), vector=E1, text=text, what=f"after {patch}")

    @clause("spi.keyword-search")
    @requires(Capability.KEYWORD_SEARCH)
    def test_filters_and_content_updates(self, api: Api) -> None:
        """Filters apply; patched content is searchable at once and old words are gone;
        deleted records vanish.

        Troubleshooting: re-index a record's terms when its content is patched, drop them
        when it is deleted.
        """
        from agentmemory.spi import RecordPatch

        api.write(WriteBatch(add=[new(rec(rid, content=text, user="u1" if rid in ("k1", "k2") else "u2"), E1) for rid, text in KEYWORD_DOCS.items()]))
        assert set(ids(api.keyword_search("banana apple", RecordFilter(user_id="u1"), k=10))) == {"k1", "k2"}
        api.write(WriteBatch(patch=[RecordPatch("k3", content="zebra crossing")]))
        assert ids(api.keyword_search("zebra", k=10)) == ["k3"]
        assert api.keyword_search("guitar", k=10) == []
        api.write(WriteBatch(delete=["k3"]))
        assert api.keyword_search("zebra", k=10) == []

    @clause("spi.keyword-search", "9.bad-input")
    @requires(Capability.KEYWORD_SEARCH)
    def test_query_syntax_is_plain_text(self, api: Api) -> None:
        """Full-text operators and quotes in the query are plain text: no syntax errors, no
        injection; words still match.

        Troubleshooting: never pass user text to CONTAINS/MATCH unescaped.
        """
        api.write(WriteBatch(add=[new(rec(rid, content=text), E1) for rid, text in KEYWORD_DOCS.items()]))
        for text in ('apple" OR "x', "apple AND NOT banana", "apple*", "(apple", "apple'); DROP TABLE records; --", "{apple}", "apple:banana", "-apple +cherry", "apple ~ near/3 %", "\\apple"):
            hits = api.keyword_search(text, k=10)
            assert set(ids(hits)) <= set(KEYWORD_DOCS), text
            assert "k1" in ids(hits), f"{text!r} should still match the word 'apple'"
        assert api.count() == len(KEYWORD_DOCS)

    @clause("spi.keyword-search", "spi.errors")
    @requires(Capability.KEYWORD_SEARCH)
    def test_arguments_are_validated(self, api: Api) -> None:
        """Empty or non-string text and bad ``k`` raise ``InvalidArgument``.

        Troubleshooting: the base class validates the text and ``k``; do not override the public
        ``keyword_search``.
        """
        for text in ("", "   ", None, 5):
            with pytest.raises(InvalidArgument):
                api.keyword_search(text, k=3)
        with pytest.raises(InvalidArgument):
            api.keyword_search("apple", k=0)


class CapabilityTests:
    """Undeclared capabilities raise ``CapabilityNotSupported``; declared ones are real."""

    @clause("spi.capabilities")
    def test_undeclared_keyword_search_raises(self, api: Api, store: MemoryStore) -> None:
        """Without ``KEYWORD_SEARCH``, keyword search raises ``CapabilityNotSupported`` (never an
        empty result).

        Troubleshooting: do not declare ``KEYWORD_SEARCH`` unless ``_keyword_search`` is
        implemented; the base class raises otherwise.
        """
        if Capability.KEYWORD_SEARCH in store.capabilities():
            pytest.skip("keyword_search is declared (its behaviour is tested elsewhere)")
        api.write(WriteBatch(add=[new(rec("a", content="apple"), E1)]))
        with pytest.raises(CapabilityNotSupported):
            api.keyword_search("apple", k=3)

    @clause("spi.capabilities")
    def test_declarations_match_the_implementation(self, store: MemoryStore) -> None:
        """A declared capability must be implemented: ``KEYWORD_SEARCH`` needs
        ``_keyword_search`` overridden, ``READ_VECTORS`` ``_read_vectors``; ``CONCURRENT_WRITERS`` and ``PERSISTENCE`` are checked by
        their own tests.

        Troubleshooting: declare exactly the capabilities you implement.
        """
        from agentmemory.spi import MemoryStore as Base

        declared = store.capabilities()
        for capability, method in ((Capability.KEYWORD_SEARCH, "_keyword_search"),
                                   (Capability.READ_VECTORS, "_read_vectors")):
            overrides = getattr(type(store), method) is not getattr(Base, method)
            if capability in declared:
                assert overrides, f"{capability.name} declared but {method} is not implemented"
            elif overrides:
                import warnings

                warnings.warn(f"{store.name}: {method} is implemented but {capability.name} is not declared", stacklevel=1)

    @clause("spi.read-vectors")
    @requires(Capability.READ_VECTORS)
    def test_read_vectors_returns_what_was_written(self, api: Api, store: MemoryStore) -> None:
        """``read_vectors`` gives each id's current vector in its written direction (export and
        migrate keep these instead of re-embedding): patched vectors are the new ones, removed
        or never-set vectors and unknown or deleted ids are absent, an empty list reads nothing.

        Troubleshooting: read the same column vector search ranks, after every change of the
        batch; return float32 arrays of the store's dimension keyed by record id.
        """
        api.write(WriteBatch(add=[
            new(rec("rv-a"), vec(3, 4)), new(rec("rv-b"), vec(0, 0, 2)), new(rec("rv-c"), E3),
            new(rec("rv-d"), None), new(rec("rv-e"), E4),
        ]))
        api.write(WriteBatch(patch=[RecordPatch("rv-b", vector=vec(1, -1)), RecordPatch("rv-c", vector=None)],
                             delete=["rv-e"]))
        got = store.read_vectors(["rv-a", "rv-b", "rv-c", "rv-d", "rv-e", "rv-missing"])
        assert sorted(got) == ["rv-a", "rv-b"], "only ids that have a vector now are returned"
        for rid, want in (("rv-a", vec(3, 4)), ("rv-b", vec(1, -1))):
            arr = np.asarray(got[rid], dtype=np.float64)
            assert arr.shape == (DIM,), f"{rid}: shape {arr.shape}"
            cos = float(arr @ want / (np.linalg.norm(arr) * np.linalg.norm(want)))
            assert cos > 0.99999, f"{rid}: read back a different direction (cos {cos})"
        assert store.read_vectors([]) == {}
        with pytest.raises(InvalidArgument):
            store.read_vectors("rv-a")  # type: ignore[arg-type]

    @clause("spi.capabilities")
    def test_undeclared_read_vectors_raises(self, api: Api, store: MemoryStore) -> None:
        """Without ``READ_VECTORS``, ``read_vectors`` raises ``CapabilityNotSupported`` (export
        then re-embeds on import), never an empty answer.

        Troubleshooting: declare ``READ_VECTORS`` only when ``_read_vectors`` is implemented.
        """
        if Capability.READ_VECTORS in store.capabilities():
            pytest.skip("read_vectors is declared (tested by test_read_vectors_returns_what_was_written)")
        api.write(WriteBatch(add=[new(rec("a"), E1)]))
        with pytest.raises(CapabilityNotSupported):
            store.read_vectors(["a"])

    @clause("spi.capabilities")
    def test_undeclared_keyword_search_raises_in_client(self, memory_factory: object) -> None:
        """The client's keyword and hybrid strategies raise ``CapabilityNotSupported`` on a
        backend without ``KEYWORD_SEARCH``.

        Troubleshooting: the client checks ``capabilities()``; declare ``KEYWORD_SEARCH``
        only when supported.
        """
        mem = memory_factory()  # type: ignore[operator]
        if Capability.KEYWORD_SEARCH in mem.store.capabilities():
            pytest.skip("keyword_search is declared")
        mem.add_memory("apple pie", user_id="u")
        for strategy in ("keyword", "hybrid"):
            with pytest.raises(CapabilityNotSupported):
                mem.search("apple", user_id="u", strategy=strategy)


_ = E2
