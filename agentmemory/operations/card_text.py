"""The context card's text work: offline topics (``keyword_topics``), what the card already
shows (``unrepeated``, ``offline_card_summary``, ``topics_not_named``). Pure functions of texts
and hits; ``card`` builds the card with them."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

from ..card_model import CardParts, ContextCard
from ..index_text import speaker_label, spoken_line
from ..memo import BoundedMemo
from ..records import Record, SearchResult
from ..spi import Hit
from ..summarize import extractive_summary
from ..tokens import TokenCounter
from .summary import SUMMARY_TOKENS

_STOP = set(
    "the a an and or but if then than that this these those is are was were be been being to of in on at for "
    "with from by as it its i me my we our you your he she they them their what which who whom how when where why "
    "can could would should will shall may might must do does did done have has had not no yes so just also very "
    "about into over after before right now please thanks thank hi hello hey okay ok sure need want like get got "
    "going make made let know think there here some any all more most other such only own same too again".split()
)


_WORD = re.compile(r"[\w'-]+")
_TERMS_MEMO: dict[str, tuple[str, ...]] = {}
"""``_text_terms`` by text (emptied when full): a card reads the same recent messages turn
after turn."""
_TERMS_MEMO_SIZE = 1024


def _text_terms(text: str) -> tuple[str, ...]:
    """The content words of ``text`` (lower case, longer than 3 letters, no stop words or
    numbers) followed by its adjacent word pairs: what ``keyword_topics`` counts."""
    terms = _TERMS_MEMO.get(text)
    if terms is None:
        words = [w for w in _WORD.findall(text.lower()) if len(w) > 3 and w not in _STOP and not w.isdigit()]
        terms = (*words, *(f"{a} {b}" for a, b in zip(words, words[1:])))
        if len(_TERMS_MEMO) >= _TERMS_MEMO_SIZE:
            _TERMS_MEMO.clear()  # one step, safe beside another thread's card
        _TERMS_MEMO[text] = terms
    return terms


def keyword_topics(texts: Sequence[str], n: int = 5) -> list[str]:
    """Offline topics: the most frequent content words (and adjacent pairs) of ``texts``;
    remembered by the texts (a pure function of them: a card built again before the thread
    changes reads the same messages)."""
    key = (tuple(texts), n)
    topics = _TOPICS_MEMO.get(key)
    if topics is None:
        topics = _keyword_topics(texts, n)
        if sum(map(len, texts)) > 10 * _MEMO_CHARS:
            return topics
        _TOPICS_MEMO.keep(key, topics)
    return list(topics)


_TOPICS_MEMO: BoundedMemo[tuple[tuple[str, ...], int], list[str]] = BoundedMemo(256)


def _keyword_topics(texts: Sequence[str], n: int) -> list[str]:
    """``keyword_topics`` computed."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_text_terms(text))
    # a term said once is not yet a topic; every term said twice sorts before any said once (a
    # pair's weight is 1.5, a word's 1), so only those are ranked
    ranked = sorted(((t, c) for t, c in counts.items() if c >= 2), key=lambda kv: (-kv[1] * (1.5 if " " in kv[0] else 1.0), kv[0]))
    topics: list[str] = []
    for term, _count in ranked:
        if any(term in t or t in term for t in topics):
            continue
        topics.append(term)
        if len(topics) == n:
            break
    return topics

class Candidate(NamedTuple):
    """A ranked card candidate, read like a ``Hit`` (``record``, ``distance``, ``score``): a
    tuple, made for each of a ranking's ~40 fused hits at a third of a ``Hit``'s cost, of which
    the card reads the first few."""

    record: Record
    distance: float | None
    score: float | None

    @classmethod
    def each(cls, scored: Iterable[tuple[Record, float | None, float | None]]) -> list[Candidate]:
        """A candidate of each (record, distance, score)."""
        return list(map(cls._make, scored))


