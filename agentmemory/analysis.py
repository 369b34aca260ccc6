"""Keyword analysis, once for every backend: text → the terms that BM25 indexes and queries.

An ``Analyzer`` is a Unicode word tokenizer (``\\w+``), ``str.casefold`` case folding, stop-word
removal and Snowball stemming (PyStemmer), configured by a store's ``language``:

* ``"english"`` (the default): Snowball's English stemmer and Snowball's published English stop
  word list (below);
* another Snowball algorithm name (``Stemmer.algorithms()``: ``"german"``, ``"french"``, …):
  that stemmer, no stop words (no maintained list is bundled for it yet);
* ``"none"``: tokens and case folding only, no stemming and no stop words.

Every backend indexes ``Analyzer.terms(content)`` and analyses queries with the same analyzer,
so BM25 scores agree across backends. A store persists its language and the analyzer's
``fingerprint``; when the fingerprint of the code differs from the stored one (another
language, another analyzer version, another stemmer release or stop list), the store rebuilds
its keyword index on open instead of serving stale terms.

Words the stemmer does not know (other scripts: ``日本語``, accents: ``ünïcødé``) come back
unchanged, and documents and queries are analysed alike, so they still match exactly.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from .errors import InvalidArgument
from .memo import BoundedMemo

ANALYZER_VERSION = 1
"""Bumped whenever the pipeline itself changes (tokenizer, folding, order of steps): stores
written with another version reindex on open."""

DEFAULT_LANGUAGE = "english"
NO_LANGUAGE = "none"
"""The language that turns stemming and stop words off (plain case-folded word tokens)."""

_WORD = re.compile(r"\w+", re.UNICODE)
_CACHE_MAX = 200_000
"""Distinct tokens whose stem is remembered per language before the cache starts over."""

# Snowball's English stop word list, as published with the Snowball English stemmer
# (snowball.tartarus.org/algorithms/english/stop.txt; Copyright (c) 2001 Dr Martin Porter,
# BSD License: https://snowballstem.org/license.html). Entries in their published order; the
# commented-out ones there (us, will, can, may, might, must, shall, daren't, …) are left out
# there too. Forms with an apostrophe cannot be one ``\w+`` token and so never match a token
# (the tokenizer splits "don't" into "don", "t"); they are kept to show the list unedited.
SNOWBALL_ENGLISH_STOP_WORDS: tuple[str, ...] = (
    "i", "me", "my", "myself", "we", "our", "ours", "ourselves", "you", "your", "yours",
    "yourself", "yourselves", "he", "him", "his", "himself", "she", "her", "hers", "herself",
    "it", "its", "itself", "they", "them", "their", "theirs", "themselves", "what", "which",
    "who", "whom", "this", "that", "these", "those", "am", "is", "are", "was", "were", "be",
    "been", "being", "have", "has", "had", "having", "do", "does", "did", "doing", "would",
    "should", "could", "ought", "i'm", "you're", "he's", "she's", "it's", "we're", "they're",
    "i've", "you've", "we've", "they've", "i'd", "you'd", "he'd", "she'd", "we'd", "they'd",
    "i'll", "you'll", "he'll", "she'll", "we'll", "they'll", "isn't", "aren't", "wasn't",
    "weren't", "hasn't", "haven't", "hadn't", "doesn't", "don't", "didn't", "won't", "wouldn't",
    "shan't", "shouldn't", "can't", "cannot", "couldn't", "mustn't", "let's", "that's", "who's",
    "what's", "here's", "there's", "when's", "where's", "why's", "how's", "a", "an", "the",
    "and", "but", "if", "or", "because", "as", "until", "while", "of", "at", "by", "for",
    "with", "about", "against", "between", "into", "through", "during", "before", "after",
    "above", "below", "to", "from", "up", "down", "in", "out", "on", "off", "over", "under",
    "again", "further", "then", "once", "here", "there", "when", "where", "why", "how", "all",
    "any", "both", "each", "few", "more", "most", "other", "some", "such", "no", "nor", "not",
    "only", "own", "same", "so", "than", "too", "very",
)

STOP_WORDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "english": ("snowball-english", SNOWBALL_ENGLISH_STOP_WORDS),
}
"""language → (name of the published list, its words)."""


def _stemmer_module() -> Any:
    try:
        import Stemmer
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ImportError("keyword analysis needs PyStemmer: pip install 'PyStemmer>=2.2'") from exc
    return Stemmer


def languages() -> tuple[str, ...]:
    """Every accepted ``language``: ``"none"`` and the Snowball algorithms PyStemmer ships."""
    return (NO_LANGUAGE, *sorted(_stemmer_module().algorithms()))


def _stemmer_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("PyStemmer")
    except PackageNotFoundError:  # pragma: no cover - e.g. vendored
        return "unknown"


@dataclass(frozen=True)
class Analyzer:
    """Text → keyword terms for one language (use ``Analyzer.for_language`` to share caches).

    ``terms`` keeps the order and the repeats of the text's words (BM25 needs term
    frequencies); queries use the same method. Thread-safe."""

    language: str = DEFAULT_LANGUAGE
    fingerprint: str = field(init=False, compare=False)
    """Identifies everything that decides the terms: analyzer version, language, stemmer
    release, stop list. Stores persist it and reindex when it changes."""
    _stop: frozenset[str] = field(init=False, repr=False, compare=False)
    _cache: dict[str, str] = field(init=False, repr=False, compare=False)
    _queries: BoundedMemo[str, frozenset[str]] = field(init=False, repr=False, compare=False)
    _local: threading.local = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = normalize_language(self.language)
        parts = [f"agentmemory-analyzer/{ANALYZER_VERSION}", f"language={name}"]
        stop: frozenset[str] = frozenset()
        if name != NO_LANGUAGE:
            parts.append(f"stemmer=snowball:{name}@pystemmer-{_stemmer_version()}")
            list_name, words = STOP_WORDS.get(name, ("none", ()))
            stop = frozenset(w.casefold() for w in words if _WORD.fullmatch(w.casefold()))
            digest = hashlib.sha256("\n".join(sorted(stop)).encode("utf-8")).hexdigest()[:12]
            parts.append(f"stopwords={list_name}:{digest}")
        object.__setattr__(self, "language", name)
        object.__setattr__(self, "fingerprint", ";".join(parts))
        object.__setattr__(self, "_stop", stop)
        object.__setattr__(self, "_cache", {})
        object.__setattr__(self, "_queries", BoundedMemo(256))
        object.__setattr__(self, "_local", threading.local())

    @classmethod
    def for_language(cls, language: str | None = None) -> Analyzer:
        """The shared analyzer of ``language`` (default English); ``InvalidArgument`` naming
        ``language`` when it is unknown."""
        return _shared(normalize_language(DEFAULT_LANGUAGE if language is None else language))

    @property
    def stems(self) -> bool:
        """True when words are stemmed (every language but ``"none"``)."""
        return self.language != NO_LANGUAGE

    @property
    def stop_words(self) -> frozenset[str]:
        """The (case-folded) words dropped from documents and queries."""
        return self._stop

    def terms(self, text: str) -> list[str]:
        """The analysed terms of ``text`` in order, repeats kept: the ``\\w+`` words of
        ``text``, case-folded, stop words dropped, each stemmed. Every term is itself one
        ``\\w+`` word, so joining terms with spaces and splitting on whitespace gives them back."""
        cache = self._cache
        out: list[str] = []
        for token in _WORD.findall(text):
            term = cache.get(token)
            if term is None:
                term = self._analyse(token)
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                cache[token] = term
            if term:
                out.append(term)
        return out

    def query_terms(self, text: str) -> list[str]:
        """The distinct terms of a query, first occurrence first (empty when the query has
        only stop words or no word at all: keyword search then finds nothing)."""
        return list(dict.fromkeys(self.terms(text)))

    def term_set(self, text: str) -> frozenset[str]:
        """A keyword query's distinct terms as the set BM25 sums over, remembered by text (a
        card asks the same question of two scopes). Every store iterates this one set, so their
        per-term score sums add up in the same order and give the same floats."""
        terms = self._queries.get(text)
        if terms is None:
            terms = self._queries.keep(text, frozenset(self.terms(text)))
        return terms

    def _analyse(self, token: str) -> str:
        """One word's term, or "" for a stop word (cached by ``terms``)."""
        folded = token.casefold()
        if not _WORD.fullmatch(folded):  # "İ" folds to "i" + a combining dot: keep the letters
            folded = "".join(_WORD.findall(folded))
        if self.language == NO_LANGUAGE or not folded:
            return folded
        if folded in self._stop:
            return ""
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:  # PyStemmer objects are not thread-safe: one per thread
            stemmer = _stemmer_module().Stemmer(self.language, 0)
            self._local.stemmer = stemmer
        stem = stemmer.stemWord(folded)
        # a stem is a word made of the original's characters; keep the word if not
        return stem if stem and _WORD.fullmatch(stem) else folded


def normalize_language(language: Any) -> str:
    """The canonical name of ``language`` (case-insensitive), or ``InvalidArgument`` naming it."""
    if not isinstance(language, str) or not language.strip():
        raise InvalidArgument("language", f"must be a language name such as 'english' or 'none', got {language!r}")
    name = language.strip().lower()
    if name != NO_LANGUAGE and name not in _algorithms():
        raise InvalidArgument(
            "language", f"unknown language {language!r}; known: {', '.join(languages())}"
        )
    return name


@lru_cache(maxsize=1)
def _algorithms() -> frozenset[str]:
    return frozenset(_stemmer_module().algorithms())


@cache
def _shared(language: str) -> Analyzer:
    return Analyzer(language)


__all__ = [
    "ANALYZER_VERSION",
    "DEFAULT_LANGUAGE",
    "NO_LANGUAGE",
    "SNOWBALL_ENGLISH_STOP_WORDS",
    "Analyzer",
    "languages",
    "normalize_language",
]
