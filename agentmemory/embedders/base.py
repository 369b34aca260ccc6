"""The ``Embedder`` interface every embedding model implements."""

from __future__ import annotations

import asyncio
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..effects import Call, Op
from ..errors import ModelError
from ..plugins import PluginManager, get_plugin_manager
from ..validation import bad_vector_row


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
        """Embed ``texts`` into an array of shape (len(texts), dimension), rows unit length.
        ``ModelError`` when the model answers with the wrong number of rows, the wrong
        dimension, or a non-finite or all-zero row."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._finish(len(items), self._embed(items, is_query))

    async def aembed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Async ``embed`` (runs in a worker thread unless overridden)."""
        return await asyncio.to_thread(self.embed, texts, is_query=is_query)

    def _finish(self, count: int, raw: Any) -> np.ndarray:
        """``raw`` checked (``checked_embeddings``) and L2-normalised: what ``embed`` returns;
        native-async embedders call it from their ``aembed``."""
        out = checked_embeddings(self, count, raw, rows_checked=False)
        # what np.linalg.norm(out, axis=1, keepdims=True) computes, bit for bit, without its
        # dispatch (a search embeds one query: the per-call overhead is the cost); an overflow
        # warns here as it warned there
        squares = np.add.reduce(out * out, axis=1, keepdims=True)
        if count == 1:  # a search's query: one value, no reductions
            low = high = float(squares[0, 0])
        else:
            low, high = (float(squares.min()), float(squares.max())) if count else (0.0, 0.0)
        if 0.0 < low and high < math.inf:
            # a finite positive sum of squares proves every row finite and not all zeros: what
            # ``bad_vector_row`` asks, in the reduction the norm needs anyway
            return out / np.sqrt(squares)
        checked_embeddings(self, count, out)  # NaN, infinity, zeros, overflow: the full rule
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def as_embedder(value: Any, plugins: PluginManager | None = None) -> Embedder:
    """The embedder the core calls for ``value``: another framework's embedding model wrapped by
    the adapter registered for it (``agentmemory_register_embedder_adapters``; built in: any
    LangChain ``Embeddings`` in ``agentmemory.integrations.langchain.LangChainEmbedder``), looked
    up in ``plugins`` (default: the process-wide manager); an ``Embedder`` (or any object with
    ``embed``/``aembed`` and ``dimension``) unchanged."""
    if isinstance(value, Embedder):
        return value
    adapted: Embedder = (plugins or get_plugin_manager()).adapt("embedder_adapters", value)
    return adapted  # duck-typed embedders are accepted as before


def embed_op(embedder: Any, texts: Sequence[str], *, is_query: bool = False) -> Op[np.ndarray]:
    """The one place the core calls an embedder (sync or async, through ``Call``): the answer
    is checked by ``checked_embeddings`` before anything uses it, so an embedder that returns
    too few rows, the wrong dimension or non-finite values raises ``ModelError`` and nothing
    is written."""
    items = list(texts)
    kwargs = {"is_query": True} if is_query else {}
    vectors = yield Call(embedder, "embed", (items,), kwargs)
    if _checks_itself(type(embedder)):
        return vectors  # ``Embedder.embed`` / ``aembed`` checked it already (``_finish``)
    return checked_embeddings(embedder, len(items), vectors)


def _checks_itself(cls: type) -> bool:
    """Whether ``cls``'s ``embed`` and ``aembed`` are ``Embedder``'s own, whose answer
    ``_finish`` has already passed through ``checked_embeddings`` (checking it again cost a
    plain search ~5 us)."""
    return (issubclass(cls, Embedder) and cls.embed is Embedder.embed and cls.aembed is Embedder.aembed
            and cls._finish is Embedder._finish)


def checked_embeddings(embedder: Any, count: int, vectors: Any, *, rows_checked: bool = True) -> np.ndarray:
    """``vectors`` as a float32 ``(count, embedder.dimension)`` matrix of finite, non-zero rows;
    ``ModelError`` naming the embedder otherwise (a plugin or a server may answer anything).
    ``rows_checked=False`` checks the shape alone (the caller checks the rows)."""
    name = getattr(embedder, "name", type(embedder).__name__)
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf: rejected below
            matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"embedder {name!r} returned something that is not a matrix of numbers ({exc})") from None
    if matrix.ndim != 2 or matrix.shape[0] != count:
        raise ModelError(f"embedder {name!r} returned {_rows(matrix)} for {count} text(s)")
    dimension = getattr(embedder, "dimension", None)
    if count and matrix.shape[1] != dimension:
        raise ModelError(f"embedder {name!r} returned {matrix.shape[1]}-d vectors, its dimension is {dimension}")
    bad = bad_vector_row(matrix) if count and rows_checked else None
    if bad is not None:
        raise ModelError(f"embedder {name!r} returned an unusable vector for text {bad[0]}: it {bad[1]}")
    return matrix


def _rows(matrix: np.ndarray) -> str:
    if matrix.ndim == 0:
        return "a scalar"
    if matrix.ndim != 2:
        return f"an array of shape {matrix.shape}"
    return f"{matrix.shape[0]} vector(s)"
