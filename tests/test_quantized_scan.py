"""The 8-bit first pass of SQLite's vector search (store/_quantized.py): it only chooses
candidates, the float32 re-scoring decides, so a search returns what the exact scan returns."""

from __future__ import annotations

import numpy as np
import pytest

from session_manager import SessionManager
from session_manager.store import _vector_cache
from session_manager.store._quantized import approximate_scores, quantize


def unit_rows(count: int, dim: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((count, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_approximate_scores_follow_the_exact_ones() -> None:
    vectors = unit_rows(20_000, 384, seed=1)
    codes, scales = quantize(vectors)
    assert codes.dtype == np.uint8 and scales.shape == (20_000,)
    for query in unit_rows(20, 384, seed=2):
        exact = vectors @ query
        rough = approximate_scores(codes, scales, query)
        # proportional to the exact scores, with a small error
        assert np.corrcoef(exact, rough)[0, 1] > 0.999
        for k in (10, 50):
            candidates = np.argpartition(-rough, 4 * k)[: 4 * k]
            assert set(np.argsort(-exact)[:k]) <= set(candidates)


def test_quantize_keeps_a_zero_vector_finite() -> None:
    codes, scales = quantize(np.zeros((2, 8), np.float32))
    assert np.isfinite(scales).all()
    assert (approximate_scores(codes, scales, np.ones(8, np.float32)) == 0).all()


QUERIES = ["topic 3 and item 4", "fact 120", "item 7", "what about topic 30?"]


def many_facts(mgr: SessionManager) -> None:
    session = mgr.start_session("many facts")
    for i in range(600):
        mgr.record_fact(
            session.id, f"fact {i} about topic {i % 37} and item {i % 11}", metadata={"odd": i % 2}
        )
    mgr.flush()


def semantic_results(mgr: SessionManager, filtered: bool) -> list[list[tuple[str, float]]]:
    where = {"odd": 1} if filtered else None
    return [
        [(h.event.id, h.score) for h in mgr.search(q, k=10, mode="semantic", where=where)]
        for q in QUERIES
    ]


@pytest.mark.parametrize("filtered", [False, True])
def test_a_search_returns_what_the_exact_scan_returns(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch, filtered: bool
) -> None:
    many_facts(mgr)
    monkeypatch.setattr(_vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = semantic_results(mgr, filtered)
    monkeypatch.setattr(_vector_cache, "APPROXIMATE_FROM", 0)  # every search: 8 bits first
    assert semantic_results(mgr, filtered) == exact


@pytest.mark.parametrize("filtered", [False, True])
def test_a_big_partition_re_scores_from_the_store(
    make_manager: object, monkeypatch: pytest.MonkeyPatch, filtered: bool
) -> None:
    """A partition of IN_MEMORY_UNDER rows or more keeps only 8-bit codes: its candidates are
    re-scored with their float32 vectors read from the store, and the results (events and
    exact cosines) equal the all-in-memory scan's."""
    make = make_manager
    many_facts(make())  # type: ignore[operator]
    monkeypatch.setattr(_vector_cache, "APPROXIMATE_FROM", 10**9)
    exact = semantic_results(make(), filtered)  # type: ignore[operator]
    monkeypatch.setattr(_vector_cache, "APPROXIMATE_FROM", 100)  # a new cache: codes only
    monkeypatch.setattr(_vector_cache, "IN_MEMORY_UNDER", 100)
    codes_only = make()  # type: ignore[operator]
    assert semantic_results(codes_only, filtered) == exact
    (part,) = codes_only._storage.vectors._cache._partitions.values()
    assert not part.in_memory and part.matrix.size == 0 and part.size == 601
