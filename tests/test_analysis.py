"""The keyword analyzer (``agentmemory.analysis``): tokens, case folding, stop words, Snowball
stemming, languages and the fingerprint stores persist; and keyword search through it."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import numpy as np
import pytest

from agentmemory.analysis import (
    NO_LANGUAGE,
    SNOWBALL_ENGLISH_STOP_WORDS,
    Analyzer,
    languages,
    normalize_language,
)
from agentmemory.errors import InvalidArgument
from agentmemory.records import Record, RecordType
from agentmemory.reference_store import InMemoryStore
from agentmemory.spi import NewRecord, RecordFilter, WriteBatch

EN = Analyzer.for_language("english")
V = np.array([1.0, 0.0, 0.0], dtype=np.float32)


def test_stemming_makes_inflections_meet() -> None:
    assert EN.terms("running") == EN.terms("runs") == EN.terms("run") == ["run"]
    assert EN.terms("Invoices invoiced") == ["invoic", "invoic"]


def test_stop_words_are_dropped_and_order_and_repeats_kept() -> None:
    assert EN.terms("The cat and the hat, the cat") == ["cat", "hat", "cat"]
    assert EN.stop_words >= {"the", "and", "of", "is", "i"}
    assert "don't" not in EN.stop_words  # cannot be one \w+ token, so not kept as one
    assert EN.query_terms("cat hat cat") == ["cat", "hat"]


def test_only_stop_words_give_an_empty_query() -> None:
    assert EN.terms("the and of it is") == []
    assert EN.query_terms("!!! ...") == []


def test_case_folding_is_casefold() -> None:
    assert EN.terms("CAFÉ Café café") == EN.terms("café") * 3
    assert Analyzer.for_language("none").terms("Straße STRASSE") == ["strasse", "strasse"]
    assert EN.terms("İstanbul") == EN.terms("istanbul")  # no stray combining dot


def test_non_latin_words_pass_through_unchanged() -> None:
    assert EN.terms("日本語 ünïcødé") == ["日本語", "ünïcødé"]
    assert Analyzer.for_language("german").terms("Häuser") == Analyzer.for_language("german").terms("häuser")


def test_digits_and_underscores_stay_terms() -> None:
    assert EN.terms("order_id=7421-B") == ["order_id", "7421", "b"]


def test_none_language_is_plain_folded_words() -> None:
    none = Analyzer.for_language(NO_LANGUAGE)
    assert none.terms("The Runners were running") == ["the", "runners", "were", "running"]
    assert not none.stems and none.stop_words == frozenset()


def test_languages_are_validated_and_named_in_the_error() -> None:
    assert "english" in languages() and NO_LANGUAGE in languages()
    assert normalize_language(" English ") == "english"
    assert Analyzer.for_language(None).language == "english"  # None: the default
    for bad in ("klingon", "", " ", 3):
        with pytest.raises(InvalidArgument) as err:
            Analyzer.for_language(bad)  # type: ignore[arg-type]
        assert err.value.argument == "language"
    with pytest.raises(InvalidArgument, match="klingon"):
        InMemoryStore(language="klingon")


def test_fingerprint_names_everything_that_decides_terms() -> None:
    fps = {Analyzer.for_language(lang).fingerprint for lang in ("english", "german", "none")}
    assert len(fps) == 3
    assert "language=english" in EN.fingerprint and "snowball-english" in EN.fingerprint
    assert Analyzer("english").fingerprint == EN.fingerprint  # stable, not per instance
    assert Analyzer.for_language() is EN  # shared (one stem cache per language)


def test_english_list_is_snowballs_published_list() -> None:
    """The embedded list is Snowball's English stop list, unedited (174 entries)."""
    assert len(SNOWBALL_ENGLISH_STOP_WORDS) == len(set(SNOWBALL_ENGLISH_STOP_WORDS)) == 174
    assert SNOWBALL_ENGLISH_STOP_WORDS[:3] == ("i", "me", "my")
    assert SNOWBALL_ENGLISH_STOP_WORDS[-3:] == ("than", "too", "very")


def test_every_term_is_one_word() -> None:
    """Backends join terms with spaces and split them back: no term may hold a separator."""
    import re

    text = "Ǆemal ﬁne İzmir ß ǅ x\u0301 हिन्दी 𝔘𝔫𝔦 ① ½ _a_ ÆON"
    for lang in ("english", "none", "german", "turkish"):
        for term in Analyzer.for_language(lang).terms(text):
            assert re.fullmatch(r"\w+", term), (lang, term)


def test_threads_share_an_analyzer() -> None:
    words = [f"running{i} walks{i}" for i in range(300)]
    expected = [EN.terms(w) for w in words]
    out: list[list[list[str]]] = []

    def work() -> None:
        out.append([EN.terms(w) for w in words])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [expected] * 4


def _store(language: str | None = None) -> InMemoryStore:
    store = InMemoryStore() if language is None else InMemoryStore(language=language)
    store.open(dimension=3)
    docs = {"a": "She runs every morning", "b": "The runner ran", "c": "日本語のテキスト", "d": "nothing relevant"}
    when = datetime(2025, 1, 1, tzinfo=timezone.utc)
    store.write(WriteBatch(add=[
        NewRecord(Record(record_id=rid, record_type=RecordType.MEMORY, content=c, timestamp=when, created_at=when), V)
        for rid, c in docs.items()
    ]))
    return store


def test_keyword_search_finds_stemmed_matches_and_survives_stop_word_queries() -> None:
    store = _store()
    assert [h.record.record_id for h in store.keyword_search("running", RecordFilter(), 5)] == ["a"]
    assert store.keyword_search("the and of", RecordFilter(), 5) == []
    assert [h.record.record_id for h in store.keyword_search("日本語のテキスト", RecordFilter(), 5)] == ["c"]
    plain = _store("none")
    assert plain.keyword_search("running", RecordFilter(), 5) == []
    assert [h.record.record_id for h in plain.keyword_search("the", RecordFilter(), 5)] == ["b"]


def test_memory_uri_takes_a_language() -> None:
    assert InMemoryStore.from_uri("memory://").analyzer.language == "english"
    assert InMemoryStore.from_uri("memory://?language=none").analyzer.language == "none"
    with pytest.raises(InvalidArgument):
        InMemoryStore.from_uri("memory://?stemmer=x")
