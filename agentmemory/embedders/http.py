"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, …), over
the pooled httpx client of ``agentmemory.http`` (native async for ``aembed``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ModelError
from ..http import HttpSettings, JsonHttpClient
from .base import Embedder


class OpenAICompatibleEmbedder(Embedder):
    """Calls ``POST {base_url}/embeddings`` in batches; the dimension is given or probed once."""

    name = "openai-compatible"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "http://localhost:11434/v1",
        api_key: str | None = None,
        dimension: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        connect_timeout_s: float = 10.0,
        max_retry_after_s: float = 60.0,
    ) -> None:
        self.model = model
        self.settings = HttpSettings(base_url, api_key, timeout_s, max_retries, backoff_s, connect_timeout_s, max_retry_after_s)
        self.http = JsonHttpClient(self.settings)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.dimension = dimension if dimension is not None else self._call(["dimension probe"]).shape[1]

    def _request(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.model, "input": texts}

    def _rows(self, texts: list[str], answer: dict[str, Any]) -> np.ndarray:
        try:
            rows = sorted(answer["data"], key=lambda item: item["index"])
            with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf: rejected by the caller
                out = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"malformed embeddings answer: {exc}") from None
        if out.shape[0] != len(texts):
            raise ModelError(f"asked for {len(texts)} embeddings, got {out.shape[0]}")
        return out

    def _call(self, texts: list[str]) -> np.ndarray:
        return self._rows(texts, self.http.post("/embeddings", self._request(texts)))

    async def _acall(self, texts: list[str]) -> np.ndarray:
        return self._rows(texts, await self.http.apost("/embeddings", self._request(texts)))

    def _batches(self, texts: list[str], is_query: bool) -> list[list[str]]:
        prefix = self.query_prefix if is_query else self.passage_prefix
        return [[prefix + t for t in texts[i : i + self.batch_size]] for i in range(0, len(texts), self.batch_size)]

    def _joined(self, parts: list[np.ndarray]) -> np.ndarray:
        out = np.concatenate(parts)
        if out.shape[1] != self.dimension:
            raise ModelError(f"expected {self.dimension}-d embeddings, got {out.shape[1]}-d")
        return out

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        return self._joined([self._call(batch) for batch in self._batches(texts, is_query)])

    async def aembed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Native async ``embed``: the batches go out concurrently on the running loop."""
        items = list(texts)
        if not items:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = await asyncio.gather(*(self._acall(batch) for batch in self._batches(items, is_query)))
        return self._finish(len(items), self._joined(list(parts)))

    def close(self) -> None:
        """Close the pooled connections."""
        self.http.close()
