"""The set operations that replace numpy's slow paths give numpy's answers."""

from __future__ import annotations

import numpy as np
import pytest

from memlane.ranking import arrays
from memlane.ranking.arrays import bit_counts, distinct, member


@pytest.mark.parametrize("size", [0, 1, 2, 7, 1_000])
@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
def test_distinct_is_np_unique(size: int, dtype: type) -> None:
    rng = np.random.default_rng(size)
    values = rng.integers(-3, size // 2 + 3, size).astype(dtype)
    found = distinct(values)
    assert found.dtype == values.dtype
    assert found.tolist() == np.unique(values).tolist()


@pytest.mark.parametrize("wanted", [[], [3], [0, 5, 9], list(range(0, 40, 2))])
def test_member_is_np_isin(wanted: list[int]) -> None:
    values = np.random.default_rng(1).integers(0, 20, 500).astype(np.int16)
    assert member(values, wanted).tolist() == np.isin(values, wanted).tolist()


@pytest.mark.parametrize("numpy_1", [False, True])
def test_bit_counts_count_every_set_bit_with_or_without_np_bitwise_count(
    monkeypatch: pytest.MonkeyPatch, numpy_1: bool
) -> None:
    """NumPy 1.x has no ``np.bitwise_count``: the byte lookup that stands in for it gives
    the same counts (a partition past 262,144 rows depends on it)."""
    if numpy_1:
        monkeypatch.setattr(arrays, "_HAS_BITWISE_COUNT", False)
    words = np.random.default_rng(7).integers(0, 2**63, (3, 1_000), dtype=np.uint64)
    words[0, :3] = [0, 2**64 - 1, 1 << 63]
    found = bit_counts(words)
    assert found.shape == words.shape
    assert found.tolist() == [[int(w).bit_count() for w in row] for row in words]
