"""Term frequencies of the in-memory keyword ranking at chosen rows, for small scopes.

The keyword cache (``_keyword_cache.py``) ranks a query term by walking its postings: every
row that holds the term, and the context it gives its neighbours. That cost follows how
common the term is in the whole partition — at 1M events, a common word's postings hold
hundreds of thousands of rows — even when the search is scoped to one session of a few
thousand events (restore's relevant section is such a search). For a scope much smaller than
the query's postings, this module computes the same frequencies the other way round: for the
scope's rows and their neighbours only, it looks their counts up in the sorted postings
(binary search: cost ~ rows · log postings, whatever the postings' length).

BM25's document frequency stays the partition's (the ranking does not depend on how the
search found its rows): a partition keeps each term's count of matching rows once computed
(:class:`DocumentFrequencies`), and when rows arrive it updates the count from the rows whose
frequency can have changed — the new rows and the two before each in its session, whose
context now holds it — evaluated before and after, so a search after each record stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..arrays import distinct, located

__all__ = ["DocumentFrequencies", "Neighbourhood", "ScopedPartition", "frequencies_at"]

IntArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]


class _Segment(Protocol):
    @property
    def span(self) -> tuple[int, int]: ...
    def postings(self, term: int) -> tuple[IntArray, npt.NDArray[np.float32]] | None: ...


class _Postings(Protocol):
    @property
    def segments(self) -> Sequence[_Segment]: ...


class ScopedPartition(Protocol):
    """What this module reads of a keyword cache partition (``_keyword_cache.ScopedPartition``)."""

    @property
    def size(self) -> int: ...
    @property
    def own(self) -> _Postings: ...
    @property
    def near(self) -> _Postings: ...
    @property
    def far(self) -> _Postings: ...
    def neighbours(self) -> tuple[IntArray, ...]: ...
    def date_match(self, stem: str, rows: IntArray) -> npt.NDArray[np.bool_] | None: ...


#: a cached document frequency is brought up to date from the rows added since it was
#: counted while they are at most this many (beyond, counting again is as cheap)
INCREMENTAL_ROWS = 8_192


def counts_at(postings: _Postings, term: int, rows: IntArray) -> FloatArray:
    """The count of ``term`` in each of ``rows`` (ascending, distinct), 0 where it is absent.
    A segment is searched only for the rows in its span, from the smaller side: those rows
    in its postings, or the other way round."""
    found = np.zeros(len(rows), np.float64)
    for segment in postings.segments:
        first, last = segment.span
        # (bounds of the rows' own dtype: Python ints would have numpy convert all the rows)
        lo, hi = np.searchsorted(rows, np.array((first, last + 1), rows.dtype)).tolist()
        if lo == hi:
            continue
        hit = segment.postings(term)
        if hit is None:
            continue
        posted, counts = hit
        inside, part = rows[lo:hi], found[lo:hi]
        if len(posted) <= len(inside):
            at, same = located(inside, posted)
            part[at[same]] += counts[same]
        else:
            at, same = located(posted, inside)
            part[same] += counts[at[same]]
    return found


@dataclass
class Neighbourhood:
    """Some rows of a partition and the session neighbours whose text is in their context:
    every row involved (``union``, ascending), each row's position in it, and for each row
    the positions of its neighbours in it (computed once: every query term reads them).

    ``around[i]`` holds every row's neighbour ``i`` places away — one before, one after, two
    before, two after, in that order — as its position in ``union``, or ``len(union)`` where
    the row has none: a term's counts with a zero appended there are then added with one
    dense gather a neighbour, not gathered and scattered over the rows that have one (those
    scattered adds were ~17 of the ~37 ms of restore's keyword search at 100k events)."""

    rows: IntArray
    union: IntArray
    own: npt.NDArray[np.intp]
    around: npt.NDArray[np.intp]  # (4, len(rows))

    @classmethod
    def of(cls, part: ScopedPartition, rows: IntArray, *, upto: int | None = None) -> Neighbourhood:
        """``rows`` (ascending, distinct) of ``part``; with ``upto``, as they were when the
        partition held only its first ``upto`` rows (later neighbours left out)."""
        prev1, prev2, next1, next2 = part.neighbours()
        linked = np.stack([links[rows] for links in (prev1, next1, prev2, next2)])
        if upto is not None:
            linked[linked >= upto] = -1
        union = distinct(np.concatenate([rows, linked[linked >= 0]]))
        union = union.astype(np.int32, copy=False)
        around = np.searchsorted(union, linked)
        around[linked < 0] = len(union)
        return cls(rows, union, np.searchsorted(union, rows), around)


def frequencies_at(
    part: ScopedPartition,
    area: Neighbourhood,
    term: int,
    stem: str,
    context_weight: float,
    *,
    content_only: bool,
) -> FloatArray:
    """The frequency of ``term`` at ``area.rows`` exactly as the keyword cache's postings walk
    computes it (``KeywordCache._matches``): its count in the row, plus, unless
    ``content_only``, ``context_weight`` times its count in the heads of the row's
    neighbours, and in the row's date."""
    if content_only:
        return counts_at(part.own, term, area.rows)
    n = len(area.union)
    own = np.zeros(n + 1, np.float64)  # (the last: what a row without a neighbour adds)
    own[:n] = counts_at(part.own, term, area.union)
    frequency = own[area.own]
    # each neighbour's share added in turn (a row without one adds 0.0: the same sums, in
    # the same order, as the postings walk makes); none where no row involved holds the term
    if own.any():
        for around in area.around:
            frequency += context_weight * own[around]
    # a long neighbour counts with its head only: take back what lies beyond it
    for postings, pair in ((part.near, area.around[:2]), (part.far, area.around[2:])):
        if postings.segments:
            beyond = np.zeros(n + 1, np.float64)
            beyond[:n] = counts_at(postings, term, area.union)
            if beyond.any():
                for around in pair:
                    frequency += -context_weight * beyond[around]
    dated = part.date_match(stem, area.rows)
    if dated is not None:
        frequency[dated] += context_weight
    return frequency


class DocumentFrequencies:
    """A partition's count, per query term, of the rows a term matches with its context (what
    BM25's ``n`` counts), kept across searches and brought up to date as rows arrive."""

    def __init__(self) -> None:
        self._counted: dict[int, tuple[int, int]] = {}  # term -> (rows matched, at size)

    def remember(self, term: int, matched: int, size: int) -> None:
        self._counted[term] = (matched, size)

    def get(self, part: ScopedPartition, term: int, stem: str, context_weight: float) -> int | None:
        """The term's count at the partition's current size, or None when it was never
        counted or too many rows arrived since (the caller counts it by walking postings)."""
        counted = self._counted.get(term)
        if counted is None:
            return None
        matched, size = counted
        if size == part.size:
            return matched
        if part.size - size > INCREMENTAL_ROWS or part.size < size:
            return None
        new = np.arange(size, part.size, dtype=np.int32)
        prev1, prev2, _, _ = part.neighbours()
        touched = np.concatenate([prev1[new], prev2[new]])
        old = distinct(touched[(touched >= 0) & (touched < size)]).astype(np.int32)

        def matching(rows: IntArray, upto: int | None = None) -> int:
            area = Neighbourhood.of(part, rows, upto=upto)
            found = frequencies_at(part, area, term, stem, context_weight, content_only=False)
            return int(np.count_nonzero(found))

        matched += matching(new) + matching(old) - matching(old, upto=size)
        self._counted[term] = (matched, part.size)
        return matched

    def __len__(self) -> int:
        return len(self._counted)
