"""The offline (no-LLM) summary: salient, non-redundant sentences of a conversation.

``extractive_summary(messages, token_budget)`` splits the messages into sentences (and
semicolon clauses), weighs each sentence's terms by TF-IDF, ranks sentences by TextRank
centrality over their cosine-similarity graph (a sentence that many others echo is what the
conversation is about), boosts sentences that carry specifics (names, numbers, identifiers) and damps content-free ones ("thanks!", "ok"), then
picks sentences greedily by maximal marginal relevance, so a near-duplicate of a picked sentence is
skipped. The picked sentences are printed in chronological order as ``role: text`` lines (one line
per message) and the whole text stays within ``token_budget`` (``agentmemory.tokens``).

Pure Python + numpy, deterministic: ties break by position.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .analysis import DEFAULT_LANGUAGE, Analyzer
from .index_text import speaker_label
from .memo import BoundedMemo
from .records import Record
from .tokens import EstimateCounter, TokenCounter

MMR_LAMBDA = 0.7
"""Weight of salience against redundancy in the greedy pick (1.0 ignores redundancy)."""
DUPLICATE_SIMILARITY = 0.8
"""A sentence at least this similar (cosine of TF-IDF vectors) to a picked one is never picked."""
DAMPING = 0.85
_SENTENCE = re.compile(r"(?:[^.!?;\n]|[.!?](?=[\w@/-]))+[.!?;]*")
"""A sentence, or a clause a semicolon ends (a verse or a list of clauses is one long run-on line
otherwise, and its repeated clauses could not be told apart); ``3.5`` and ``e.g.`` stay whole."""
_TOKEN = re.compile(r"[a-z0-9][a-z0-9'_-]*")
_SPECIFIC = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+|\d")
_FILLERS = frozenset(
    "yes yeah ok okay sure great good nice well oh hi hello hey please thank thanks lol haha get got like one also really".split()
)
"""Chat fillers that carry no content, on top of the analyzer's stop words."""


@dataclass
class _Sentence:
    message: int
    position: int
    role: str
    text: str
    terms: list[str]


def _terms(text: str) -> list[str]:
    """Content terms of ``text``: the core keyword analysis (stop words out, Snowball stems)
    without chat fillers and one-letter words."""
    words = " ".join(w for w in _TOKEN.findall(text.lower()) if w not in _FILLERS and len(w) > 1)
    return Analyzer.for_language(DEFAULT_LANGUAGE).terms(words)


def _split(messages: Sequence[tuple[str, str]]) -> list[_Sentence]:
    """The sentences of ``(role, text)`` messages."""
    out: list[_Sentence] = []
    for index, (role, content) in enumerate(messages):
        for text, terms in _sentences(content):
            out.append(_Sentence(index, len(out), role, text, list(terms)))
    return out


