"""The postings of the in-memory keyword index: for each term, the rows that hold it and how
often, as sorted numpy arrays in a few segments (``_keyword_cache.py`` keeps one set per
partition: the rows' whole texts, and what long rows hold beyond the heads their neighbours
see in their context).

A segment is built from postings in row order by one stable sort by term; a term is looked
up in each segment by binary search. Segments merge so that a term is found in few of them,
but never past :data:`SEALED_FROM` postings, so that no merge sorts a whole big partition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from .terms import Words

__all__ = [
    "Counts",
    "IntArray",
    "Postings",
    "Segment",
    "Triple",
    "as_counts",
    "beyond",
    "concat",
    "postings_of",
]

IntArray = npt.NDArray[np.int32]
# An event's own postings count occurrences as uint16 (2 bytes, not a float32's 4: ~80 MB less
# at 1M events, where the postings are a row and a count each, ~40M of them). A word repeated
# more than 65,535 times in one event counts 65,535, which BM25's saturation makes no
# difference for. The signed remainders beyond a long neighbour's head (``beyond``) stay
# float32. Readers take either: they add the counts into float64 buffers.
Counts = npt.NDArray[np.float32] | npt.NDArray[np.uint16]
COUNT_MAX = np.iinfo(np.uint16).max

# Segment merging (see Postings.add).
MERGE_SHARE = 8
MIN_MERGE = 16_384
MAX_SEGMENTS = 8
# A segment of this many postings or more is sealed: never merged again, so that no merge
# sorts more than about this many (merging all of a 1M-event partition's ~40M postings at
# once peaked 1.1 GB above the index). A term is then looked up in one segment per ~50k
# events, a binary search each.
SEALED_FROM = 2_097_152


@dataclass
class Segment:
    """Postings of a range of rows: for each term (sorted), its rows (ascending) and counts."""

    terms: IntArray
    offsets: npt.NDArray[np.int64]
    rows: IntArray
    counts: Counts

    @classmethod
    def build(cls, terms: IntArray, rows: IntArray, counts: Counts) -> Segment:
        """From postings in row order (one per distinct ``(term, row)``, see :func:`count_pairs`):
        a stable sort by term keeps each term's rows ascending."""
        order = np.argsort(terms, kind="stable")
        terms, rows, counts = terms[order], rows[order], counts[order]
        del order
        starts = np.flatnonzero(terms[1:] != terms[:-1]) + 1
        starts = np.concatenate(([0], starts)) if len(terms) else starts
        return cls(
            terms=terms[starts],
            offsets=np.append(starts, len(terms)).astype(np.int64),
            rows=rows,
            counts=counts,
        )

    @cached_property
    def span(self) -> tuple[int, int]:
        """The first and last row it holds postings of (a segment holds a range of rows:
        those appended together, or merged neighbours)."""
        return (int(self.rows.min()), int(self.rows.max())) if len(self.rows) else (0, -1)

    def postings(self, term: int) -> tuple[IntArray, Counts] | None:
        # (as the terms' own dtype: a Python int would have numpy convert the whole array)
        at = int(np.searchsorted(self.terms, np.int32(term)))
        if at == len(self.terms) or self.terms[at] != term:
            return None
        lo, hi = self.offsets[at], self.offsets[at + 1]
        return self.rows[lo:hi], self.counts[lo:hi]

    def renumbered(self, mapping: IntArray) -> Segment:
        """This segment with each term ``t`` as ``mapping[t]``. Where the new ids sort
        otherwise, each term's run of postings moves whole (a gather, not a sort); two terms
        mapped to one id (two stems of one hash: they share postings) are merged by a sort."""
        terms = mapping[self.terms]
        if len(terms) < 2 or bool(np.all(terms[1:] > terms[:-1])):
            return Segment(terms, self.offsets, self.rows, self.counts)
        order = np.argsort(terms, kind="stable")
        if bool(np.any(terms[order][1:] == terms[order][:-1])):
            _, rows, counts = self.pairs()
            every = np.repeat(terms, np.diff(self.offsets))
            by = np.lexsort((rows, every))
            return Segment.build(every[by], rows[by], counts[by])
        lengths = np.diff(self.offsets)[order]
        offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
        take = np.repeat(self.offsets[:-1][order] - offsets[:-1], lengths) + np.arange(
            offsets[-1], dtype=np.int64
        )
        return Segment(terms[order], offsets, self.rows[take], self.counts[take])

    def pairs(self) -> tuple[IntArray, IntArray, Counts]:
        """Every posting as ``(term, row, count)`` arrays."""
        return np.repeat(self.terms, np.diff(self.offsets)), self.rows, self.counts

    @property
    def size(self) -> int:
        return len(self.rows)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.terms, self.offsets, self.rows, self.counts))


