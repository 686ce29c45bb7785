"""The SQLite backend: sessions, events, the embedding outbox, vectors and FTS5 in one file.

One file holds everything (docs/architecture.md, "Storage seams"). The file is opened in WAL mode
with ``synchronous=NORMAL`` (a committed event survives the process being killed; only an OS crash
may lose the last commits), foreign keys on and a busy timeout. Every write runs in
``BEGIN IMMEDIATE`` — taking the write lock up front means SQLite's busy handler can wait for
it, where a deferred transaction that upgrades later fails at once with "database is locked" —
and :meth:`SqliteStore.atomic` retries that with backoff for a bounded time, so callers never
see "database is locked" while other processes write.

A failed ``COMMIT`` is rolled back, and an ``atomic()`` inside another is a savepoint.

Each thread gets its own connection (sqlite3 connections must not be shared mid-transaction),
closed when the thread ends; a snapshot (export) reads on a connection of its own, so the
thread may write meanwhile. ``":memory:"`` is a private file in a temporary folder, removed on
close, so that every connection sees the same database. sqlite3's errors become the library's
(``errors.py``) in one place, :meth:`SqliteStore._mapped_errors`.

The statements shared with PostgreSQL live in ``_sql.py``; this module adds connections, the
schema, FTS5 keyword search and the lease-based outbox claim; its vector index (float32 BLOBs
ranked by numpy) is ``_sqlite_vectors.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.seams import Tx
from ..errors import InvalidInput, SessionManagerError, StoreReadOnly
from ..ranking.keyword.cache import KeywordCache
from ..ranking.keyword.snapshots import KeywordSnapshots
from ..ranking.snapshot_files import partition_digest
from . import _sqlite_wal as wal
from ._migrations import MIGRATIONS
from ._sql import SqlStore
from ._sql_rows import EVENT_COLUMNS, SESSION_COLUMNS, SqlTx, row_to_event, row_to_session
from ._sqlite_cache_files import CacheFiles
from ._sqlite_connections import (
    OpenConnections,
    ThreadConnection,
    may_write,
    remove_wal_files,
    roll_back,
    split_sql,
)
from ._sqlite_errors import RETRY_SECONDS, is_busy, store_error
from ._sqlite_keywords import SqliteKeywordIndex
from ._sqlite_outbox import SqliteOutbox
from ._sqlite_vectors import SqliteVectors
from ._sqlite_wal import WalBound
from .base import Capabilities, refuse_unknown_migrations

__all__ = [
    "CAPABILITIES",
    "EVENT_COLUMNS",
    "SESSION_COLUMNS",
    "SqliteStore",
    "row_to_event",
    "row_to_session",
]

BUSY_TIMEOUT_MS = 5_000

CAPABILITIES = Capabilities(
    name="sqlite",
    multi_process=True,
    multi_host=False,
    keyword_context=True,
    exact_vectors=True,
    transactional_vectors=True,
)


class SqliteStore(SqlStore, SqliteKeywordIndex, SqliteOutbox):
    """The log, vectors and keyword index in one SQLite file. Not part of the public API."""

    capabilities = CAPABILITIES
    # Payloads over PREVIEW_THRESHOLD live in large_payloads (0003_restore_reads): in place,
    # every read of the row's later columns (importance, metadata, times) would walk the
    # payload's overflow pages. PostgreSQL's TOAST already keeps large values apart.
    payload_sql = "coalesce(lp.payload, e.payload)"
    payload_join = " LEFT JOIN large_payloads lp ON lp.seq = e.seq"
    large_payloads_apart = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        autocheckpoint: bool = True,
        read_only: bool = False,
    ) -> None:
        """``autocheckpoint=False`` leaves WAL checkpoints to :meth:`maintenance` calls (the
        background worker's), except past three quarters of the WAL floor, where a commit
        checkpoints itself (a writer outpacing the model must not grow the WAL unbounded).
        ``":memory:"`` is a private database that lasts until :meth:`close` (see
        :meth:`_private_file`).
        ``read_only`` opens an existing database read-only (:meth:`_read_access`): reads
        work, any write is refused by SQLite itself (``StoreReadOnly``), nothing is migrated
        and no file is left behind."""
        self.location = str(path)
        self.autocheckpoint = autocheckpoint
        self.read_only = read_only
        self._remove_private_folder: weakref.finalize[Any, Any] | None = None
        self.path = self._private_file() if str(path) == ":memory:" else Path(path)
        if read_only and not self.path.is_file():
            raise InvalidInput(
                f"There is no database at {str(self.path)!r} to open read-only; read_only=True "
                "opens an existing store. Check the path."
            )
        if not self.path.parent.is_dir():
            raise InvalidInput(
                f"The folder {str(self.path.parent)!r} for database {str(self.path)!r} does not "
                "exist. Create it first (mkdir -p) or choose another db_path."
            )
        self._cache_files = CacheFiles(self.path)
        #: how a read-only store's connections open, and whether its close has SQLite remove
        #: the -wal and -shm files its reads made (see _read_access)
        self._read_query, self._remove_wal_files = self._read_access() if read_only else ("", False)
        self._local = threading.local()
        #: called at each retry of an operation that found the database locked (metrics)
        self.on_busy: list[Callable[[], None]] = []
        self._connections = OpenConnections()
        # Threads of this process queue on a lock rather than on SQLite's busy handler, which
        # polls with sleeps of up to tens of milliseconds: a record() behind the embedding
        # worker's short commit then waits microseconds, not a sleep quantum.
        self._write_lock = threading.RLock()
        self._waiting = 0  # threads queued for the write lock
        self._wal = WalBound(self.path, writable=not read_only, busy_timeout_ms=BUSY_TIMEOUT_MS)
        self._waiting_lock = threading.Lock()
        self._vector_index = SqliteVectors(self)
        keyword_snapshots = KeywordSnapshots(
            self.snapshot_folder, writable=not self.read_only, current=self._at_generation
        )
        self._keywords = KeywordCache(self, snapshots=keyword_snapshots)
        # While opening, a file SQLite cannot use may be the wrong file (see _store_error).
        self._opening = True
        try:
            self._migrate()
        except BaseException:
            self.close()  # nobody else holds this half-open store to close it
            raise
        self._opening = False
        if not self.read_only:
            self._cache_files.tidy()

    def _private_file(self) -> Path:
        """Where ``":memory:"`` lives: a file in a new temporary folder, removed on close.

        SQLite's own ``:memory:`` is a separate database for each connection, and this store
        opens one per thread and one per snapshot: each saw an empty database of its own (the
        background worker failed with "no such table: outbox"). A file they all open is one
        database, with the same locking and WAL behaviour as any other path.
        """
        folder = tempfile.mkdtemp(prefix="asm-memory-")
        # Removed by close(), or when the store is garbage-collected or the interpreter exits
        # without a close().
        self._remove_private_folder = weakref.finalize(
            self, shutil.rmtree, folder, ignore_errors=True
        )
        return Path(folder) / "memory.db"

    # -- connections and transactions -------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and closed when the thread ends."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open_connection()
            # Only this thread's slot of self._local refers to the holder, so it is freed
            # when the thread ends (or close() drops self._local), and its finalizer closes
            # the connection: short-lived threads leave no connection and descriptors behind.
            holder = ThreadConnection()
            release = weakref.finalize(holder, self._connections.release, conn)
            # Not at interpreter exit: finalizers then run while other threads (an embedding
            # worker a program never stopped) may be inside SQLite on that connection, and
            # closing it under them crashed the process (SIGSEGV in 1 exit of 20).
            release.atexit = False
            self._local.holder, self._local.conn = holder, conn
        return conn

    def _open_connection(self) -> sqlite3.Connection:
        if self._connections.closed:
            raise InvalidInput("This SessionManager is closed; open a new one.")
        with self._mapped_errors():
            conn = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?{self._read_query}"
                if self.read_only
                else str(self.path),
                isolation_level=None,
                check_same_thread=False,
                timeout=5.0,
                uri=self.read_only,
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                if not self.read_only:  # a read-only connection cannot change the journal
                    self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                if not self.autocheckpoint:
                    # The worker checkpoints after each batch (maintenance); a writer that
                    # outpaces it checkpoints itself once the WAL nears the floor. Without
                    # this net a model slower than the writer let the WAL grow by a whole
                    # batch's worth of writes: 8,000 events embedded by MiniLM peaked at
                    # 171-237 MB beside a 43 MB database. One commit in ~1,500 pays for it.
                    pages = int(conn.execute("PRAGMA page_size").fetchone()[0])
                    conn.execute(f"PRAGMA wal_autocheckpoint = {wal.net_pages(pages)}")
                if not self.read_only:  # a reset WAL is trimmed back to this size
                    conn.execute(f"PRAGMA journal_size_limit = {wal.WAL_FLOOR_BYTES}")
            except BaseException:
                conn.close()
                raise
        self._connections.add(conn)
        return conn

    def _read_access(self) -> tuple[str, bool]:
        """The URI parameters of a read-only store's connections, and whether its close should
        have SQLite remove the -wal and -shm files beside the database.

        A database in WAL mode is read through its -shm file (the WAL's index), which SQLite
        creates if it is missing — and a read-only connection never removes it, nor the
        -wal, when it closes. So:

        - where this user may write the file and its folder, other processes may write
          meanwhile: ``mode=ro``, through the -wal and -shm (a reader sees their writes); if
          neither existed, the close has SQLite remove them (:func:`_remove_wal_files`);
        - where it may not (a read-only disk, a folder or file of another user), with no -wal
          (or an empty one: the store was closed cleanly) the file is the whole database, and
          ``immutable=1`` reads it without any -shm (it does not see writes other processes
          make after it opened: none can be made on a read-only disk);
        - with a -wal holding changes (a process killed with the store open) and its -shm (or
          a folder where SQLite can make one), ``mode=ro`` reads through them;
        - with a -wal holding changes and no -shm that can be created, SQLite cannot read it:
          the error says how to.
        """
        wal, shm = Path(f"{self.path}-wal"), Path(f"{self.path}-shm")
        if may_write(self.path):
            return "mode=ro", not wal.exists() and not shm.exists()
        try:
            logged = wal.stat().st_size
        except FileNotFoundError:
            logged = 0
        except OSError:
            logged = 1  # (not known to be empty)
        if not logged:
            return "mode=ro&immutable=1", False
        if shm.exists() or os.access(self.path.parent, os.W_OK | os.X_OK):
            return "mode=ro", False  # (another user's file: SQLite makes the -shm it lacks)
        raise StoreReadOnly(
            f"The database {str(self.path)!r} was not closed cleanly: its write-ahead log "
            f"{str(wal)!r} holds changes that SQLite reads only through a -shm file beside "
            f"it, and there is none, nor can one be created in {str(self.path.parent)!r} "
            "(it cannot be written). Copy the database with its -wal file to a folder this "
            "user can write and open the copy (read_only=True works there), or open it once "
            "without read_only where it can be written, which folds the log back into the file."
        )

    def _retry(self, operation: Any) -> Any:
        deadline = time.monotonic() + RETRY_SECONDS
        delay = 0.005
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() > deadline:
                    raise  # _mapped_errors, around every caller, says what it means
                for hook in self.on_busy:
                    hook()
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    @contextmanager
    def atomic(self) -> Iterator[SqlTx]:
        """A write transaction: committed on success, rolled back on any exception.

        The whole block is retried only while *starting* it is busy; once inside, the write
        lock is held, so the block itself never sees "database is locked". An ``atomic()``
        inside another on the same thread is a savepoint: its failure undoes its own writes
        only, and its ``on_commit`` callbacks wait for the outermost commit.
        """
        conn = self.connection()
        outer: SqlTx | None = getattr(self._local, "tx", None)
        with self._mapped_errors(), self._queued_for_write():
            block = self._transaction(conn) if outer is None else self._savepoint(conn, outer)
            with block as tx:
                yield tx
        if outer is None:
            tx.committed()

    @contextmanager
    def _queued_for_write(self) -> Iterator[None]:
        """Hold the process's write lock; on release, let a thread queued for it go first.

        Python's locks are not fair: a thread that writes in a loop takes the lock again
        before a woken waiter gets the interpreter, so the embedding worker could wait out
        a whole burst of ``record()`` calls (seen: 0.2 s, while the WAL grew by 100 MB).
        """
        with self._waiting_lock:
            self._waiting += 1
        with self._write_lock:
            with self._waiting_lock:
                self._waiting -= 1
            yield
        if self._waiting:
            time.sleep(0)  # give up the interpreter: the waiter takes the lock now

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[SqlTx]:
        self._wal.keep_bounded(conn)
        self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        tx = self._local.tx = SqlTx(conn)
        try:
            try:
                yield tx
            except BaseException:
                roll_back(conn)
                raise
            try:
                self._retry(lambda: conn.execute("COMMIT"))
            except BaseException:
                # SQLite keeps a transaction open when its COMMIT fails (a deferred
                # constraint, a full disk, an I/O error), for the caller to fix and retry.
                # Nothing here can: left open, it would hold the write lock and fail this
                # thread's next BEGIN with "cannot start a transaction within a transaction".
                roll_back(conn)
                raise
        finally:
            self._local.tx = None

    @contextmanager
    def _savepoint(self, conn: sqlite3.Connection, outer: SqlTx) -> Iterator[SqlTx]:
        # One name for every level is enough: ROLLBACK TO and RELEASE act on the innermost
        # savepoint of that name, which is always this block's own.
        conn.execute("SAVEPOINT asm_nested")
        tx = self._local.tx = SqlTx(conn)
        try:
            try:
                yield tx
            except BaseException:
                # Guarded: the error that made the block fail is the one to report.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK TO asm_nested")
                    conn.execute("RELEASE asm_nested")
                raise
            conn.execute("RELEASE asm_nested")
            tx.hand_hooks_to(outer)
        finally:
            self._local.tx = outer

    @contextmanager
    def snapshot(self) -> Iterator[SqlTx]:
        """One read snapshot (WAL: writers go on meanwhile), on a connection of its own.

        Not the thread's connection: a snapshot may stay open for as long as its reader
        likes (an export streams), and the thread may write meanwhile (delete a session it
        has just exported), which on a connection inside a read transaction would fail.
        """
        conn = self._open_connection()
        try:
            with self._mapped_errors():
                conn.execute("BEGIN")
                # A deferred transaction takes its snapshot at its first read: read now, so
                # the snapshot is of this moment, not of whenever the caller first reads.
                conn.execute("SELECT count(*) FROM migrations").fetchone()
                yield SqlTx(conn)
        finally:
            self._connections.release(conn)  # closing it ends the read transaction

    def _read(self, sql: str, params: Sequence[Any] = (), tx: Tx | None = None) -> list[Any]:
        with self._mapped_errors():
            if tx is not None:
                return list(tx.execute(sql, params).fetchall())
            conn = self.connection()
            result: list[Any] = self._retry(lambda: conn.execute(sql, params).fetchall())
            return result

    def maintenance(self) -> None:
        """Prune the vectors' deletion log (0008_deletion_log); copy the WAL back into the
        database file, and keep the WAL bounded.

        A PASSIVE checkpoint blocks nobody, but under a steady stream of writes it never
        gets to the WAL's end, and SQLite only restarts a WAL from its beginning once it
        has: 4,000 recorded events grew a 424 MB WAL for a 38 MB database (14.5 GB at
        100k: docs/decisions/2026-11-23-bounded-wal.md). So when the WAL is larger than
        :func:`wal_limit`, the checkpoint is a TRUNCATE, which waits (busy handler) for the writers
        of the moment and empties the file; ``journal_size_limit`` trims what a reset leaves.
        A WAL a PASSIVE checkpoint copied back whole is emptied too, if it is still large and
        nobody is on it (``WalBound.trim``): an idle store keeps no tens of megabytes of it.
        """
        if self.read_only:
            return
        self._vector_index.prune_deletion_log()
        conn = self.connection()
        with self._mapped_errors():
            if self._wal.size() <= wal.wal_limit(self.path):
                done = self._retry(
                    lambda: conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                )
                if done is not None and done[0] == 0 and done[1] == done[2]:  # all copied back
                    self._wal.trim(conn)
                return
            # This process's writers pause meanwhile: SQLite's busy handler polls with
            # sleeps, and a writer in a loop never left it a gap (seen: 0.2 s of retries
            # while the WAL grew by 100 MB).
            with self._queued_for_write():
                self._retry(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))

    @contextmanager
    def secure_deletes(self) -> Iterator[None]:
        """What this thread deletes meanwhile is overwritten with zeros in the file (and the
        pages written to the WAL), not merely unlinked (``PRAGMA secure_delete``)."""
        conn = self.connection()
        with self._mapped_errors():
            conn.execute("PRAGMA secure_delete = ON")
        try:
            yield
        finally:
            with self._mapped_errors():
                conn.execute("PRAGMA secure_delete = OFF")

    def scrub(self, partitions: Sequence[str]) -> list[str]:
        """After deletes that must leave no trace: FTS5's segments merged into one (a deleted
        row's terms otherwise survive in the segments written before), the WAL copied back
        and truncated (its old frames hold old pages), and the snapshot files that may hold
        what was deleted removed (``CacheFiles.remove_for_erasure``) once ``partitions`` are marked
        erased (:meth:`snapshot_current`: no process writes or uses a snapshot of them built
        before). Returns what could not be done."""
        notes: list[str] = []
        conn = self.connection()
        with self.secure_deletes(), self.atomic() as tx:
            tx.execute("INSERT INTO events_fts (events_fts) VALUES ('optimize')")
            self.bump_generation(tx)
            generation = str(self._generation_in(tx))
            for partition in partitions:
                self.set_meta(tx, _erased_key(partition), generation)
        with self._mapped_errors(), self._queued_for_write():
            busy = self._retry(lambda: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone())
        if busy and busy[0]:
            notes.append(
                "the write-ahead log could not be truncated now (another connection was reading "
                "an older snapshot): its old pages are overwritten as the log is reused"
            )
        notes += self._cache_files.remove_for_erasure(partitions)
        return notes

    def snapshot_current(self, partition: str, stamp: int) -> bool:
        """Whether data of ``partition`` read from the log at generation ``stamp`` may be in
        a snapshot file: not if an erasure touched the partition since (:meth:`scrub`)."""
        mark = self.get_meta(_erased_key(partition))
        return mark is None or stamp >= int(mark)

    def _at_generation(self, partition: str, generation: int) -> bool:
        """Whether a keyword snapshot built at ``generation`` is current: it is the store's
        (every erasure moves it, and a keyword snapshot of an older one is never used)."""
        return generation == self.generation()

    def _generation_in(self, tx: Tx) -> int:
        rows = tx.execute("SELECT value FROM meta WHERE key = 'generation'").fetchall()
        return int(rows[0][0]) if rows else 0

    checkpoint = maintenance

    def settle(self) -> None:
        """After ``flush()``: the WAL copied back into the database and emptied (a TRUNCATE
        checkpoint that waits half a second at most: a connection of another process still
        reading makes it give up, and the worker's checkpoints empty it later). Then the
        database file alone holds everything (a copy of it is a backup), and the folder is
        no larger than the data: recording LoCoMo's 2,760 turns left a 36.5 MiB WAL beside
        a 5.2 MiB database until the store had been idle for a while
        (docs/decisions/2026-11-27-flush-empties-the-wal.md)."""
        if self.read_only or self._wal.size() == 0:
            return
        conn = self.connection()
        with self._mapped_errors():
            self._wal.empty(conn)

    @property
    def snapshot_folder(self) -> Path:
        """Where the search caches keep their snapshots (``ranking/vectors/snapshots.py``,
        ``ranking/keyword/snapshots.py``)."""
        return self._cache_files.folder

    def close(self) -> None:
        self._keywords.close()  # (its background build reads through this store)
        self._connections.close_all()
        self._local = threading.local()
        if self._remove_wal_files:
            self._remove_wal_files = False
            remove_wal_files(self.path)
        if self._remove_private_folder is not None:
            self._remove_private_folder()

    # -- driver errors ---------------------------------------------------------------------

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Turn sqlite3's errors into the library's (errors.py): the one place where they are
        mapped, around every use of a connection; the driver's exception stays the
        ``__cause__``."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc

    def _store_error(self, exc: sqlite3.Error) -> SessionManagerError:
        """The library's error that ``exc`` means, its message naming the file and the fix."""
        return store_error(exc, self.path, opening=self._opening, read_only=self.read_only)

    # -- schema ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        if self.read_only:
            self._check_schema()
            return
        with self.atomic() as tx:
            conn = tx.conn
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_us INTEGER)"
            )
            applied = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            known = {name for name, _ in MIGRATIONS}
            refuse_unknown_migrations(applied, known, repr(str(self.path)))
            for name, script in MIGRATIONS:
                if name in applied:
                    continue
                for statement in split_sql(script):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (name, applied_us) VALUES (?, ?)",
                    (name, int(time.time() * 1e6)),
                )

    def _check_schema(self) -> None:
        """Read-only: the schema must be this version's already (nothing can be migrated)."""
        found = self._read(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'migrations'"
        )
        applied = {row[0] for row in self._read("SELECT name FROM migrations")} if found else set()
        known = {name for name, _ in MIGRATIONS}
        refuse_unknown_migrations(applied, known, repr(str(self.path)))
        if known - applied:
            raise StoreReadOnly(
                f"The database {str(self.path)!r} needs its schema upgraded "
                f"({', '.join(sorted(known - applied))}), which read_only=True cannot do. Open "
                "it once without read_only (as a user who may write it), then read-only again."
            )

    # -- hooks of the shared statements ----------------------------------------------------

    def _deleting_session(self, tx: Tx, session_id: str) -> None:
        # Drop the session's keyword rows first and unmark its events: the delete triggers
        # then have no neighbour's row to take out and put back (contexts stay within a
        # session, so no other row changes). Each row once, while the view still gives it.
        rows = tx.execute(
            "SELECT seq FROM events WHERE session_id = ? AND keyword_row", (session_id,)
        ).fetchall()
        tx.executemany("DELETE FROM events_fts WHERE rowid = ?", rows)
        tx.execute(
            "UPDATE events SET keyword_row = 0 WHERE session_id = ? AND keyword_row", (session_id,)
        )

    def _deleted(self, tx: Tx) -> None:
        self.bump_generation(tx)

    @staticmethod
    def bump_generation(tx: Tx) -> None:
        """Tell every vector cache (in any process) that rows disappeared."""
        tx.execute(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) "
            "WHERE key = 'generation'"
        )

    # -- the vector index ------------------------------------------------------------------

    def vector_index(self) -> SqliteVectors:
        """The vector index in this file (``_sqlite_vectors.py``), one per store."""
        return self._vector_index

    # -- operators -------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        stats = self.base_stats()
        stats["size_bytes"] = sum(self.footprint()[:2])
        return stats

    def footprint(self) -> tuple[int, int | None, str | None]:
        """The database file's bytes, its WAL's, and the schema version (cheap: two stats
        and one row)."""
        size = self.path.stat().st_size if self.path.exists() else 0
        return size, self._wal.size(), self.schema_version()


def _erased_key(partition: str) -> str:
    """The ``meta`` key of the generation an erasure last touched ``partition`` at."""
    return "snapshots_erased:" + partition_digest(partition)
