"""Scores from a message's surroundings for hybrid search's fused candidates: a turn gains from
the passage around it (``context_boost``). The width and weight search uses, and how they were
chosen, are constants of ``operations.search`` (``CONTEXT_WINDOW``, ``CONTEXT_WEIGHT``)."""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Record, RecordType

Scored = tuple[Record, float | None, float]
"""A candidate: its record, its vector distance (None when it has none) and its score."""


def context_boost(scored: Sequence[Scored], width: int, weight: float) -> list[Scored]:
    """Raise each candidate message by ``weight`` × the mean fused score of the ``2 × width``
    sequence numbers around it in its thread (candidate messages there count their score,
    anything else 0), then re-sort. Other records are unchanged."""
    if not weight or width < 1:
        return list(scored)
    by_seq: dict[tuple[str | None, int], float] = {
        (rec.thread_id, rec.seq): score for rec, _, score in scored if rec.record_type is RecordType.MESSAGE
    }
    offsets = [o for o in range(-width, width + 1) if o]
    get = by_seq.get
    boosted = []
    for rec, dist, score in scored:
        if rec.record_type is RecordType.MESSAGE:
            thread, seq = rec.thread_id, rec.seq
            around = sum([get((thread, seq + o), 0.0) for o in offsets])  # in offset order, as always
            score += weight * around / (2 * width)
        boosted.append((rec, dist, score))
    boosted.sort(key=lambda e: (-round(e[2], 12), e[0].record_id))
    return boosted