Ranked = TypeVar("Ranked", Hit, Candidate, Hit | Candidate)
"""What ``unrepeated`` reads: a hit or a candidate (each has the ``record``)."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def _normalised(text: str) -> str:
    """``text`` with its whitespace collapsed, case-folded: how the card compares texts.
    Remembered by text (a card compares the same records' texts several times, and again in
    the next card)."""
    out = _NORMALISED.get(text)
    if out is None:
        out = " ".join(text.split()).casefold()
        if len(text) <= _MEMO_CHARS:
            _NORMALISED.keep(text, out)
    return out


_NORMALISED: BoundedMemo[str, str] = BoundedMemo(4096)
_MEMO_CHARS = 4000
"""Longer texts (documents) are not remembered by ``_normalised`` or ``keyword_topics``."""


def unrepeated(hits: Sequence[Ranked], summary: str) -> list[Ranked]:
    """``hits`` without those whose text the card already shows: a record whose sentences the
    summary quotes, or one whose text equals, contains or is contained in an earlier hit's (a
    memory that restates a message)."""
    return list(unrepeated_lazily(hits, summary))


def unrepeated_lazily(hits: Iterable[Ranked], summary: str) -> Iterator[Ranked]:
    """``unrepeated``, one hit at a time: whether a hit is kept depends only on it and the hits
    kept before it, so a caller that needs the first few reads no further."""
    quoted = _normalised(summary)
    joined = ""  # the kept texts, NUL-separated (no text holds a NUL): one C-level search each
    held: list[str] = []  # the kept texts of 12+ characters, which a later text may hold
    for hit in hits:
        text = _normalised(hit.record.content)
        if (joined and text in joined) or any(len(earlier) <= len(text) and earlier in text for earlier in held):
            continue  # the same text, or one that holds (or is held by) an earlier result's
        if quoted and any(s in quoted for s in _SENTENCE_END.split(text) if len(s) >= 12):
            continue
        joined += "\x00" + text
        if len(text) >= 12:
            held.append(text)
        yield hit


def offline_card_summary(
    messages: Sequence[Record], results: Sequence[SearchResult], recent: Sequence[Record], counter: TokenCounter,
) -> str:
    """The offline summary a card shows: salient sentences (``summarize.extractive_summary``) of
    the messages it covers that neither a result nor the raw recent messages already show (a
    result that quotes a message, as an extracted fact may, shows it), so no text appears twice
    in one card. Remembered by what it reads (ids, speakers and texts of the messages, ids and
    texts of the results, ids of the recent messages, the counter), of which it is a pure
    function: a card built again before the thread changes does not work it out again."""
    key = (
        tuple((m.record_id, speaker_label(m), m.content) for m in messages),
        tuple((r.record.record_id, r.record.content) for r in results),
        tuple(m.record_id for m in recent),
        counter,
    )
    try:
        summary = _SUMMARY_MEMO.get(key)
    except TypeError:  # a counter that cannot be a key
        return _offline_card_summary(messages, results, recent, counter)
    if summary is None:
        summary = _offline_card_summary(messages, results, recent, counter)
        if sum(len(m[2]) for m in key[0]) + sum(len(r[1]) for r in key[1]) <= 10 * _MEMO_CHARS:
            _SUMMARY_MEMO.keep(key, summary)
    return summary


_SUMMARY_MEMO: BoundedMemo[tuple[Any, ...], str] = BoundedMemo(256)


def _offline_card_summary(
    messages: Sequence[Record], results: Sequence[SearchResult], recent: Sequence[Record], counter: TokenCounter,
) -> str:
    """``offline_card_summary`` worked out."""
    shown = {r.record.record_id for r in results} | {m.record_id for m in recent}
    shown_texts = {_normalised(r.record.content) for r in results}
    joined = "\x00".join(shown_texts)
    plain = not any("\x00" in t for t in shown_texts)

    def stated(text: str) -> bool:
        """Whether a shown text holds ``text``: one search of them NUL-joined (a text without
        a NUL cannot span two)."""
        if plain and "\x00" not in text:
            return bool(shown_texts) and text in joined
        return any(text in t for t in shown_texts)

    rest = [m for m in messages if m.record_id not in shown and not stated(_normalised(m.content))]
    summary = extractive_summary(rest, SUMMARY_TOKENS, counter) if rest else ""
    # a picked sentence that a result states word for word is not repeated either
    lines = [line for line in summary.split("\n") if not stated(_normalised(line.partition(": ")[2] or line))]
    return "\n".join(lines)


def topics_not_named(parts: CardParts) -> tuple[str, ...]:
    """The topics that neither the summary nor a relevant result already names (as whole words,
    ignoring case): a topic the card's text states carries nothing for the model."""
    named = _normalised(" ".join([parts.summary, *(r.record.content for r in parts.relevant)]))
    return tuple(t for t in parts.topics if not re.search(rf"(?<!\w){re.escape(_normalised(t))}(?!\w)", named))


def short_thread_card(card: ContextCard, messages: Sequence[Record], mode: str, counter: TokenCounter) -> ContextCard:
    """``card`` for a thread it read whole: with the tokens of the transcript it stands for
    (``messages`` as ``speaker: text`` lines), and when it costs more than that transcript (a
    few turns: its markup outweighs what it saves), either a ``note`` saying so (``mode``
    ``"card"``) or the transcript itself in its place (``"transcript"``)."""
    lines = [spoken_line(m) for m in messages if m.content.strip()]
    transcript = "\n".join(lines)
    tokens = counter.count(transcript) if lines else 0
    card = card.model_copy(update={"transcript_tokens": tokens})
    if not card.larger_than_transcript:
        return card
    if mode == "transcript":
        return card.model_copy(update={
            "topics": (), "summary": "", "relevant": (), "recent_messages": tuple(messages),
            "content": transcript, "tokens": tokens, "is_transcript": True,
        })
    note = (f"this card ({card.tokens} tokens) is larger than the {len(lines)} messages it stands for "
            f"({tokens} tokens): the thread is shorter than a card's markup; "
            "get_context_card(short_thread='transcript') returns the transcript instead")
    return card.model_copy(update={"note": note})
