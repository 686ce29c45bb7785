"""Rank fusion: one ranking from several (semantic, keyword, time), by reciprocal rank."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["reciprocal_rank_fusion", "tied_ranks"]


def tied_ranks(scores: Sequence[float]) -> list[int]:
    """Competition ranks of scores sorted best first: equal scores share a rank ("1224").

    >>> tied_ranks([0.9, 0.5, 0.5, 0.1])
    [1, 2, 2, 4]
    """
    ranks: list[int] = []
    for position, score in enumerate(scores):
        tied = position and score == scores[position - 1]
        ranks.append(ranks[-1] if tied else position + 1)
    return ranks


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]],
    k: int,
    *,
    constant: int = 60,
    weights: Sequence[float] | None = None,
    ranks: Sequence[Sequence[int]] | None = None,
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(id) = Σ weight / (constant + rank), rank counted from 1
    (or given: ``ranks`` holds each list's ranks, so that tied items share one).

    RRF needs no score calibration between BM25 and cosine, which is why hybrid search uses
    it (Cormack et al., 2009, whose ``constant=60`` is the default here; hybrid search uses a
    smaller constant and weights, see ``search/searcher.py``). Ties go to the smaller id.

    >>> reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=2)
    [(1, 0.03252247488101534), (3, 0.032266458495966696)]
    >>> reciprocal_rank_fusion([[1, 2], [2, 1]], k=2, constant=10, weights=[2.0, 1.0])
    [(1, 0.26515151515151514), (2, 0.25757575757575757)]
    >>> reciprocal_rank_fusion([[1, 2], [2, 1]], k=2, constant=10, ranks=[[1, 1], [1, 2]])
    [(2, 0.18181818181818182), (1, 0.17424242424242425)]
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[int, float] = {}
    for i, (ranking, weight) in enumerate(zip(rankings, weights, strict=True)):
        given = None if ranks is None else ranks[i]
        for position, item in enumerate(ranking):
            rank = position + 1 if given is None else given[position]
            scores[item] = scores.get(item, 0.0) + weight / (constant + rank)
    ordered = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return ordered[:k]
