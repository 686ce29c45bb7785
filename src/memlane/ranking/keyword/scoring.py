"""The keyword cache's BM25 ranking of one partition for one query, by numpy.

The score of a row is the sum over the query's terms of ``idf · f · (k1 + 1) / (f + norm)``
(``_keyword_cache.py`` has the formula and where it comes from), ``f`` the term's frequency
in the row and its context. Four ways to compute the best ``k`` rows, one result:

- **Scoped**: a search filtered to a small share of the partition (a session, a time range)
  finds each term's frequency at those rows from their side (``_keyword_scoped.py``).
- **Walked**: otherwise each term's postings are walked — every row that holds it and the
  rows whose context it is in — into per-row sums: over the matching rows, or with
  row-sized arithmetic when a term touches a good share of the partition (~2.5 ns a row
  against ~30 ns a matching row).
- **Pruned** (max-score, Turtle & Flood 1995): terms are taken strongest first (their
  highest possible contribution, ``idf · (k1 + 1)``, as ``f / (f + norm)`` stays below 1).
  Once the contributions the terms not yet walked could still add, together, fall below the
  ``k``-th best score so far, a row none of the walked terms matched cannot reach the best
  ``k``: the rest of the terms are looked up at the rows already matched only, and those
  rows dropped as soon as they cannot reach it either. With context, a word in every
  tenth event sits in every third context and weighs little (idf ~0.8): at 1M events a
  4-word query walks one word's postings instead of four. Exact: the same rows and scores.
- **Pre-scored**: a bar from partial sums is low (the rows of the strongest term, scored by
  it alone). When that term is held by few rows and weighs as much as the others together,
  its rows are scored in full first — every other term looked up there — and when the other
  terms together cannot reach the k-th best of those, they are the answer: no other term
  is walked. At 1M events, "what happened
  with rate limits of the search API after we fixed it?" walked two words of a third of
  the rows each, 37 → 15 ms. Looking up stops as soon as that cannot happen (a long
  query's many terms), and what was found still raises the bar.

Every way adds the terms' contributions in the same order (the caller's, strongest
first), and each contribution with the same operations, so the scores agree to the bit and
ties at the cut go to the earliest rows, whichever way a search took.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol, cast

import numpy as np
import numpy.typing as npt

from ..arrays import distinct, located
from .postings import Counts, IntArray
from .scoped import DocumentFrequencies, Neighbourhood, ScopedPartition, frequencies_at
from .terms import KEYWORD_WEIGHTS

__all__ = ["PassageTerms", "Query", "best_passages", "matches", "rank", "walk"]

FloatArray = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

K1 = 1.2
B = 0.75
_CONTENT_WEIGHT, CONTEXT_WEIGHT = KEYWORD_WEIGHTS
assert _CONTENT_WEIGHT == 1.0, "the ranking below leaves the content's weight out"
# A search whose filters leave fewer than one row in this many of a partition (a session, a
# time range) finds its terms from the rows' side (_keyword_scoped.py): at 1M events, a
# 10k-event session's 18-word query took 176 ms walking whole postings.
SCOPE_SHARE = 8
# A term that matches (with context) at least one row in this many of a partition is walked
# with row-sized arithmetic (~2.5 ns a row, against ~30 ns a matching row over its matches).
# Content alone is always walked over its matches: its postings are its matches.
DENSE_SHARE = 8
# A term looked up (with context) at rows at least half as many as its postings is walked
# into a buffer and read at those rows instead (at 1M events: 252k rows of a 71k-posting
# term, 11.3 → 3.7 ms; equal cost near 0.45).
LOOKUP_WALK_SHARE = 2
# A looked-up term's contributions are added over all the rows in the running when at least
# one in this many matches it, else over its matches only (the same sums: see
# _add_at_matches).
ALL_ROWS_SHARE = 2
# A term held by fewer than one row in this many is matched by sorting out the rows its walk
# touched rather than by a pass over the row-sized buffer (matches).
MATCHES_SORTED_SHARE = 16
# A term looked up at fewer rows than its postings by this factor is looked up from the
# rows' side, by binary search in its postings (as a small scope is: _keyword_scoped.py)
# rather than by setting its postings out in a row-sized buffer.
LOOKUP_SCOPED_SHARE = 8
# The strongest term's rows are scored in full (every other term looked up there) before a
# second term is walked when they are at most one row in this many of the partition: their
# k-th best score is a bar the rest of the terms may already fall short of (see
# _rank_walking).
PRESCORE_SHARE = 16
# ... and only when that term weighs at least this many times the others together: else
# their k-th best rarely clears what the others could add, and the lookups are spent (1M
# events, a content-only search or one with several common words: +3-7 ms, nothing decided).
PRESCORE_WEIGHT = 1.0
# Rows a dense term's contributions are computed for at a time (512 KB of float64: L2).
_CHUNK = 65_536
# Whether walks stop early (max-score); off only to compare the two in tests.
PRUNE = True
# Rounding slack of the pruning test (sums of a few floats: errors ~1e-15 relative).
_SLACK = 1e-9


class _Postings(Protocol):
    @property
    def segments(self) -> Sequence[Any]: ...
    def get(self, term: int) -> tuple[IntArray, Counts]: ...


class Partition(ScopedPartition, Protocol):
    """What the ranking reads of a keyword cache partition (``_keyword_cache._Partition``),
    beyond what the scoped lookups read."""

    @property
    def sizes(self) -> FloatArray: ...
    @property
    def lengths(self) -> npt.NDArray[np.int32]: ...
    @property
    def seqs(self) -> npt.NDArray[np.int64]: ...
    @property
    def own(self) -> Any: ...
    @property
    def near(self) -> _Postings: ...
    @property
    def far(self) -> _Postings: ...
    @property
    def frequencies(self) -> DocumentFrequencies: ...

    #: every row's length normalisation for one avgdl and size (:func:`_norms`), or None
    norm_cache: tuple[float, int, FloatArray] | None

    def postings(self, term: int) -> tuple[IntArray, Counts]: ...
    def date_rows(self, stem: str) -> IntArray | None: ...
    def scratch(self, count: int = 1) -> AbstractContextManager[list[FloatArray]]: ...


@dataclass(frozen=True)
class Query:
    """A query's terms over the partitions searched, strongest (highest ``idf``) first."""

    terms: Sequence[int]
    stems: Sequence[str]
    idf: Sequence[float]
    avgdl: float
    k: int
    content_only: bool

    def weights(self) -> Iterator[tuple[int, str, float]]:
        """``(term, stem, idf · (k1 + 1))``: each term's highest possible contribution."""
        for term, stem, idf in zip(self.terms, self.stems, self.idf, strict=True):
            yield term, stem, idf * (K1 + 1)


