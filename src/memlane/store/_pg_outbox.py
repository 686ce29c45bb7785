"""PostgreSQL's outbox, claimed with a lease (a mixin of
:class:`~memlane.store.postgres.PostgresStore`; not part of the public API).

One short statement stamps up to a batch of free rows with the batch's token and an expiry
(:data:`OUTBOX_LEASE_SECONDS`, renewed while the model runs); the model runs with no
connection or lock held; a second short transaction stores the vectors of the rows still
claimed by the batch and refreshes the keyword context of the events before them. Any number
of workers in any processes share the outbox and no event is embedded twice; a killed
worker's rows are free again within a lease. A search catching up its own scope, and
``flush``, wait for rows other workers hold rather than skipping or redoing them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.seams import OutboxRow, Tx
from ..text.shrink import PREVIEW_THRESHOLD
from ._lease import held

__all__ = ["OUTBOX_LEASE_SECONDS", "PgOutbox"]

#: how long an outbox claim lasts unless its worker renews it (every third of it, while the
#: model runs): the rows of a worker that died are free again within this
OUTBOX_LEASE_SECONDS = 10.0
# a flush or a search's catch-up polls this often (doubling) while others hold the rows it needs
_CLAIM_POLL_FIRST = 0.02
_CLAIM_POLL_MAX = 0.5
# the pg_advisory_lock key of the first embedder registration
_REGISTER_LOCK = 0x61736D01


class PgOutbox:
    """Claiming, renewing, releasing and finishing batches of outbox rows."""

    if TYPE_CHECKING:  # provided by PostgresStore (through SqlStore)

        def _read(
            self, sql: str, params: Sequence[Any] = (), tx: Tx | None = None
        ) -> list[Any]: ...
        def _run_alone(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...
        def atomic(self) -> AbstractContextManager[Tx]: ...
        def get_meta(self, key: str, tx: Tx | None = None) -> str | None: ...

    @contextmanager
    def claim_outbox(
        self,
        limit: int,
        partitions: Sequence[str] | None = None,
        *,
        force: bool = False,
        seqs: Sequence[int] | None = None,
    ) -> Iterator[_PgBatch]:
        """Claim up to ``limit`` outbox rows with a lease; no connection is held meanwhile.

        The claim is one short statement that stamps the rows with this batch's token and an
        expiry :data:`OUTBOX_LEASE_SECONDS` ahead, renewed while the batch is open; the model
        runs outside any transaction, and the vectors are stored by a second short
        transaction (:meth:`finish_batch`). A worker that dies stops renewing, so its rows are
        free again within a lease; one that fails hands them back at once.

        The background worker takes only rows nobody holds. A search's catch-up
        (``partitions``) and ``flush`` (``force``) wait for rows other workers hold and find
        them gone once those store their vectors — so no event is embedded twice. ``seqs``
        restricts the claim to those events.
        """
        batch = self._claim(limit, partitions, seqs, wait=partitions is not None or force)
        with held(batch, OUTBOX_LEASE_SECONDS):
            yield batch

    def _claim(
        self,
        limit: int,
        partitions: Sequence[str] | None,
        only: Sequence[int] | None,
        *,
        wait: bool,
    ) -> _PgBatch:
        """Claim rows nobody holds; with ``wait``, poll while others hold the only ones left."""
        token = uuid.uuid4().hex
        pause = _CLAIM_POLL_FIRST
        while True:
            rows = self._claim_free_rows(limit, partitions, only, token)
            if rows or not wait or not self._pending_rows(partitions, only):
                return _PgBatch(self, token, rows)
            time.sleep(pause)
            pause = min(pause * 2, _CLAIM_POLL_MAX)

    def _claim_free_rows(
        self,
        limit: int,
        partitions: Sequence[str] | None,
        only: Sequence[int] | None,
        token: str,
    ) -> list[OutboxRow]:
        where, params = self._outbox_where(partitions, only)
        # One statement, so one short transaction of its own (the pool's connections are in
        # autocommit). SKIP LOCKED: rows another claimer is stamping right now are theirs.
        rows = self._run_alone(
            "WITH picked AS MATERIALIZED ("
            f"SELECT o.seq FROM outbox o WHERE {where} AND o.claimed_until < now() "
            "ORDER BY o.seq LIMIT ? FOR UPDATE SKIP LOCKED"
            "), claimed AS ("
            "UPDATE outbox o SET claimed_until = now() + make_interval(secs => ?), "
            "claimed_by = ? FROM picked WHERE o.seq = picked.seq RETURNING o.seq, o.partition"
            ") SELECT c.seq, c.partition, e.content, e.session_id, e.agent_id, e.kind, "
            "e.created_us FROM claimed c JOIN events e ON e.seq = c.seq ORDER BY c.seq",
            (*params, limit, OUTBOX_LEASE_SECONDS, token),
        )
        return [
            OutboxRow(int(seq), partition, content, session, agent, kind, int(created))
            for seq, partition, content, session, agent, kind, created in rows
        ]

    def _pending_rows(self, partitions: Sequence[str] | None, only: Sequence[int] | None) -> bool:
        where, params = self._outbox_where(partitions, only)
        rows = self._read(f"SELECT EXISTS (SELECT 1 FROM outbox o WHERE {where})", params)
        return bool(rows[0][0])

    @staticmethod
    def _outbox_where(
        partitions: Sequence[str] | None, only: Sequence[int] | None = None
    ) -> tuple[str, list[Any]]:
        where, params = "TRUE", list[Any]()
        if partitions is not None:
            where, params = "o.partition = ANY(?)", [list(partitions)]
        if only is not None:
            where, params = f"{where} AND o.seq = ANY(?)", [*params, list(only)]
        return where, params

    def renew_lease(self, batch: _PgBatch) -> None:
        """Push the expiry of ``batch``'s rows a full lease ahead (they are still embedding)."""
        self._run_alone(
            "UPDATE outbox SET claimed_until = now() + make_interval(secs => ?) "
            "WHERE seq = ANY(?) AND claimed_by = ?",
            (OUTBOX_LEASE_SECONDS, batch.seqs, batch.token),
        )

    def _release(self, batch: _PgBatch) -> None:
        self._run_alone(
            "UPDATE outbox SET claimed_until = '-infinity', claimed_by = NULL "
            "WHERE seq = ANY(?) AND claimed_by = ?",
            (batch.seqs, batch.token),
        )

    def finish_batch(self, batch: _PgBatch, write: Callable[[Tx, list[OutboxRow]], None]) -> None:
        """Clear the batch's rows from the outbox and ``write(tx, kept)`` in the same short
        transaction (the embedder's registration and the vectors).

        Only rows still claimed by this batch are ``kept``: an event deleted meanwhile has
        no outbox row any more, and a row whose lease ran out and went to another worker, or
        that ``requeue_all`` queued again, is theirs to store.
        """
        with self.atomic() as tx:
            if self.get_meta("embedder_name", tx) is None:
                # the first vectors of the store: one process at a time records the embedder
                tx.execute("SELECT pg_advisory_xact_lock(?)", (_REGISTER_LOCK,))
            # outbox rows in seq order first, as deletes take them (see _lock_outbox)
            tx.execute(
                "SELECT seq FROM outbox WHERE seq = ANY(?) ORDER BY seq FOR UPDATE", (batch.seqs,)
            )
            kept = {
                int(row[0])
                for row in tx.execute(
                    "DELETE FROM outbox WHERE seq = ANY(?) AND claimed_by = ? RETURNING seq",
                    (batch.seqs, batch.token),
                ).fetchall()
            }
            write(tx, [row for row in batch.rows if row.seq in kept])
            self._write_keyword_text(tx, sorted(kept))
        batch.finished = True

    @staticmethod
    def _write_keyword_text(tx: Tx, seqs: Sequence[int]) -> None:
        """The keyword text of ``seqs`` (their content and, now, their context: their insert
        indexed the content alone, 0019_context_by_worker) and of the two events before each
        of them, whose context now includes it (0002_keyword_context in SQLite)."""
        if not seqs:
            return
        previous = tx.execute(
            "SELECT DISTINCT p.seq FROM events x CROSS JOIN LATERAL ("
            "SELECT p.seq FROM events p WHERE p.session_id = x.session_id AND p.seq < x.seq "
            "ORDER BY p.seq DESC LIMIT 2) p WHERE x.seq = ANY(?)",
            (list(seqs),),
        ).fetchall()
        ids = sorted({int(row[0]) for row in previous}.union(seqs))
        # Lock in seq order, so that workers sharing neighbours queue instead of deadlocking,
        # and no stronger than the UPDATE needs: FOR UPDATE would conflict with the KEY
        # SHARE locks that other workers' vector inserts take on these rows (their FK).
        tx.execute(
            "SELECT seq FROM events WHERE seq = ANY(?) ORDER BY seq FOR NO KEY UPDATE", (ids,)
        )
        # Before a row: a flattened output indexed whole is queued for the worker again
        # instead (its whole text is not in the database: 0007_deferred_digests). A row of
        # the batch that is digested (deferred, flattened or long) gets its context from its
        # digest (finish_deferred), which indexes it whole (over PREVIEW_THRESHOLD characters
        # an event is digested: records/validate.py's DIGEST_INLINE_CHARS).
        tx.execute(
            "UPDATE events e SET "
            "search_text = CASE WHEN e.deferred OR asm_whole_text(e.content, e.metadata) "
            "THEN e.search_text "
            "ELSE asm_search_text(e.session_id, e.seq, e.created_us, e.content) END, "
            "deferred = e.deferred OR asm_whole_text(e.content, e.metadata) "
            "WHERE e.seq = ANY(?) AND e.indexed AND NOT (e.seq = ANY(?) AND (e.deferred "
            "OR asm_whole_text(e.content, e.metadata) OR length(e.content) > ?))",
            (ids, list(seqs), PREVIEW_THRESHOLD),
        )


@dataclass
class _PgBatch:
    """Outbox rows claimed under ``token`` (:meth:`PgOutbox.claim_outbox`)."""

    store: PgOutbox
    token: str
    rows: list[OutboxRow]
    #: set once the vectors are stored: the claim is then spent, not released
    finished: bool = False

    @property
    def seqs(self) -> list[int]:
        return [row.seq for row in self.rows]

    def renew(self) -> None:
        self.store.renew_lease(self)

    def release(self) -> None:
        self.store._release(self)

    def finish(self, write: Callable[[Tx, list[OutboxRow]], None]) -> None:
        self.store.finish_batch(self, write)
