"""SQLite's own vector index: float32 BLOBs in the log's file, ranked exactly by numpy.

The ``vectors`` table lives in the log's database (its rows go with their events, by foreign
key), so vectors commit in the same transactions as the outbox they drain. Searches rank the
per-partition matrices of :class:`~session_manager.store._vector_cache.VectorCache`, which
refreshes from this table incrementally (other processes write to the same file).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from .._seams import EventFilter, OutboxRow, Tx, Vectors
from ._partition_rows import RowQuery
from ._vector_cache import VectorCache, encode_vector
from ._vector_snapshots import VectorSnapshots
from ._vector_table import VectorTable
from .base import batched

__all__ = ["SqliteVectors"]


class _Log(Protocol):
    """What this index uses of its :class:`~session_manager.store.sqlite.SqliteStore`."""

    def within(self, tx: Tx | None) -> AbstractContextManager[Tx]: ...
    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
    def bump_generation(self, tx: Tx) -> None: ...
    def generation(self) -> int: ...
    @property
    def snapshot_folder(self) -> Path: ...
    @property
    def read_only(self) -> bool: ...


class SqliteVectors(VectorTable):
    """The :class:`~session_manager._seams.VectorIndex` of a SQLite log."""

    _store: _Log

    transactional = True
    exact = True
    multi_process = True
    multi_host = False
    name = "numpy"
    location = ""

    def __init__(self, store: _Log) -> None:
        self._store = store
        self._cache: VectorCache | None = None
        self._lock = threading.Lock()

    def upsert(self, tx: Tx | None, rows: Sequence[OutboxRow], vectors: Vectors) -> None:
        """Insert the vectors in ``tx`` (an event deleted meanwhile, or that has a vector
        already, is skipped)."""
        with self._store.within(tx) as write:
            write.executemany(
                "INSERT OR IGNORE INTO vectors (seq, partition, vector) "
                "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE seq = ?)",
                [
                    (row.seq, row.partition, encode_vector(vector), row.seq)
                    for row, vector in zip(rows, vectors, strict=True)
                ],
            )

    def delete(self, tx: Tx | None, seqs: Sequence[int]) -> None:
        with self._store.within(tx) as write:
            for chunk in batched(list(seqs)):
                marks = ", ".join("?" for _ in chunk)
                write.execute(f"DELETE FROM vectors WHERE seq IN ({marks})", chunk)
            self._store.bump_generation(write)

    def clear(self, tx: Tx | None) -> None:
        with self._store.within(tx) as write:
            write.execute("DELETE FROM vectors")
            self._store.bump_generation(write)

    def search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
        allowed: Callable[[], Sequence[int]],
    ) -> list[tuple[int, float]]:
        """Exact cosine over the cached per-partition matrices."""
        with self._lock:
            if self._cache is None:
                snapshots = VectorSnapshots(
                    self._store.snapshot_folder, writable=not self._store.read_only
                )
                self._cache = VectorCache(self, snapshots)
        filters = RowQuery.of(flt, allowed)
        agent = flt.scope.agent_id if flt.scope is not None else ""
        return self._cache.search(query, list(partitions), agent, k, filters)

    def close(self) -> None:
        with self._lock:
            self._cache = None

    # -- what the cache refreshes from -----------------------------------------------------

    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]:
        return self._store.read(
            "SELECT v.vid, v.seq, e.session_id, e.agent_id, e.kind, e.created_us, v.vector "
            "FROM vectors v JOIN events e ON e.seq = v.seq "
            "WHERE v.partition = ? AND v.vid > ? ORDER BY v.vid LIMIT ?",
            (partition, after_vid, limit),
        )

    def vectors_of(self, seqs: list[int]) -> dict[int, bytes]:
        found: dict[int, bytes] = {}
        for chunk in batched(seqs):
            marks = ", ".join("?" for _ in chunk)
            rows = self._store.read(
                f"SELECT seq, vector FROM vectors WHERE seq IN ({marks})", chunk
            )
            found.update((int(seq), bytes(blob)) for seq, blob in rows)
        return found

    def vector_count(self, partition: str, after_vid: int) -> int:
        rows = self._store.read(
            "SELECT count(*) FROM vectors WHERE partition = ? AND vid > ?", (partition, after_vid)
        )
        return int(rows[0][0])

    def generation(self) -> int:
        """Moves whenever vector rows disappear (any process): the cache then rebuilds."""
        return self._store.generation()
