"""PostgreSQL's own vector index: pgvector columns in the log's schema.

The ``vectors`` table lives beside the events (its rows go with them, by foreign key), so
vectors commit in the same transactions as the outbox they drain. Search is exact by default
(``vector_index=exact``): ranked in memory by SQLite's vector cache fed in commit order
(``_pg_caches.py``), or in SQL by ``<=>`` with ``?search_cache=off``; ``vector_index=hnsw``
adds an HNSW index searched with iterative scans (docs/backends.md has the measurements).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, Protocol

from ..core.seams import EventFilter, OutboxRow, Tx, VectorMatch, Vectors
from ..errors import InvalidInput
from ..ranking.partition_rows import RowQuery
from ._pg_caches import PARTS, PgVectorCache
from ._pg_feed import Connect
from ._vector_table import VectorTable

__all__ = ["HNSW_EF_CONSTRUCTION", "HNSW_EF_SEARCH", "HNSW_M", "PgVectors"]

#: HNSW search settings (vector_index=hnsw): see docs/backends.md for the measurement
HNSW_EF_SEARCH = 200
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64


class _Log(Protocol):
    """What this index uses of its :class:`~memlane.store.postgres.PostgresStore`."""

    def within(self, tx: Tx | None) -> AbstractContextManager[Tx]: ...
    def atomic(self) -> AbstractContextManager[Tx]: ...
    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
    def get_meta(self, key: str, tx: Tx | None = None) -> str | None: ...
    def event_where(self, flt: EventFilter, *, live: bool = True) -> tuple[str, list[Any]]: ...


class PgVectors(VectorTable):
    """The :class:`~memlane.core.seams.VectorIndex` of a PostgreSQL log."""

    _store: _Log

    transactional = True
    multi_process = True
    multi_host = True
    name = "pgvector"
    location = ""

    def __init__(self, store: _Log, kind: str, *, cache_from: Connect | None = None) -> None:
        """``cache_from``: rank exact searches in memory, reading through these connections."""
        self._store = store
        self.kind = kind  # "exact" or "hnsw"
        self.exact = kind == "exact"
        self._cache = PgVectorCache(cache_from) if cache_from and self.exact else None
        self._dim: int | None = None
        self._dim_lock = threading.Lock()

    def upsert(self, tx: Tx | None, rows: Sequence[OutboxRow], vectors: Vectors) -> None:
        """Insert the vectors in ``tx`` (an event deleted meanwhile, or that has a vector
        already, is skipped); the first ones create the HNSW index when asked for."""
        with self._store.within(tx) as write:
            write.executemany(
                "INSERT INTO vectors (seq, partition, agent_id, embedding, part, start, stop) "
                "SELECT ?, ?, agent_id, ?, ?, ?, ? FROM events WHERE seq = ? "
                "ON CONFLICT (seq, part) DO NOTHING",
                [
                    (row.seq, row.partition, vector, row.part, row.start, row.stop, row.seq)
                    for row, vector in zip(rows, vectors, strict=True)
                ],
            )
            if self.kind == "hnsw" and rows:
                write.execute(
                    "CREATE INDEX IF NOT EXISTS vectors_hnsw ON vectors USING hnsw "
                    f"((embedding::vector({int(vectors.shape[1])})) vector_cosine_ops) "
                    f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
                )

    def delete(self, tx: Tx | None, seqs: Sequence[int]) -> None:
        with self._store.within(tx) as write:
            write.execute("DELETE FROM vectors WHERE seq = ANY(?)", (list(seqs),))

    def clear(self, tx: Tx | None) -> None:
        with self._store.within(tx) as write:
            write.execute("DELETE FROM vectors")
            write.execute("DROP INDEX IF EXISTS vectors_hnsw")
        with self._dim_lock:
            self._dim = None

    def search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
        allowed: Callable[[], Sequence[int]],
    ) -> list[VectorMatch]:
        """Exact cosine over the cached per-partition matrices (``allowed()`` answering
        what only the log can filter), or in SQL without the cache. There, isolation comes
        from the scope: ``Scope.partition_sql`` when it is the only restriction, else
        ``Scope.sql`` with the rest of ``flt``. Each event once, by its best passage."""
        if flt.scope is None:
            raise InvalidInput("A vector search needs a scope.")
        if self._cache is not None:
            filters = RowQuery.of(flt, allowed)
            found = self._cache.search(query, list(partitions), flt.scope.agent_id, k, filters)
            return self._matches(
                [(seq, score, vid % PARTS, passage) for seq, score, vid, passage in found]
            )
        dim = self._vector_dim()
        if dim is None or dim != len(query):
            return []
        store = self._store
        # (the searcher leaves expired events out of every ranking itself)
        rest, _ = store.event_where(replace(flt, scope=None, include_shared=True), live=False)
        if rest == "TRUE":
            # only the scope: read the vectors table alone, by partition (measured: 2x faster
            # than through the events at 100k rows; docs/backends.md)
            source = "vectors v"
            where, params = flt.scope.partition_sql(list(partitions))
        else:
            # filters too: start from the events they select (their indexes), scope by SQL
            source = "vectors v JOIN events e ON e.seq = v.seq "
            source += "JOIN sessions s ON s.id = e.session_id"
            where, params = store.event_where(flt, live=False)
        if self.kind == "hnsw":
            distance = f"(v.embedding::vector({dim})) <=> ?::vector({dim})"
        else:
            # 1 - the dot product of the stored half floats, as float32, with the query: what
            # the caches compute (SQLite's and these), the cosine of unit vectors. pgvector's
            # cosine would divide by the stored vector's norm, which rounding to half
            # precision moves off 1 by up to ~1e-4. (A no-op cast on a ``vector`` column.)
            distance = "1 + (v.embedding::vector <#> ?)"
        sql = (
            f"SELECT v.seq, v.part, {distance} AS distance FROM {source} "
            f"WHERE {where} ORDER BY {distance} LIMIT ?"
        )
        # a long event's passages may take several of the nearest rows: ask for more until
        # k events are found or the rows run out
        want = k
        while True:
            if self.kind == "exact":
                rows = store.read(
                    f"SELECT seq, 1 - distance, part FROM ({sql}) hits ORDER BY distance, seq",
                    (query, *params, query, want),
                )
            else:
                with store.atomic() as tx:
                    tx.execute(f"SET LOCAL hnsw.ef_search = {max(HNSW_EF_SEARCH, want)}")
                    tx.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
                    # relaxed_order may return neighbours slightly out of order: sort again
                    rows = tx.execute(
                        f"WITH hits AS MATERIALIZED ({sql}) "
                        "SELECT seq, 1 - distance, part FROM hits ORDER BY distance, seq",
                        (query, *params, query, want),
                    ).fetchall()
            best: dict[int, tuple[int, float, int, bool]] = {}
            for seq, score, part in rows:
                best.setdefault(int(seq), (int(seq), float(score), int(part), True))
            if len(best) >= k or len(rows) < want:
                return self._matches(list(best.values())[:k])
            want *= 4

    def _matches(self, found: list[tuple[int, float, int, bool]]) -> list[VectorMatch]:
        """``(seq, score, part, passage)`` as :class:`VectorMatch`, each with its passage's
        span, read for those that may be one (the cache knows; the SQL path does not)."""
        spans: dict[tuple[int, int], tuple[int, int]] = {}
        passages = [seq for seq, _, _, passage in found if passage]
        if passages:  # (part 0 is a whole event or a long one's first passage: ask for all)
            rows = self._store.read(
                "SELECT seq, part, start, stop FROM vectors WHERE seq = ANY(?) AND stop > 0",
                (passages,),
            )
            spans = {(int(seq), int(part)): (int(a), int(b)) for seq, part, a, b in rows}
        return [
            VectorMatch(seq, score, part, *spans.get((seq, part), (0, 0)))
            for seq, score, part, _ in found
        ]

    def _vector_dim(self) -> int | None:
        if self._dim is None:
            value = self._store.get_meta("embedder_dim")
            with self._dim_lock:
                self._dim = int(value) if value is not None else None
        return self._dim

    def close(self) -> None:
        """Frees the cache; the log's pool holds the connections."""
        if self._cache is not None:
            self._cache.invalidate()
