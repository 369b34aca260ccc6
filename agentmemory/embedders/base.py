"""The ``Embedder`` interface every embedding model implements."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Embedder(ABC):
    """Maps texts to L2-normalised float32 vectors of a fixed ``dimension``.

    ``is_query`` lets asymmetric models (E5: "query:" vs "passage:") embed search queries
    differently from stored passages.
    """

    name: str = "embedder"
    dimension: int
    max_input_tokens: int = 512

    @abstractmethod
    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray: ...

    def embed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Embed ``texts`` into an array of shape (len(texts), dimension), rows unit length."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = np.asarray(self._embed(items, is_query), dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms

    async def aembed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Async ``embed`` (runs in a worker thread unless overridden)."""
        return await asyncio.to_thread(self.embed, texts, is_query=is_query)