def count_pairs(terms: IntArray, rows: IntArray) -> tuple[IntArray, IntArray, Counts]:
    """Postings from one ``(term, row)`` pair per token: each distinct pair once, with its
    count, in row order. Counted per chunk of rows, so a bulk load never sorts all of its
    tokens at once (the transient memory of a 100k-event build: 259 MB before, ~100 MB)."""
    key, counted = np.unique((rows.astype(np.int64) << 32) | terms, return_counts=True)
    return (
        (key & 0xFFFFFFFF).astype(np.int32),
        (key >> 32).astype(np.int32),
        as_counts(counted),
    )


def as_counts(counted: npt.NDArray[Any]) -> npt.NDArray[np.uint16]:
    """Occurrence counts as own postings keep them (see :data:`Counts`)."""
    kept: npt.NDArray[np.uint16] = np.minimum(counted, COUNT_MAX).astype(np.uint16)
    return kept


def merge(segments: list[Segment]) -> Segment:
    terms, rows, counts = zip(*(segment.pairs() for segment in segments), strict=True)
    return Segment.build(np.concatenate(terms), np.concatenate(rows), np.concatenate(counts))


Triple = tuple[IntArray, IntArray, Counts]  # postings (terms, rows, counts) in row order

NO_ROWS = np.zeros(0, np.int32)
NO_COUNTS = np.zeros(0, np.float32)


class Postings:
    """A term -> (rows, counts) map kept as a few sorted segments."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def add(self, terms: IntArray, rows: IntArray, counts: Counts) -> None:
        """Add the postings of newly appended rows as a segment. Sealed segments
        (:data:`SEALED_FROM` postings or more) stay as they are; the ones after them are
        merged so that a term is looked up in few: all into one once the newer ones hold an
        eighth of the oldest's postings (amortised O(1) per posting), the newer ones together
        once there are more than a few (a search after every record adds a tiny one)."""
        if not len(terms):
            return
        self.segments.append(Segment.build(terms, rows, counts))
        sealed = 0
        while self.segments[sealed].size >= SEALED_FROM and sealed < len(self.segments) - 1:
            sealed += 1  # (sealed segments come first: the merges below only grow)
        kept, (base, *newer) = self.segments[:sealed], self.segments[sealed:]
        if not newer:
            return
        if sum(segment.size for segment in newer) * MERGE_SHARE >= max(base.size, MIN_MERGE):
            self.segments = [*kept, merge([base, *newer])]
        elif len(newer) > MAX_SEGMENTS:
            self.segments = [*kept, base, merge(newer)]

    def count(self, term: int) -> int:
        """How many rows hold ``term`` (each row's postings are in one segment)."""
        found = (segment.postings(term) for segment in self.segments)
        return sum(len(rows) for rows, _ in filter(None, found))

    def get(self, term: int) -> tuple[IntArray, Counts]:
        found = [p for p in (segment.postings(term) for segment in self.segments) if p]
        if len(found) == 1:
            return found[0]
        if not found:
            return NO_ROWS, NO_COUNTS
        return np.concatenate([r for r, _ in found]), np.concatenate([c for _, c in found])

    def nbytes(self) -> int:
        return sum(segment.nbytes() for segment in self.segments)


def concat(triples: Sequence[Triple]) -> Triple:
    terms, rows, counts = zip(*triples, strict=True)
    return np.concatenate(terms), np.concatenate(rows), np.concatenate(counts)


def beyond(whole: Triple, head: Triple) -> Triple:
    """Signed postings of ``whole`` minus ``head`` (the same rows): what a long row's text
    holds beyond the head its neighbours see. A word the cut split ("hel" of "hello") has
    -1 — the head holds it and the whole does not."""
    terms = np.concatenate((whole[0], head[0]))
    rows = np.concatenate((whole[1], head[1]))
    counts = np.concatenate((whole[2].astype(np.float32), -head[2].astype(np.float32)))
    keys, inverse = np.unique((rows.astype(np.int64) << 32) | terms, return_inverse=True)
    summed = np.bincount(inverse, weights=counts, minlength=len(keys))
    kept = summed != 0
    keys = keys[kept]
    return (
        (keys & 0xFFFFFFFF).astype(np.int32),
        (keys >> 32).astype(np.int32),
        summed[kept].astype(np.float32),
    )


def postings_of(words: Words, found: list[list[str]], rows: IntArray) -> Triple:
    """Postings of the token lists ``found`` of ``rows``."""
    lengths = np.fromiter(map(len, found), np.int32, len(found))
    terms = words.ids(list(chain.from_iterable(found)))
    return count_pairs(terms, np.repeat(rows, lengths))
