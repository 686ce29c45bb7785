"""BM25 keyword ranking over per-partition postings cached in memory, scored by numpy.

Why not FTS5's own ranking: ``bm25()`` is an auxiliary function FTS5 calls once for every row
that contains any query word, and the scope filter comes after it, so its cost follows the
whole store and how common the query's words are, not the agent's share or ``k``: 70 ms at the
median and 240 ms at p95 over 100k events (docs/benchmarks.md). Here each partition (an
agent's private sessions, or one pool: the vector cache's partitions) keeps its postings as
sorted numpy arrays; a query adds up, term by term, the same BM25 FTS5 computes, over exactly
the rows that hold a query term, in a few milliseconds at 100k events.

The formula is FTS5's (``fts5_aux.c``): ``idf = ln((N - n + 0.5) / (n + 0.5))`` (at least
1e-6), and for each query term ``idf · f · (k1 + 1) / (f + k1 · (1 - b + b · D / avgdl))``
with ``k1 = 1.2``, ``b = 0.75``, where ``f`` sums the term's occurrences weighted by column
(content 1, context 0.5: ``KEYWORD_WEIGHTS``) and ``D`` is the row's size in tokens over both
columns. Two differences, both deliberate: ``N``, ``n`` and ``avgdl`` are counted over the
partitions searched, not the whole file (another agent's events should not change how this
agent's words weigh); and an event's context (its two neighbours on either side in the
session, and its date: migration ``0002_keyword_context``) is composed at query time from the
neighbours' postings instead of being stored: the context of an event changes when the next
events arrive, and composing it costs one gather per neighbour. The neighbours count whole
(FTS5 stores the first 1,000 / 500 characters of each); events recorded with ``index=False``
are neither rows nor neighbours here.

The rows come from the log (``events`` by ``partition`` and ``seq``) and are tokenized in
Python (:class:`~session_manager.store._keyword.Words`), so an event is searchable as soon as
it is committed, by any process: each search first reads the rows with a ``seq`` above the
last one seen. When rows are deleted anywhere, the store's generation counter moves and the
partitions are rebuilt, as the vector cache does.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ._keyword import KEYWORD_WEIGHTS, Words, tokens
from ._partition_rows import PartitionRows, RowCodes, RowQuery

__all__ = ["KeywordCache"]

IntArray = npt.NDArray[np.int32]
Counts = npt.NDArray[np.float32]
FloatArray = npt.NDArray[np.float64]

_K1 = 1.2
_B = 0.75
_CONTENT_WEIGHT, _CONTEXT_WEIGHT = KEYWORD_WEIGHTS
assert _CONTENT_WEIGHT == 1.0, "the ranking below leaves the content's weight out"
# Tokens of the date an event's context holds ("8 May 2023"); see migration 0002.
_DATE_TOKENS = 3
_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
# Rows read from the log per query while refreshing a partition.
_CHUNK = 8192
# Segment merging (see _Partition.add_postings).
_MERGE_SHARE = 8
_MIN_MERGE = 16_384
_MAX_SEGMENTS = 8


class _Source(Protocol):
    def keyword_rows(self, partition: str, after_seq: int, limit: int) -> list[Any]:
        """``(seq, session_id, agent_id, kind, created_us, content)`` of the indexed events
        of ``partition`` with a ``seq`` above ``after_seq``, in ``seq`` order."""
        ...

    def generation(self) -> int: ...


@dataclass
class _Segment:
    """Postings of a range of rows: for each term (sorted), its rows (ascending) and counts."""

    terms: IntArray
    offsets: npt.NDArray[np.int64]
    rows: IntArray
    counts: Counts

    @classmethod
    def build(cls, terms: IntArray, rows: IntArray, counts: Counts) -> _Segment:
        """From postings in row order (one per distinct ``(term, row)``, see :func:`_count`):
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

    def postings(self, term: int) -> tuple[IntArray, Counts] | None:
        at = int(np.searchsorted(self.terms, term))
        if at == len(self.terms) or self.terms[at] != term:
            return None
        lo, hi = self.offsets[at], self.offsets[at + 1]
        return self.rows[lo:hi], self.counts[lo:hi]

    def pairs(self) -> tuple[IntArray, IntArray, Counts]:
        """Every posting as ``(term, row, count)`` arrays."""
        return np.repeat(self.terms, np.diff(self.offsets)), self.rows, self.counts

    @property
    def size(self) -> int:
        return len(self.rows)

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.terms, self.offsets, self.rows, self.counts))


