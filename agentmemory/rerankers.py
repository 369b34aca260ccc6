"""Built-in rerankers: MMR (diversity) and recency. A reranker is a callable
``(query, results) -> results`` registered through the ``agentmemory_register_rerankers`` hook."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime, timezone

from .records import SearchResult

Reranker = Callable[[str, list[SearchResult]], list[SearchResult]]
"""``(query, results) -> results``: reorder (or drop) search results."""

_WORD = re.compile(r"\w+", re.UNICODE)


def _tokens(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class MmrReranker:
    """Maximal marginal relevance: trade relevance (the result score) against redundancy with
    results already chosen (word-set Jaccard similarity), so near-duplicates stop crowding out
    different information. ``lambda_`` = 1 keeps the original order."""

    def __init__(self, lambda_: float = 0.7) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise ValueError("lambda_ must be within 0..1")
        self.lambda_ = lambda_

    def __call__(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        if len(results) < 3:
            return list(results)
        scores = [r.score for r in results]
        lo, hi = min(min(scores), 0.0), max(scores)  # 0-anchored: a close second stays close
        rel = [(s - lo) / (hi - lo) if hi > lo else 1.0 for s in scores]
        toks = [_tokens(r.record.content) for r in results]
        chosen: list[int] = []
        left = list(range(len(results)))
        while left:
            def value(i: int) -> tuple[float, int]:
                redundancy = max((_jaccard(toks[i], toks[j]) for j in chosen), default=0.0)
                return (self.lambda_ * rel[i] - (1 - self.lambda_) * redundancy, -i)

            best = max(left, key=value)
            chosen.append(best)
            left.remove(best)
        return [results[i] for i in chosen]


class RecencyReranker:
    """Blend relevance with an exponential decay on the record's timestamp (half-life in days),
    so newer statements win close calls against stale ones."""

    def __init__(self, half_life_days: float = 30.0, weight: float = 0.3, clock: Callable[[], datetime] | None = None) -> None:
        self.half_life_days = half_life_days
        self.weight = weight
        self.clock = clock or (lambda: datetime.now(timezone.utc))

    def __call__(self, query: str, results: list[SearchResult]) -> list[SearchResult]:
        if not results:
            return []
        now = self.clock()
        scores = [r.score for r in results]
        lo, hi = min(min(scores), 0.0), max(scores)  # 0-anchored: a close second stays close

        def blended(item: tuple[int, SearchResult]) -> tuple[float, int]:
            i, r = item
            rel = (r.score - lo) / (hi - lo) if hi > lo else 1.0
            age_days = max((now - r.record.timestamp).total_seconds() / 86400.0, 0.0)
            fresh = math.exp(-math.log(2) * age_days / self.half_life_days)
            return (-((1 - self.weight) * rel + self.weight * fresh), i)

        return [r for _, r in sorted(enumerate(results), key=blended)]


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0
