"""A manager's view of the store's buffer epoch: when the Redis working buffer may answer.

``buffer.py`` says what the epoch is for; this is the manager's side of it
(docs/decisions/2026-11-24-redis-working-buffer.md). The epoch lives in the log
(``meta.buffer_epoch``); the manager reads it at most every ``RedisBuffer.epoch_check`` seconds and
at once after a Redis call of its buffer failed. It moves the epoch, in a transaction of its own
after the commit, when a committed write or delete could not be passed on to Redis, and when its
buffer's Redis calls begin to fail (a failing Redis may be restarting with older data, or be cut off
from this host only). When the move itself cannot be written (the store is full or unreachable), the
manager trusts its buffer no more until it can: its reads go to the log, and it tries again at the
next one.

Not part of the public API.
"""

from __future__ import annotations

import logging
import threading
import time

from ..buffer import RedisBuffer
from ..store.base import Log

__all__ = ["BufferEpoch"]

log = logging.getLogger("memlane.buffer")


class BufferEpoch:
    """The store's buffer epoch as one manager knows it (see the module docstring)."""

    def __init__(self, store: Log, buffer: RedisBuffer, *, writable: bool) -> None:
        self._store = store
        self._buffer = buffer
        self._writable = writable
        self._lock = threading.Lock()
        self._epoch = 0
        self._due = 0.0  # (monotonic) when the epoch must be read again: at once
        self._failures = buffer.failures  # the buffer's failures already answered for
        self._owed = False  # a move this manager could not write yet

    def current(self) -> int | None:
        """The epoch to read and fill the buffer with, read again if it is due (or if the
        buffer failed since: moved then, by a manager that may write); None while a move
        this manager owes the store could not be written (the log answers meanwhile)."""
        if self._owed or self._buffer.failures != self._failures or time.monotonic() >= self._due:
            with self._lock:
                failures = self._buffer.failures
                if self._owed or failures != self._failures:
                    self._failures = failures
                    if self._writable:
                        self._move()
                    else:
                        self._read()
                elif time.monotonic() >= self._due:
                    self._read()
        return None if self._owed else self._epoch

    def moved(self) -> None:
        """A committed write or delete did not reach Redis: move the epoch, so that no
        manager serves the entry that misses it."""
        with self._lock:
            self._failures = self._buffer.failures  # (this move answers for them too)
            self._move()

    def _read(self) -> None:
        self._epoch = self._store.buffer_epoch()
        self._due = time.monotonic() + self._buffer.epoch_check

    def _move(self) -> None:
        try:
            with self._store.atomic() as tx:
                self._epoch = self._store.bump_buffer_epoch(tx)
        except Exception as exc:  # (called after a commit: the caller's write stands)
            if not self._owed:
                log.warning(
                    "the Redis working buffer's epoch could not be moved (%s); this manager "
                    "reads the log until it can",
                    exc,
                )
            self._owed = True
            return
        self._owed = False
        self._due = time.monotonic() + self._buffer.epoch_check
