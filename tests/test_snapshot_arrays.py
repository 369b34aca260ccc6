"""The numpy helpers backends keep their in-process snapshots with (``agentmemory.snapshot_arrays``)."""

from __future__ import annotations

import numpy as np
import pytest

from agentmemory.snapshot_arrays import isin_codes, pack_texts, unpack_texts


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize("codes", [[], [3], [0, 5], [1, 2, 3, 4], [7, 7], [99]])
def test_isin_codes_selects_what_np_isin_selects(dtype: type, codes: list[int]) -> None:
    column = np.random.default_rng(0).integers(0, 8, 5_000).astype(dtype)
    got = isin_codes(column, codes)
    assert got.dtype == bool and got.shape == column.shape
    assert np.array_equal(got, np.isin(column, codes))


def test_isin_codes_leaves_the_column_unchanged() -> None:
    column = np.arange(10, dtype=np.int32)
    isin_codes(column, [2, 4])[:] = True  # the result is a new array
    assert np.array_equal(column, np.arange(10))


def test_texts_pack_and_unpack() -> None:
    texts = ["r1", "", "東京 café", "x" * 1000]
    assert unpack_texts(pack_texts(texts), len(texts)) == texts
    assert unpack_texts(pack_texts([]), 0) == []
