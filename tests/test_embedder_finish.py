"""``Embedder._finish`` normalises with one reduction that also checks the rows (issue #31: a
search embeds one query, so the per-call overhead is the cost): its vectors are bit for bit what
``np.linalg.norm`` gave, and rows it cannot prove usable take the full rule."""

from __future__ import annotations

import numpy as np
import pytest

from agentmemory import ModelError
from agentmemory.embedders import Embedder


class Raw(Embedder):
    """Answers whatever ``answer`` holds."""

    name = "raw"

    def __init__(self, answer: np.ndarray) -> None:
        self.answer = answer
        self.dimension = len(answer[0])

    def _embed(self, texts: list[str], is_query: bool) -> np.ndarray:
        return self.answer


def before(raw: np.ndarray) -> np.ndarray:
    """``_finish`` as it was: ``np.linalg.norm``, zero norms left as 1."""
    out = np.asarray(raw, dtype=np.float32)
    with np.errstate(over="ignore"):
        norms = np.linalg.norm(out, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return out / norms


@pytest.mark.filterwarnings("ignore:overflow encountered")  # huge rows overflow the norm, as they always did
@pytest.mark.parametrize("rows,dim", [(1, 384), (3, 16), (64, 768), (5, 1)])
@pytest.mark.parametrize("scale", [1.0, 1e-20, 1e-30, 1e18, 3e19])
def test_the_same_vectors_as_linalg_norm(rows, dim, scale):
    rng = np.random.default_rng(rows * dim)
    raw = (rng.normal(size=(rows, dim)) * scale).astype(np.float32)  # tiny: squares underflow; huge: overflow
    got = Raw(raw).embed(["t"] * rows)
    assert got.dtype == np.float32 and np.array_equal(got, before(raw), equal_nan=True)


def test_float64_and_lists_are_read_as_float32_first():
    raw = np.random.default_rng(1).normal(size=(2, 8))
    assert np.array_equal(Raw(raw).embed(["a", "b"]), before(raw.astype(np.float32)))
    assert np.array_equal(Raw(raw.tolist()).embed(["a", "b"]), before(raw.astype(np.float32)))  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 0.0])
def test_unusable_rows_still_raise(bad):
    raw = np.ones((3, 4), np.float32)
    if bad == 0.0:
        raw[1] = 0.0
    else:
        raw[1, 2] = bad
    with pytest.raises(ModelError, match="text 1"):
        Raw(raw).embed(["a", "b", "c"])