def _count(terms: IntArray, rows: IntArray) -> tuple[IntArray, IntArray, Counts]:
    """Postings from one ``(term, row)`` pair per token: each distinct pair once, with its
    count, in row order. Counted per chunk of rows, so a bulk load never sorts all of its
    tokens at once (the transient memory of a 100k-event build: 259 MB before, ~100 MB)."""
    key, counted = np.unique((rows.astype(np.int64) << 32) | terms, return_counts=True)
    return (
        (key & 0xFFFFFFFF).astype(np.int32),
        (key >> 32).astype(np.int32),
        counted.astype(np.float32),
    )


def _merge(segments: list[_Segment]) -> _Segment:
    terms, rows, counts = zip(*(segment.pairs() for segment in segments), strict=True)
    return _Segment.build(np.concatenate(terms), np.concatenate(rows), np.concatenate(counts))


class _Partition(PartitionRows):
    """One partition's rows: filter columns, token counts, session neighbours, postings."""

    def __init__(self) -> None:
        super().__init__()
        self.last_seq = 0
        self.lengths = np.zeros(0, np.int32)  # tokens of the event's content
        self.sizes = np.zeros(0, np.float64)  # tokens of content and context: BM25's D
        # the rows of the two events before and after it in its session (-1: none)
        self.prev1 = np.zeros(0, np.int32)
        self.prev2 = np.zeros(0, np.int32)
        self.next1 = np.zeros(0, np.int32)
        self.next2 = np.zeros(0, np.int32)
        self.days = np.zeros(0, np.int16)
        self.months = np.zeros(0, np.int16)
        self.years = np.zeros(0, np.int16)
        self.total_tokens = 0  # over both columns: avgdl = total_tokens / size
        self.segments: list[_Segment] = []
        self._tails: dict[int, tuple[int, int]] = {}  # session code -> its last two rows

    def _resize(self, capacity: int) -> None:
        super()._resize(capacity)
        self._grow("lengths", capacity, np.int32)
        self._grow("sizes", capacity, np.float64)
        for name in ("prev1", "prev2", "next1", "next2"):
            self._grow(name, capacity, np.int32, fill=-1)
        for name in ("days", "months", "years"):
            self._grow(name, capacity, np.int16)

    def neighbours(self) -> tuple[IntArray, ...]:
        n = self.size
        return self.prev1[:n], self.prev2[:n], self.next1[:n], self.next2[:n]

    def append(
        self, codes: RowCodes, words: Words, rows: list[Any]
    ) -> tuple[IntArray, IntArray, Counts]:
        """Add ``rows`` (from :meth:`_Source.keyword_rows`) after the current ones; return
        their postings ``(terms, rows, counts)`` for :meth:`add_postings` (a bulk load adds
        many chunks' at once). Stop words are indexed too: FTS5 indexes them,
        and a query word like "one" stems to one ("on")."""
        self.reserve(len(rows), exact=len(rows) >= _CHUNK)
        self.append_columns(codes, rows)
        start, end = self.size, self.size + len(rows)
        found = [tokens(row[5]) for row in rows]
        lengths = np.fromiter(map(len, found), np.int32, len(found))
        self.lengths[start:end] = lengths
        self._link(start, end)
        self._dates(start, end)
        self.size = end
        self.last_seq = int(rows[-1][0])
        terms = words.ids(list(chain.from_iterable(found)))
        return _count(terms, np.repeat(np.arange(start, end, dtype=np.int32), lengths))

    def _link(self, start: int, end: int) -> None:
        """Chain each new row to the two before it in its session; grow the row sizes (a
        neighbour's tokens are in the context of the rows it neighbours)."""
        sessions, lengths, sizes = self.sessions, self.lengths, self.sizes
        added = 0
        for row in range(start, end):
            session = int(sessions[row])
            last, before = self._tails.get(session, (-1, -1))
            self._tails[session] = (row, last)
            size = int(lengths[row])
            own = size + _DATE_TOKENS
            for neighbour, backward, forward in (
                (last, self.prev1, self.next1),
                (before, self.prev2, self.next2),
            ):
                if neighbour >= 0:
                    backward[row], forward[neighbour] = neighbour, row
                    own += int(lengths[neighbour])
                    sizes[neighbour] += size
                    added += size
            sizes[row] = own
            added += own
        self.total_tokens += added

    def _dates(self, start: int, end: int) -> None:
        """The day, month and year (UTC) the context of each new row spells out."""
        at = self.times[start:end].astype("datetime64[us]")
        months = at.astype("datetime64[M]")
        self.years[start:end] = months.astype("datetime64[Y]").astype(np.int64) + 1970
        self.months[start:end] = months.astype(np.int64) % 12 + 1
        self.days[start:end] = (at.astype("datetime64[D]") - months).astype(np.int64) + 1

    def add_postings(self, terms: IntArray, rows: IntArray, counts: Counts) -> None:
        """Add the postings of newly appended rows as a segment. Segments are merged so that a
        term is looked up in few of them: all into one once the newer ones hold an eighth of
        the oldest's postings (amortised O(1) per posting), the newer ones together once
        there are more than a few (a search after every record adds a tiny one)."""
        self.segments.append(_Segment.build(terms, rows, counts))
        base, newer = self.segments[0], self.segments[1:]
        if not newer:
            return
        if sum(segment.size for segment in newer) * _MERGE_SHARE >= max(base.size, _MIN_MERGE):
            self.segments = [_merge(self.segments)]
        elif len(newer) > _MAX_SEGMENTS:
            self.segments = [base, _merge(newer)]

    def postings(self, term: int) -> tuple[IntArray, Counts]:
        found = [p for p in (segment.postings(term) for segment in self.segments) if p]
        if len(found) == 1:
            return found[0]
        if not found:
            return np.zeros(0, np.int32), np.zeros(0, np.float32)
        return np.concatenate([r for r, _ in found]), np.concatenate([c for _, c in found])

    def date_rows(self, stem: str) -> IntArray | None:
        """The rows whose date (in their context) contains the token ``stem``."""
        n = self.size
        if stem in _MONTH_STEMS:
            return np.flatnonzero(self.months[:n] == _MONTH_STEMS[stem]).astype(np.int32)
        if not stem.isdigit() or stem != str(int(stem)):
            return None
        value = int(stem)
        if 1 <= value <= 31:
            return np.flatnonzero(self.days[:n] == value).astype(np.int32)
        if len(stem) == 4:
            return np.flatnonzero(self.years[:n] == value).astype(np.int32)
        return None

    def nbytes(self) -> int:
        # five int32 arrays, one float64, three int16
        per_row = self.lengths.nbytes * 7 + self.days.nbytes * 3
        postings = sum(segment.nbytes() for segment in self.segments)
        return self.column_bytes() + per_row + postings


