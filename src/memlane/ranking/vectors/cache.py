"""Exact vector search with numpy over per-partition matrices cached in memory.

Vectors live in the log's own file as BLOBs (half precision: ``codec.py``)
(docs/decisions/2026-11-23-quantized-vector-scan.md: at 100k events a brute-force dot product takes
under a millisecond on this machine, exact, and needs no extra service). Each partition (an agent's
private sessions, or one shared pool) is cached as a growing matrix; a refresh reads only vectors
with a ``vid`` above the last one seen, so writes by other processes become visible at the cost of
one indexed query. When rows are deleted anywhere, the caches mark them dead from the store's
deletion log (one indexed read per search; SQLite's migration 0008_deletion_log), and a partition a
quarter dead is read anew.

A partition of :data:`APPROXIMATE_FROM` rows or more is ranked by its vectors' 8-bit codes
first (``_quantized.py``) and the best few times k re-scored exactly. Past
:data:`IN_MEMORY_UNDER` rows it keeps no float32 copy, and its codes in 4 bits (at 1M events
of MiniLM, 184 MB instead of 1.9 GB), and re-scores with float32 vectors read from the store
by ``vid``, so every returned score is still the exact cosine.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ..budget import CacheBudget, process_budget
from ..partition_rows import PartitionRows, RowCodes, RowQuery
from .codec import decode_stored, decode_vector, decode_vectors, fits_half, vector_dim
from .exact import exact_scores
from .one_op import as_float32
from .quantized import (
    approximate_scores,
    approximate_scores4,
    binarize,
    hamming_candidates,
    quantize,
    quantize4,
)
from .snapshots import REWRITE_GROWTH, VectorSnapshots

#: the deletion log's rows the store keeps (SqliteVectors prunes to it)
DELETION_LOG_KEEP = 100_000

__all__ = ["VectorCache"]

Matrix = npt.NDArray[np.float32]
# Rows fetched per query on refresh: bounds the transient Python objects of a bulk load.
_CHUNK = 4096
# From this many rows to score, a search first ranks their 8-bit codes (``_quantized.py``)
# and re-scores the best ``_CANDIDATES`` times k of them exactly: at 100k rows 1.5 ms + re-scoring
# instead of 5 ms. Below it the float32 scan is as fast and needs no second pass.
APPROXIMATE_FROM = 16_384
# A partition of this many rows or more (and ranked by codes: APPROXIMATE_FROM) is saved as a
# snapshot file beside the store once built, for the next process's first search. Below it,
# reading the rows from the log costs a first search less than the file costs disk: a fresh
# process's first search over 20k rows took 81 ms with the snapshot and 159 ms without, for
# a 24.8 MB file (1,242 bytes an event, beside a database of ~1,900); at 100k rows 301 vs
# 585 ms for 124 MB (docs/decisions/2026-11-27-snapshots-only-where-they-pay.md).
SNAPSHOT_FROM = 65_536
_CANDIDATES = 4
# A partition of fewer rows (of capacity) keeps its vectors in half precision, as the store
# does, and converts them at each exact scan (1,000 rows: 0.045 ms instead of 0.018; 2,800:
# 0.14 instead of 0.06): a process serving many agents holds one such partition per agent,
# and memory decides how many it keeps (a 1,000-event agent: 2.0 → 0.8 MB with the codes
# below; docs/decisions/2026-11-28-a-byte-limit-for-the-caches.md). From it up to twice
# APPROXIMATE_FROM, float32: those scans are the latency-critical ones (16k rows: 0.36 ms
# against 1.2 in half precision).
HALF_UNDER = 4_096
# A partition keeps its vectors' float32 copy below this many rows (400 MB at 384 dims), and
# re-scores candidates from it; past it, its codes are 4-bit ones (half the memory, the same
# candidates: _quantized.py) and it re-scores from the store (~2.4 ms for hybrid's 200 candidates
# at 100k rows, which is why the copy stays while it is affordable).
IN_MEMORY_UNDER = 262_144
# From this many rows to score, the 8-bit pass itself is too slow (it reads every row's 384
# bytes: ~4 ms at 100k rows on this machine, ~23 ms at 1M) and is preceded by a 1-bit one: the
# rows' signs (48 bytes) by Hamming distance, whose best ``_BIT_CANDIDATES`` times k (at
# least ``_BIT_FLOOR``) go on to the 8-bit pass — 200 k in a partition that keeps its exact
# vectors in memory (re-scoring them costs nothing), 100 k past IN_MEMORY_UNDER. At 100k rows
# a semantic search takes ~1.9 ms instead of ~6, a hybrid one ~4 instead of ~8. This pass can
# lose a row: recall of the exact top k among its candidates, on real MiniLM vectors
# (bench/quantized_recall.py, LoCoMo dev questions), at 65,536 / 100,000 rows: k = 10 (4,096
# candidates) 0.9999 / 0.9995, k = 50 with 200 k 0.9997 / 0.9994 (100 k: 0.9986 / 0.9976),
# k = 166 1.0 / 0.9999 (docs/decisions/2026-11-27-one-bit-pass-from-65k-rows.md).
BITS_FROM = 65_536
_BIT_CANDIDATES = 100
_BIT_CANDIDATES_IN_MEMORY = 200
_BIT_FLOOR = 4_096
# ... and only when its candidates are at most one row in this many
_BIT_SHARE = 8
# A partition that keeps no float32 copy re-scores its candidates with vectors read from the
# store (~7 µs each; restore's semantic half, ~330 deep, read ~1,300 of them: 11 ms at 1M
# events), so it takes 2 k + 64 candidates, not 4 k. Recall of the exact top k among 2 k of
# the 4-bit codes' best, on real MiniLM vectors (10k and 40k rows, the LoCoMo development
# questions): 1.0 at k = 60, 166 and 332 (1.5 k: 0.999;
# docs/decisions/2026-11-23-quantized-vector-scan.md).
_STORED_CANDIDATES = 2
_STORED_EXTRA = 64


class _VectorSource(Protocol):
    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]: ...
    def vector_count(self, partition: str, after_vid: int) -> int: ...
    def vectors_of(self, vids: list[int]) -> dict[int, bytes]:
        """The stored vector BLOB of each of ``vids`` (the first column of
        :meth:`vector_rows`) that still has one."""
        ...

    def deletions(self, after_id: int) -> tuple[int, int, list[Any]]:
        """``(cleared, pruned_to, [(id, seq, partition), ...])``: see SqliteVectors."""
        ...

    def deletion_head(self) -> int: ...


class _Partition(PartitionRows):
    """One partition's vectors (a matrix row per event: exact and in 8 bits below
    :data:`IN_MEMORY_UNDER` rows, in 4 bits past it) and the rows' filter columns."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim
        self.last_vid = 0
        #: the vectors as the store keeps them, while the partition is small enough (empty
        #: once it is not): float32 while every row is scanned exactly, float16 — what the
        #: store holds, so the same values — once the partition is ranked by its codes and
        #: only candidates are re-scored (half the memory: 73 MB less at 100k rows)
        self.matrix: npt.NDArray[np.float32 | np.float16] = np.zeros((0, dim), np.float32)
        #: every vector so far fits half precision (an embedder that does not normalise may
        #: give components past ±65,504: then the matrix stays float32)
        self.half_ok = True
        #: every vector so far came from the store in half precision (SQLite's, and
        #: PostgreSQL's ``halfvec``; a PostgreSQL column still ``vector`` — pgvector before
        #: 0.7 — keeps float32, and so must a small partition of it, to score what it stores)
        self.stored_half = True
        self.in_memory = True
        #: whether it keeps codes and signs: only a partition that can be ranked by them
        #: (APPROXIMATE_FROM rows of capacity); a smaller one scans its exact vectors
        self.coded = False
        # the vectors in 8 bits, or in 4 (two to a byte) once not in memory (_quantized.py)
        self.codes = np.zeros((0, dim), np.uint8)
        # their signs in bits, one row of 64-bit words per word of the vector (_quantized.py)
        self.signs = np.zeros((-(-dim // 64), 0), np.uint64)
        self.vids = np.zeros(0, np.int64)  # where the store keeps each row's vector
        # whether the row's vector is a long event's passage (its span is read for a hit)
        self.passages = np.zeros(0, np.bool_)
        self.scales = np.zeros(0, np.float32)
        self.live = np.zeros(0, np.bool_)  # False: the vector was deleted since it was read
        self.dead = 0
        self.snapshot_size = 0  # rows in its snapshot file (_vector_snapshots.py), if any
        self.stamp = 0  # the store's generation its first rows were read at (idem)
        self.erased = False  # an erasure touched it since: it holds dead rows never saved

    def _resize(self, capacity: int) -> None:
        super()._resize(capacity)
        if not self.coded and capacity >= min(APPROXIMATE_FROM, IN_MEMORY_UNDER):
            # ranked by codes from now on: made from the exact vectors of the rows so far
            self.coded = True
            self.codes, self.scales = _in_chunks(quantize, self.matrix[: self.size])
            self.signs = np.ascontiguousarray(binarize(self.codes).T)
        if self.in_memory and capacity >= IN_MEMORY_UNDER:
            # big from now on: 4-bit codes rank (made from the exact vectors while they are
            # here), the store re-scores
            self.in_memory = False
            self.codes, self.scales = _in_chunks(quantize4, self.matrix[: self.size])
            self.matrix = np.zeros((0, self.dim), np.float32)
        if self.in_memory:
            self._grow("matrix", capacity, self._matrix_type(capacity))
        if self.coded:
            self._grow("codes", capacity, np.uint8)
            grown = np.zeros((self.signs.shape[0], capacity), np.uint64)
            grown[:, : self.size] = self.signs[:, : self.size]
            self.signs = grown
            self._grow("scales", capacity, np.float32)
        self._grow("vids", capacity, np.int64)
        self._grow("passages", capacity, np.bool_)
        self._grow("live", capacity, np.bool_, fill=1)

    def _grow(self, name: str, capacity: int, dtype: Any, fill: int = 0) -> None:
        old = getattr(self, name)
        if name == "matrix" and old.dtype == np.float16 and dtype == np.float32 and self.size:
            # (numpy converts half floats one at a time: onnxruntime's Cast, bit for bit)
            grown = np.zeros((capacity, self.dim), np.float32)
            grown[: self.size] = as_float32(old[: self.size])
            self.matrix = grown
            return
        super()._grow(name, capacity, dtype, fill)

    def _matrix_type(self, capacity: int) -> type[np.floating[Any]]:
        """While every vector fits half precision: float16 under HALF_UNDER rows of capacity
        (small partitions, many of them) and from twice APPROXIMATE_FROM (the partition then
        holds at least APPROXIMATE_FROM rows, so a full scan reads its codes and only
        candidates are converted); float32 in between, and otherwise."""
        if not self.half_ok:
            return np.float32
        if capacity < HALF_UNDER:
            return np.float16 if self.stored_half else np.float32
        return np.float16 if capacity >= 2 * APPROXIMATE_FROM else np.float32

    def keep(self, start: int, vectors: npt.NDArray[np.float32 | np.float16]) -> None:
        """Write rows ``start …`` of the exact matrix (capacity reserved); ``vectors`` as
        the store keeps them (float16 ones need no range check)."""
        if vectors.dtype != np.float16:
            self.stored_half = False
            if self.half_ok and not fits_half(vectors):
                self.half_ok = False
            # (a big partition rounds float32 rows to half precision, as the store now keeps
            # them; a small one keeps them as they are stored)
            small = self.capacity < HALF_UNDER
            if self.matrix.dtype == np.float16 and (small or not self.half_ok):
                self.matrix = as_float32(self.matrix)
        if self.matrix.dtype == np.float32 and vectors.dtype == np.float16:
            vectors = as_float32(vectors)
        self.matrix[start : start + len(vectors)] = vectors

    def nbytes(self) -> int:
        """What the partition's arrays hold (their capacity: rows reserved ahead count)."""
        return (
            self.matrix.nbytes
            + self.codes.nbytes
            + self.scales.nbytes
            + self.signs.nbytes
            + self.vids.nbytes
            + self.passages.nbytes
            + self.column_bytes()
        )

    def scans_exactly(self, count: int) -> bool:
        """Whether a scan of ``count`` of its rows scores every one of them exactly (else
        the 8-bit pass chooses candidates first): fewer than APPROXIMATE_FROM rows, whose
        vectors it holds (float16 ones are converted by onnxruntime: 12,799 rows in ~1.4 ms)."""
        return self.in_memory and (count < APPROXIMATE_FROM or not self.coded)

    def encode(self, vectors: Matrix) -> tuple[npt.NDArray[np.uint8], Matrix]:
        """``(codes, scales)`` of ``vectors`` as this partition keeps them."""
        return quantize(vectors) if self.in_memory else quantize4(vectors)

    def kill(self, seqs: npt.NDArray[np.int64]) -> None:
        """Mark the rows of ``seqs`` dead (their vectors were deleted)."""
        n = self.size
        hit = np.isin(self.seqs[:n], seqs) & self.live[:n]
        self.live[:n][hit] = False
        self.dead += int(hit.sum())

    def scores(
        self,
        rows: npt.NDArray[np.intp] | None,
        query: Matrix,
        k: int,
        stored: Callable[[npt.NDArray[np.int64], int], Matrix],
    ) -> tuple[npt.NDArray[np.intp], Matrix]:
        """The best ``k`` of ``rows`` (None: all) as ``(positions, cosines)``, and any row
        tied with the k-th: the caller breaks ties by storage order, so which tied rows make
        the cut does not depend on how the scan found them. ``stored`` reads the float32
        vectors of some vids from the store (a big partition's re-scoring)."""
        # Dead rows (deleted since they were read) are scanned with the rest and scored -inf:
        # cheaper than copying every live row's codes out (38 MB at 100k).
        dead = None if rows is not None or not self.dead else ~self.live[: self.size]
        count = self.size if rows is None else len(rows)
        if rows is not None and count * 2 > self.size:
            # Most of the partition (a session that is most of its agent's memory): scanning
            # every row and scoring the others -inf is cheaper than copying the chosen rows'
            # codes or vectors out (38 MB of codes at 100k rows, ~half the scan's time; the
            # float32 rows of a 10k-event session, ~3.5 of a 7 ms exact scan).
            dead = np.ones(self.size, np.bool_)
            dead[rows] = False
            rows = None
        if self.scans_exactly(count):
            picked = slice(0, self.size) if rows is None else rows
            exact = exact_scores(self.matrix[picked], query)
            positions = np.arange(self.size) if rows is None else rows
            if dead is not None:
                exact[dead] = -np.inf
        else:
            first = None
            multiple = _BIT_CANDIDATES_IN_MEMORY if self.in_memory else _BIT_CANDIDATES
            wanted = max(multiple * k, _BIT_FLOOR)
            # the 1-bit pass first, when it leaves the 8-bit one a small share of the rows:
            # copying many candidates' codes out costs more than scanning them all (restore's
            # depth of ~166 at 100k rows: 33k candidates, ~8 ms slower than no 1-bit pass)
            if count >= BITS_FROM and wanted * _BIT_SHARE <= count:
                excluded = dead
                if rows is not None:
                    excluded = np.ones(self.size, np.bool_)
                    excluded[rows] = False
                signs = binarize(quantize(query[None, :])[0])[0]
                first = hamming_candidates(self.signs[:, : self.size], signs, wanted, excluded)
            chosen = first if first is not None else rows
            codes = self.codes[: self.size] if chosen is None else self.codes[chosen]
            scales = self.scales[: self.size] if chosen is None else self.scales[chosen]
            approximate = approximate_scores if self.in_memory else approximate_scores4
            rough = approximate(codes, scales, query)
            if dead is not None and chosen is None:
                rough[dead] = -np.inf
            if self.in_memory:
                candidates = _best(rough, _CANDIDATES * k)
            else:
                candidates = _bounded(rough, _STORED_CANDIDATES * k + _STORED_EXTRA)
            positions = candidates if chosen is None else chosen[candidates]
            if self.in_memory:
                exact = exact_scores(self.matrix[positions], query)
            else:
                exact = exact_scores(stored(self.vids[positions], self.dim), query)
                exact[np.isnan(exact)] = -np.inf  # (a vector deleted meanwhile: NaN row)
            if dead is not None:
                exact[dead[positions]] = -np.inf
        best = _best(exact, k)
        best = best[exact[best] > -np.inf]
        return positions[best], exact[best]


def _in_chunks(
    encode: Callable[[Matrix], tuple[npt.NDArray[np.uint8], Matrix]],
    vectors: npt.NDArray[np.float32 | np.float16],
) -> tuple[npt.NDArray[np.uint8], Matrix]:
    """``encode(vectors)`` a chunk of rows at a time: its float temporaries are the size of
    its input (400 MB for a whole partition reaching IN_MEMORY_UNDER rows)."""
    if len(vectors) <= 16_384:
        return encode(vectors.astype(np.float32, copy=False))
    parts = [
        encode(vectors[at : at + 16_384].astype(np.float32, copy=False))
        for at in range(0, len(vectors), 16_384)
    ]
    return np.concatenate([c for c, _ in parts]), np.concatenate([s for _, s in parts])


def _bounded(scores: Matrix, wanted: int) -> npt.NDArray[np.intp]:
    """:func:`_best`, but at most ``2 · wanted`` rows: past that, the rows tied with the last
    are taken in storage order. Rows tie in their codes when their vectors are the same — one
    text recorded thousands of times — and each candidate is read from the store: an
    unbounded tie would read them all (the 1M benchmark's replayed vectors, ~500 copies of
    each, made every semantic search read ~500). Storage order is the final ranking's own
    tie-break, so the copies kept are the ones it would return."""
    best = _best(scores, wanted)
    if len(best) <= 2 * wanted:
        return best
    last = scores[best].min()
    above, tied = best[scores[best] > last], best[scores[best] == last]
    return np.concatenate((above, tied[: 2 * wanted - len(above)]))


def _best(scores: Matrix, k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` highest ``scores`` and of every score tied with the k-th."""
    if scores.size <= k:
        return np.arange(scores.size)
    kth = np.partition(scores, scores.size - k)[scores.size - k]
    return np.flatnonzero(scores >= kth)


def _first_of_each(
    seqs: npt.NDArray[np.int64], positions: npt.NDArray[np.intp], scores: Matrix
) -> tuple[npt.NDArray[np.intp], Matrix]:
    """``positions`` best first (ties by storage order), each seq's best row only."""
    order = np.lexsort((seqs[positions], -scores))
    positions, scores = positions[order], scores[order]
    _, first = np.unique(seqs[positions], return_index=True)
    if len(first) < len(positions):  # (best first: the first row of a seq is its best)
        first.sort()
        positions, scores = positions[first], scores[first]
    return positions, scores


def _best_distinct(
    seqs: npt.NDArray[np.int64], positions: npt.NDArray[np.intp], scores: Matrix, k: int
) -> tuple[npt.NDArray[np.intp], Matrix]:
    """:func:`_first_of_each` of the best rows holding ``k`` distinct seqs (or all of them),
    chosen from an exact scan's scores without sorting every row: sorting a 10k-event
    session's rows twice was ~3 ms of a restore's search. The best ``m`` rows with every tie
    of the m-th hold each of their seqs' best rows, and any seq they miss scores below all
    of theirs, so once they hold ``k`` seqs those are the best ``k``."""
    m = k
    while True:
        top = _best(scores, m)
        chosen, chosen_scores = _first_of_each(seqs, positions[top], scores[top])
        if len(chosen) >= k or len(top) >= len(scores):
            return chosen, chosen_scores
        m *= 4


def _holds_last(part: _Partition, vector: Matrix) -> bool:
    """Whether ``part``'s last row is ``vector`` (the log's): by its codes, or by its exact
    values in a partition too small to keep codes."""
    last = part.size - 1
    if part.coded:
        return bool(np.array_equal(part.encode(vector[None, :])[0][0], part.codes[last]))
    return bool(np.array_equal(as_float32(part.matrix[last : last + 1])[0], vector))


class VectorCache:
    """In-memory matrices of one database, refreshed incrementally from the store."""

    def __init__(
        self,
        store: _VectorSource,
        snapshots: VectorSnapshots | None = None,
        budget: CacheBudget | None = None,
    ) -> None:
        self._store = store
        self._snapshots = snapshots
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        #: the process's byte limit over every cache (ranking/budget.py)
        self._budget = budget or process_budget()
        # the index's clear counter, and the deletion log's id up to which every cached
        # partition has its deleted rows marked dead (migration 0008_deletion_log)
        self._cleared = -1
        self._seen = 0
        self._codes = RowCodes()

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._budget.forget(self)
            self._cleared = -1

    def _follow_deletions(self) -> None:
        """Mark the rows deleted since the last search dead, in every cached partition; on a
        clear of the index, a pruned log or a partition a quarter dead, read anew."""
        cleared, pruned, rows = self._store.deletions(self._seen)
        if cleared != self._cleared or pruned > self._seen or len(rows) > DELETION_LOG_KEEP:
            self._partitions.clear()
            self._budget.forget(self)
            self._cleared = cleared
            self._seen = self._store.deletion_head()  # (read before any row is loaded)
            return
        if not rows:
            return
        by_partition: dict[str, list[int]] = {}
        for _, seq, partition in rows:
            by_partition.setdefault(partition, []).append(int(seq))
        for partition, seqs in by_partition.items():
            part = self._partitions.get(partition)
            if part is not None:
                part.kill(np.asarray(seqs, np.int64))
                if part.dead * 4 > part.size:  # compact: the scan would read too many dead
                    del self._partitions[partition]
                    self._budget.forget(self, partition)
        self._seen = int(rows[-1][0])

    def _refresh(self, name: str) -> _Partition | None:
        self._follow_deletions()
        part = self._partitions.get(name)
        stamp = 0
        if part is None and self._snapshots is not None:
            part = self._from_snapshot(name)
            if part is None:  # (read before the rows: see _vector_snapshots.py)
                stamp = self._snapshots.stamp()
        after = part.last_vid if part else 0
        rows = self._store.vector_rows(name, after, _CHUNK)
        # A full first chunk means a bulk load: count once, so the matrix is sized once.
        total = self._store.vector_count(name, after) if len(rows) == _CHUNK else len(rows)
        while rows:
            if part is None:
                dim = vector_dim(rows[0][6])
                part = self._partitions[name] = _Partition(dim)
                part.stamp = stamp
            part.reserve(max(total, len(rows)), exact=total > len(rows))
            total -= len(rows)
            self._append(part, rows)
            rows = self._store.vector_rows(name, part.last_vid, _CHUNK) if total > 0 else []
        if (
            part is not None
            and self._snapshots is not None
            and part.coded
            and part.size >= max(APPROXIMATE_FROM, SNAPSHOT_FROM)
            and part.size >= part.snapshot_size * (1 + REWRITE_GROWTH)
            and not part.erased
        ):
            self._snapshots.save(name, part, self._codes, self._cleared, self._seen)
        return part

    def _keep_on_disk(self, name: str, part: _Partition) -> None:
        """Save a partition the byte limit drops, of any size, unless its snapshot is less than
        :data:`REWRITE_GROWTH` behind it: its next search loads the file (~1 ms at 1,000
        rows) instead of reading every vector from the log and coding its columns again
        (docs/decisions/2026-11-29-dropped-partitions-kept-on-disk.md). Not after an
        erasure touched it (it holds the erased vectors as dead rows)."""
        if self._snapshots is None or not part.size or part.erased:
            return
        if not part.in_memory and not part.coded:  # (never: a partition keeps one or both)
            return
        if part.snapshot_size and part.size < part.snapshot_size * (1 + REWRITE_GROWTH):
            return
        self._snapshots.save(name, part, self._codes, self._cleared, self._seen)

    def _from_snapshot(self, name: str) -> _Partition | None:
        """The partition from its snapshot file, if the index was not cleared since, the
        deletion log still reaches back to it (its later deletions are applied), and the log
        still holds its last vector, the same, where the snapshot says (not a file copied
        beside another database)."""
        assert self._snapshots is not None
        loaded = self._snapshots.load(name, self._cleared, self._codes, _Partition)
        if loaded is None:
            return None
        part: _Partition = loaded[0]
        since: int = loaded[1]
        cleared, pruned, later = self._store.deletions(since)
        found = self._store.vector_rows(name, part.last_vid - 1, 1)
        last = part.size - 1
        if (
            cleared != self._cleared
            or pruned > since
            or len(later) > DELETION_LOG_KEEP
            or not found
            or found[0][0] != part.last_vid
            or found[0][1] != part.seqs[last]
            or not _holds_last(part, decode_vector(found[0][6]))
        ):
            self._snapshots.remove(name)
            return None
        part.kill(np.asarray([seq for _, seq, partition in later if partition == name], np.int64))
        self._partitions[name] = part
        return part

    def _append(self, part: _Partition, rows: list[Any]) -> None:
        """Copy fetched rows into the partition's arrays (capacity already reserved)."""
        if rows:
            start, end = part.size, part.size + len(rows)
            stored = decode_stored([row[6] for row in rows], part.dim)
            if part.in_memory:
                part.keep(start, stored)
            if part.coded:
                vectors = as_float32(stored)
                eight, scales = quantize(vectors)
                part.signs[:, start:end] = binarize(eight).T
                part.codes[start:end], part.scales[start:end] = (
                    (eight, scales) if part.in_memory else quantize4(vectors)
                )
            part.vids[start:end] = [row[0] for row in rows]
            part.passages[start:end] = [bool(row[7]) for row in rows]
            part.append_columns(self._codes, rows, first=1)
            part.size = end
            part.last_vid = rows[-1][0]

    def search(
        self,
        query: Matrix,
        partitions: list[tuple[str, bool]],
        agent_id: str,
        k: int,
        filters: RowQuery,
    ) -> list[tuple[int, float, int, bool]]:
        """The best ``k`` events over the given ``(partition, owner_only)`` pairs, each once
        as ``(seq, cosine, vid, passage)`` of its best row (a long event has a row per
        passage; ``passage``: that row is one)."""
        candidates_seq: list[npt.NDArray[np.int64]] = []
        candidates_score: list[npt.NDArray[np.float32]] = []
        candidates_vid: list[npt.NDArray[np.int64]] = []
        candidates_passage: list[npt.NDArray[np.bool_]] = []
        with self._lock:
            for name in self._budget.take_dropped(self):  # (over the process's limit)
                dropped = self._partitions.pop(name, None)
                if dropped is not None:
                    self._keep_on_disk(name, dropped)
            for name, owner_only in partitions:
                part = self._refresh(name)
                if part is None or part.size == 0:
                    continue
                self._budget.charge(self, name, part.nbytes())
                if part.dim != query.shape[0]:
                    continue  # vectors of another embedder; the manager refuses that earlier
                mask = part.mask(self._codes, owner_only, agent_id, filters)
                if part.dead and mask is not None:  # (unfiltered: scores() skips the dead)
                    mask &= part.live[: part.size]
                rows = None if mask is None else np.flatnonzero(mask)
                if rows is not None and rows.size == 0:
                    continue
                positions, scores = self._distinct(part, rows, query, k)
                candidates_seq.append(part.seqs[positions])
                candidates_score.append(scores)
                candidates_vid.append(part.vids[positions])
                candidates_passage.append(part.passages[positions])
        if not candidates_seq:
            return []
        all_seq = np.concatenate(candidates_seq)
        all_score = np.concatenate(candidates_score)
        all_vid = np.concatenate(candidates_vid)
        all_passage = np.concatenate(candidates_passage)
        order = np.lexsort((all_seq, -all_score))[:k]  # ties broken by storage order
        return [
            (int(all_seq[i]), float(all_score[i]), int(all_vid[i]), bool(all_passage[i]))
            for i in order
        ]

    def _distinct(
        self,
        part: _Partition,
        rows: npt.NDArray[np.intp] | None,
        query: Matrix,
        k: int,
    ) -> tuple[npt.NDArray[np.intp], Matrix]:
        """The partition's best rows for ``k`` distinct events, each event's best row once:
        a long event's passages can fill the first k rows, so the scan asks for more until
        k events are found or none is left."""
        available = part.size if rows is None else len(rows)
        # The exact scan costs the same for any k (one product over the rows, which a retry
        # copies again: 8 → 31 ms p95 on sessions of long events), so it scores every row at
        # once and the rows are then chosen from its scores; the approximate scans ask the
        # partition for more as they go.
        exact = part.scans_exactly(available)
        want = available if exact else k
        while True:
            positions, scores = part.scores(rows, query, want, self._stored)
            if exact:
                return _best_distinct(part.seqs, positions, scores, k)
            positions, scores = _first_of_each(part.seqs, positions, scores)
            if len(positions) >= k or want >= available:
                return positions, scores
            want = min(available, want * 4)

    def _stored(self, vids: npt.NDArray[np.int64], dim: int) -> Matrix:
        """The float32 vectors of ``vids``, read from the store (one row each, in order). A
        vector deleted since the partition was cached is a row of NaN (the deletion log
        marks it dead at the next search)."""
        found = self._store.vectors_of([int(vid) for vid in vids])
        missing = np.full(dim, np.nan, "<f4").tobytes()
        return decode_vectors([found.get(int(vid), missing) for vid in vids], dim)

    def memory_bytes(self) -> int:
        return sum(p.nbytes() for p in self._partitions.values())
