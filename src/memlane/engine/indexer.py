"""The embedding side of the one write path: drain the outbox into the vector index.

``record()`` only appends the event and its outbox row; this module turns outbox rows into
vectors, in batches, from a background thread (so callers never wait for the model) or from
the caller's thread when a search needs its own scope caught up first (read-your-writes) or
``flush()`` is called. The worker also digests large events (``engine/digests.py``).
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.clock import now_us
from ..core.heap import HeapTrimmer
from ..core.idle import IdleRunner
from ..core.seams import OutboxRow
from ..embed import LoadedEmbedder
from ..embed.minilm import stop_model_runs
from ..errors import EmbedderMismatch, ModelNotAvailable
from ..text.passages import Cutter
from ..text.tokens import tokenizer_for
from .digests import digest_deferred
from .storage import Storage

__all__ = ["Indexer"]

log = logging.getLogger("memlane.indexer")

_IDENTITY = ("name", "dim", "fingerprint")
#: How long close() waits for the worker's batch before leaving the store's closing to it.
STOP_TIMEOUT = 30.0
#: The worker embeds a batch this many texts at a time and looks between them whether it
#: is asked to stop: close() and the end of the process wait for one slice, not for a whole
#: batch (4,096 texts of MiniLM took minutes on a busy machine:
#: docs/decisions/2026-11-26-worker-stops-between-slices.md); the rest of the batch goes back to the
#: queue for the next worker. The default batch size: a batch of that size is one call of the
#: embedder, as before (an API embedder pays per call).
EMBED_SLICE = 64
#: close() says what it waits for once it has waited this long (seconds).
SAY_AFTER = 1.0
#: While the worker runs, a search embeds at most this many of this process's newest pending
#: events itself (read-your-writes), and leaves the rest of the backlog to the workers: eight
#: processes recording into one agent made each search embed all eight's backlogs (p50
#: ~300 ms, p99 up to 1.8 s with MiniLM). Events beyond are found by the keyword ranking
#: until a worker embeds them.
CATCH_UP_LIMIT = 256
#: ... then, of a backlog this small, whoever wrote it (another manager's latest events)...
SMALL_BACKLOG = 16
#: ... but never for longer than this (after an ingest of a 900-line file, a search
#: embedded ~250 chunks first and sat silent for 17 s; with long events cut into passages,
#: 16 pending messages of ~2,000 characters held a search 3.2 s). Past it the search answers
#: with what is embedded, the rest found by keyword, and says how many wait
#: (``Hits.waiting``). The first step is always taken: the newest events are found by
#: meaning at once.
CATCH_UP_SECONDS = 0.2
#: ... a step at a time, newest first, so that the clock is looked at between steps (a long
#: event is several passages: one message of ~2,000 characters is ~0.1 s of MiniLM, four
#: were 0.75 s on a loaded machine). A step is one event, or several short ones together of
#: at most this many characters (about one MiniLM window, ~25 ms): an agent's last few chat
#: lines cost one call, not one each, so the first step (always taken) holds all of them
#: and a loaded machine cannot push them past the deadline, to be found by keyword only.
CATCH_UP_STEP_CHARS = 1_000

_REINDEX_HINT = (
    "Rebuild the vectors with the new embedder: `memlane reindex --db {path}` or "
    "SessionManager.reindex(); or construct the SessionManager with the embedder the store "
    "was built with."
)


#: workers whose thread has not ended yet (stopped ones finishing their slice included);
#: stopped at interpreter exit (see _stop_workers_at_exit)
_RUNNING: weakref.WeakSet[Indexer] = weakref.WeakSet()
#: how long the end of the process waits for the workers, in all
EXIT_TIMEOUT = 30.0

#: the meta key holding when (microseconds) any process last stored a batch of vectors, or
#: started a worker
LAST_EMBEDDED = "last_embedded_us"
#: how often a process writes it (at most): one upsert per batch would make every worker's
#: batch wait on that row while another's commits
BEAT_SECONDS = 10.0
#: the meta key holding the most recent failure of any process's worker: JSON ``{"at":
#: microseconds, "error": "Type: message"}`` (``health()`` in another process — ``memlane
#: health``, the inspector — has no worker of its own to ask)
WORKER_ERROR = "worker_error"


@atexit.register
def _stop_workers_at_exit() -> None:
    """Stop every worker thread still alive: one a program left running (a manager never
    closed) and one a close() stopped waiting for. A daemon thread still inside SQLite while
    the interpreter tears itself down crashed the process (seen: 1 exit in 20 ended in
    SIGSEGV), and one inside an onnxruntime run aborted it (exit code 134). The
    model runs in progress are cut short first (their batch goes back to the queue), then
    each worker is waited for."""
    indexers = list(_RUNNING)
    for indexer in indexers:
        indexer._stop.set()
        indexer._wake.set()
    deadline = time.monotonic() + EXIT_TIMEOUT
    if indexers:
        stop_model_runs(timeout=EXIT_TIMEOUT)
    for indexer in indexers:
        indexer.stop(timeout=max(0.1, deadline - time.monotonic()))
        worker = indexer._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(max(0.1, deadline - time.monotonic()))


class _Stopped(Exception):
    """The worker was asked to stop between two slices of its batch (the batch is handed
    back: :data:`EMBED_SLICE`)."""


class Indexer:
    """Embeds pending events and keeps the store's embedder identity honest."""

    def __init__(
        self,
        storage: Storage,
        embedder: LoadedEmbedder,
        *,
        batch_size: int = 64,
        poll_seconds: float = 1.0,
        check: bool = True,
        idle: bool = True,
    ) -> None:
        self.storage = storage
        self.store = storage.log
        self.embedder = embedder
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()  # one batch at a time per process: no duplicate work
        # this process's newest recorded events that may still wait for a vector (insertion
        # order, at most CATCH_UP_LIMIT): what a search embeds itself while the worker runs
        self._recent: dict[int, int] = {}  # seq: characters
        self._recent_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._worker: threading.Thread | None = None  # the last worker thread started
        #: what the worker is doing (for close()'s message when it waits)
        self._activity = "starting"
        self._caught_up_at = time.monotonic()  # when the worker last saw the outbox empty
        self._on_exit: list[Callable[[], None]] = []  # run by the worker as it ends
        self._exit_lock = threading.Lock()
        self._exited = False  # the worker has taken its exit hooks (set under _exit_lock)
        #: run by the background worker after each drain of the outbox (auto-summaries)
        self.idle_hooks: list[Callable[[], object]] = []
        #: counts a deferred event's tokens (the manager sets its model's counter)
        self.count_tokens: Callable[[str], int] = tokenizer_for("gpt-4o").count
        # the worker's embedding runs at idle priority from its second batch (core/idle.py),
        # unless asked to run at the caller's (SessionManager(worker_priority="normal"))
        self._idle = IdleRunner() if idle else None
        self._worker_batches = 0
        self._beat_at = -BEAT_SECONDS
        #: gives the memory the worker's batches freed back to the system (core/heap.py)
        self.trim_heap = HeapTrimmer()
        self._trimmed_at = 0  # _worker_batches at the last trim on catching up
        if check:
            self.check_identity()

    # -- embedder identity -----------------------------------------------------------------

    def _mine(self, dim: int | None) -> dict[str, str | None]:
        """This indexer's embedder identity; ``None`` where it is not known yet (a user's
        callable has no dim before its first call; model files may be absent at open)."""
        try:
            fingerprint: str | None = self.embedder.fingerprint
        except ModelNotAvailable:
            fingerprint = None  # nothing can be embedded anyway; the first batch says why
        return {
            "name": self.embedder.name,
            "dim": None if dim is None else str(dim),
            "fingerprint": fingerprint,
        }

    def _stored_identity(self, read: Any) -> dict[str, str | None]:
        return {key: read(f"embedder_{key}") for key in _IDENTITY}

    def _check(self, stored: dict[str, str | None], mine: dict[str, str | None]) -> None:
        """The one identity rule, at open and at every write: each field both sides know
        must agree (a store from before fingerprints were recorded has none)."""
        differ = [
            key
            for key in _IDENTITY
            if stored[key] is not None and mine[key] is not None and stored[key] != mine[key]
        ]
        if not differ:
            return
        detail = "; ".join(f"{key} {stored[key]!r} vs {mine[key]!r}" for key in differ)
        hint = _REINDEX_HINT.format(path=self.store.location)
        raise EmbedderMismatch(
            f"The store {self.store.location!r} holds vectors made by embedder "
            f"{stored['name']!r}, but this SessionManager's embedder differs ({detail}; the "
            f"store's value first). Vectors of different embedders cannot be compared. {hint}"
        )

    def check_identity(self) -> None:
        """Raise :class:`EmbedderMismatch` now, at open, rather than at the first batch."""
        stored = self._stored_identity(self.store.get_meta)
        if stored["name"] is not None:
            self._check(stored, self._mine(self.embedder.dim))

    def _register(self, tx: Any, dim: int) -> None:
        """In the transaction that stores a batch: the embedder's identity (checked, or
        written by the first batch), and now and then when a batch was last stored
        (:data:`LAST_EMBEDDED`: ``health()`` tells a stalled worker from a busy one)."""
        if time.monotonic() - self._beat_at >= BEAT_SECONDS:
            self.store.set_meta(tx, LAST_EMBEDDED, str(now_us()))
            self._beat_at = time.monotonic()
        stored = self._stored_identity(lambda key: self.store.get_meta(key, tx))
        mine = self._mine(dim)
        if stored["name"] is None:
            for key, value in mine.items():
                if value is not None:
                    self.store.set_meta(tx, f"embedder_{key}", value)
        else:
            self._check(stored, mine)

    # -- embedding -------------------------------------------------------------------------

    def embed_batch(self, partitions: Sequence[str] | None = None, *, force: bool = False) -> int:
        """Embed one batch of pending events; return how many were done (0: nothing left)."""
        with self._lock:
            return self._embed(partitions, force=force)

    def _embed(
        self,
        partitions: Sequence[str] | None,
        *,
        force: bool = False,
        seqs: Sequence[int] | None = None,
        limit: int | None = None,
    ) -> int:
        size = self.batch_size if limit is None else limit
        with self.store.claim_outbox(size, partitions, force=force, seqs=seqs) as batch:
            if not batch.rows:
                return 0
            rows = self._passages(batch.rows)
            texts = [row.text for row in rows]
            if threading.current_thread() is self._worker:
                vectors = self._worker_vectors(texts)
                self._worker_batches += 1
            else:  # a caller's (flush, a search catching up): all of it, at once
                vectors = self.embedder.embed(texts)
            dim = int(vectors.shape[1])
            self.storage.store_batch(batch, rows, vectors, lambda tx: self._register(tx, dim))
            return len(batch.rows)

    @property
    def cutter(self) -> Cutter:
        """How this index cuts a long event into passages (restore cuts the same way)."""
        return Cutter.of(self.embedder.embedder)

    def _passages(self, rows: Sequence[OutboxRow]) -> list[OutboxRow]:
        """The rows to embed: an event that fits the embedder's window whole as it is, a
        longer one as one row per passage (``text/passages.py``), so that what it says past
        its first ~1,000 characters is found by meaning too."""
        cutter = self.cutter
        expanded: list[OutboxRow] = []
        for row in rows:
            spans = cutter.spans(row.content)
            if not spans:
                expanded.append(row)
                continue
            expanded.extend(
                row._replace(part=part, start=start, stop=stop)
                for part, (start, stop) in enumerate(spans)
            )
        return expanded

    def _worker_vectors(self, texts: list[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The worker's vectors of a batch, :data:`EMBED_SLICE` texts at a time, at idle
        priority from its second batch (the first loads the model: see ``core/idle.py``)
        when the embedder computes outside the GIL (``releases_gil``):
        a pure-Python one at idle priority would hold the GIL while it waits for a core, and
        every thread of the process with it. :class:`_Stopped` between two slices when it
        is asked to stop."""
        parts = []
        for start in range(0, len(texts), EMBED_SLICE):
            if self._stop.is_set():
                raise _Stopped
            part = texts[start : start + EMBED_SLICE]
            self._activity = (
                f"embedding texts {start + 1}-{start + len(part)} of a batch of {len(texts)}"
            )
            if self._worker_batches and self._idle is not None and self.embedder.releases_gil:
                parts.append(self._idle.run(self.embedder.embed, part))
            else:
                parts.append(self.embedder.embed(part))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def recorded(self, seq: int, chars: int) -> None:
        """Note an event this process recorded, and its length (for :meth:`catch_up`)."""
        with self._recent_lock:
            self._recent[seq] = chars
            if len(self._recent) > CATCH_UP_LIMIT:
                del self._recent[next(iter(self._recent))]

    def catch_up(self, partitions: Sequence[str]) -> int:
        """Embed what a search of ``partitions`` needs first (read-your-writes); return how
        many events there still wait for their vectors (the search finds them by keyword).

        Without a running worker, everything pending there (nobody else would). With one,
        for at most :data:`CATCH_UP_SECONDS` (its first step always), a step at a time (one
        event, or short ones up to :data:`CATCH_UP_STEP_CHARS` together): this process's
        newest recorded events (at most
        :data:`CATCH_UP_LIMIT`, newest first), then, when at most :data:`SMALL_BACKLOG`
        events wait, anyone's (another manager's latest writes). The workers embed the rest,
        and the keyword ranking finds it meanwhile. This is done beside the worker's batch,
        not after it (the worker's lock is not taken: a batch of MiniLM takes seconds when
        eight processes share two cores); the outbox leases keep the two from embedding an
        event twice.
        """
        pending = self.store.pending_count(partitions)
        if not pending:
            return 0
        if not self.running:
            while self.embed_batch(partitions) and self.store.pending_count(partitions):
                pass
            return self.store.pending_count(partitions)
        deadline = time.monotonic() + CATCH_UP_SECONDS
        with self._recent_lock:
            mine = list(self._recent.items())[::-1]  # newest first: what the agent just said
        while mine and time.monotonic() < deadline:
            size, chars = 1, mine[0][1]
            while size < len(mine) and chars + mine[size][1] <= CATCH_UP_STEP_CHARS:
                chars += mine[size][1]
                size += 1
            step = [seq for seq, _ in mine[:size]]
            mine = mine[size:]
            self._embed(partitions, seqs=step)
            with self._recent_lock:  # embedded now, or gone: a later search need not ask
                for seq in step:
                    self._recent.pop(seq, None)
        if self.store.pending_count(partitions) <= SMALL_BACKLOG:
            while time.monotonic() < deadline and self._embed(partitions, limit=1):
                pass
        return self.store.pending_count(partitions)

    def flush(self) -> None:
        """Embed every pending event in the store, whoever recorded it, and digest every
        deferred one (``engine/digests.py``).

        If the worker's last pass failed (a full disk, say), this one also does its
        housekeeping (the WAL checkpoint); having done all of it, the failure is over and
        ``health()`` says so now, not at the worker's next batch. A failure the worker meets
        meanwhile stays (only the one seen when the flush began is cleared)."""
        failed = self.last_error
        embedded = 0
        while done := self.embed_batch(force=True):
            embedded += done
        while self.digest():
            pass
        if embedded:  # (the caller's thread held the batches' buffers: core/heap.py)
            self.trim_heap(force=True)
        if failed is not None:
            self.storage.maintenance()
            if self.last_error is failed:
                self.last_error = None

    def _step(self) -> int:
        """The worker's step: a batch of embeddings, then a few digests; how many events."""
        self._activity = "claiming a batch to embed"
        done = self.embed_batch()
        self._activity = "digesting large events (exact token counts, previews)"
        return done + self.digest()

    def digest(self) -> int:
        """Digest a few deferred events (``engine/digests.py``); return how many."""
        return digest_deferred(self.store, self.count_tokens)

    def query_vectors(self, texts: Sequence[str]) -> list[np.ndarray[Any, np.dtype[np.float32]]]:
        """The vectors of queries (a search's, a session's rule sentences: search/rules.py),
        in one call of the model."""
        return list(self.embedder.embed(list(texts)))

    # -- background worker -----------------------------------------------------------------

    def start(self) -> None:
        _RUNNING.add(self)
        if self._thread is None:
            self._exited = False
            self._thread = self._worker = threading.Thread(
                target=self._run, name="session-manager-indexer", daemon=True
            )
            self._thread.start()

    def notify(self) -> None:
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether this process's background worker thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def lag_seconds(self) -> float:
        """Seconds since the worker last found nothing left to embed."""
        return time.monotonic() - self._caught_up_at

    def stop(self, timeout: float | None = None, then: Callable[[], None] | None = None) -> bool:
        """Ask the worker to stop and wait up to ``timeout`` seconds (default
        :data:`STOP_TIMEOUT`); then run ``then``.

        The worker stops after the slice of its batch it is embedding (the rest goes back
        to the queue: :data:`EMBED_SLICE`), or after the step it is in (a digest, a
        checkpoint, an idle hook); past :data:`SAY_AFTER` seconds, a message on the
        ``memlane.indexer`` logger says which. Returns False if the worker was still busy
        after ``timeout``: ``then`` (e.g. closing the store) runs when it finishes instead,
        never under its feet.
        """
        self._stop.set()
        self._wake.set()
        if self._idle is not None:  # its slice finishes at normal priority, not when it may
            self._idle.hurry()
        thread, self._thread = self._thread, None
        timeout = STOP_TIMEOUT if timeout is None else timeout
        if thread is not None:
            started = time.monotonic()
            thread.join(min(timeout, SAY_AFTER))
            if thread.is_alive() and timeout > SAY_AFTER:
                log.warning(
                    "close() is waiting for the embedding worker to stop: it is %s "
                    "(it stops after that; waiting at most %.0f s)",
                    self._activity,
                    timeout,
                )
                thread.join(max(0.0, timeout - (time.monotonic() - started)))
            if thread.is_alive():
                log.warning(
                    "the embedding worker is still busy after %.0f s; the store closes when "
                    "its batch ends",
                    timeout,
                )
                if then is not None:
                    with self._exit_lock:
                        if not self._exited:
                            self._on_exit.append(then)
                            return False
        if then is not None:
            then()
        return True

    def _run(self) -> None:
        try:
            self._work()
        finally:
            if self._idle is not None:
                self._idle.close()
            with self._exit_lock:
                hooks, self._on_exit, self._exited = self._on_exit, [], True
            for hook in hooks:
                hook()
            _RUNNING.discard(self)

    def _work(self) -> None:
        # A worker that starts counts as a beat: until its first batch is stored, a backlog
        # is being worked on, not stalled (health()).
        try:
            with self.store.atomic() as tx:
                self.store.set_meta(tx, LAST_EMBEDDED, str(now_us()))
        except Exception as exc:  # (a full or busy store: the loop below reports it)
            log.debug("worker start not noted: %s", exc)
        # Poll even without a wake-up: other processes' events and the leftovers of a crashed
        # process are caught up too (their outbox claims expire).
        while not self._stop.is_set():
            self._activity = "waiting for work"
            self._wake.wait(self.poll_seconds)
            self._wake.clear()
            try:
                # The app's own commits skip WAL checkpoints (see SqliteStore); they are done
                # here, off the caller's path, after every batch: a steady writer may never
                # let the outbox drain, and the WAL must not grow meanwhile. A checkpoint
                # with nothing new to copy costs ~nothing.
                while not self._stop.is_set() and self._step():
                    self._activity = "writing a checkpoint of the store"
                    self.storage.maintenance()
                    self.trim_heap()  # (what the batch's buffers held: core/heap.py)
                if not self._stop.is_set():
                    self._caught_up_at = time.monotonic()
                    if self._worker_batches != self._trimmed_at:  # (it embedded since)
                        self._trimmed_at = self._worker_batches
                        self.trim_heap(force=True)
                self._activity = "writing a checkpoint of the store"
                self.storage.maintenance()
                for hook in self.idle_hooks:
                    if self._stop.is_set():
                        break
                    self._activity = f"running {_named(hook)}"
                    hook()
                self.last_error = None
            except _Stopped:
                return  # (the batch was handed back)
            except Exception as exc:
                if self._stop.is_set():  # (a model run cut short at exit, say)
                    log.debug("embedding worker stopped: %s", exc)
                    return
                # keep the worker alive; searches re-raise in the caller
                if self.last_error is None or type(exc) is not type(self.last_error):
                    log.warning("embedding worker: %s", exc)
                if self.last_error is None or str(exc) != str(self.last_error):
                    self._record_error(exc)  # (once for a failure that repeats)
                self.last_error = exc
                self._stop.wait(self.poll_seconds)

    def _record_error(self, exc: BaseException) -> None:
        """Keep the failure in the store (:data:`WORKER_ERROR`) for other processes' health;
        a store that cannot take it (the failure may be the store's) leaves it untold."""
        found = {"at": now_us(), "error": f"{type(exc).__name__}: {exc}"[:2_000]}
        try:
            with self.store.atomic() as tx:
                self.store.set_meta(tx, WORKER_ERROR, json.dumps(found))
        except Exception as again:  # (the worker must go on)
            log.debug("embedding worker: could not record its error: %s", again)


def _named(hook: Callable[[], object]) -> str:
    """An idle hook's name, for close()'s message: "Storage.sweep_expired", "AutoSummary"."""
    return str(getattr(hook, "__qualname__", None) or type(hook).__name__)
