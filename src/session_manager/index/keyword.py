"""Keyword search helpers: turning free text into a safe FTS5 query, and rank fusion."""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["fts_query", "reciprocal_rank_fusion"]

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any word of ``text`` (BM25 ranks documents with more of them).

    Every word is quoted, so FTS5 syntax in user text (``AND``, ``*``, ``"``, ``:``) is
    matched literally instead of being parsed.

    >>> fts_query('did we turn off 2FA: "anywhere"?')
    '"did" OR "we" OR "turn" OR "off" OR "2fa" OR "anywhere"'
    """
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], k: int, *, constant: int = 60
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score(id) = Σ 1 / (constant + rank), rank counted from 1.

    RRF needs no score calibration between BM25 and cosine, which is why hybrid search uses
    it (Cormack et al., 2009; ``constant=60`` is their value).

    >>> reciprocal_rank_fusion([[1, 2, 3], [3, 1]], k=2)
    [(1, 0.03252247488101534), (3, 0.032266458495966696)]
    """
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (constant + rank)
    ordered = sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))
    return ordered[:k]
