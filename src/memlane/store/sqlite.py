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
import logging
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.seams import OutboxRow, Tx
from ..core.searchable import CONTENT_CHARS
from ..errors import InvalidInput, SessionManagerError, StoreReadOnly
from ..ranking.keyword.cache import KeywordCache
from ..ranking.keyword.snapshots import KeywordSnapshots
from ..ranking.snapshot_files import partition_digest, remove_temporary
from ._lease import held
from ._migrations import MIGRATIONS
from ._sql import EVENT_COLUMNS, SESSION_COLUMNS, SqlStore, SqlTx, row_to_event, row_to_session
from ._sqlite_errors import RETRY_SECONDS, is_busy, store_error
from ._sqlite_keywords import SqliteKeywordIndex
from ._sqlite_vectors import SqliteVectors
from .base import Capabilities, batched, refuse_unknown_migrations

__all__ = [
    "CAPABILITIES",
    "EVENT_COLUMNS",
    "SESSION_COLUMNS",
    "SqliteStore",
    "row_to_event",
    "row_to_session",
]

log = logging.getLogger("memlane.store.snapshots")

CAPABILITIES = Capabilities(
    name="sqlite",
    multi_process=True,
    multi_host=False,
    keyword_context=True,
    exact_vectors=True,
    transactional_vectors=True,
)
BUSY_TIMEOUT_MS = 5_000
# How long a writer's own WAL checkpoint waits for other processes (_keep_wal_bounded).
_CHECKPOINT_WAIT_MS = 500
# The WAL may grow to the database's own size, or this much for a small database, before the
# worker's checkpoint empties it (see SqliteStore.maintenance).
WAL_FLOOR_BYTES = 64 * 1024 * 1024


def _net_pages(page_size: int) -> int:
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


# How long a worker's claim on outbox rows lasts unless renewed (it is, every third of it,
# while the worker embeds): a killed worker's rows are free again within this.
LEASE_SECONDS = 10.0


