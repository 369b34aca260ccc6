"""``Columns.top_k`` ranks small candidate sets (an ANN fetch) in plain Python: it must give
exactly what the numpy path gives, ties and near-ties at the k-th distance included."""

from __future__ import annotations

import numpy as np
import pytest
from agentmemory_hnswlib import _columns


def test_small_path_equals_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    n, dim = 3000, 8
    cols = _columns.Columns(dim, n)
    vecs = rng.normal(size=(n, dim)).astype(np.float32)
    vecs[1000:1200] = vecs[1000]  # exact ties
    vecs[1200:1300] = vecs[1200] * np.float32(1.0000001)  # ties after rounding
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    cols.vectors[:n] = vecs
    cols.rids = [f"r{int(rng.integers(10**9))}-{i}" for i in range(n)]
    cols.n = n
    for t in range(3000):
        if t % 3:
            q = _columns.unit(rng.normal(size=dim))
        else:
            q = _columns.unit(vecs[1000 + t % 300] + rng.normal(scale=1e-6, size=dim).astype(np.float32))
        m = int(rng.integers(1, _columns._SMALL + 1))
        pool = np.arange(n) if t % 2 else np.arange(990, 1310)
        slots = rng.choice(pool, min(m, len(pool)), replace=False)
        k = int(rng.integers(1, 30))
        small = cols.top_k(q, slots, k)
        monkeypatch.setattr(_columns, "_SMALL", 0)
        assert small == cols.top_k(q, slots, k)
        monkeypatch.setattr(_columns, "_SMALL", 64)