@dataclass
class Matches:
    """One term's matches in one partition: rows and their column-weighted frequency."""

    rows: npt.NDArray[np.integer[Any]]
    frequency: FloatArray


def rank(
    part: Partition, query: Query, mask: Mask | None, matching: Sequence[int]
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """The best ``query.k`` rows of ``part`` among those ``mask`` keeps (None: all), as
    ``(seqs, scores)``; ``matching``: how many rows of ``part`` each term matches (its
    ``_keyword_counts.document_frequency``)."""
    scope = None if mask is None else np.flatnonzero(mask).astype(np.int32)
    if scope is not None and len(scope) * SCOPE_SHARE <= part.size:
        return _rank_scope(part, query, scope)
    return _rank_walking(part, query, mask, matching)


#: A long event's passages as the ranking reads them: each passage's porter stems counted,
#: and its length in tokens (``search/passage_terms.py`` cuts and counts them).
PassageTerms = Sequence[tuple[Mapping[str, int], int]]


def best_passages(
    part: Partition, query: Query, rows: IntArray, passages: Sequence[PassageTerms]
) -> tuple[FloatArray, IntArray]:
    """The score of each of ``rows`` (ascending, distinct) by its best passage
    (``passages[i]`` are ``rows[i]``'s), and that passage's index (the first of equals; -1
    for a row without passages): each passage scored as a row of its own that holds
    the passage's words and the row's context (its neighbours, its date), ``D`` the
    passage's tokens and the context's, with the query's ``idf`` and ``avgdl``.

    Why: a long event is ranked whole by :func:`rank`, so a 2,000-token log whose one line
    holds every word of the question scores below ten shorter events that each hold two of
    them. Scored by that line (with its context, which says where the event stands), it
    comes first (issue 31; docs/decisions/2026-11-28-long-events-by-their-best-passage.md).
    """
    area = Neighbourhood.of(part, rows)
    context_size = np.maximum(part.sizes[rows] - part.lengths[rows], 0.0)
    context: list[FloatArray] = []
    for term, stem in zip(query.terms, query.stems, strict=True):
        if query.content_only:
            context.append(np.zeros(len(rows)))
            continue
        whole = frequencies_at(part, area, term, stem, CONTEXT_WEIGHT, content_only=False)
        own = frequencies_at(part, area, term, stem, CONTEXT_WEIGHT, content_only=True)
        context.append(whole - own)
    # every passage of every row at once: its stems' counts (a row per passage, a column
    # per query term) plus its row's context, then the terms' contributions added in the
    # query's order, as rank() adds them (an event given as its one passage scores the same)
    owner = np.repeat(np.arange(len(rows)), [len(terms) for terms in passages])
    if not len(owner):
        return np.zeros(len(rows)), np.full(len(rows), -1, np.int32)
    counts = np.array(
        [[found.get(stem, 0) for stem in query.stems] for terms in passages for found, _ in terms],
        np.float64,
    ).reshape(len(owner), len(query.stems))
    lengths = np.array([length for terms in passages for _, length in terms], np.float64)
    norm = K1 * (1 - B) + (K1 * B / query.avgdl) * (lengths + context_size[owner])
    scores = np.zeros(len(owner))
    for column, (_, _, weight) in enumerate(query.weights()):
        f = counts[:, column] + context[column][owner]
        held = f != 0
        scores[held] += _contribution(weight, f[held], norm[held])
    best = np.zeros(len(rows))
    np.maximum.at(best, owner, scores)
    # each row's first passage reaching its best score (owner ascending: a stable sort by
    # owner keeps the passages' order, and -score puts the best first within each)
    order = np.lexsort((np.arange(len(owner)), -scores, owner))
    firsts = np.flatnonzero(np.r_[True, owner[order][1:] != owner[order][:-1]])
    starts = np.r_[0, np.cumsum([len(terms) for terms in passages])[:-1]]
    which = np.full(len(rows), -1, np.int32)
    which[owner[order][firsts]] = order[firsts] - starts[owner[order][firsts]]
    return best, which


def matches(part: Partition, term: int, stem: str, content_only: bool) -> Matches:
    """Where ``term`` occurs in ``part``: in the event's content, or (unless
    ``content_only``) in its context too, weighted as FTS5 weighs the two columns."""
    if content_only:  # (the content's weight is 1)
        rows, counts = part.postings(term)
        return Matches(rows, counts.astype(np.float64))
    rows, _ = part.postings(term)
    with part.scratch() as (frequency,):
        positions = walk(part, term, stem, content_only, frequency)
        if len(rows) * MATCHES_SORTED_SHARE <= part.size:
            # A term of few rows touched few: sort them out (5,000 rows' ~25,000 touched
            # ~0.07 ms) rather than pass over the whole buffer (~0.8 ms at 1M rows).
            touched = _touched(part, positions, stem)
            found = frequency[touched]
            frequency[touched] = 0
            held = found != 0  # (a neighbour's head may not hold it: taken back to 0)
            return Matches(touched[held], found[held])
        # (nonzero over a bool array is ~7x faster than over floats)
        hit = np.flatnonzero(frequency[: part.size] != 0)
        found = frequency[hit]
        frequency[hit] = 0
    return Matches(hit, found)


def _touched(part: Partition, positions: IntArray, stem: str) -> IntArray:
    """The rows a :func:`walk` that added at ``positions`` (the term's rows and their
    neighbours, -1 for none; a long row's tail taken back touches only these) wrote to,
    with the rows whose date spells ``stem`` — ascending, distinct."""
    dated = part.date_rows(stem)
    touched = distinct(positions if dated is None else np.concatenate([positions, dated]))
    return touched[np.searchsorted(touched, 0) :]  # (no neighbour: -1)


def walk(
    part: Partition, term: int, stem: str, content_only: bool, frequency: FloatArray
) -> IntArray:
    """Add ``term``'s frequency at every row of ``part`` to ``frequency`` (zeros, one longer
    than the rows); return the positions it added at other than dated rows (the term's rows
    and, with context, their neighbours; -1 for a missing one), repeats included."""
    rows, counts = part.postings(term)
    if content_only:
        frequency[rows] += counts
        return rows
    # A neighbour's occurrences count in the context of the rows it neighbours: those in the
    # first NEAR_CHARS of its text one place away, FAR_CHARS two places away; a long
    # neighbour's occurrences beyond its head are taken back (signed counts, almost always
    # none; halves of small integers, so the sums are exact in any order). A missing
    # neighbour (-1) lands in the buffer's spare last slot. One unbuffered add of the five
    # contributions (a row can be two rows' neighbour: np.add.at adds both) takes half the
    # time of five fancy-indexed +=; its values are of the buffer's own type, as a cast
    # sends np.add.at down a path 20x slower.
    prev1, prev2, next1, next2 = part.neighbours()
    own = counts.astype(np.float64)
    context = own * CONTEXT_WEIGHT
    positions = np.concatenate([rows, *(links[rows] for links in (prev1, next1, prev2, next2))])
    np.add.at(frequency, positions, np.concatenate([own, context, context, context, context]))
    for postings, neighbours in ((part.near, (prev1, next1)), (part.far, (prev2, next2))):
        if postings.segments:
            beyond, excess = postings.get(term)
            if len(beyond):
                for neighbour in neighbours:
                    frequency[neighbour[beyond]] -= excess * CONTEXT_WEIGHT
    dated = part.date_rows(stem)
    if dated is not None:
        frequency[dated] += CONTEXT_WEIGHT
    return positions


def _norm(part: Partition, rows: npt.NDArray[np.integer[Any]], avgdl: float) -> FloatArray:
    """BM25's length normalisation ``k1 · (1 - b + b · D / avgdl)`` of ``rows``: read from
    the partition's :func:`_norms` when it holds them (or when ``rows`` are many enough to
    make computing all of them worth it), else computed at ``rows`` alone."""
    cached = part.norm_cache
    if (cached is not None and cached[:2] == (avgdl, part.size)) or len(rows) * 4 >= part.size:
        kept: FloatArray = _norms(part, avgdl)[rows]
        return kept
    norm: FloatArray = K1 * (1 - B) + (K1 * B / avgdl) * part.sizes[rows]
    return norm


def _norms(part: Partition, avgdl: float) -> FloatArray:
    """Every row's length normalisation for ``avgdl``, kept by the partition until its rows
    or ``avgdl`` change: searches between writes reuse it (at 1M rows it costs ~0.9 ms and
    every dense term and big lookup read it). The same operations as :func:`_norm`'s, so the
    same bits (a product and a sum, each rounded once, in either order)."""
    n = part.size
    cached = part.norm_cache
    if cached is not None and cached[:2] == (avgdl, n):
        return cached[2][:n]
    # (reusing the buffer: fresh pages for 8 MB cost more than computing into them)
    buffer = cached[2] if cached is not None and len(cached[2]) >= n else np.empty(len(part.sizes))
    norm = buffer[:n]
    np.multiply(part.sizes[:n], K1 * B / avgdl, out=norm)
    norm += K1 * (1 - B)
    part.norm_cache = (avgdl, n, buffer)
    return norm


def _contribution(weight: float, f: FloatArray, norm: FloatArray) -> FloatArray:
    """One term's BM25 contribution at frequencies ``f`` (``weight`` is ``idf · (k1 + 1)``)."""
    added: FloatArray = weight * f / (f + norm)
    return added


def _rank_scope(
    part: Partition, query: Query, scope: IntArray
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Rank the rows of a small ``scope`` from their side (``_keyword_scoped.py``)."""
    area = Neighbourhood.of(part, scope)
    scores = np.zeros(len(scope))
    norm = _norm(part, scope, query.avgdl)
    for term, stem, weight in query.weights():
        frequency = frequencies_at(
            part, area, term, stem, CONTEXT_WEIGHT, content_only=query.content_only
        )
        at = np.flatnonzero(frequency)
        scores[at] += _contribution(weight, frequency[at], norm[at])
    candidates = np.flatnonzero(scores)
    return _best(part, scope[candidates], scores[candidates], query.k)


def _rank_walking(
    part: Partition, query: Query, mask: Mask | None, matching: Sequence[int]
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """Walk the terms' postings, strongest first, until the rest cannot change the best
    ``k`` (see the module's docstring); look the rest up at the rows still in the running."""
    n, k = part.size, query.k
    # Terms no row of this partition holds, even in its context, add nothing: left out. A
    # query word no event holds — a typo, a name never seen — has the highest idf, so it
    # came first and its empty walk left the pruning without a bar: every other term was
    # walked whole (hybrid at 1M events ~50 ms p50 instead of ~32).
    held = [
        (weight, matched)
        for weight, matched in zip(query.weights(), matching, strict=True)
        if matched
    ]
    weights = [weight for weight, _ in held]
    matching = [matched for _, matched in held]
    rest = sum(weight for _, _, weight in weights)  # what the terms not walked could add
    walked = 0
    bar = 0.0  # a k-th best score so far: the best k score at least this
    pool = None  # the rows of the strongest term, where the best k mostly are
    with part.scratch(2) as (frequency, totals):
        sums = totals[:n]
        for (term, stem, weight), matched in zip(weights, matching, strict=True):
            if (
                PRUNE
                and walked == 1
                and pool is not None
                and len(pool) * PRESCORE_SHARE <= n
                and weights[0][2] >= PRESCORE_WEIGHT * rest
            ):
                # The strongest term's rows scored in full: when the other terms together fall
                # short of their k-th best, no other row can reach the best k; if not, that
                # k-th best is still a higher bar to prune by than the walked term's sums.
                seen = _kept(pool, mask)
                scores = _scored(part, query, weights[1:], seen, sums[seen], frequency, rest)
                bar = _kth(scores, k)  # (of partial sums when _scored stopped: still a bar)
                if rest < bar * (1 - _SLACK):  # (never when _scored stopped: see there)
                    sums[pool] = 0  # (the scratch buffer is handed back zeroed)
                    return _best(part, seen, scores, k)
            if PRUNE and walked and rest < sum(w for _, _, w in weights[:walked]):
                # (the k-th best among some rows is a lower bound: the strongest term's
                # rows give a good one for less than all the rows would cost)
                seen = _matched(sums, mask) if pool is None else _kept(pool, mask)
                bar = max(bar, _kth(sums[seen], k))
                if rest < bar * (1 - _SLACK):
                    break
            dense = not query.content_only and matched * DENSE_SHARE >= n
            rows = _add_walked(part, query, term, stem, weight, sums, frequency, dense=dense)
            if walked == 0:
                pool = rows
            rest -= weight
            walked += 1
        candidates = _matched(sums, mask)
        scores = sums[candidates]
        totals.fill(0)
        for term, stem, weight in weights[walked:]:
            running = scores + rest >= bar * (1 - _SLACK)
            candidates, scores = candidates[running], scores[running]
            f = _looked_up(part, term, stem, query.content_only, _At(part, candidates), frequency)
            _add_at_matches(scores, weight, f, candidates, part, query.avgdl)
            rest -= weight
            bar = max(bar, _kth(scores, k))
    return _best(part, candidates, scores, k)


def _scored(
    part: Partition,
    query: Query,
    weights: Sequence[tuple[int, str, float]],
    rows: npt.NDArray[np.intp],
    scores: FloatArray,
    buffer: FloatArray,
    beat: float,
) -> FloatArray:
    """``scores`` (of ``rows``) with every term of ``weights`` looked up and added, in their
    order: the rows' full scores when ``scores`` holds the terms before them. Stops early
    once their ``k``-th best cannot end above ``beat`` (then it is below it already: a
    27-word query's pool spent ~15 ms on lookups that could not decide the search)."""
    at = _At(part, rows)
    left = sum(weight for _, _, weight in weights)
    for i, (term, stem, weight) in enumerate(weights, 1):
        f = _looked_up(part, term, stem, query.content_only, at, buffer)
        _add_at_matches(scores, weight, f, rows, part, query.avgdl)
        left -= weight
        if i < len(weights) and _kth(scores, query.k) + left < beat:
            break
    return scores


@dataclass
class _At:
    """Rows a term is looked up at, with their neighbourhood (``_keyword_scoped.py``) found
    once, when a lookup from the rows' side first needs it, for every term looked up there."""

    part: Partition
    rows: npt.NDArray[np.intp]

    @cached_property
    def area(self) -> Neighbourhood:
        return Neighbourhood.of(self.part, self.rows.astype(np.int32))

    @cached_property
    def linked(self) -> npt.NDArray[np.intp]:
        """The rows and their neighbours one and two places before and after (-1: none),
        stacked ``(5, len(rows))``."""
        prev1, prev2, next1, next2 = self.part.neighbours()
        return np.stack([self.rows, *(links[self.rows] for links in (prev1, next1, prev2, next2))])


def _add_walked(
    part: Partition,
    query: Query,
    term: int,
    stem: str,
    weight: float,
    sums: FloatArray,
    frequency: FloatArray,
    *,
    dense: bool,
) -> npt.NDArray[np.intp] | None:
    """Add ``term``'s contributions to ``sums`` (row-sized), walking its postings: over its
    matching rows (returned), or with row-sized arithmetic (None)."""
    n = part.size
    if not dense:
        found = matches(part, term, stem, query.content_only)
        rows = found.rows
        sums[rows] += _contribution(weight, found.frequency, _norm(part, rows, query.avgdl))
        return rows  # type: ignore[return-value]
    norm = _norms(part, query.avgdl)
    walk(part, term, stem, query.content_only, frequency)
    # A chunk at a time, so that the four passes read and write cache, not memory (at 1M
    # rows 4.1 -> 3.3 ms a dense term); the buffer is zeroed behind them.
    divisor = np.empty(min(n, _CHUNK))
    for start in range(0, n, _CHUNK):
        end = min(start + _CHUNK, n)
        f, below = frequency[start:end], divisor[: end - start]
        np.add(f, norm[start:end], out=below)
        f *= weight
        f /= below
        sums[start:end] += f
        f.fill(0)
    frequency[-1] = 0  # (the spare last slot, which missing neighbours were added to)
    return None


def _add_at_matches(
    scores: FloatArray,
    weight: float,
    f: FloatArray,
    rows: npt.NDArray[np.intp],
    part: Partition,
    avgdl: float,
) -> None:
    """Add to ``scores`` (of ``rows``) the contributions of frequencies ``f`` (of the same
    rows). When most rows match, over all of them: a row that does not adds
    ``weight · 0 / norm``, +0.0 exactly, and skipping the selection saves three gathers."""
    matched = np.count_nonzero(f)
    if matched and matched * ALL_ROWS_SHARE >= len(f):
        scores += _contribution(weight, f, _norm(part, rows, avgdl))
        return
    at = np.flatnonzero(f)
    scores[at] += _contribution(weight, f[at], _norm(part, rows[at], avgdl))


def _looked_up(
    part: Partition,
    term: int,
    stem: str,
    content_only: bool,
    at: _At,
    buffer: FloatArray,
) -> FloatArray:
    """``term``'s frequency at ``at.rows``, as :func:`walk` computes it, read from ``buffer``
    (zeros, left so) where the term's counts are set out by row: the cost follows the
    term's postings and the rows, not the partition."""
    rows = at.rows
    posted, counts = part.postings(term)
    if len(rows) * LOOKUP_SCOPED_SHARE <= len(posted):
        return frequencies_at(part, at.area, term, stem, CONTEXT_WEIGHT, content_only=content_only)
    if not content_only and len(rows) * LOOKUP_WALK_SHARE >= len(posted):
        # Many rows against the term's postings: one walk (~40 ns a posting) and a gather
        # cost less than reading five places of every row (~40-90 ns a row). The same
        # frequencies: halves of small integers add up exactly in any order.
        walk(part, term, stem, content_only, buffer)
        frequency = buffer[rows]
        buffer[: part.size + 1] = 0
        return frequency
    buffer[posted] = counts
    if content_only:
        frequency = buffer[rows]
        buffer[posted] = 0
        return frequency
    # The row's own count and its four neighbours' in one gather (-1, no neighbour, reads the
    # spare last slot: 0); halves of small integers, so the sum is the walk's to the bit.
    own, *context = buffer[at.linked]
    buffer[posted] = 0
    frequency = cast(
        FloatArray, own + CONTEXT_WEIGHT * (context[0] + context[1] + context[2] + context[3])
    )
    # a long neighbour counts with its head only: take back what lies beyond it, from the
    # side of the few long rows that hold the term there (as the walk does)
    prev1, prev2, next1, next2 = part.neighbours()
    for postings, neighbours in ((part.near, (prev1, next1)), (part.far, (prev2, next2))):
        if postings.segments:
            beyond, excess = postings.get(term)
            for neighbour in neighbours if len(beyond) and len(rows) else ():
                where, there = located(rows, neighbour[beyond])
                frequency[where[there]] -= CONTEXT_WEIGHT * excess[there]
    dated = part.date_match(stem, rows.astype(np.int32))
    if dated is not None:
        frequency[dated] += CONTEXT_WEIGHT
    return frequency


def _matched(sums: FloatArray, mask: Mask | None) -> npt.NDArray[np.intp]:
    """The rows with a score that ``mask`` keeps."""
    hit = sums != 0
    if mask is not None:
        hit &= mask
    return np.flatnonzero(hit)


def _kept(rows: npt.NDArray[np.intp], mask: Mask | None) -> npt.NDArray[np.intp]:
    """Those of ``rows`` that ``mask`` keeps."""
    return rows if mask is None else rows[mask[rows]]


def _kth(scores: FloatArray, k: int) -> float:
    """The ``k``-th highest of ``scores`` (0 when there are fewer)."""
    if len(scores) < k:
        return 0.0
    return float(np.partition(scores, len(scores) - k)[len(scores) - k])


def _best(
    part: Partition, rows: npt.NDArray[np.integer[Any]], scores: FloatArray, k: int
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """The ``k`` best of ``rows`` (ascending) by ``scores``, ties to the earliest rows, as
    ``(seqs, scores)``."""
    if len(rows) > k:
        cut = _kth(scores, k)
        keep = scores > cut
        tied = np.flatnonzero(scores == cut)[: k - int(np.count_nonzero(keep))]
        keep[tied] = True
        rows, scores = rows[keep], scores[keep]
    return part.seqs[rows], scores
