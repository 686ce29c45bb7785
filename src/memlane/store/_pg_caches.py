"""SQLite's in-memory search caches, fed from PostgreSQL in commit order.

The keyword cache (FTS5's BM25 over postings, ``_keyword_cache.py``) and the vector cache
(exact cosine over the stored vectors with an 8-bit first pass, ``_vector_cache.py``) rank the
same way whatever fills them; only how they learn of new and deleted rows differs. SQLite's
refresh reads rows above the last ``seq`` seen, which a PostgreSQL sequence cannot support
(see ``_pg_feed.py``), so these subclasses replace ``_refresh`` alone: each refresh asks the
:class:`~memlane.store._pg_feed.CommitFeed` which partitions lost rows (they are
dropped and loaded again) and which rows committed since the last read (they are appended).

Why the caches rather than SQL: at 100k events in one agent's scope, pgvector's exact plan
takes ~45 ms and ``ts_rank`` has no inverse document frequency (LoCoMo any@10 2.9 points
under BM25); with the caches PostgreSQL ranks exactly as SQLite does, in the same time plus a
round trip or two (docs/backends.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from ..ranking.keyword.cache import KeywordCache, _NewPostings
from ..ranking.keyword.cache import _Partition as _KeywordPartition
from ..ranking.vectors.cache import Matrix, VectorCache
from ..ranking.vectors.cache import _Partition as _VectorPartition
from ..ranking.vectors.codec import decode_vector, vector_dim
from ._pg_feed import CommitFeed, Connect, _cursor

#: a vid's room for a passage number: seq * PARTS + part (text/passages.py's MAX_PASSAGES
#: is below it)
PARTS = 64

__all__ = ["PARTS", "PgKeywordCache", "PgVectorCache"]

#: a vid's room for a passage number: seq * PARTS + part (text/passages.py's MAX_PASSAGES
#: is below it)
PARTS = 64


class _FedByFeed:
    """Stands in for the SQLite source the base caches expect: the subclasses below read
    their rows through a :class:`CommitFeed` and never call it."""

    def keyword_rows(self, partition: str, after_seq: int, limit: int) -> list[Any]:
        raise NotImplementedError

    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]:
        raise NotImplementedError

    def vector_count(self, partition: str, after_vid: int) -> int:
        raise NotImplementedError

    def vectors_of(self, seqs: list[int]) -> dict[int, bytes]:
        raise NotImplementedError

    def deletions(self, after_id: int) -> tuple[int, int, list[Any]]:
        raise NotImplementedError

    def deletion_head(self) -> int:
        raise NotImplementedError

    def generation(self) -> int:
        raise NotImplementedError

    def has_keyword_rows_beyond(self, partition: str, count: int) -> bool:
        raise NotImplementedError


class PgKeywordCache(KeywordCache):
    """BM25 over the indexed events of a PostgreSQL store, as SQLite ranks them."""

    def __init__(self, connect: Connect) -> None:
        # (built by the search that needs it: the feed has no generation for ready())
        super().__init__(_FedByFeed(), background=False)
        self._feed = CommitFeed(
            connect,
            "events",
            # the payload of a flattened output cut at its content: searched whole
            "t.seq, t.session_id, t.agent_id, t.kind, t.created_us, t.content, "
            "CASE WHEN asm_whole_text(t.content, t.metadata) THEN t.payload END",
            "events t",
        )
        # partition -> session -> the highest seq held: a row of a session arriving after a
        # later one of the same session would be chained to the wrong neighbours
        self._session_tails: dict[str, dict[str, int]] = {}

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._budget.forget(self)
            self._session_tails.clear()
            self._feed.forget()

    def _refresh(self, name: str, chunks: int | None = None) -> _KeywordPartition:
        feed = self._feed
        with feed.reading() as conn:
            xmin, dropped = feed.dropped(conn)
            for gone in list(self._partitions) if dropped is None else dropped:
                self._partitions.pop(gone, None)
                self._budget.forget(self, gone)
                self._session_tails.pop(gone, None)
                feed.forget(gone)
            part = self._partitions.get(name)
            if part is not None and name in feed.marks:
                rows = feed.new_rows(conn, name, xmin)
                tails = self._session_tails[name]
                if not any(int(row[0]) < tails.get(row[1], -1) for row in rows):
                    return self._append(name, part, [rows] if rows else [])
                # Within a session, writes queue on the session's row lock, so its events
                # commit in seq order; this is the safety net should they not.
            part = self._partitions[name] = _KeywordPartition()
            self._session_tails[name] = {}
            return self._append(name, part, feed.load(conn, name, xmin))

    def _append(
        self, name: str, part: _KeywordPartition, chunks: Iterable[list[Any]]
    ) -> _KeywordPartition:
        tails = self._session_tails[name]
        added: list[_NewPostings] = []
        for rows in chunks:
            added.append(part.append(self._codes, self._words, rows))
            tails.update((row[1], int(row[0])) for row in rows)  # rows come in seq order
        if added:
            part.add_postings(added)
        return part


class PgVectorCache(VectorCache):
    """Exact cosine over the vectors of a PostgreSQL store, as SQLite ranks them."""

    def __init__(self, connect: Connect) -> None:
        super().__init__(_FedByFeed())
        # a row's vid (where the store keeps its vector) is its event and passage in one
        # number, seq * PARTS + part: what _stored reads back
        self._feed = CommitFeed(
            connect,
            "vectors",
            f"t.seq * {PARTS} + t.part, t.seq, e.session_id, e.agent_id, e.kind, "
            "e.created_us, t.embedding, t.stop > 0",
            "vectors t JOIN events e ON e.seq = t.seq",
            seq_at=1,
        )

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._budget.forget(self)
            self._feed.forget()

    def _stored(self, vids: npt.NDArray[np.int64], dim: int) -> Matrix:
        """A big partition's re-scoring: the vectors of ``vids`` as float32 (NaN rows for
        any deleted meanwhile), read from pgvector by event and part (``vid`` is
        ``seq * PARTS + part`` here)."""
        matrix = np.full((len(vids), dim), np.nan, np.float32)
        where = {int(vid): i for i, vid in enumerate(vids)}
        seqs = sorted({vid // PARTS for vid in where})
        with self._feed.reading() as conn, _cursor(conn, True) as cursor:
            cursor.execute("SELECT seq, part, embedding FROM vectors WHERE seq = ANY(%s)", (seqs,))
            for seq, part, blob in cursor.fetchall():
                at = where.get(int(seq) * PARTS + int(part))
                if at is not None:
                    matrix[at] = decode_vector(blob)
        return matrix

    def _refresh(self, name: str) -> _VectorPartition | None:
        feed = self._feed
        with feed.reading() as conn:
            xmin, dropped = feed.dropped(conn)
            for gone in list(self._partitions) if dropped is None else dropped:
                self._partitions.pop(gone, None)
                self._budget.forget(self, gone)
                feed.forget(gone)
            part = self._partitions.get(name)
            if part is not None and name in feed.marks:
                rows = feed.new_rows(conn, name, xmin, binary=True)
                return self._grow(name, part, [rows] if rows else [])
            self._partitions.pop(name, None)
            total = feed.count(conn, name)
            return self._grow(name, None, feed.load(conn, name, xmin, binary=True), total)

    def _grow(
        self,
        name: str,
        part: _VectorPartition | None,
        chunks: Iterable[list[Any]],
        total: int = 0,
    ) -> _VectorPartition | None:
        for rows in chunks:
            if part is None:
                part = self._partitions[name] = _VectorPartition(vector_dim(rows[0][6]))
            # a load sizes the matrix once (``total`` counted before it began)
            part.reserve(max(total - part.size, len(rows)), exact=total > part.size + len(rows))
            self._append(part, rows)
        return part
