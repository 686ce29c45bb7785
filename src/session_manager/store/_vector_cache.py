"""Exact vector search with numpy over per-partition matrices cached in memory.

Vectors live in the log's own file as little-endian float32 BLOBs (DESIGN.md §3: at 100k
events a brute-force dot product takes under a millisecond on this machine, exact, and needs no
extra service). Each partition (an agent's private sessions, or one shared pool) is cached as a
growing matrix; a refresh reads only vectors with a ``vid`` above the last one seen, so writes by
other processes become visible at the cost of one indexed query. When rows are deleted
anywhere, the store's generation counter moves and every cached matrix is rebuilt.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["VectorCache", "decode_vector", "encode_vector"]

Matrix = npt.NDArray[np.float32]
# Rows fetched per query on refresh: bounds the transient Python objects of a bulk load.
_CHUNK = 4096


def encode_vector(vector: npt.NDArray[Any]) -> bytes:
    """Little-endian float32 bytes: the storage format of every vector."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def decode_vector(blob: bytes) -> Matrix:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32, copy=False)


class _VectorSource(Protocol):
    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]: ...
    def vector_count(self, partition: str, after_vid: int) -> int: ...
    def generation(self) -> int: ...


class _Codes:
    """Interns strings (session ids, agent ids, kinds) as small ints for fast numpy masks."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.index)
        return found

    def lookup(self, value: str) -> int:
        return self.index.get(value, -1)


@dataclass
class _Partition:
    dim: int
    size: int = 0
    last_vid: int = 0
    matrix: Matrix = field(default_factory=lambda: np.zeros((0, 0), np.float32))
    seqs: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    sessions: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    agents: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    kinds: npt.NDArray[np.int32] = field(default_factory=lambda: np.zeros(0, np.int32))
    times: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    def reserve(self, extra: int, *, exact: bool = False) -> None:
        needed = self.size + extra
        capacity = len(self.seqs)
        if needed <= capacity:
            return
        # Grow geometrically so that a stream of small refreshes stays amortised O(n); a bulk
        # load reserves what it needs plus a little, so a 100k-event matrix is not doubled.
        capacity = needed + max(256, needed // 16) if exact else max(needed, capacity * 2, 256)
        matrix = np.zeros((capacity, self.dim), np.float32)
        matrix[: self.size] = self.matrix[: self.size]
        self.matrix = matrix
        for name, dtype in (
            ("seqs", np.int64),
            ("sessions", np.int32),
            ("agents", np.int32),
            ("kinds", np.int32),
            ("times", np.int64),
        ):
            grown = np.zeros(capacity, dtype)
            grown[: self.size] = getattr(self, name)[: self.size]
            setattr(self, name, grown)


@dataclass(frozen=True)
class VectorQuery:
    """Filters applied to the cached rows before ranking."""

    session_id: str | None = None
    kinds: frozenset[str] | None = None
    since_us: int | None = None
    until_us: int | None = None
    allowed_seqs: npt.NDArray[np.int64] | None = None  # from a SQL `where` filter


class VectorCache:
    """In-memory matrices of one database, refreshed incrementally from the store."""

    def __init__(self, store: _VectorSource) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        self._generation = -1
        self._sessions = _Codes()
        self._agents = _Codes()
        self._kinds = _Codes()

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._generation = -1

    def _refresh(self, name: str) -> _Partition | None:
        generation = self._store.generation()
        if generation != self._generation:
            self._partitions.clear()
            self._generation = generation
        part = self._partitions.get(name)
        after = part.last_vid if part else 0
        rows = self._store.vector_rows(name, after, _CHUNK)
        # A full first chunk means a bulk load: count once, so the matrix is sized once.
        total = self._store.vector_count(name, after) if len(rows) == _CHUNK else len(rows)
        while rows:
            if part is None:
                dim = len(rows[0][6]) // 4
                part = self._partitions[name] = _Partition(dim=dim)
                part.matrix = np.zeros((0, dim), np.float32)
            part.reserve(max(total, len(rows)), exact=total > len(rows))
            total -= len(rows)
            self._append(part, rows)
            rows = self._store.vector_rows(name, part.last_vid, _CHUNK) if total > 0 else []
        return part

    def _append(self, part: _Partition, rows: list[Any]) -> None:
        """Copy fetched rows into the partition's arrays (capacity already reserved)."""
        if rows:
            start, end = part.size, part.size + len(rows)
            blob = b"".join(row[6] for row in rows)
            part.matrix[start:end] = np.frombuffer(blob, dtype="<f4").reshape(len(rows), part.dim)
            part.seqs[start:end] = [row[1] for row in rows]
            part.sessions[start:end] = [self._sessions.code(row[2]) for row in rows]
            part.agents[start:end] = [self._agents.code(row[3]) for row in rows]
            part.kinds[start:end] = [self._kinds.code(row[4]) for row in rows]
            part.times[start:end] = [row[5] for row in rows]
            part.size = end
            part.last_vid = rows[-1][0]

    def search(
        self,
        query: Matrix,
        partitions: list[tuple[str, bool]],
        agent_id: str,
        k: int,
        filters: VectorQuery,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, cosine)`` over the given ``(partition, owner_only)`` pairs."""
        candidates_seq: list[npt.NDArray[np.int64]] = []
        candidates_score: list[npt.NDArray[np.float32]] = []
        with self._lock:
            for name, owner_only in partitions:
                part = self._refresh(name)
                if part is None or part.size == 0:
                    continue
                if part.dim != query.shape[0]:
                    continue  # vectors of another embedder; the manager refuses that earlier
                n = part.size
                mask = self._mask(part, n, owner_only, agent_id, filters)
                if mask is not None:
                    rows = np.flatnonzero(mask)
                    if rows.size == 0:
                        continue
                    scores = part.matrix[rows] @ query
                    seqs = part.seqs[rows]
                else:
                    scores = part.matrix[:n] @ query
                    seqs = part.seqs[:n]
                if scores.size > k:
                    top = np.argpartition(-scores, k - 1)[:k]
                    scores, seqs = scores[top], seqs[top]
                candidates_seq.append(seqs.copy())
                candidates_score.append(scores)
        if not candidates_seq:
            return []
        all_seq = np.concatenate(candidates_seq)
        all_score = np.concatenate(candidates_score)
        order = np.lexsort((all_seq, -all_score))[:k]  # ties broken by storage order
        return [(int(all_seq[i]), float(all_score[i])) for i in order]

    def _mask(
        self, part: _Partition, n: int, owner_only: bool, agent_id: str, filters: VectorQuery
    ) -> npt.NDArray[np.bool_] | None:
        mask: npt.NDArray[np.bool_] | None = None

        def narrow(condition: npt.NDArray[np.bool_]) -> None:
            nonlocal mask
            mask = condition if mask is None else (mask & condition)

        if owner_only:
            narrow(part.agents[:n] == self._agents.lookup(agent_id))
        if filters.session_id is not None:
            narrow(part.sessions[:n] == self._sessions.lookup(filters.session_id))
        if filters.kinds is not None:
            codes = [self._kinds.lookup(kind) for kind in filters.kinds]
            narrow(np.isin(part.kinds[:n], codes))
        if filters.since_us is not None:
            narrow(part.times[:n] >= filters.since_us)
        if filters.until_us is not None:
            narrow(part.times[:n] < filters.until_us)
        if filters.allowed_seqs is not None:
            narrow(np.isin(part.seqs[:n], filters.allowed_seqs))
        return mask

    def memory_bytes(self) -> int:
        return sum(p.matrix.nbytes + p.seqs.nbytes * 3 for p in self._partitions.values())
