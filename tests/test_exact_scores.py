"""Exact scores: the same numbers as numpy's product, and no BLAS thread left spinning.

OpenBLAS threads a product of 460,800 elements or more and its helper threads busy-wait
afterwards: ~80 ms of a second core per 8,000-token restore of a 100k-event session
(docs/decisions/2026-11-27-exact-scores-without-spinning-threads.md)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from memlane.ranking.vectors.exact import THREADED_FROM, exact_scores


def unit_rows(rows: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("rows", [1, 700, THREADED_FROM // 384, THREADED_FROM // 384 + 1, 9000])
def test_the_scores_are_numpy_s(rows: int) -> None:
    matrix, query = unit_rows(rows), unit_rows(1, seed=1)[0]
    found = exact_scores(matrix, query)
    assert found.dtype == np.float32 and found.shape == (rows,)
    np.testing.assert_allclose(found, matrix @ query, atol=1e-5)


def test_a_gathered_or_nan_row_is_scored_as_numpy_would() -> None:
    matrix, query = unit_rows(4000), unit_rows(1, seed=1)[0]
    picked = matrix[np.arange(0, 4000, 2)]  # fancy indexing: a copy, as the cache makes
    picked[3] = np.nan  # a vector deleted while a search read it
    found = exact_scores(picked, query)
    assert np.isnan(found[3]) and np.isfinite(np.delete(found, 3)).all()


def native_threads_cpu_ms() -> float:
    """CPU time of this process's threads that are not Python threads (BLAS and onnxruntime
    pools): a spinning BLAS helper shows here, the test runner's own threads do not."""
    python = {thread.native_id for thread in threading.enumerate()}
    total = 0
    for task in os.listdir("/proc/self/task"):
        if int(task) in python:
            continue
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:  # (a thread that ended meanwhile)
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
    return total * 1000 / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux's /proc")
def test_no_thread_spins_after_a_big_product() -> None:
    matrix, query = unit_rows(2400), unit_rows(1, seed=1)[0]  # 921,600 elements
    exact_scores(matrix, query)  # (pools created, libraries loaded)
    time.sleep(0.5)
    before = native_threads_cpu_ms()
    for _ in range(5):
        exact_scores(matrix, query)
        time.sleep(0.05)
    time.sleep(0.3)
    # Five products take ~1 ms of CPU; OpenBLAS's spinning helper took ~30 ms after each
    # (~100 ms or more in this window). A loaded machine only gives a spinner less time.
    assert native_threads_cpu_ms() - before < 40
