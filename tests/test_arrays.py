"""The set operations that replace numpy's slow paths give numpy's answers."""

from __future__ import annotations

import numpy as np
import pytest

from memlane.store._arrays import distinct, member


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