_MONTH_STEMS = {Words().stem(month): number for number, month in enumerate(_MONTHS, 1)}


@dataclass
class _Matches:
    """One term's matches in one partition: rows and their column-weighted frequency."""

    rows: npt.NDArray[np.integer[Any]]
    frequency: FloatArray


class KeywordCache:
    """In-memory BM25 over the keyword rows of one database, refreshed from the log."""

    def __init__(self, source: _Source) -> None:
        self._source = source
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        self._generation = -1
        self._codes = RowCodes()
        self._words = Words()

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._generation = -1

    def query_stems(self, text: str) -> list[str] | None:
        """See :meth:`~session_manager.store._keyword.Words.query_stems`."""
        with self._lock:
            return self._words.query_stems(text)

    def search(
        self,
        stems: Sequence[str],
        partitions: Sequence[tuple[str, bool]],
        agent_id: str,
        k: int,
        filters: RowQuery,
        *,
        content_only: bool,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, bm25)`` over ``(partition, owner_only)`` pairs for the query
        ``stems`` (from :meth:`query_stems`)."""
        with self._lock:
            parts = [(self._refresh(name), owner_only) for name, owner_only in partitions]
            parts = [(part, owner_only) for part, owner_only in parts if part.size]
            if not parts:
                return []
            terms = [self._words.term(stem) for stem in stems]
            matched = [
                [
                    self._matches(part, term, stem, content_only)
                    for term, stem in zip(terms, stems, strict=True)
                ]
                for part, _ in parts
            ]
            rows = sum(part.size for part, _ in parts)
            hits = [sum(len(found[i].rows) for found in matched) for i in range(len(terms))]
            idf = [max(float(np.log((rows - n + 0.5) / (n + 0.5))), 1e-6) for n in hits]
            avgdl = sum(part.total_tokens for part, _ in parts) / rows
            ranked = [
                self._rank(part, per_term, idf, avgdl, k, owner_only, agent_id, filters)
                for (part, owner_only), per_term in zip(parts, matched, strict=True)
            ]
        seqs = np.concatenate([seqs for seqs, _ in ranked])
        scores = np.concatenate([scores for _, scores in ranked])
        order = np.lexsort((seqs, -scores))[:k]  # ties broken by storage order
        return [(int(seqs[i]), float(scores[i])) for i in order]

    def _matches(self, part: _Partition, term: int, stem: str, content_only: bool) -> _Matches:
        """Where ``term`` occurs in ``part``: in the event's content, or (unless
        ``content_only``) in its context too, weighted as FTS5 weighs the two columns."""
        rows, counts = part.postings(term)
        if content_only:  # (the content's weight is 1)
            return _Matches(rows, counts.astype(np.float64))
        # A neighbour's occurrences count in the context of the rows it neighbours. Each
        # neighbour map is one-to-one (a row is the previous event of one row at most), so a
        # fancy-indexed += adds each row once; a missing neighbour (-1) lands in a spare
        # last slot that is dropped.
        n = part.size
        frequency = np.zeros(n + 1, np.float64)
        frequency[rows] += counts
        context = counts * _CONTEXT_WEIGHT
        for neighbour in part.neighbours():
            frequency[neighbour[rows]] += context
        dated = part.date_rows(stem)
        if dated is not None:
            frequency[dated] += _CONTEXT_WEIGHT
        # (nonzero over a bool array is ~7x faster than over floats)
        hit = np.flatnonzero(frequency[:n] != 0)
        return _Matches(hit, frequency[hit])

    def _rank(
        self,
        part: _Partition,
        per_term: list[_Matches],
        idf: list[float],
        avgdl: float,
        k: int,
        owner_only: bool,
        agent_id: str,
        filters: RowQuery,
    ) -> tuple[npt.NDArray[np.int64], FloatArray]:
        """The best ``k`` rows of ``part`` that pass the filters, as ``(seqs, scores)``."""
        scores = np.zeros(part.size, np.float64)
        for found, weight in zip(per_term, idf, strict=True):
            rows, f = found.rows, found.frequency
            norm = _K1 * (1 - _B) + (_K1 * _B / avgdl) * part.sizes[rows]
            scores[rows] += (weight * (_K1 + 1)) * f / (f + norm)
        candidates = np.flatnonzero(scores != 0)
        mask = part.mask(self._codes, owner_only, agent_id, filters, rows=candidates)
        if mask is not None:
            candidates = candidates[mask]
        if candidates.size > k:
            candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        return part.seqs[candidates], scores[candidates]

    def _refresh(self, name: str) -> _Partition:
        generation = self._source.generation()
        if generation != self._generation:
            self._partitions.clear()
            self._generation = generation
        part = self._partitions.get(name)
        if part is None:
            part = self._partitions[name] = _Partition()
        postings: list[tuple[IntArray, IntArray, Counts]] = []
        while True:
            rows = self._source.keyword_rows(name, part.last_seq, _CHUNK)
            if rows:
                postings.append(part.append(self._codes, self._words, rows))
            if len(rows) < _CHUNK:
                break
        if postings:
            columns = [np.concatenate(column) for column in zip(*postings, strict=True)]
            postings.clear()  # (a bulk load's transient memory: the chunks go first)
            part.add_postings(*columns)
        return part

    def memory_bytes(self) -> int:
        with self._lock:
            return sum(part.nbytes() for part in self._partitions.values())
