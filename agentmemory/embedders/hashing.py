"""A deterministic, dependency-free embedder for tests and offline development.

Feature hashing of words and character trigrams: texts sharing words or word pieces get close
vectors, the same text always gets the same vector, on every machine.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from .base import Embedder

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder(Embedder):
    """Bag of hashed words (weight 1) and character trigrams (weight 0.5), signed, normalised."""

    name = "hashing"

    def __init__(self, dimension: int = 256) -> None:
        self.dimension = dimension

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            for word in words:
                self._add(out[row], word, 1.0)
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    self._add(out[row], padded[i : i + 3], 0.5)
            if not words:
                self._add(out[row], text or "<empty>", 1.0)
        return out

    def _add(self, row: np.ndarray, feature: str, weight: float) -> None:
        digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        sign = 1.0 if value & 1 else -1.0
        row[(value >> 1) % self.dimension] += sign * weight
