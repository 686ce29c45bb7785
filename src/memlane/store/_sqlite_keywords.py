"""SQLite's keyword index: FTS5 (the persistent index, kept by triggers and the worker; it
stores no text of its own, reading it from the view ``events_keyword_text``:
0016_keyword_text_from_the_log) and the in-memory BM25 ranking that answers scoped searches
(``_keyword_cache.py``).

A mixin of :class:`~memlane.store.sqlite.SqliteStore`, which creates the cache
(``_keywords``); the log's connections, reads and filters are the store's. Not part of the
public API.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core.seams import EventFilter, Tx
from ..core.searchable import CONTENT_CHARS
from ..ranking.keyword.cache import KeywordCache
from ..ranking.keyword.scoring import PassageTerms
from ..ranking.keyword.terms import KEYWORD_WEIGHTS, fts_query
from ..ranking.partition_rows import RowQuery
from .base import batched

__all__ = ["SqliteKeywordIndex"]


#: a search ranked by FTS5 first writes the keyword rows of at most this many of the newest
#: events still waiting for the worker
PENDING_ROWS = 256


class SqliteKeywordIndex:
    """Keyword search, the rows the in-memory index reads, and the FTS5 rows the worker
    writes (a neighbour's context, a large event's whole text)."""

    _keywords: KeywordCache

    if TYPE_CHECKING:  # provided by SqliteStore (through SqlStore)

        def _read(
            self, sql: str, params: Sequence[Any] = (), tx: Tx | None = None
        ) -> list[Any]: ...
        def event_where(self, flt: EventFilter, *, live: bool = True) -> tuple[str, list[Any]]: ...
        def select_seqs(self, flt: EventFilter, *, live: bool = True) -> list[int]: ...
        def atomic(self) -> AbstractContextManager[Any]: ...

        read_only: bool

    def keyword_search(
        self,
        text: str,
        flt: EventFilter,
        limit: int,
        *,
        content_only: bool,
        partitions: Sequence[tuple[str, bool]] | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over the event's content and its context (``0002_keyword_context``),
        weighted by :data:`~memlane.ranking.keyword.terms.KEYWORD_WEIGHTS`; higher is better.

        Ranked in memory (``_keyword_cache.py``) over ``partitions`` (the searcher's, as for
        vectors), or by FTS5 when no partitions are given, while the in-memory index of a
        partition is still being built (in the background: a process's first search does
        not wait for it), or when it cannot rank the query as FTS5 would (see
        :meth:`~memlane.ranking.keyword.terms.Words.query_stems`)."""
        if (
            partitions is None
            or flt.scope is None
            or not self._keywords.ready([name for name, _ in partitions])
        ):
            return self.fts_search(text, flt, limit, content_only=content_only)
        stems = self._keywords.query_stems(text)
        if stems is None:
            return self.fts_search(text, flt, limit, content_only=content_only)
        filters = RowQuery.of(flt, lambda: self.select_seqs(flt))
        return self._keywords.search(
            stems, partitions, flt.scope.agent_id, limit, filters, content_only=content_only
        )

    def keyword_passage_scores(
        self,
        text: str,
        partitions: Sequence[tuple[str, bool]],
        candidates: Sequence[int],
        passages_of: Callable[[list[int]], Mapping[int, PassageTerms]],
    ) -> dict[int, tuple[float, int]]:
        """See :meth:`~memlane.store.base.KeywordSearch.keyword_passage_scores`: by the
        in-memory index, when it ranked the search (FTS5 scores events whole)."""
        if not self._keywords.ready([name for name, _ in partitions]):
            return {}
        stems = self._keywords.query_stems(text)
        if stems is None:
            return {}
        return self._keywords.passage_scores(
            stems, partitions, candidates, passages_of, content_only=False
        )

    def keyword_index_ready(self, partitions: Sequence[str], wait: float = 0.0) -> bool:
        """Whether the in-memory index of ``partitions`` is built (see
        :meth:`~memlane.store.base.KeywordSearch.keyword_index_ready`)."""
        return self._keywords.wait_ready(partitions, wait)

    def fts_search(
        self, text: str, flt: EventFilter, limit: int, *, content_only: bool
    ) -> list[tuple[int, float]]:
        """FTS5's own BM25 ranking (negated: higher is better), filtered by ``flt``; the
        newest events still waiting for their keyword row get it first (read-your-writes)."""
        fts = fts_query(text)
        if not fts:
            return []
        self._index_pending()
        if content_only:
            fts = f"content : ({fts})"
        where, params = self.event_where(flt)
        content, context = (float(w) for w in KEYWORD_WEIGHTS)
        rows = self._read(
            f"SELECT e.seq, bm25(events_fts, {content!r}, {context!r}) AS rank FROM events_fts "
            "JOIN events e ON e.seq = events_fts.rowid JOIN sessions s ON s.id = e.session_id "
            f"WHERE events_fts MATCH ? AND {where} ORDER BY rank LIMIT ?",
            (fts, *params, limit),
        )
        return [(int(row[0]), -float(row[1])) for row in rows]

    def keyword_rows(self, partition: str, after_seq: int, limit: int) -> list[Any]:
        """What the keyword cache indexes: see ``_keyword_cache._Source``."""
        # The payload is read only for a flattened output cut at CONTENT_CHARS.
        return self._read(
            "SELECT e.seq, e.session_id, e.agent_id, e.kind, e.created_us, e.content, "
            f"CASE WHEN length(e.content) >= {CONTENT_CHARS} "
            "AND json_extract(e.metadata, '$.derived_content') = 1 "
            "THEN coalesce((SELECT lp.payload FROM large_payloads lp WHERE lp.seq = e.seq), "
            "e.payload) END FROM events e "
            "WHERE e.partition = ? AND e.seq > ? AND e.indexed ORDER BY e.seq LIMIT ?",
            (partition, after_seq, limit),
        )

    def has_keyword_rows_beyond(self, partition: str, count: int) -> bool:
        """Whether ``partition`` holds more than ``count`` indexed events (an index range
        scan of ``count`` entries at most)."""
        return bool(
            self._read(
                "SELECT 1 FROM events WHERE partition = ? AND indexed LIMIT 1 OFFSET ?",
                (partition, count),
            )
        )

    def generation(self) -> int:
        """Moves whenever events or vectors disappear (any process): caches then rebuild."""
        rows = self._read("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0

    # -- what the worker writes into FTS5 --------------------------------------------------

    def _index_pending(self) -> None:
        """Write the keyword rows of the newest :data:`PENDING_ROWS` events in the outbox
        that have none yet (the worker writes them as it embeds): a search by FTS5 finds
        what was just recorded, as the in-memory index does. More than that waits for the
        worker, as their vectors do."""
        if self.read_only:
            return
        missing = self._read(
            f"SELECT o.seq FROM (SELECT seq FROM outbox ORDER BY seq DESC LIMIT {PENDING_ROWS}) o "
            "JOIN events e ON e.seq = o.seq WHERE NOT e.keyword_row"
        )
        if missing:
            with self.atomic() as tx:
                self.index_new_events(tx.conn, [int(row[0]) for row in missing])

    @staticmethod
    def index_new_events(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
        """Write the keyword rows of the events ``seqs`` that have none yet (those indexed
        and still existing), and rewrite the rows of their neighbours whose context they
        join (0016_keyword_text_from_the_log: an event's context holds its neighbours that
        have a row; FTS5 reads both texts from the view, so each neighbour's row is taken out
        before the new events count as indexed and put back after).

        The outbox worker calls this for the batch it embeds (0015_keyword_rows_by_worker):
        in ``record()`` the row cost a third of the call, and FTS5 merged its segments in
        some commits (a new segment a transaction): ``record()`` p50 0.87 → 0.53 ms and p99
        5.6 → 1.3 ms without it (docs/decisions/2026-11-27-keyword-rows-by-the-worker.md).
        """
        new: list[int] = []
        for chunk in batched(sorted(set(seqs))):
            marks = ", ".join("?" for _ in chunk)
            found = conn.execute(
                f"SELECT seq FROM events WHERE seq IN ({marks}) AND indexed AND NOT keyword_row",
                chunk,
            )
            new.extend(int(row[0]) for row in found.fetchall())
        if not new:
            return
        # Every event whose context a new one joins is among the two indexed events on
        # either side of it now (tests/test_keyword_rows.py).
        near = (
            "SELECT p.seq FROM events p WHERE p.session_id = e.session_id "
            "AND p.seq {} e.seq AND p.keyword_row ORDER BY p.seq {} LIMIT 2"
        )
        touched: set[int] = set()
        for chunk in batched(new):
            marks = ", ".join("?" for _ in chunk)
            for side in (near.format("<", "DESC"), near.format(">", "ASC")):
                rows = conn.execute(
                    f"SELECT n.seq FROM events e JOIN events n ON n.seq IN ({side}) "
                    f"WHERE e.seq IN ({marks})",
                    chunk,
                ).fetchall()
                touched.update(int(row[0]) for row in rows)
        out = [(seq,) for seq in sorted(touched)]
        conn.executemany("DELETE FROM events_fts WHERE rowid = ?", out)
        for chunk in batched(new):
            marks = ", ".join("?" for _ in chunk)
            conn.execute(f"UPDATE events SET keyword_row = 1 WHERE seq IN ({marks})", chunk)
        for chunk in batched(sorted(touched.union(new))):
            marks = ", ".join("?" for _ in chunk)
            conn.execute(
                "INSERT INTO events_fts (rowid, content, context) "
                f"SELECT seq, content, context FROM events_keyword_text WHERE seq IN ({marks})",
                chunk,
            )

    def finish_deferred(
        self, tx: Tx, seq: int, token_count: int, preview: str | None, text: str | None
    ) -> bool:
        """See :meth:`Store.finish_deferred <memlane.store.base.Store.finish_deferred>`:
        the keyword row then holds the whole text (the update's triggers rewrite it, and its
        neighbours', if the event has one; otherwise the worker writes it from the view). A
        whole text that is not the event's content is kept in ``keyword_text``, the one text
        the log cannot give back (0016_keyword_text_from_the_log)."""
        if text is not None:
            known = tx.execute(
                "SELECT content FROM events WHERE seq = ? AND deferred", (seq,)
            ).fetchone()
            # (while deferred, the view reads the head of the content: this changes nothing
            # FTS5 holds until the update below)
            if known is not None and text != known[0]:
                tx.execute(
                    "INSERT OR REPLACE INTO keyword_text (seq, text) VALUES (?, ?)", (seq, text)
                )
            elif known is not None:
                tx.execute("DELETE FROM keyword_text WHERE seq = ?", (seq,))
        cursor = tx.execute(
            "UPDATE events SET token_count = ?, payload_preview = ?, deferred = 0 "
            "WHERE seq = ? AND deferred",
            (token_count, preview, seq),
        )
        return bool(cursor.rowcount)
