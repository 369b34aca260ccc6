"""An embedder for any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, Ollama, vLLM, …)."""

from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..http import HttpSettings, post_json
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
    ) -> None:
        self.model = model
        self.settings = HttpSettings(base_url, api_key, timeout_s, max_retries)
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.dimension = dimension if dimension is not None else self._call(["dimension probe"]).shape[1]

    def _call(self, texts: list[str]) -> np.ndarray:
        answer = post_json(self.settings, "/embeddings", {"model": self.model, "input": texts})
        try:
            rows = sorted(answer["data"], key=lambda item: item["index"])
            with np.errstate(over="ignore", invalid="ignore"):  # out-of-range values become inf: rejected by the caller
                out = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"malformed embeddings answer: {exc}") from None
        if out.shape[0] != len(texts):
            raise ModelError(f"asked for {len(texts)} embeddings, got {out.shape[0]}")
        return out

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        prefix = self.query_prefix if is_query else self.passage_prefix
        parts = [
            self._call([prefix + t for t in texts[i : i + self.batch_size]])
            for i in range(0, len(texts), self.batch_size)
        ]
        out = np.concatenate(parts)
        if out.shape[1] != self.dimension:
            raise ModelError(f"expected {self.dimension}-d embeddings, got {out.shape[1]}-d")
        return out
