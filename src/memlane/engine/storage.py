"""The log store and the vector index, composed: what the engine opens and writes through.

Two narrow interfaces meet here and nowhere else (docs/architecture.md, "Storage seams"):
:class:`~memlane.store.base.Store` (the log: sessions, events, the outbox, keyword
search) and :class:`~memlane.core.seams.VectorIndex` (upsert, delete, search, clear,
count). Neither package imports the other. What needs both lives in :class:`Storage`:

* **storing a batch**: a transactional index (the log's own SQLite or pgvector table) writes
  its vectors in the transaction that clears the outbox rows; an external one (Chroma) is
  upserted first, so a crash in between re-embeds and upserts again (idempotent);
* **deletes**: the log's delete takes a transactional index's rows with it (foreign keys); an
  external index follows after the commit, and a delete it cannot take now is kept in the
  log's ``meta`` and retried by the worker's :meth:`Storage.maintenance`;
* **audits**: now and then the worker compares an external index with the log and queues
  again what a lost or emptied index no longer holds;
* **reindex**: the log queues every event again, and the index forgets every vector.

Not part of the public API.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..core.clock import now_us
from ..core.seams import EventFilter, OutboxRow, Tx, VectorIndex, VectorMatch, Vectors
from ..errors import StoreError
from ..index import open_index
from ..store import open_store, sqlite_path
from ..store.base import Capabilities, OutboxBatch, Store

__all__ = ["Storage", "open_storage"]

log = logging.getLogger("memlane.storage")

#: event seqs whose vectors an external index still has to forget (it was down when the
#: log's delete committed), kept in the log's ``meta`` until the worker gets them through
PENDING_DELETES = "index_pending_deletes"
#: how often the worker compares an external index with the log (a lost or partial index)
AUDIT_SECONDS = 60.0
#: expired events deleted per transaction by :meth:`Storage.sweep_expired`
SWEEP_BATCH = 500


def open_storage(
    target: str | os.PathLike[str],
    index: str | None = None,
    *,
    autocheckpoint: bool = True,
    read_only: bool = False,
) -> Storage:
    """Open the log ``target`` names and the vector index ``index`` names (``None``: the
    log's own); see ``store/__init__.py`` and ``index/__init__.py`` for the URLs."""
    store = open_store(target, autocheckpoint=autocheckpoint, read_only=read_only)
    try:
        if index is None or index in ("sqlite", "postgres", "builtin"):
            vectors: VectorIndex = store.vector_index()
        else:
            vectors = open_index(index, beside=sqlite_path(target), store_id=_store_id(store))
    except BaseException:
        store.close()
        raise
    return Storage(store, vectors)


def _store_id(store: Store) -> str:
    """The store's own id (kept in ``meta``): what names its collections in a shared index."""
    found = store.get_meta("store_id")
    if found is None:
        with store.atomic() as tx:
            found = store.get_meta("store_id", tx)
            if found is None:
                found = uuid.uuid4().hex
                store.set_meta(tx, "store_id", found)
    return found


class Storage:
    """A log store and the vector index fed from its outbox (see the module docstring)."""

    def __init__(self, store: Store, vectors: VectorIndex) -> None:
        self.log = store
        self.vectors = vectors
        own = store.capabilities
        #: an index outside the log's transactions (written after commits, audited)
        self.external = not vectors.transactional
        self.location = (
            f"{store.location} + {vectors.location}" if self.external else store.location
        )
        self.capabilities: Capabilities = replace(
            own,
            name=f"{own.name}+{vectors.name}" if self.external else own.name,
            multi_process=own.multi_process and vectors.multi_process,
            multi_host=own.multi_host and vectors.multi_host,
            exact_vectors=vectors.exact,
            transactional_vectors=vectors.transactional,
        )
        self._audited_at = 0.0  # the worker's first maintenance audits an external index

    def close(self) -> None:
        try:
            self.log.close()
        finally:
            self.vectors.close()

    # -- search ----------------------------------------------------------------------------

    def search_vectors(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
    ) -> list[VectorMatch]:
        """The best ``k`` events matching ``flt`` in ``partitions``, each by its best vector
        (:class:`VectorMatch`); what only the log can filter (metadata, status, importance)
        it answers."""
        return self.vectors.search(query, flt, partitions, k, lambda: self.log.select_seqs(flt))

    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """The index's passages of the long events among ``seqs`` (``VectorIndex``)."""
        return self.vectors.passage_spans(seqs) if seqs else {}

    # -- the indexer's write ---------------------------------------------------------------

    def store_batch(
        self,
        batch: OutboxBatch,
        rows: Sequence[OutboxRow],
        vectors: Vectors,
        register: Callable[[Tx], None],
    ) -> None:
        """Store the vectors of a claimed batch — ``rows[i]``'s is ``vectors[i]``; a long
        event has one row per passage — and clear the batch from the outbox; ``register(tx)``
        checks or records the embedder's identity in that transaction."""
        if not self.external:

            def write(tx: Tx, kept: list[OutboxRow]) -> None:
                register(tx)
                alive = {row.seq for row in kept}
                positions = [i for i, row in enumerate(rows) if row.seq in alive]
                self.vectors.upsert(tx, [rows[i] for i in positions], vectors[positions])

            batch.finish(write)
            return
        self.vectors.upsert(None, rows, vectors)
        kept_seqs: set[int] = set()

        def register_only(tx: Tx, kept: list[OutboxRow]) -> None:
            register(tx)
            kept_seqs.update(row.seq for row in kept)

        batch.finish(register_only)
        dropped = [row.seq for row in batch.rows if row.seq not in kept_seqs]
        if dropped:  # deleted while embedding: their vectors must not outlive them
            existing = self.log.event_times(dropped)
            self._forget([seq for seq in dropped if seq not in existing])

    # -- deletes ---------------------------------------------------------------------------

    def delete_session(self, tx: Tx, session_id: str) -> int:
        """Delete a session, its events and every projection of them; return the count."""
        seqs = self._doomed(EventFilter(scope=None, session_id=session_id))
        count = self.log.delete_session_rows(tx, session_id)
        self._forget_after_commit(tx, seqs)
        return count

    def delete_events(self, tx: Tx, flt: EventFilter) -> int:
        """Delete the events matching ``flt`` and every projection of them; return the count."""
        seqs = self._doomed(flt)
        count = self.log.delete_event_rows(tx, flt)
        self._forget_after_commit(tx, seqs)
        return count

    def sweep_expired(self, now: int | None = None) -> dict[str, int]:
        """Delete the events expired at ``now`` (short-term memory, ``record(ttl=...)``)
        with their vectors and keyword rows, :data:`SWEEP_BATCH` per transaction so that
        no writer waits long; return the counts by kind. Reads stopped seeing them at their
        expiry already: this frees their space."""
        now = now_us() if now is None else now
        swept: dict[str, int] = {}
        while (cutoff := self.log.expiry_cutoff(now, SWEEP_BATCH)) is not None:
            doomed = EventFilter(None, expired_by_us=cutoff)
            with self.log.atomic() as tx:
                for kind, count in self.log.kind_counts(doomed, tx).items():
                    swept[kind] = swept.get(kind, 0) + count
                self.delete_events(tx, doomed)
        return swept

    def _doomed(self, flt: EventFilter) -> list[int]:
        # a transactional index loses its rows with the events (foreign keys)
        return self.log.select_seqs(flt, live=False) if self.external else []

    def _forget_after_commit(self, tx: Tx, seqs: list[int]) -> None:
        if seqs:
            tx.on_commit(lambda: self._forget(seqs))

    def _forget(self, seqs: list[int]) -> None:
        """The log's delete committed: the index follows. If it cannot now, the delete is
        kept in the log and retried by the worker — never reported as a failure of a delete
        that happened (searches drop vectors the log no longer has meanwhile)."""
        if not seqs:
            return
        try:
            self.vectors.delete(None, seqs)
        except StoreError as exc:
            log.warning("the vector index missed a delete (%s); the worker retries it", exc)
            with self.log.atomic() as tx:
                pending = json.loads(self.log.get_meta(PENDING_DELETES, tx) or "[]")
                self.log.set_meta(tx, PENDING_DELETES, json.dumps(pending + seqs))

    def _retry_deletes(self) -> None:
        pending: list[int] = json.loads(self.log.get_meta(PENDING_DELETES) or "[]")
        if not pending:
            return
        self.vectors.delete(None, pending)  # raises while the index is still down: kept
        with self.log.atomic() as tx:  # drop what was applied, keep what came meanwhile
            now = json.loads(self.log.get_meta(PENDING_DELETES, tx) or "[]")
            self.log.set_meta(tx, PENDING_DELETES, json.dumps(now[len(pending) :]))

    # -- upkeep ----------------------------------------------------------------------------

    def maintenance(self) -> None:
        """The log's housekeeping, then an external index's: retry the deletes it missed,
        and now and then compare it with the log (a lost or emptied index is rebuilt)."""
        self.log.maintenance()
        if not self.external:
            return
        self._retry_deletes()
        if time.monotonic() - self._audited_at >= AUDIT_SECONDS:
            self.audit()
            self._audited_at = time.monotonic()

    def audit(self) -> int:
        """Compare every partition's vectors with the log; queue again (for the worker to
        embed) the events whose vectors are missing. Returns how many."""
        queued = 0
        for partition in self.log.vector_partitions():
            expected = self.log.embedded_seqs(partition)
            # (the events are compared, not counts: a long event has a vector per passage)
            missing = sorted(set(expected) - self.vectors.seqs(partition))
            if missing:
                log.warning(
                    "the vector index lacks %d vectors of %s; queued to embed again",
                    len(missing),
                    partition,
                )
                queued += self.log.requeue(missing)
        return queued

    def reindex(self) -> int:
        """Queue every event for embedding again and forget every vector (and the embedder
        identity); the keyword index is rebuilt too. Returns the number of events queued."""
        with self.log.atomic() as tx:
            count = self.log.requeue_all(tx)
            if not self.external:
                self.vectors.clear(tx)
        if self.external:
            self.vectors.clear(None)
            with self.log.atomic() as tx:  # every collection went: nothing left to forget
                self.log.set_meta(tx, PENDING_DELETES, "[]")
        return count

    def stats(self) -> dict[str, Any]:
        """The log's figures, with the index's vector count and size."""
        stats = self.log.stats()
        stats["vectors"] = self.vectors.count()
        stats["size_bytes"] = int(stats["size_bytes"]) + self.vectors.size_bytes()
        return stats
