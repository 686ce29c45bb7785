"""Rank fusion: one ranking from several (semantic, keyword, time), by reciprocal rank."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]],
    k: int,
    *,
    constant: int = 60,
    weights: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(id) = Σ weight / (constant + rank), rank counted from 1.

    RRF needs no score calibration between BM25 and cosine, which is why hybrid search uses
    it (Cormack et al., 2009, whose ``constant=60`` is the default here; hybrid search uses a
    smaller constant and weights, see ``_search.py``). Ties go to the smaller id.

    >>> reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=2)
    [(1, 0.03252247488101534), (3, 0.032266458495966696)]
    >>> reciprocal_rank_fusion([[1, 2], [2, 1]], k=2, constant=10, weights=[2.0, 1.0])
    [(1, 0.26515151515151514), (2, 0.25757575757575757)]
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[int, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (constant + rank)
    ordered = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return ordered[:k]
