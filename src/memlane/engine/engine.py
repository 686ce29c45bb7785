"""The engine beneath every front end: one opened store, its indexer, searches over scopes.

:class:`~memlane.SessionManager` (one agent's view), its async twin and
:class:`~memlane.admin.StoreAdmin` (the operator's view) differ in *whose* memory
they see, not in how a store is opened, embedded into, searched or closed. That part lives
here, once: URL resolution, opening the store, loading the embedder and checking its
identity, reindexing, draining the outbox, one :class:`Searcher` per scope, and the wording
of the errors all front ends share.

Not part of the public API.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..core.clock import format_time, from_us
from ..core.progress import Progress
from ..core.scope import Scope
from ..embed import LoadedEmbedder, load_embedder
from ..errors import EmbedderMismatch, InvalidInput, SessionNotFound, shown
from ..protocols import Embedder
from ..search.recalls import RecallCounts
from ..search.searcher import Searcher
from ..store import describe_url, sqlite_path, store_identity
from ..store.base import Store
from .indexer import LAST_EMBEDDED, WORKER_ERROR, Indexer
from .storage import Storage, open_storage

__all__ = ["DEFAULT_DB", "Engine", "Health", "resolve_target", "session_not_found"]

DEFAULT_DB = "sessions.db"


def resolve_target(db_path: str | os.PathLike[str] | None, url: str | None) -> str:
    """The store a front end was asked for: ``url``, else ``db_path`` (``~`` expanded),
    else ``sessions.db`` in the working directory."""
    if url is not None and db_path is not None:
        raise InvalidInput("Give either db_path or url, not both (url='sqlite:///x.db').")
    if url is not None:
        return url
    if db_path is not None:
        return os.path.expanduser(os.fspath(db_path))  # "~/agents.db" means the home folder
    return DEFAULT_DB


def session_not_found(session_id: object, *, agent: str | None, where: str) -> SessionNotFound:
    """The one wording of "no such session": for an agent (``agent``) or the operator."""
    if agent is not None:
        return SessionNotFound(
            f"Session {shown(session_id)} does not exist for agent {agent!r}. "
            "List sessions with `memlane sessions` or SessionManager.list_sessions()."
        )
    return SessionNotFound(
        f"Session {shown(session_id)} does not exist in {where!r}. "
        "List sessions with `memlane sessions`."
    )


#: seconds a backlog may wait for its next stored batch before health() calls it stalled
STALLED_AFTER = 120.0


@dataclass(frozen=True)
class Health:
    """What the background side of a store is doing (:meth:`SessionManager.health`).

    ``backlog`` counts events of the whole store still waiting for their embedding;
    ``lag_seconds`` is how long this process's worker has been behind (since it last saw
    the outbox empty; 0 when it is empty, ``None`` without a worker): searches still find
    the waiting events, embedding them first. ``worker_running`` says whether this
    process's background worker is alive; ``last_error`` is its most recent failure
    (``None`` once a batch succeeds again). ``buffer_error`` says why the Redis working
    buffer cannot answer now (the log answers meanwhile). ``last_embedded_at`` is when any
    process last stored a batch of vectors (within :data:`~memlane.engine.indexer.
    BEAT_SECONDS`) or started a worker: with a backlog, an old one (or none) means no worker
    anywhere is embedding (:attr:`stalled`). ``store_bytes``, ``wal_bytes`` (SQLite's log;
    None on PostgreSQL) and ``schema`` (the newest migration applied) describe the store.

    What any process can tell, worker or not (``memlane health``, the inspector):
    ``oldest_pending_at`` is when the event that has waited longest for its embedding was
    recorded (None without a backlog; its ``created_at``, so an event recorded with an
    earlier ``created_at`` looks older), :attr:`backlog_seconds` how long ago that was (the
    store's lag, whoever embeds); ``worker_error`` / ``worker_error_at`` are the most recent
    failure any process's worker recorded in the store, and when (kept after it recovers:
    compare with ``last_embedded_at``).
    """

    backlog: int
    lag_seconds: float | None
    worker_running: bool
    last_error: str | None
    embedder: str
    store: str
    index_error: str | None = None
    buffer_error: str | None = None
    last_embedded_at: datetime | None = None
    store_bytes: int | None = None
    wal_bytes: int | None = None
    schema: str | None = None
    #: the extraction stage (``SessionManager(extractor=...)``): its last failure (None once
    #: its batches succeed again), how many sessions' batches fail now (each retried later,
    #: nothing of it written), and the tokens its extractor reported in this process
    extraction_error: str | None = None
    extraction_failing: int = 0
    extraction_tokens: int = 0
    oldest_pending_at: datetime | None = None
    worker_error: str | None = None
    worker_error_at: datetime | None = None

    @property
    def backlog_seconds(self) -> float | None:
        """How long the oldest waiting event has waited (:attr:`oldest_pending_at`), in
        seconds; None without a backlog."""
        if self.oldest_pending_at is None:
            return None
        return max(0.0, (datetime.now(timezone.utc) - self.oldest_pending_at).total_seconds())

    @property
    def stalled(self) -> bool:
        """A backlog nobody has embedded from for :data:`STALLED_AFTER` seconds (no worker
        runs on this store, or every one is failing)."""
        if not self.backlog:
            return False
        if self.last_embedded_at is None:
            return True
        waited = (datetime.now(timezone.utc) - self.last_embedded_at).total_seconds()
        return waited > STALLED_AFTER

    @property
    def ok(self) -> bool:
        """No worker, index, buffer or extraction error, and no stalled backlog (a backlog alone is
        normal: it drains in the background)."""
        return (
            self.last_error is None
            and self.index_error is None
            and self.buffer_error is None
            and self.extraction_error is None
            and not self.stalled
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "stalled": self.stalled,
            "backlog": self.backlog,
            "lag_seconds": self.lag_seconds,
            "worker_running": self.worker_running,
            "last_error": self.last_error,
            "last_embedded_at": None
            if self.last_embedded_at is None
            else format_time(self.last_embedded_at),
            "index_error": self.index_error,
            "buffer_error": self.buffer_error,
            "embedder": self.embedder,
            "store": self.store,
            "store_bytes": self.store_bytes,
            "wal_bytes": self.wal_bytes,
            "schema": self.schema,
            "oldest_pending_at": None
            if self.oldest_pending_at is None
            else format_time(self.oldest_pending_at),
            "backlog_seconds": self.backlog_seconds,
            "worker_error": self.worker_error,
            "worker_error_at": None
            if self.worker_error_at is None
            else format_time(self.worker_error_at),
        }


class Engine:
    """An opened store with its embedder and indexer; front ends add a scope on top.

    ``embedder=None`` loads all-MiniLM-L6-v2 on first use. ``read_only`` opens the store for
    reading only: searches neither count recalls nor embed what is pending.
    ``check_embedder=True`` checks the store's embedder identity at open (an agent's
    manager, which writes vectors); ``False`` defers it to the first embedding (the
    operator's admin, which may only list). With ``reindex=True`` a mismatch rebuilds every
    vector instead of raising.
    """

    def __init__(
        self,
        target: str,
        index: str | None = None,
        *,
        embedder: Embedder | LoadedEmbedder | None = None,
        batch_size: int = 64,
        autocheckpoint: bool = True,
        check_embedder: bool = True,
        reindex: bool = False,
        read_only: bool = False,
        worker_priority: str = "idle",
    ) -> None:
        if read_only and reindex:
            raise InvalidInput("reindex=True rebuilds vectors, which read_only=True cannot write.")
        self.read_only = read_only
        self.url = describe_url(target)
        self.db_path = sqlite_path(target) or self.url
        #: what tells two spellings of one store apart from two stores (None: cannot tell)
        self.identity = store_identity(target)
        #: the log and its vector index; ``store`` is the log alone
        self.storage: Storage = open_storage(
            target, index, autocheckpoint=autocheckpoint, read_only=read_only
        )
        self.store: Store = self.storage.log
        self.batch_size = batch_size
        self.worker_priority = worker_priority
        self._embedder_spec = embedder
        self._loaded: LoadedEmbedder | None = None
        self._indexer: Indexer | None = None
        self._searchers: dict[Scope, Searcher] = {}
        #: recall counts of every searcher, written in batches (search/recalls.py)
        self.recalls = RecallCounts(self.storage.log)
        self._lock = threading.Lock()
        #: how many front ends hold this engine (engine/shared.py); the last close() closes it
        self._holders = 1
        #: called once when the engine really closes (the shared registry forgets it)
        self.on_close: list[Callable[[], None]] = []
        try:
            if check_embedder:
                try:
                    self._indexer = self._new_indexer()
                except EmbedderMismatch:
                    if not reindex:
                        raise
                    self.reindex()
        except BaseException:
            self.storage.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------

    def hold(self) -> bool:
        """One more front end holds this engine (False: it is closed, open another)."""
        with self._lock:
            if self._holders == 0:
                return False
            self._holders += 1
            return True

    @property
    def holders(self) -> int:
        """How many front ends hold this engine now (0 once closed)."""
        return self._holders

    def drop_idle_hooks(self, hooks: list[Callable[[], Any]]) -> None:
        """Take back what one front end asked the worker to run when idle (it closes; the
        engine may serve others on)."""
        indexer = self._indexer
        if indexer is not None:
            for hook in hooks:
                if hook in indexer.idle_hooks:
                    indexer.idle_hooks.remove(hook)

    def close(self) -> None:
        """Let go of the engine; the last holder stops the background worker (if any) and
        closes the store — after the worker's last batch, if it is still embedding when
        close() stops waiting. Closing again does nothing."""
        with self._lock:
            if self._holders == 0:
                return
            self._holders -= 1
            if self._holders:
                return
        for forget in self.on_close:
            forget()
        self.recalls.flush()
        if self._indexer is not None:
            self._indexer.stop(then=self.storage.close)
        else:
            self.storage.close()

    # -- embedding -------------------------------------------------------------------------

    @property
    def embedder(self) -> LoadedEmbedder:
        """The configured embedder (nothing is loaded until it first embeds)."""
        if self._loaded is None:
            self._loaded = load_embedder(self._embedder_spec)
        return self._loaded

    @property
    def indexer(self) -> Indexer:
        """The indexer, its embedder identity checked against the store's on first use."""
        with self._lock:
            if self._indexer is None:
                self._indexer = self._new_indexer()
            return self._indexer

    def _new_indexer(self, *, check: bool = True) -> Indexer:
        """The indexer (its embedder identity checked unless ``check=False``); its idle
        worker also writes the recall counts due and sweeps expired events."""
        indexer = Indexer(
            self.storage,
            self.embedder,
            batch_size=self.batch_size,
            check=check,
            idle=self.worker_priority == "idle",
        )
        indexer.idle_hooks.append(self.recalls.flush_if_due)
        indexer.idle_hooks.append(self.storage.sweep_expired)
        return indexer

    def searcher(self, scope: Scope) -> Searcher:
        """One searcher per scope, so its query-vector cache lives as long as the engine."""
        with self._lock:
            found = self._searchers.get(scope)
        if found is None:
            found = Searcher(
                self.storage,
                self.indexer,
                scope,
                writes=not self.read_only,
                recalls=self.recalls,
            )
            with self._lock:
                found = self._searchers.setdefault(scope, found)
        return found

    def embed_pending(self, progress: Progress | None = None) -> int:
        """Embed everything waiting in the outbox, whoever recorded it (blocking); call
        ``progress(done, total)`` after each batch; return how many were embedded."""
        indexer = self.indexer
        total = self.store.pending_count()
        done = 0
        if progress is not None:
            progress(0, total)
        while count := indexer.embed_batch(force=True):
            done += count
            if progress is not None:
                progress(min(done, total), total)
        return done

    def reindex(self, progress: Progress | None = None) -> int:
        """Drop every vector, rebuild the keyword index and embed the whole log with this
        engine's embedder (blocking). Returns the number of events queued."""
        total = self.storage.reindex()
        with self._lock:
            if self._indexer is None:  # the old identity was just dropped: nothing to check
                self._indexer = self._new_indexer(check=False)
            indexer = self._indexer
        if progress is not None:
            progress(0, total)
        while indexer.embed_batch(force=True):
            if progress is not None:
                # Counted from the outbox: a worker of another process may embed some too.
                progress(max(0, total - self.store.pending_count()), total)
        return total

    def health(self) -> Health:
        """The backlog, the worker's state and its last error (see :class:`Health`)."""
        indexer = self._indexer
        error = None if indexer is None else indexer.last_error
        backlog = self.store.pending_count()
        lag: float | None = None
        if indexer is not None and indexer.running:
            lag = indexer.lag_seconds() if backlog else 0.0
        stored, wal, schema = self.store.footprint()
        beat = self.store.get_meta(LAST_EMBEDDED)
        oldest = self.store.oldest_pending_us() if backlog else None
        worker_error, worker_error_at = _recorded_error(self.store.get_meta(WORKER_ERROR))
        return Health(
            backlog=backlog,
            lag_seconds=lag,
            worker_running=lag is not None,
            last_error=None if error is None else f"{type(error).__name__}: {error}",
            # (an operator's look at health must not load a model: the store names its own)
            embedder=self._loaded.name
            if self._loaded is not None
            else (self.store.get_meta("embedder_name") or "none yet"),
            store=self.url,
            index_error=next(
                (s.index_error for s in list(self._searchers.values()) if s.index_error), None
            ),
            last_embedded_at=None if beat is None else from_us(int(beat)),
            store_bytes=stored,
            wal_bytes=wal,
            schema=schema,
            oldest_pending_at=None if oldest is None else from_us(oldest),
            worker_error=worker_error,
            worker_error_at=worker_error_at,
        )


def _recorded_error(value: str | None) -> tuple[str | None, datetime | None]:
    """The worker failure kept in the store (``indexer.WORKER_ERROR``): its text and when."""
    if not value:
        return None, None
    try:
        found = json.loads(value)
        return str(found["error"]), from_us(int(found["at"]))
    except (ValueError, KeyError, TypeError):  # (written by a later version, say)
        return value[:2_000], None
