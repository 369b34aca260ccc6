"""BM25 keyword search over the fts snapshot plus the exact delta: a message is findable the
moment it is written, and changed or deleted rows never leak from the stale index."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentmemory_duckdb import DuckDBStore

from agentmemory.errors import InvalidArgument
from agentmemory.spi import Capability, RecordFilter, RecordPatch, WriteBatch

V = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def _ids(hits: Any) -> list[str]:
    return [h.record.record_id for h in hits]


@pytest.fixture
def indexed(db_path: Path, h: Any) -> DuckDBStore:
    """A store whose BM25 snapshot covers 30 documents."""
    store = h.open_store(db_path, auto_index=False)
    words = ["invoice", "reconciliation", "maya", "workflow", "step", "fails", "export", "csv"]
    store.write(
        WriteBatch(
            add=[
                h.new(f"d{i:02d}", V, " ".join(words[(i + j) % len(words)] for j in range(4)), user_id="u1" if i % 2 else "u2")
                for i in range(30)
            ]
        )
    )
    assert store.build_indexes()["fts"]
    assert store.info().extra["fts_index"]["rows"] == 30
    return store


def test_declares_keyword_search(store: DuckDBStore) -> None:
    assert Capability.KEYWORD_SEARCH in store.capabilities()


def test_new_message_is_findable_at_once(indexed: DuckDBStore, h: Any) -> None:
    indexed.write(WriteBatch(add=[h.new("fresh", V, "Where is order 7421? It was due on Monday", user_id="u1")]))
    assert _ids(indexed.keyword_search("order 7421", RecordFilter(), 5)) == ["fresh"]
    # the snapshot is untouched; the delta answered
    assert indexed.info().extra["fts_index"]["rows"] == 30
    assert _ids(indexed.keyword_search("7421", RecordFilter(user_id="u2"), 5)) == []


def test_indexed_and_fresh_rows_rank_together(indexed: DuckDBStore, h: Any) -> None:
    indexed.write(WriteBatch(add=[h.new("fresh", V, "maya maya maya csv", user_id="u1")]))
    hits = indexed.keyword_search("maya csv", RecordFilter(), 40)
    assert hits[0].record.record_id == "fresh"  # highest term frequency wins across both parts
    assert len(hits) == len({h.record.record_id for h in hits})
    assert all(h.score is not None and h.score > 0 for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_patched_and_deleted_rows_do_not_leak(indexed: DuckDBStore) -> None:
    before = _ids(indexed.keyword_search("maya", RecordFilter(), 50))
    assert "d00" in before and "d01" in before
    indexed.write(WriteBatch(patch=[RecordPatch("d00", content="completely different words")], delete=["d01"]))
    after = _ids(indexed.keyword_search("maya", RecordFilter(), 50))
    assert "d00" not in after and "d01" not in after
    assert set(after) == set(before) - {"d00", "d01"}
    assert _ids(indexed.keyword_search("completely different", RecordFilter(), 5)) == ["d00"]
    # removing the vector takes a record out of the searchable corpus (as in the reference)
    indexed.write(WriteBatch(patch=[RecordPatch("d02", vector=None)]))
    assert "d02" not in _ids(indexed.keyword_search("invoice reconciliation maya workflow", RecordFilter(), 50))


def test_rebuild_picks_up_the_delta(indexed: DuckDBStore, h: Any) -> None:
    indexed.write(WriteBatch(add=[h.new("fresh", V, "order 7421 returned")], patch=[RecordPatch("d03", content="café crème 7421")]))
    assert indexed.build_indexes() == {"vector": True, "fts": True}
    assert indexed.info().extra["fts_index"]["rows"] == 31
    assert set(_ids(indexed.keyword_search("7421", RecordFilter(), 5))) == {"fresh", "d03"}
    assert _ids(indexed.keyword_search("CAFÉ", RecordFilter(), 5)) == ["d03"]  # unicode, case-folded


def test_filters_apply_to_both_parts(indexed: DuckDBStore, h: Any) -> None:
    indexed.write(
        WriteBatch(add=[h.new("fresh", V, "invoice export", user_id="u1", metadata={"tags": ["billing"]})])
    )
    hits = indexed.keyword_search("invoice", RecordFilter(user_id="u1", metadata_filter={"tags": {"$array_contains": "billing"}}), 50)
    assert _ids(hits) == ["fresh"]
    scoped = _ids(indexed.keyword_search("invoice", RecordFilter(user_id="u2"), 50))
    assert scoped and all(int(rid[1:]) % 2 == 0 for rid in scoped)


def test_digits_and_underscores_are_terms(store: DuckDBStore, h: Any) -> None:
    store.write(WriteBatch(add=[h.new("a", V, "ticket order_id=7421-B shipped"), h.new("b", V, "nothing here")]))
    store.build_indexes()
    assert _ids(store.keyword_search("order_id", RecordFilter(), 5)) == ["a"]
    assert _ids(store.keyword_search("7421", RecordFilter(), 5)) == ["a"]
    assert store.keyword_search("!!!", RecordFilter(), 5) == []


def test_invalid_keyword_arguments(store: DuckDBStore) -> None:
    with pytest.raises(InvalidArgument):
        store.keyword_search("  ", RecordFilter(), 5)
    with pytest.raises(InvalidArgument):
        store.keyword_search("x", RecordFilter(), 0)


def test_background_builder_indexes_after_enough_writes(db_path: Path, h: Any) -> None:
    store = h.open_store(db_path, fts_min_rows=50, vector_index_min_rows=50)
    try:
        rng = np.random.default_rng(0)
        store.write(WriteBatch(add=[h.new(f"r{i}", rng.standard_normal(4), f"word{i % 7} common") for i in range(120)]))
        assert store.wait_for_indexes(timeout=60)
        extra = store.info().extra
        assert extra["fts_index"] is not None and extra["vector_index"] is not None
        assert extra["fts_index"]["rows"] == 120
        assert len(store.keyword_search("common", RecordFilter(), 200)) == 120
    finally:
        store.close()


@pytest.mark.parametrize("language", ["english", "none"])
def test_snapshot_scores_are_the_reference_bm25(db_path: Path, h: Any, language: str) -> None:
    """With the snapshot covering every document, scores equal the reference's Okapi BM25
    (natural-log idf; DuckDB's own ``match_bm25`` macro uses log10 and would fail this), over
    the same analysed terms: inflections meet, stop words count for nothing, in both paths."""
    from agentmemory.reference_store import InMemoryStore

    rng = np.random.default_rng(5)
    vocab = ["order", "orders", "7421", "refund", "refunded", "late", "maya", "invoice", "invoices", "csv",
             "step", "bob", "name", "the", "and", "Running", "runs", "東京", "café"]
    batch = WriteBatch(add=[h.new(f"d{i:02d}", V, " ".join(rng.choice(vocab, rng.integers(2, 9)))) for i in range(40)])
    ref = InMemoryStore(language=language)
    ref.open(dimension=4)
    ref.write(batch)
    store = h.open_store(db_path, auto_index=False, language=language)
    queries = ("order refund", "maya", "csv step bob name", "7421 7421 late", "refunds ordering", "run", "the invoices", "東京 CAFÉ")
    try:
        store.write(batch)
        for query in queries:
            exact = store.keyword_search(query, RecordFilter(), 10)  # no snapshot yet: exact path
            want = ref.keyword_search(query, RecordFilter(), 10)
            assert _ids(exact) == _ids(want), query
            assert np.allclose([x.score for x in exact], [x.score for x in want], rtol=1e-9)
        store.build_indexes()
        for query in queries:
            got, want = store.keyword_search(query, RecordFilter(), 10), ref.keyword_search(query, RecordFilter(), 10)
            assert _ids(got) == _ids(want), query
            assert np.allclose([x.score for x in got], [x.score for x in want], rtol=1e-6), query
        assert bool(store.keyword_search("run", RecordFilter(), 10)) == (language == "english")
        assert (store.keyword_search("the and", RecordFilter(), 10) == []) == (language == "english")
    finally:
        store.close()


def test_language_option_is_validated_and_persisted(db_path: Path, h: Any) -> None:
    with pytest.raises(InvalidArgument, match="klingon") as err:
        DuckDBStore(db_path, language="klingon")
    assert err.value.argument == "language"
    assert DuckDBStore.from_uri(f"duckdb://{db_path}?language=none")._analyzer.language == "none"
    store = h.open_store(db_path, language="German")
    store.close()
    store = h.open_store(db_path)  # no language given: the file's
    try:
        assert store.info().extra["language"] == "german"
    finally:
        store.close()


def _downgrade_to_v1(db_path: Path) -> None:
    """Rewrite a closed store's file as schema version 1 wrote it: the BM25 snapshot indexes
    raw content (fts lower-casing, no stemming) and no analyzer is recorded."""
    import duckdb
    from agentmemory_duckdb import _schema

    con = duckdb.connect(str(db_path), config={"extension_directory": _schema.extension_directory()})
    con.execute("LOAD fts")
    (table,) = con.execute("SELECT value FROM am_meta WHERE key = 'fts_table'").fetchone()
    con.execute(
        f"PRAGMA create_fts_index('{table}', 'rid', 'content', stemmer = 'none', stopwords = 'none', "
        "ignore = '[^\\p{L}\\p{N}_]+', strip_accents = 0, lower = 1, overwrite = 1)"
    )
    con.execute(f"ALTER TABLE {table} DROP COLUMN terms")
    con.execute("DELETE FROM am_meta WHERE key IN ('language', 'analyzer')")
    con.execute("UPDATE am_meta SET value = '1' WHERE key = 'schema_version'")
    con.execute("DELETE FROM am_migrations WHERE version > 1")
    con.close()


def test_store_written_with_an_older_analyzer_is_reindexed_on_open(db_path: Path, h: Any) -> None:
    """A version-1 file (BM25 snapshot of raw words, no analyzer fingerprint) opened by this
    code: the stale snapshot is dropped at once (keyword search scans exactly, stemmed), then
    rebuilt over analysed terms; scores equal the reference's throughout."""
    from agentmemory_duckdb import _schema

    from agentmemory.reference_store import InMemoryStore

    texts = ["She runs every morning", "The runner was running late", "nothing of the sort", "runs runs"]
    batch = WriteBatch(add=[h.new(f"d{i}", V, t) for i, t in enumerate(texts)])
    store = h.open_store(db_path, auto_index=False, language="none")
    store.write(batch)
    store.build_indexes()
    assert _ids(store.keyword_search("running", RecordFilter(), 10)) == ["d1"]  # no stemming
    store.close()
    _downgrade_to_v1(db_path)

    ref = InMemoryStore()
    ref.open(dimension=4)
    ref.write(batch)
    want = ref.keyword_search("running", RecordFilter(), 10)
    assert {x.record.record_id for x in want} == {"d0", "d1", "d3"}
    store = h.open_store(db_path, auto_index=False)
    try:
        assert store.info().extra["schema_version"] == _schema.SCHEMA_VERSION and store.info().extra["fts_index"] is None
        got = store.keyword_search("running", RecordFilter(), 10)
        assert _ids(got) == _ids(want)
        assert np.allclose([x.score for x in got], [x.score for x in want], rtol=1e-9)
        assert store.build_indexes()["fts"]
        got = store.keyword_search("running", RecordFilter(), 10)
        assert _ids(got) == _ids(want)
        assert np.allclose([x.score for x in got], [x.score for x in want], rtol=1e-6)
        assert store.keyword_search("the of", RecordFilter(), 10) == []
    finally:
        store.close()
    # a read-only open with another language ignores the snapshot instead of misreading it
    ro = DuckDBStore(db_path, read_only=True, language="none")
    ro.open(dimension=4)
    try:
        assert ro.info().extra["fts_index"] is None
        assert _ids(ro.keyword_search("running", RecordFilter(), 10)) == ["d1"]
    finally:
        ro.close()


def test_delta_statistics_follow_every_write(db_path: Path, h: Any) -> None:
    """Rows written, rewritten and deleted after the snapshot change the delta's document
    frequencies, which are kept up to date write by write rather than recounted: after every
    write the scores equal those of the same file reopened (statistics counted from scratch)."""
    rng = np.random.default_rng(11)
    vocab = ["order", "refund", "late", "maya", "invoice", "csv", "step", "bob", "export", "tokyo"]

    def text() -> str:
        return " ".join(rng.choice(vocab, rng.integers(2, 7)))

    writes = [
        WriteBatch(add=[h.new(f"n{i:02d}", V, text()) for i in range(5)]),
        WriteBatch(patch=[RecordPatch("n01", content="refund refund tokyo"), RecordPatch("d03", content="maya csv")]),
        WriteBatch(delete=["n02", "d04"]),
        WriteBatch(add=[h.new("n09", V, "invoice late late")], patch=[RecordPatch("n01", content="bob")]),
        WriteBatch(delete=["n01", "n09"]),
    ]
    queries = ("refund tokyo", "maya csv late", "invoice bob export step order")
    store = h.open_store(db_path, auto_index=False)
    store.write(WriteBatch(add=[h.new(f"d{i:02d}", V, text()) for i in range(20)]))
    store.build_indexes()
    try:
        for batch in writes:
            for query in queries:  # statistics of the delta before the write
                store.keyword_search(query, RecordFilter(), 10)
            store.write(batch)
            got = {q: [(x.record.record_id, x.score) for x in store.keyword_search(q, RecordFilter(), 10)] for q in queries}
            store.close()
            store = h.open_store(db_path, auto_index=False)
            assert store.info().extra["fts_index"]["rows"] == 20  # the same snapshot, a fresh count
            fresh = {q: [(x.record.record_id, x.score) for x in store.keyword_search(q, RecordFilter(), 10)] for q in queries}
            assert got == fresh
            assert any(rid.startswith("n") for hits in got.values() for rid, _ in hits) or batch is writes[-1]
    finally:
        store.close()


def test_a_search_inside_the_last_ones_range_scores_as_a_fresh_one(db_path: Path, h: Any) -> None:
    """A search in a thread's range right after one in its user's (the card's two searches) takes
    its scores from the first: the same hits and the same floats as searching afresh, also for
    another thread, another user, other terms, and a range wider than the last one."""
    rng = np.random.default_rng(2)
    vocab = ["order", "refund", "late", "maya", "invoice", "csv", "step", "bob", "export", "tokyo"]
    store = h.open_store(db_path, auto_index=False)
    store.write(WriteBatch(add=[
        h.new(f"d{i:03d}", V, " ".join(rng.choice(vocab, rng.integers(2, 8))), user_id=f"u{i % 3}", thread_id=f"t{i % 7}")
        for i in range(300)
    ]))
    store.build_indexes()
    try:
        store.keyword_search("order", RecordFilter(), 5)  # loads the postings
        kw = store._kw
        assert kw is not None
        sequence = [
            ("refund late tokyo", RecordFilter(user_id="u1")), ("refund late tokyo", RecordFilter(user_id="u1", thread_id="t1")),
            ("refund late tokyo", RecordFilter(user_id="u1", thread_id="t4")), ("refund late tokyo", RecordFilter(user_id="u2", thread_id="t2")),
            ("maya csv", RecordFilter(user_id="u2", thread_id="t2")), ("maya csv", RecordFilter(user_id="u2")),
            ("maya csv", RecordFilter()), ("maya csv", RecordFilter(user_id="u0", thread_id="t3")), ("nothing here", RecordFilter(user_id="u0")),
            ("nothing here", RecordFilter(user_id="u0", thread_id="t3")),
        ]
        for text, flt in sequence:
            got = [(x.record.record_id, x.score) for x in store.keyword_search(text, flt, 8)]
            kw._last = None
            assert [(x.record.record_id, x.score) for x in store.keyword_search(text, flt, 8)] == got, (text, flt)
            assert got or text == "nothing here"
    finally:
        store.close()