def _sentences(content: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A message text's sentences (whitespace collapsed) with their terms. Remembered by text
    (a pure function of it; texts up to ``_SENTENCES_CHARS``): a card after a turn summarises
    the same recent messages as the card before it, plus the new ones."""
    known = _SENTENCES.get(content)
    if known is None:
        known = tuple(
            (text, tuple(_terms(text))) for match in _SENTENCE.finditer(content) if (text := " ".join(match.group(0).split()))
        )
        if len(content) <= _SENTENCES_CHARS:
            _SENTENCES.keep(content, known)
    return known


_SENTENCES: BoundedMemo[str, tuple[tuple[str, tuple[str, ...]], ...]] = BoundedMemo(2048)
_SENTENCES_CHARS = 4000


def _tfidf(sentences: Sequence[_Sentence]) -> np.ndarray:
    vocab: dict[str, int] = {}
    for s in sentences:
        for t in s.terms:
            vocab.setdefault(t, len(vocab))
    matrix = np.zeros((len(sentences), max(1, len(vocab))))
    df = Counter(t for s in sentences for t in set(s.terms))
    n = len(sentences)
    for row, s in enumerate(sentences):
        for term, count in Counter(s.terms).items():
            matrix[row, vocab[term]] = (1 + math.log(count)) * (math.log((n + 1) / (df[term] + 1)) + 1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _textrank(similarity: np.ndarray) -> np.ndarray:
    n = similarity.shape[0]
    weights = similarity.copy()
    np.fill_diagonal(weights, 0.0)
    out_sum = weights.sum(axis=1, keepdims=True)
    transition = np.divide(weights, out_sum, out=np.full_like(weights, 1.0 / n), where=out_sum > 0)
    rank = np.full(n, 1.0 / n)
    for _ in range(50):
        new = (1 - DAMPING) / n + DAMPING * transition.T @ rank
        if np.abs(new - rank).sum() < 1e-9:
            rank = new
            break
        rank = new
    return np.asarray(rank / rank.max())


def _salience(sentences: Sequence[_Sentence], similarity: np.ndarray) -> np.ndarray:
    rank = _textrank(similarity) if len(sentences) > 1 else np.ones(1)
    out = np.empty(len(sentences))
    for i, s in enumerate(sentences):
        content = len(set(s.terms))
        specifics = min(3, len(_SPECIFIC.findall(s.text)))
        richness = min(1.0, content / 6)  # content-free small talk scores low
        out[i] = rank[i] * (0.4 + 0.6 * richness) * (1 + 0.15 * specifics) + 0.05 * richness
    return out


def _render(sentences: Sequence[_Sentence], picked: Sequence[int]) -> str:
    lines: list[str] = []
    last_message, last_position = -1, -1
    for i in sorted(picked):
        s = sentences[i]
        if s.message == last_message:
            lines[-1] += (" " if s.position == last_position + 1 else " … ") + s.text
        else:
            lines.append(f"{s.role}: {s.text}")
        last_message, last_position = s.message, s.position
    return "\n".join(lines)


def extractive_summary(messages: Sequence[Record], token_budget: int, counter: TokenCounter | None = None) -> str:
    """Salient, non-redundant sentences of ``messages`` in chronological order, as ``role: text``
    lines (one per message), within ``token_budget`` tokens of ``counter`` (default: the
    estimate). Empty input or budget → ``""``. The result depends only on the messages' roles
    and texts, so it is remembered (``_remembered_summary``): a card built again before the
    thread changes does not summarise again."""
    if counter is None or type(counter) is EstimateCounter:
        counter = _ESTIMATE  # stateless: one instance serves as the memo key
    if token_budget <= 0:
        return ""
    return _remembered_summary(tuple((speaker_label(m) or "message", m.content) for m in messages), token_budget, counter)


_ESTIMATE = EstimateCounter()


@functools.lru_cache(maxsize=256)
def _remembered_summary(messages: tuple[tuple[str, str], ...], token_budget: int, counter: TokenCounter) -> str:
    sentences = _split(messages)
    if not sentences:
        return ""
    vectors = _tfidf(sentences)
    similarity = np.clip(vectors @ vectors.T, 0.0, 1.0)
    salience = _salience(sentences, similarity)
    picked: list[int] = []
    open_ = np.array([bool(s.terms) for s in sentences])  # "thanks!", "lol ok" say nothing
    redundancy = np.zeros(len(sentences))  # max similarity to a picked sentence
    seen_texts: set[str] = set()
    while open_.any():
        score = np.where(open_, np.round(MMR_LAMBDA * salience - (1 - MMR_LAMBDA) * redundancy, 9), -np.inf)
        best = int(np.argmax(score))  # the first of equal scores: ties break by position
        open_[best] = False
        text = sentences[best].text.lower()
        if redundancy[best] >= DUPLICATE_SIMILARITY or text in seen_texts:
            continue
        if counter.count(_render(sentences, [*picked, best])) <= token_budget:
            picked.append(best)
            seen_texts.add(text)
            redundancy = np.maximum(redundancy, similarity[best])
    if not picked:  # not even one sentence fits: the most salient one, clipped
        if not any(s.terms for s in sentences):
            return ""
        top = sentences[int(np.argmax(salience))]
        line = f"{top.role}: {top.text}"
        return counter.truncate(line, token_budget)
    return _render(sentences, picked)