class SqliteStore(SqlStore, SqliteKeywordIndex):
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
        #: how a read-only store's connections open, and whether its close has SQLite remove
        #: the -wal and -shm files its reads made (see _read_access)
        self._read_query, self._remove_wal_files = self._read_access() if read_only else ("", False)
        self._local = threading.local()
        #: called at each retry of an operation that found the database locked (metrics)
        self.on_busy: list[Callable[[], None]] = []
        self._connections = _OpenConnections()
        # Threads of this process queue on a lock rather than on SQLite's busy handler, which
        # polls with sleeps of up to tens of milliseconds: a record() behind the embedding
        # worker's short commit then waits microseconds, not a sleep quantum.
        self._write_lock = threading.RLock()
        self._waiting = 0  # threads queued for the write lock
        self._wal_path = str(self.path) + "-wal"
        self._wal_retry_at = 0.0  # when a writer may try to empty an over-long WAL again
        self._wal_backoff = 0.0
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
            self._tidy_snapshot_folder()

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
            holder = _ThreadConnection()
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
                    conn.execute(f"PRAGMA wal_autocheckpoint = {_net_pages(pages)}")
                if not self.read_only:  # a reset WAL is trimmed back to this size
                    conn.execute(f"PRAGMA journal_size_limit = {WAL_FLOOR_BYTES}")
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
        if _may_write(self.path):
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

    def _keep_wal_bounded(self, conn: sqlite3.Connection) -> None:
        """Before a write: if the WAL has passed :func:`wal_limit` (the worker's checkpoints
        could not reset it — several writing processes on a starved CPU grew 150 MB past a
        28 MB bound), this writer empties it first, with a TRUNCATE checkpoint that waits
        briefly for the other processes' readers and writers. A reader that keeps an old
        snapshot for long (an export) cannot be waited out: then the attempts space out
        (0.05 s doubling to 2 s), each bounded by :data:`_CHECKPOINT_WAIT_MS`, and the
        write goes on."""
        if self.read_only or time.monotonic() < self._wal_retry_at:
            return
        try:  # (one stat a write: the common case ends here)
            size = os.stat(self._wal_path).st_size
        except OSError:
            return
        if size <= WAL_FLOOR_BYTES or size <= wal_limit(self.path):
            return
        conn.execute(f"PRAGMA busy_timeout = {_CHECKPOINT_WAIT_MS}")
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
            busy = 1
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if busy:  # again soon, then less and less often while it keeps failing
            self._wal_backoff = min(self._wal_backoff * 2, 2.0) if self._wal_backoff else 0.05
            self._wal_retry_at = time.monotonic() + self._wal_backoff
        else:
            self._wal_backoff = 0.0

    @contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[SqlTx]:
        self._keep_wal_bounded(conn)
        self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
        tx = self._local.tx = SqlTx(conn)
        try:
            try:
                yield tx
            except BaseException:
                _roll_back(conn)
                raise
            try:
                self._retry(lambda: conn.execute("COMMIT"))
            except BaseException:
                # SQLite keeps a transaction open when its COMMIT fails (a deferred
                # constraint, a full disk, an I/O error), for the caller to fix and retry.
                # Nothing here can: left open, it would hold the write lock and fail this
                # thread's next BEGIN with "cannot start a transaction within a transaction".
                _roll_back(conn)
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
        """
        if self.read_only:
            return
        self._vector_index.prune_deletion_log()
        conn = self.connection()
        with self._mapped_errors():
            if self._wal_bytes() <= wal_limit(self.path):
                self._retry(lambda: conn.execute("PRAGMA wal_checkpoint(PASSIVE)"))
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
        what was deleted removed (:meth:`_remove_snapshots`) once ``partitions`` are marked
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
        notes += self._remove_snapshots(partitions)
        return notes

    def _remove_snapshots(self, partitions: Sequence[str]) -> list[str]:
        """Remove the search caches' files an erasure of ``partitions`` may have left: every
        keyword snapshot (all are stale once the generation moved; earlier versions saved
        every stem their process had seen in each), every snapshot of ``partitions``,
        every temporary file of a write (a killed one's partial snapshot; a live one's fails),
        and the folder of the project's former name. Returns what could not be removed."""
        folder = self.snapshot_folder
        digests = {partition_digest(partition) for partition in partitions}
        failed = remove_temporary(folder, every=True)
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            entries = []
        except OSError as exc:
            entries = []
            failed.append(f"{folder} ({exc.strerror or exc})")
        for entry in entries:
            kind, _, rest = entry.name.partition("-")
            if kind == "keywords" or rest.split(".")[0] in digests:
                try:
                    os.unlink(entry.path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    failed.append(f"{entry.path} ({exc.strerror or exc})")
        failed += _remove_folder(self._legacy_snapshot_folder)
        if not failed:
            return []
        return [
            f"search cache files that may hold erased words could not be removed: "
            f"{'; '.join(failed)}. Delete them (the folder {str(folder)!r} is a cache: "
            "nothing is lost), then erase the user again"
        ]

    def _tidy_snapshot_folder(self) -> None:
        """At open: the temporary files of snapshot writes whose writer is gone, and the
        folder of the project's former name (``<database>.asm-cache/``: derived data that
        may hold words erased since), removed. Best effort."""
        failed = remove_temporary(self.snapshot_folder)
        failed += _remove_folder(self._legacy_snapshot_folder)
        if failed:
            log.info("search cache files not removed: %s", "; ".join(failed))

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

    def _wal_bytes(self) -> int:
        try:
            return self.path.with_name(self.path.name + "-wal").stat().st_size
        except OSError:
            return 0

    checkpoint = maintenance

    @property
    def snapshot_folder(self) -> Path:
        """Where the search caches keep their snapshots (``_vector_snapshots.py``,
        ``_keyword_snapshots.py``)."""
        return Path(str(self.path) + ".memlane-cache")

    @property
    def _legacy_snapshot_folder(self) -> Path:
        """Where versions before the rename to memlane kept them."""
        return Path(str(self.path) + ".asm-cache")

    def close(self) -> None:
        self._keywords.close()  # (its background build reads through this store)
        self._connections.close_all()
        self._local = threading.local()
        if self._remove_wal_files:
            self._remove_wal_files = False
            _remove_wal_files(self.path)
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
                for statement in _split_sql(script):
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
        # Drop the session's keyword rows first: the delete trigger then has no neighbour
        # context left to refresh inside the session (it would be deleted a moment later).
        tx.execute(
            "DELETE FROM events_fts WHERE rowid IN (SELECT seq FROM events WHERE session_id = ?)",
            (session_id,),
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

    # -- the outbox and the vector index ----------------------------------------------------

    def vector_index(self) -> SqliteVectors:
        """The vector index in this file (``_sqlite_vectors.py``), one per store."""
        return self._vector_index

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
            self.refresh_previous_context(tx.conn, seqs)

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
        tx.execute("DELETE FROM events_fts")
        tx.execute(
            "INSERT INTO events_fts (rowid, content, context) "
            "SELECT t.seq, t.content, t.context FROM events_search_text t "
            "JOIN events e ON e.seq = t.seq WHERE e.indexed"
        )
        tx.execute(  # a flattened output's whole text is the worker's (finish_deferred)
            "UPDATE events SET deferred = 1 WHERE indexed AND NOT deferred "
            f"AND length(content) >= {CONTENT_CHARS} "
            "AND json_extract(metadata, '$.derived_content') = 1"
        )
        return int(tx.execute("SELECT count(*) FROM outbox").fetchone()[0])

    # -- operators -------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        stats = self.base_stats()
        stats["size_bytes"] = sum(self.footprint()[:2])
        return stats

    def footprint(self) -> tuple[int, int | None, str | None]:
        """The database file's bytes, its WAL's, and the schema version (cheap: two stats
        and one row)."""
        size = self.path.stat().st_size if self.path.exists() else 0
        return size, self._wal_bytes(), self.schema_version()


class _ThreadConnection:
    """Lives as long as the thread that holds it in ``SqliteStore._local`` (see connection())."""

    __slots__ = ("__weakref__",)


class _OpenConnections:
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


@dataclass
class _SqliteBatch:
    store: SqliteStore
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


def _may_write(path: Path) -> bool:
    """Whether this process may write the file at ``path`` and create files beside it (not
    on a read-only filesystem, even as root)."""
    return os.access(path.parent, os.W_OK | os.X_OK) and os.access(path, os.W_OK)


def _remove_wal_files(path: Path) -> None:
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


def _erased_key(partition: str) -> str:
    """The ``meta`` key of the generation an erasure last touched ``partition`` at."""
    return "snapshots_erased:" + partition_digest(partition)


def _remove_folder(folder: Path) -> list[str]:
    """Remove ``folder`` and everything in it, if it exists; what could not be removed."""
    failed: list[str] = []
    if not folder.is_dir() or folder.is_symlink():
        return failed
    for root, folders, files in os.walk(folder, topdown=False):
        for name, remove in [*((f, os.unlink) for f in files), *((d, os.rmdir) for d in folders)]:
            try:
                remove(os.path.join(root, name))
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(f"{os.path.join(root, name)} ({exc.strerror or exc})")
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        if not failed:
            failed.append(f"{folder} ({exc.strerror or exc})")
    return failed


def _roll_back(conn: sqlite3.Connection) -> None:
    """Roll back whatever is still open, never raising: the error that made the caller roll
    back is the one to report. SQLite may have rolled back already (it does on some full-disk
    and I/O errors), and then a ROLLBACK would fail "no transaction is active"."""
    with contextlib.suppress(sqlite3.Error):
        if conn.in_transaction:
            conn.execute("ROLLBACK")


def _split_sql(script: str) -> list[str]:
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
