"""SQLite's outbox, claimed with a lease (a mixin of
:class:`~memlane.store.sqlite.SqliteStore`, as ``_pg_outbox.py`` is PostgreSQL's; not part of
the public API).

A claim stamps up to a batch of free rows with an expiry (:data:`LEASE_SECONDS`, renewed
while the model runs), in one short write transaction; the model runs with no lock held; a
second short transaction stores the vectors of the rows whose events still exist, clears the
rows and refreshes the keyword context of the events before them. Workers in several
processes share the outbox; a killed worker's rows are free again within a lease.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.seams import OutboxRow, Tx
from ..core.searchable import CONTENT_CHARS
from ._lease import held
from .base import batched

__all__ = ["LEASE_SECONDS", "SqliteOutbox"]

#: How long a worker's claim on outbox rows lasts unless renewed (it is, every third of it,
#: while the worker embeds): a killed worker's rows are free again within this.
LEASE_SECONDS = 10.0


class SqliteOutbox:
    """Claiming, renewing, releasing and finishing batches of outbox rows; requeueing all."""

    if TYPE_CHECKING:  # provided by SqliteStore (and its keyword index)
        from ._sql_rows import SqlTx

        def atomic(self) -> AbstractContextManager[SqlTx]: ...
        def refresh_previous_context(
            self, conn: sqlite3.Connection, seqs: Sequence[int]
        ) -> None: ...
        def index_new_events(self, conn: sqlite3.Connection, seqs: Sequence[int]) -> None: ...

    @contextmanager
    def claim_outbox(
        self,
        limit: int,
        partitions: Sequence[str] | None = None,
        *,
        force: bool = False,
        seqs: Sequence[int] | None = None,
    ) -> Iterator[_SqliteBatch]:
        """Claim up to ``limit`` outbox rows for embedding, with a lease.

        Without ``partitions`` (the background worker), rows another worker holds are
        skipped, so workers in several processes share the work. The lease is short
        (:data:`LEASE_SECONDS`) and renewed while the batch is open, so a live worker's
        claim never runs out while a dead one's frees within seconds; a batch that fails
        hands its rows back at once. With ``partitions`` (a search catching up on its own
        scope) or ``force`` (flush) every pending row is taken: read-your-writes wins over
        the rare duplicate embedding, which is harmless (vectors are keyed by event).
        ``seqs`` restricts the claim to those events.
        """
        batch = _SqliteBatch(self, *self._claim(limit, partitions, force, seqs))
        with held(batch, LEASE_SECONDS):
            yield batch

    def _claim(
        self,
        limit: int,
        partitions: Sequence[str] | None,
        force: bool,
        only: Sequence[int] | None = None,
    ) -> tuple[list[OutboxRow], float]:
        now = time.time()
        lease = now + LEASE_SECONDS
        where: str = "claimed_until < ?"
        params: list[Any] = [now]
        if force:
            where, params = "1", []
        if partitions is not None:
            where = f"partition IN ({', '.join('?' for _ in partitions)})"
            params = list(partitions)
        if only is not None:
            where += f" AND seq IN ({', '.join('?' for _ in only)})"
            params.extend(only)
        with self.atomic() as tx:
            conn = tx.conn
            seqs = [
                row[0]
                for row in conn.execute(
                    f"SELECT seq FROM outbox WHERE {where} ORDER BY seq LIMIT ?", (*params, limit)
                )
            ]
            if not seqs:
                return [], lease
            marks = ", ".join("?" for _ in seqs)
            conn.execute(
                f"UPDATE outbox SET claimed_until = ? WHERE seq IN ({marks})", (lease, *seqs)
            )
            rows = conn.execute(
                "SELECT o.seq, o.partition, e.content, e.session_id, e.agent_id, e.kind, "
                f"e.created_us FROM outbox o JOIN events e ON e.seq = o.seq "
                f"WHERE o.seq IN ({marks}) ORDER BY o.seq",
                seqs,
            ).fetchall()
        return [OutboxRow(*row) for row in rows], lease

    def reclaim(self, seqs: Sequence[int], held_until: float, until: float) -> None:
        """Move the lease of the rows still held until ``held_until`` to ``until`` (0:
        release them). The expiry a batch set is its token: rows another worker took over
        meanwhile are left alone."""
        with self.atomic() as tx:
            for chunk in batched(list(seqs)):
                marks = ", ".join("?" for _ in chunk)
                tx.execute(
                    f"UPDATE outbox SET claimed_until = ? "
                    f"WHERE claimed_until = ? AND seq IN ({marks})",
                    (until, held_until, *chunk),
                )

    def finish_batch(
        self, rows: Sequence[OutboxRow], write: Callable[[Tx, list[OutboxRow]], None]
    ) -> None:
        """Clear ``rows`` from the outbox and, first, ``write(tx, kept)`` in the same
        transaction, ``kept`` being the rows whose events still exist."""
        with self.atomic() as tx:
            seqs = [row.seq for row in rows]
            existing: set[int] = set()
            for chunk in batched(seqs):
                marks = ", ".join("?" for _ in chunk)
                found = tx.execute(f"SELECT seq FROM events WHERE seq IN ({marks})", chunk)
                existing.update(int(row[0]) for row in found.fetchall())
            write(tx, [row for row in rows if row.seq in existing])
            tx.executemany("DELETE FROM outbox WHERE seq = ?", [(seq,) for seq in seqs])
            self.index_new_events(tx.conn, list(existing))

    def requeue_all(self, tx: Tx) -> int:
        """Drop the embedder identity, queue every event for embedding and rebuild the FTS5
        index, in ``tx``: the projections start again from the log (the vectors are the
        vector index's to clear). Returns the number of events queued."""
        tx.execute("DELETE FROM meta WHERE key LIKE 'embedder_%'")
        tx.execute(
            "INSERT OR IGNORE INTO outbox (seq, partition) "
            "SELECT seq, partition FROM events WHERE indexed"
        )
        tx.execute("UPDATE outbox SET claimed_until = 0")
        # The keyword index from the log again: emptied and unmarked first, so that the
        # updates below (whose triggers would rewrite rows) have none to rewrite, then every
        # indexed event marked and FTS5 rebuilt from the view (0016_keyword_text_from_the_log).
        tx.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
        tx.execute("UPDATE events SET keyword_row = 0 WHERE keyword_row")
        tx.execute(  # a flattened output's whole text is the worker's (finish_deferred)
            "UPDATE events SET deferred = 1 WHERE indexed AND NOT deferred "
            f"AND length(content) >= {CONTENT_CHARS} "
            "AND json_extract(metadata, '$.derived_content') = 1"
        )
        tx.execute("UPDATE events SET keyword_row = 1 WHERE indexed")
        tx.execute("INSERT INTO events_fts (events_fts) VALUES ('rebuild')")
        return int(tx.execute("SELECT count(*) FROM outbox").fetchone()[0])


@dataclass
class _SqliteBatch:
    store: SqliteOutbox
    rows: list[OutboxRow]
    held_until: float  # the lease's expiry: also what tells this batch's claim apart
    finished: bool = False

    def renew(self) -> None:
        until = time.time() + LEASE_SECONDS
        self.store.reclaim([row.seq for row in self.rows], self.held_until, until)
        self.held_until = until

    def release(self) -> None:
        self.store.reclaim([row.seq for row in self.rows], self.held_until, 0.0)

    def finish(self, write: Callable[[Tx, list[OutboxRow]], None]) -> None:
        self.store.finish_batch(self.rows, write)
        self.finished = True
