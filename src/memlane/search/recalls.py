"""Recall counts, written in batches: a search is a read.

Every event a search returns (and every relevant event a restore shows) counts one recall,
which ranks it higher in later restores. Writing that count in the search's own write
transaction made every read a write: on SQLite a transaction that waits for the file's
write lock behind any writer (docs/decisions/2026-11-24-recall-counts-in-batches.md), and none at
all on a full or read-only store. Here a search only adds to a counter in memory; the counts are
written in one transaction at most once per :data:`FLUSH_SECONDS` (or once :data:`FLUSH_EVENTS`
events wait), by the search that finds them due, by the background worker when it is idle, and at
``flush()`` and ``close()``. A process killed meanwhile loses at most that second's counts: they are
a ranking hint, not data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable

from ..errors import StoreError
from ..store.base import LogWriter

__all__ = ["FLUSH_EVENTS", "FLUSH_SECONDS", "RecallCounts"]

log = logging.getLogger("memlane.search")

#: counts wait at most this long in memory
FLUSH_SECONDS = 1.0
#: ... or until this many events have some
FLUSH_EVENTS = 1_024


class RecallCounts:
    """The recall counts of one store not written yet (shared by all its searchers)."""

    def __init__(self, store: LogWriter, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: Counter[int] = Counter()
        self._since: float | None = None  # when the oldest pending count arrived

    def add(self, seqs: Iterable[int]) -> None:
        """One more recall for each of ``seqs``; written now only if the batch is due."""
        with self._lock:
            self._pending.update(seqs)
            if not self._pending:
                return
            if self._since is None:
                self._since = self._clock()
        if self.due():
            self.flush()

    def due(self) -> bool:
        """Whether the pending counts should be written now."""
        with self._lock:
            if self._since is None:
                return False
            waited = self._clock() - self._since
            return len(self._pending) >= FLUSH_EVENTS or waited >= FLUSH_SECONDS

    def flush(self) -> int:
        """Write every pending count (one transaction); return how many events had some.
        Best effort: a store that cannot take them now (read-only, full, busy past the
        retries, unreachable) loses them, with a log line — never a search's or a close()'s
        failure."""
        with self._lock:
            counts, self._pending, self._since = self._pending, Counter(), None
        if not counts:
            return 0
        try:
            self._store.bump_recall(counts)
        except StoreError as exc:
            log.info("recall counts not updated (%s)", exc)
        return len(counts)

    def flush_if_due(self) -> None:
        """For the background worker's idle loop."""
        if self.due():
            self.flush()
