"""SQLite's write-ahead log kept bounded: how large it may grow beside a database, and a
writer that empties it when the background worker's checkpoints could not
(docs/decisions/2026-11-23-bounded-wal.md). Not part of the public API.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from ._sqlite_errors import is_busy

__all__ = [
    "CHECKPOINT_WAIT_MS",
    "TRIM_BYTES",
    "TRIM_SECONDS",
    "WAL_FLOOR_BYTES",
    "WalBound",
    "net_pages",
    "wal_limit",
]

# How long a writer's own WAL checkpoint waits for other processes (WalBound.keep_bounded).
CHECKPOINT_WAIT_MS = 500
# A WAL the worker's checkpoint has copied back whole is emptied once it is larger than this
# (WalBound.trim), at most every TRIM_SECONDS: otherwise an open store keeps its WAL as large
# as it last grew — 51 MiB beside a 7.9 MiB database after recording LoCoMo's 2,760 turns
# (docs/decisions/2026-11-27-vectors-in-half-precision.md).
TRIM_BYTES = 4 * 1024 * 1024
TRIM_SECONDS = 10.0
# The WAL may grow to the database's own size, or this much for a small database, before the
# worker's checkpoint empties it (see SqliteStore.maintenance).
WAL_FLOOR_BYTES = 64 * 1024 * 1024


def net_pages(page_size: int) -> int:
    """The WAL size (in pages) at which a committing writer checkpoints when the background
    worker has not: three quarters of the floor, so one more transaction stays under it."""
    return max(1, WAL_FLOOR_BYTES * 3 // 4 // page_size)


def wal_limit(path: Path) -> int:
    """The largest WAL tolerated beside the database at ``path``: max(64 MB, its size)."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return max(WAL_FLOOR_BYTES, size)


class WalBound:
    """The WAL beside the database at ``path``: its size, and a writer's checkpoint when it
    has outgrown :func:`wal_limit`."""

    def __init__(self, path: Path, *, writable: bool, busy_timeout_ms: int) -> None:
        self.path = path
        self.writable = writable
        #: the connections' own busy timeout, restored after a checkpoint's shorter one
        self.busy_timeout_ms = busy_timeout_ms
        self._wal_path = str(path) + "-wal"
        self._retry_at = 0.0  # when a writer may try to empty an over-long WAL again
        self._backoff = 0.0
        self._trimmed_at = 0.0  # when trim() last emptied (or tried to empty) the WAL

    def size(self) -> int:
        """The WAL's bytes (0 when there is none)."""
        try:
            return os.stat(self._wal_path).st_size
        except OSError:
            return 0

    def trim(self, conn: sqlite3.Connection) -> None:
        """After a checkpoint that copied the whole WAL back: empty the file if it is larger
        than :data:`TRIM_BYTES` (at most every :data:`TRIM_SECONDS`). A TRUNCATE checkpoint
        that waits for nobody: a reader on the WAL or a writer of the moment makes it give
        up at once, and it is tried again later."""
        if not self.writable or time.monotonic() - self._trimmed_at < TRIM_SECONDS:
            return
        if self.size() <= TRIM_BYTES:
            return
        self._trimmed_at = time.monotonic()
        self._truncate(conn, wait_ms=0)

    def empty(self, conn: sqlite3.Connection) -> bool:
        """A TRUNCATE checkpoint now, tried again for at most :data:`CHECKPOINT_WAIT_MS`
        while other connections keep it from finishing; whether the WAL is empty after.
        (SQLite answers "busy" at once, without its busy handler, while another connection
        checkpoints: this process's worker does after each batch, as ``flush()`` returns.
        Each attempt waits for nobody: a checkpoint waiting for readers would hold the write
        lock, and this process's writers with it, for as long.)"""
        if not self.writable:
            return False
        deadline = time.monotonic() + CHECKPOINT_WAIT_MS / 1000
        while self._truncate(conn, wait_ms=0):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        self._trimmed_at = time.monotonic()
        return True

    def keep_bounded(self, conn: sqlite3.Connection) -> None:
        """Before a write: if the WAL has passed :func:`wal_limit` (the worker's checkpoints
        could not reset it — several writing processes on a starved CPU grew 150 MB past a
        28 MB bound), this writer empties it first, with a TRUNCATE checkpoint that waits
        briefly for the other processes' readers and writers. A reader that keeps an old
        snapshot for long (an export) cannot be waited out: then the attempts space out
        (0.05 s doubling to 2 s), each bounded by :data:`CHECKPOINT_WAIT_MS`, and the
        write goes on."""
        if not self.writable or time.monotonic() < self._retry_at:
            return
        try:  # (one stat a write: the common case ends here)
            size = os.stat(self._wal_path).st_size
        except OSError:
            return
        if size <= WAL_FLOOR_BYTES or size <= wal_limit(self.path):
            return
        if self._truncate(conn, wait_ms=CHECKPOINT_WAIT_MS):
            # again soon, then less and less often while it keeps failing
            self._backoff = min(self._backoff * 2, 2.0) if self._backoff else 0.05
            self._retry_at = time.monotonic() + self._backoff
        else:
            self._backoff = 0.0

    def _truncate(self, conn: sqlite3.Connection, *, wait_ms: int) -> bool:
        """A TRUNCATE checkpoint that waits at most ``wait_ms`` for other connections (the
        connection's own busy timeout restored after); whether it was kept from finishing."""
        conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
        try:
            return bool(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            return True
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
