"""Token estimation used by every budget (search, card, summary, extraction prompts)."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.5


def estimate_tokens(text: str) -> int:
    """Estimate tokens as ``ceil(len/3.5)``: model-independent, cheap, and stable across backends."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) if text else 0


def truncate_to_tokens(text: str, budget: int) -> str:
    """Cut ``text`` so it fits ``budget`` tokens, at a word boundary where one is near."""
    limit = int(budget * CHARS_PER_TOKEN)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + "…"
