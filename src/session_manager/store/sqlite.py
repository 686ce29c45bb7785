"""The SQLite event log: sessions, events, the embedding outbox, vectors and FTS5.

One file holds everything (DESIGN.md §1, §3). The file is opened in WAL mode with
``synchronous=NORMAL`` (a committed event survives the process being killed; only an OS crash
may lose the last commits), foreign keys on and a busy timeout. Every write runs in
``BEGIN IMMEDIATE`` — taking the write lock up front means SQLite's busy handler can wait for
it, where a deferred transaction that upgrades later fails at once with "database is locked" —
and :meth:`SqliteStore.atomic` retries that with backoff for a bounded time, so callers never
see "database is locked" while other processes write.

Each thread gets its own connection (sqlite3 connections must not be shared mid-transaction).
Reads take their isolation rule from :class:`~session_manager._scope.Scope`.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import _json
from .._filters import compile_where
from .._scope import Scope
from .._time import from_us
from ..errors import InvalidInput, SchemaTooNew, StoreBusy
from ..events import Event, Session
from ._migrations import MIGRATIONS

__all__ = ["EVENT_COLUMNS", "SqliteStore", "row_to_event", "row_to_session"]

EVENT_COLUMNS = (
    "e.seq, e.id, e.session_id, e.agent_id, e.kind, e.content, e.payload, e.importance, "
    "e.tags, e.metadata, e.status, e.created_us, e.token_count, e.recall_count"
)
SESSION_COLUMNS = (
    "s.id, s.agent_id, s.user_id, s.goal, s.status, s.shared_pool, s.metadata, "
    "s.created_us, s.updated_us"
)
# How long a writer keeps trying to get the lock before StoreBusy: long enough to outlast any
# burst of other writers, short enough that a wedged database is reported, not hung on.
RETRY_SECONDS = 60.0
BUSY_TIMEOUT_MS = 5_000


def row_to_event(row: Sequence[Any]) -> Event:
    return Event(
        seq=row[0],
        id=row[1],
        session_id=row[2],
        agent_id=row[3],
        kind=row[4],
        content=row[5],
        payload=_json.loads(row[6]),
        importance=row[7],
        tags=tuple(_json.loads(row[8])),
        metadata=_json.loads(row[9]),
        status=row[10],
        created_at=from_us(row[11]),
        token_count=row[12],
        recall_count=row[13],
    )


def row_to_session(row: Sequence[Any]) -> Session:
    return Session(
        id=row[0],
        agent_id=row[1],
        user_id=row[2],
        goal=row[3],
        status=row[4],
        shared_pool=row[5],
        metadata=_json.loads(row[6]),
        created_at=from_us(row[7]),
        updated_at=from_us(row[8]),
    )


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteStore:
    """Low-level access to one SQLite database file. Not part of the public API."""

    def __init__(self, path: str | os.PathLike[str], *, autocheckpoint: bool = True) -> None:
        """``autocheckpoint=False`` leaves WAL checkpoints to :meth:`checkpoint` calls (the
        background worker's), so a caller's commit never pays for one."""
        self.path = Path(path)
        self.autocheckpoint = autocheckpoint
        if str(path) != ":memory:" and not self.path.parent.is_dir():
            raise InvalidInput(
                f"The folder {str(self.path.parent)!r} for database {str(self.path)!r} does not "
                "exist. Create it first (mkdir -p) or choose another db_path."
            )
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._closed = False
        # Threads of this process queue on a lock rather than on SQLite's busy handler, which
        # polls with sleeps of up to tens of milliseconds: a record() behind the embedding
        # worker's short commit then waits microseconds, not a sleep quantum.
        self._write_lock = threading.RLock()
        self._migrate()

    # -- connections and transactions -------------------------------------------------------

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise InvalidInput("This SessionManager is closed; open a new one.")
            conn = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=5.0
            )
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
            if not self.autocheckpoint:
                conn.execute("PRAGMA wal_autocheckpoint = 0")
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def _retry(self, operation: Any) -> Any:
        deadline = time.monotonic() + RETRY_SECONDS
        delay = 0.005
        while True:
            try:
                return operation()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    if _is_busy(exc):
                        raise StoreBusy(
                            f"The database {str(self.path)!r} stayed locked for "
                            f"{RETRY_SECONDS:.0f} s. Another process holds a long write "
                            "transaction; find it (e.g. `fuser` on the file) or retry later."
                        ) from exc
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    @contextmanager
    def atomic(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed on success, rolled back on any exception.

        The whole block is retried only while *starting* it is busy; once inside, the write
        lock is held, so the block itself never sees "database is locked".
        """
        conn = self.connection()
        with self._write_lock:
            self._retry(lambda: conn.execute("BEGIN IMMEDIATE"))
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                self._retry(lambda: conn.execute("COMMIT"))

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        conn = self.connection()
        result: list[Any] = self._retry(lambda: conn.execute(sql, params).fetchall())
        return result

    def checkpoint(self) -> None:
        """Copy the WAL back into the database file without blocking readers or writers."""
        self._retry(lambda: self.connection().execute("PRAGMA wal_checkpoint(PASSIVE)"))

    def close(self) -> None:
        self._closed = True
        with self._connections_lock:
            for conn in self._connections:
                # ProgrammingError: closed from another thread already
                with contextlib.suppress(sqlite3.ProgrammingError):
                    conn.close()
            self._connections.clear()
        self._local = threading.local()

    # -- schema ----------------------------------------------------------------------------

    def _migrate(self) -> None:
        try:
            with self.atomic() as conn:
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS migrations "
                    "(name TEXT PRIMARY KEY, applied_us INTEGER)"
                )
                applied = {row[0] for row in conn.execute("SELECT name FROM migrations")}
                known = {name for name, _ in MIGRATIONS}
                unknown = sorted(applied - known)
                if unknown:
                    raise SchemaTooNew(
                        f"The database {str(self.path)!r} has schema migrations this version "
                        f"does not know ({', '.join(unknown)}); it was written by a newer "
                        "agent-session-manager. Upgrade: pip install -U agent-session-manager."
                    )
                for name, script in MIGRATIONS:
                    if name in applied:
                        continue
                    for statement in _split_sql(script):
                        conn.execute(statement)
                    conn.execute(
                        "INSERT INTO migrations (name, applied_us) VALUES (?, ?)",
                        (name, int(time.time() * 1e6)),
                    )
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
                raise
            raise InvalidInput(
                f"{str(self.path)!r} is not a usable session database ({exc}). "
                "Point db_path at a new file or a database made by agent-session-manager."
            ) from exc

    # -- meta ------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        rows = self.read("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    @staticmethod
    def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    @staticmethod
    def bump_generation(conn: sqlite3.Connection) -> None:
        """Tell every vector cache (in any process) that rows disappeared."""
        conn.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")

    # -- sessions --------------------------------------------------------------------------

    def session(self, session_id: str, scope: Scope) -> Session | None:
        clause, params = scope.sql("s")
        rows = self.read(
            f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ? AND {clause}",
            (session_id, *params),
        )
        return row_to_session(rows[0]) if rows else None

    @staticmethod
    def owner_of(conn: sqlite3.Connection, session_id: str) -> tuple[str, str, str | None] | None:
        """(agent_id, status, shared_pool) of a session, unscoped: for write checks only."""
        row = conn.execute(
            "SELECT agent_id, status, shared_pool FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def own_pools(self, agent_id: str) -> set[str]:
        rows = self.read(
            "SELECT DISTINCT shared_pool FROM sessions "
            "WHERE agent_id = ? AND shared_pool IS NOT NULL",
            (agent_id,),
        )
        return {row[0] for row in rows}

    def delete_session(self, conn: sqlite3.Connection, session_id: str) -> int:
        """Delete a session and its events (vectors, outbox and FTS rows follow); return the
        number of events. Call inside :meth:`atomic`, after checking who may delete it."""
        count = conn.execute(
            "SELECT count(*) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        # Drop the session's keyword rows first: the delete trigger then has no neighbour
        # context left to refresh inside the session (it would be deleted a moment later).
        conn.execute(
            "DELETE FROM events_fts WHERE rowid IN (SELECT seq FROM events WHERE session_id = ?)",
            (session_id,),
        )
        conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        self.bump_generation(conn)
        return int(count)

    # -- events ----------------------------------------------------------------------------

    def event(self, event_id: str, scope: Scope) -> Event | None:
        clause, params = scope.sql("s")
        rows = self.read(
            f"SELECT {EVENT_COLUMNS} FROM events e JOIN sessions s ON s.id = e.session_id "
            f"WHERE e.id = ? AND {clause}",
            (event_id, *params),
        )
        return row_to_event(rows[0]) if rows else None

    def events_by_seq(self, seqs: Sequence[int]) -> dict[int, Event]:
        out: dict[int, Event] = {}
        for start in range(0, len(seqs), 500):
            chunk = list(seqs[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            for row in self.read(
                f"SELECT {EVENT_COLUMNS} FROM events e WHERE e.seq IN ({marks})", chunk
            ):
                out[row[0]] = row_to_event(row)
        return out

    def bump_recall(self, seqs: Sequence[int]) -> None:
        if not seqs:
            return
        marks = ", ".join("?" for _ in seqs)
        with self.atomic() as conn:
            conn.execute(
                f"UPDATE events SET recall_count = recall_count + 1 WHERE seq IN ({marks})",
                list(seqs),
            )

    # -- filtered reads --------------------------------------------------------------------

    @staticmethod
    def event_filter_sql(
        scope: Scope,
        *,
        session_id: str | None = None,
        kinds: Sequence[str] | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
        where: Any = None,
        include_shared: bool = True,
    ) -> tuple[str, list[Any]]:
        """The WHERE clause shared by every filtered event read (aliases ``e`` and ``s``)."""
        clause, params = scope.sql("s", include_shared=include_shared)
        parts = [clause]
        if session_id is not None:
            parts.append("e.session_id = ?")
            params.append(session_id)
        if kinds:
            parts.append(f"e.kind IN ({', '.join('?' for _ in kinds)})")
            params.extend(kinds)
        if since_us is not None:
            parts.append("e.created_us >= ?")
            params.append(since_us)
        if until_us is not None:
            parts.append("e.created_us < ?")
            params.append(until_us)
        if where:
            sql, where_params = compile_where(where)
            parts.append(sql)
            params.extend(where_params)
        return " AND ".join(parts), params

    def select_events(
        self,
        where_sql: str,
        params: Sequence[Any],
        *,
        order: str = "e.created_us, e.seq",
        limit: int | None = None,
    ) -> list[Event]:
        sql = (
            f"SELECT {EVENT_COLUMNS} FROM events e JOIN sessions s ON s.id = e.session_id "
            f"WHERE {where_sql} ORDER BY {order}"
        )
        args = list(params)
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [row_to_event(row) for row in self.read(sql, args)]

    def select_seqs(self, where_sql: str, params: Sequence[Any]) -> list[int]:
        rows = self.read(
            f"SELECT e.seq FROM events e JOIN sessions s ON s.id = e.session_id WHERE {where_sql}",
            params,
        )
        return [row[0] for row in rows]

    def keyword_search(
        self,
        fts: str,
        where_sql: str,
        params: Sequence[Any],
        limit: int,
        weights: tuple[float, float] = (1.0, 0.5),
    ) -> list[tuple[int, float]]:
        """``(seq, score)`` best first; score is the negated FTS5 BM25 (higher is better).

        ``weights`` are the BM25 weights of the two indexed columns: the event's content and
        its context (neighbouring events and date; see ``0002_keyword_context``).
        """
        content, context = (float(w) for w in weights)
        rows = self.read(
            f"SELECT e.seq, bm25(events_fts, {content!r}, {context!r}) AS rank FROM events_fts "
            "JOIN events e ON e.seq = events_fts.rowid JOIN sessions s ON s.id = e.session_id "
            f"WHERE events_fts MATCH ? AND {where_sql} ORDER BY rank LIMIT ?",
            (fts, *params, limit),
        )
        return [(row[0], -float(row[1])) for row in rows]

    def event_times(self, seqs: Sequence[int]) -> dict[int, int]:
        """``seq -> created_us`` for the given events (those that still exist)."""
        out: dict[int, int] = {}
        for start in range(0, len(seqs), 500):
            chunk = list(seqs[start : start + 500])
            marks = ", ".join("?" for _ in chunk)
            for seq, created in self.read(
                f"SELECT seq, created_us FROM events WHERE seq IN ({marks})", chunk
            ):
                out[int(seq)] = int(created)
        return out

    # -- outbox and vectors ----------------------------------------------------------------

    def pending_count(self, partitions: Sequence[str] | None = None) -> int:
        if partitions is None:
            return int(self.read("SELECT count(*) FROM outbox")[0][0])
        marks = ", ".join("?" for _ in partitions)
        rows = self.read(f"SELECT count(*) FROM outbox WHERE partition IN ({marks})", partitions)
        return int(rows[0][0])

    def claim_pending(
        self,
        limit: int,
        partitions: Sequence[str] | None = None,
        *,
        force: bool = False,
        lease: float = 120.0,
    ) -> list[tuple[int, str, str]]:
        """Claim up to ``limit`` outbox rows for embedding: ``(seq, partition, content)``.

        Without ``partitions`` (the background worker), rows another process claimed less
        than ``lease`` seconds ago are skipped, so workers in several processes share the
        work; a claim by a process that died simply expires. With ``partitions`` (a search
        catching up on its own scope) or ``force`` (flush) every pending row is taken:
        read-your-writes wins over the rare duplicate embedding, which is harmless (vectors
        are keyed by event).
        """
        now = time.time()
        where: str = "claimed_until < ?"
        params: list[Any] = [now]
        if force:
            where, params = "1", []
        if partitions is not None:
            where = f"partition IN ({', '.join('?' for _ in partitions)})"
            params = list(partitions)
        with self.atomic() as conn:
            seqs = [
                row[0]
                for row in conn.execute(
                    f"SELECT seq FROM outbox WHERE {where} ORDER BY seq LIMIT ?", (*params, limit)
                )
            ]
            if not seqs:
                return []
            marks = ", ".join("?" for _ in seqs)
            conn.execute(
                f"UPDATE outbox SET claimed_until = ? WHERE seq IN ({marks})", (now + lease, *seqs)
            )
            rows = conn.execute(
                "SELECT o.seq, o.partition, e.content FROM outbox o "
                f"JOIN events e ON e.seq = o.seq "
                f"WHERE o.seq IN ({marks}) ORDER BY o.seq",
                seqs,
            ).fetchall()
        return [(row[0], row[1], row[2]) for row in rows]

    def store_vectors(self, rows: Sequence[tuple[int, str, bytes]], register: Any = None) -> None:
        """Write embeddings and clear their outbox rows, in one transaction.

        ``register(conn)`` runs first inside the transaction (it checks or records which
        embedder made the vectors). Events deleted while they were being embedded are skipped.
        """
        with self.atomic() as conn:
            if register is not None:
                register(conn)
            conn.executemany(
                "INSERT OR IGNORE INTO vectors (seq, partition, vector) "
                "SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE seq = ?)",
                [(seq, partition, blob, seq) for seq, partition, blob in rows],
            )
            conn.executemany("DELETE FROM outbox WHERE seq = ?", [(row[0],) for row in rows])
            self.refresh_previous_context(conn, [row[0] for row in rows])

    @staticmethod
    def refresh_previous_context(conn: sqlite3.Connection, seqs: Sequence[int]) -> None:
        """Re-index the keyword context of the two events recorded just before each of ``seqs``
        in its session.

        An event's context includes the next events of its session, which do not exist yet
        when it is recorded; the outbox worker calls this for the batch it embeds, so
        ``record()`` never rewrites other keyword rows (0002_keyword_context).
        """
        if not seqs:
            return
        marks = ", ".join("?" for _ in seqs)
        before = (
            "(SELECT p.seq FROM events p WHERE p.session_id = e.session_id AND p.seq < e.seq "
            "ORDER BY p.seq DESC LIMIT 1 OFFSET {})"
        )
        rows = conn.execute(
            f"SELECT {before.format(0)}, {before.format(1)} FROM events e WHERE e.seq IN ({marks})",
            list(seqs),
        ).fetchall()
        previous = sorted({seq for row in rows for seq in row if seq is not None})
        conn.executemany(
            "UPDATE events_fts SET context = "
            "(SELECT t.context FROM events_search_text t WHERE t.seq = ?) WHERE rowid = ?",
            [(seq, seq) for seq in previous],
        )

    def requeue_all(self) -> int:
        """Drop every vector and the embedder identity, queue every event for embedding and
        rebuild the FTS5 index: the projections start again from the log. Returns the number
        of events queued."""
        with self.atomic() as conn:
            conn.execute("DELETE FROM vectors")
            conn.execute("DELETE FROM meta WHERE key LIKE 'embedder_%'")
            conn.execute(
                "INSERT OR IGNORE INTO outbox (seq, partition) SELECT seq, partition FROM events"
            )
            conn.execute("UPDATE outbox SET claimed_until = 0")
            conn.execute("DELETE FROM events_fts")
            conn.execute(
                "INSERT INTO events_fts (rowid, content, context) "
                "SELECT seq, content, context FROM events_search_text"
            )
            self.bump_generation(conn)
            count = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
        return int(count)

    def vector_rows(self, partition: str, after_vid: int, limit: int) -> list[Any]:
        return self.read(
            "SELECT v.vid, v.seq, e.session_id, e.agent_id, e.kind, e.created_us, v.vector "
            "FROM vectors v JOIN events e ON e.seq = v.seq "
            "WHERE v.partition = ? AND v.vid > ? ORDER BY v.vid LIMIT ?",
            (partition, after_vid, limit),
        )

    def vector_count(self, partition: str, after_vid: int) -> int:
        rows = self.read(
            "SELECT count(*) FROM vectors WHERE partition = ? AND vid > ?", (partition, after_vid)
        )
        return int(rows[0][0])

    def generation(self) -> int:
        rows = self.read("SELECT value FROM meta WHERE key = 'generation'")
        return int(rows[0][0]) if rows else 0


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
