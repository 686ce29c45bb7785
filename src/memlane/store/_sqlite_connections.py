"""SQLite's connections and files, below :class:`~memlane.store.sqlite.SqliteStore`: the
set of open connections close() reaches, rolling back without masking an error, migrations
split into statements, and the -wal / -shm files a read-only store leaves. Not part of the
public API.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path

from ..errors import InvalidInput

__all__ = [
    "OpenConnections",
    "ThreadConnection",
    "may_write",
    "remove_wal_files",
    "roll_back",
    "split_sql",
]


class ThreadConnection:
    """Lives as long as the thread that holds it in ``SqliteStore._local`` (see connection())."""

    __slots__ = ("__weakref__",)


class OpenConnections:
    """Every connection a store has open (threads' and snapshots'), so close() reaches all.

    Whoever takes a connection out of the set closes it, so it is closed exactly once: a
    thread's finalizer and close() may race for it, and two concurrent closes of one sqlite3
    connection would free it twice.
    """

    def __init__(self) -> None:
        # Reentrant: a finalizer may run, through garbage collection, in a thread that is
        # already inside one of these methods.
        self._lock = threading.RLock()
        self._open: set[sqlite3.Connection] = set()
        self.closed = False

    def add(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self.closed:
                self._open.add(conn)
                return
        conn.close()  # the store was closed while this one was opening
        raise InvalidInput("This SessionManager is closed; open a new one.")

    def release(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if conn not in self._open:
                return
            self._open.discard(conn)
        conn.close()

    def close_all(self) -> None:
        with self._lock:
            self.closed = True
            connections, self._open = self._open, set()
        for conn in connections:
            conn.close()


def may_write(path: Path) -> bool:
    """Whether this process may write the file at ``path`` and create files beside it (not
    on a read-only filesystem, even as root)."""
    return os.access(path.parent, os.W_OK | os.X_OK) and os.access(path, os.W_OK)


def remove_wal_files(path: Path) -> None:
    """After a read-only store's last connection closed, in a folder it may write: the -wal
    and -shm files its reads made (SQLite's read-only connections never remove them) removed
    as SQLite removes them, by a connection that reads nothing and closes. As the last
    connection to the file it checkpoints the WAL (empty: nothing is written into the file)
    and deletes both; while another process has the database open it leaves them to it.
    Only while the WAL is empty: a read-only store never copies another process's writes into
    the file. Best effort."""
    try:
        if Path(f"{path}-wal").stat().st_size:
            return
    except OSError:
        return
    with contextlib.suppress(sqlite3.Error):
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=rw", uri=True)
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()


def roll_back(conn: sqlite3.Connection) -> None:
    """Roll back whatever is still open, never raising: the error that made the caller roll
    back is the one to report. SQLite may have rolled back already (it does on some full-disk
    and I/O errors), and then a ROLLBACK would fail "no transaction is active"."""
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def split_sql(script: str) -> list[str]:
    """Split a migration into statements; ``sqlite3.complete_statement`` keeps triggers whole."""
    statements, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
