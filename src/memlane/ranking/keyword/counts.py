"""BM25's document frequency for the keyword cache's ranking: how many rows of a partition a
term matches, with the context of its neighbours and dates as the ranking reads them
(``_keyword_ranking.walk``), counted once and kept by the partition
(``_keyword_scoped.DocumentFrequencies`` brings a count up to date as rows arrive).

A count is a term's first cost in a process: at 1M events a word in a third of the rows'
contexts took a whole walk (4.5 to 6 ms) before this module marked rows instead (1.8 to 2.5 ms),
and the keyword cache counts a partition's common terms in the background once it is built
(:func:`common_terms`), so the words queries share are counted before they are asked for.
"""

from __future__ import annotations

import numpy as np

from ..arrays import distinct
from .postings import IntArray
from .scoped import Neighbourhood, frequencies_at
from .scoring import CONTEXT_WEIGHT, Partition

__all__ = ["COMMON_SHARE", "common_terms", "count_matching", "document_frequency"]

# Terms that at least one row in this many of a partition holds get their BM25 n counted in
# the background once the partition is built (KeywordCache): such a term's first count costs
# a search ~2 ms at 1M rows, and these are the words queries share.
COMMON_SHARE = 64


def document_frequency(part: Partition, term: int, stem: str, content_only: bool) -> int:
    """How many rows of ``part`` ``term`` matches (in their content, or with context): BM25's
    ``n``, kept by the partition once counted."""
    if content_only:
        return int(part.own.count(term))
    known = part.frequencies.get(part, term, stem, CONTEXT_WEIGHT)
    if known is None:
        known = count_matching(part, term, stem)
        part.frequencies.remember(term, known, part.size)
    return known


def common_terms(part: Partition) -> IntArray:
    """The terms that at least one row in :data:`COMMON_SHARE` of ``part`` holds (in their
    own text), the most held first."""
    segments = part.own.segments
    if not segments or not part.size:
        return np.zeros(0, np.int32)
    width = max(int(segment.terms[-1]) for segment in segments if len(segment.terms)) + 1
    held = np.zeros(width, np.int32)
    for segment in segments:
        held[segment.terms] += np.diff(segment.offsets)  # (a segment lists a term once)
    common = np.flatnonzero(held >= max(1, part.size // COMMON_SHARE))
    return common[np.argsort(-held[common], kind="stable")].astype(np.int32)


def count_matching(part: Partition, term: int, stem: str) -> int:
    """How many rows ``term`` matches with context: the rows holding it, the rows whose
    context holds them, and the rows whose date spells it — marked in a byte a row, not
    summed (a dense term's first count at 1M rows 4.5 to 6 → 1.8 to 2.5 ms: each query word pays it
    once). Occurrences beyond a long row's head are taken back from its neighbours' context,
    so those neighbours alone (a few rows) are checked by their exact frequency."""
    rows, _ = part.postings(term)
    n = part.size
    marked = np.zeros(n + 1, np.bool_)  # (a missing neighbour, -1, marks the spare last slot)
    marked[rows] = True
    prev1, prev2, next1, next2 = part.neighbours()
    for links in (prev1, prev2, next1, next2):
        marked[links[rows]] = True
    dated = part.date_rows(stem)
    if dated is not None:
        marked[dated] = True
    count = int(np.count_nonzero(marked[:n]))
    doubtful = []
    for postings, neighbours in ((part.near, (prev1, next1)), (part.far, (prev2, next2))):
        if postings.segments:
            beyond, _ = postings.get(term)
            doubtful += [neighbour[beyond] for neighbour in neighbours]
    if doubtful:
        checked = distinct(np.concatenate(doubtful))
        checked = checked[checked >= 0]
        checked = checked[marked[checked]].astype(np.int32)
        area = Neighbourhood.of(part, checked)
        frequency = frequencies_at(part, area, term, stem, CONTEXT_WEIGHT, content_only=False)
        count -= int(np.count_nonzero(frequency == 0))
    return count
