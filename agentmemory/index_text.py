"""Contextual index text for messages: what search sees of a turn beside its own words.

A turn such as "Yes, last Tuesday!" answers nothing on its own; indexed with its speaker, its
date and the turn before it, keyword search can match the question's words and dates, and the
embedding carries the exchange. The stored content stays the turn itself (``Record.index_text``
holds the rest), so what a search or card returns is unchanged. ``AgentMemory(index_context=
False)`` indexes each message's content alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from .records import Record, RecordType

PREVIOUS_CHARS = 600
"""How much of the previous turn joins a message's index text (its start; a long turn's
opening says what it is about)."""


def spoken_date(record: Record) -> str:
    """The message's date as people write it ("8 May 2023"): questions name dates that way."""
    ts = record.timestamp
    return f"{ts.day} {ts:%B %Y}"


def message_index_texts(records: Sequence[Record], previous: Record | None) -> list[str]:
    """Per message, its index text: the date, the previous turn and the turn, each turn with its
    role. Keyword search indexes it; the embedder embeds it without the date line
    (``embedding_text``). ``previous`` is the thread's message before the first of ``records``
    (None for a new thread)."""
    out: list[str] = []
    prior = previous
    for record in records:
        turn = f"{record.role}: {record.content}" if record.role else record.content
        if prior is None:
            before = ""
        else:
            head = prior.content[:PREVIOUS_CHARS]
            before = f"{prior.role}: {head}" if prior.role else head
        out.append("\n".join(part for part in (spoken_date(record), before, turn) if part))
        prior = record
    return out


def embedding_text(record: Record) -> str:
    """What the embedder embeds for ``record``: a message's index text without its date line (a
    date adds nothing to a sentence embedding's sense: on a LoCoMo dev sample, embedding the date
    too lost 0.04-0.06 evidence recall at 500-4,000 tokens), else its ``indexed_text``. Derived
    from the record alone, so an import re-embeds exactly what ``add_messages`` embedded."""
    text = record.indexed_text
    if record.index_text is not None and record.record_type is RecordType.MESSAGE:
        first, newline, rest = text.partition("\n")
        if newline and rest and first == spoken_date(record):
            return rest
    return text
