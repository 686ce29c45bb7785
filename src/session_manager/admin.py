"""Store-wide operations for operators and the ``asm`` command line.

:class:`StoreAdmin` opens the same SQLite file a :class:`~session_manager.SessionManager`
uses, but it is deliberately **not scoped to one agent**: it lists, exports, imports,
deletes and prunes the sessions of every agent in the file. It is the operator's view of the
whole store (like a database shell), not something to hand to an agent. Agents keep using
``SessionManager``, whose isolation this module does not touch: nothing here changes what a
``SessionManager`` may read or write.

The export format (JSON Lines, one object per line, UTF-8):

* a header ``{"type": "header", "format": "agent-session-manager/export", "version": 1}``;
* per session, oldest first: a ``{"type": "session", ...}`` record followed by its
  ``{"type": "event", ...}`` records in log order.

Timestamps are ISO-8601 UTC with microseconds (``2026-11-22T10:31:00.123456Z``); payloads and
metadata are JSON values. Everything in the log is exported (ids, times, payloads, importance,
tags, metadata, statuses, token and recall counts, pools); vectors and the keyword index are
projections and are rebuilt after an import. Exporting, importing into a fresh file and
exporting again gives a byte-identical file.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ._indexer import Indexer
from ._scope import Scope
from ._search import Searcher
from ._time import from_us, now_us, to_us
from ._transfer import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    BadRecord,
    ImportResult,
    Progress,
    check_status,
    event_to_dict,
    format_time,
    json_line,
    run_import,
    session_to_dict,
)
from ._validate import identifier, text
from .embed import LoadedEmbedder, load_embedder
from .errors import InvalidInput, SessionNotFound
from .events import Event, Hit, Session, validate_kind
from .protocols import Embedder
from .store.sqlite import SESSION_COLUMNS, SqliteStore, row_to_session

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "BadRecord",
    "ImportResult",
    "PruneResult",
    "SessionInfo",
    "StoreAdmin",
    "StoreStats",
    "event_to_dict",
    "format_time",
    "json_line",
    "parse_cutoff",
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}


# ---------------------------------------------------------------------------------------
# Small public helpers
# ---------------------------------------------------------------------------------------


def parse_cutoff(value: datetime | timedelta | str, what: str = "older_than") -> int:
    """A point in time, as microseconds since the epoch, from an age or a timestamp.

    An age is a :class:`~datetime.timedelta` or a string such as ``"90d"``, ``"12h"``,
    ``"30min"``, ``"2w"`` (s, m/min, h, d, w), counted back from now; anything else is an
    ISO-8601 timestamp or a datetime (naive means UTC).

    >>> parse_cutoff("1970-01-02T00:00:00Z")
    86400000000
    """
    if isinstance(value, timedelta):
        return now_us() - int(value.total_seconds() * 1_000_000)
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            seconds = float(match.group(1)) * _UNITS[match.group(2)]
            return now_us() - int(seconds * 1_000_000)
        try:
            return to_us(value, what)
        except InvalidInput:
            raise InvalidInput(
                f"{what} {value!r} is neither an age nor a timestamp; use e.g. '90d', '12h', "
                "'30min' or '2026-05-01T12:00:00Z'."
            ) from None
    return to_us(value, what)


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionInfo:
    """A session with its size: what ``asm sessions`` lists.

    ``last_activity`` is when the session last changed (an event recorded, the session
    ended).
    """

    session: Session
    events: int
    tokens: int

    @property
    def last_activity(self) -> datetime:
        return self.session.updated_at

    def to_dict(self) -> dict[str, Any]:
        data = session_to_dict(self.session)
        data["last_activity"] = data.pop("updated_at")
        data["events"] = self.events
        data["tokens"] = self.tokens
        return data


@dataclass(frozen=True)
class StoreStats:
    """What is in a store: counts, size, the embedder behind its vectors, the backlog."""

    path: str
    size_bytes: int
    sessions: int
    events: int
    sessions_by_status: dict[str, int]
    events_by_agent: dict[str, dict[str, int]]  # agent -> kind -> count
    vectors: int
    pending_embeddings: int
    embedder_name: str | None  # the embedder that made the stored vectors, if any
    embedder_dim: int | None
    migrations: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "sessions": self.sessions,
            "events": self.events,
            "sessions_by_status": self.sessions_by_status,
            "events_by_agent": self.events_by_agent,
            "vectors": self.vectors,
            "pending_embeddings": self.pending_embeddings,
            "embedder": {"name": self.embedder_name, "dim": self.embedder_dim},
            "migrations": self.migrations,
        }


@dataclass(frozen=True)
class PruneResult:
    """What :meth:`StoreAdmin.prune` removed (or, with ``dry_run``, would remove).

    Without a kind, whole sessions go (``sessions`` lists them, ``events`` counts their
    events); with a kind, only events of that kind go and ``sessions`` stays empty
    (``sessions_touched`` says how many sessions they came from).
    """

    cutoff: datetime
    sessions: list[SessionInfo]
    events: int
    events_by_kind: dict[str, int]
    sessions_touched: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": format_time(self.cutoff),
            "dry_run": self.dry_run,
            "sessions": [info.to_dict() for info in self.sessions],
            "events": self.events,
            "events_by_kind": self.events_by_kind,
            "sessions_touched": self.sessions_touched,
        }


# ---------------------------------------------------------------------------------------
# The admin
# ---------------------------------------------------------------------------------------


class StoreAdmin:
    """Store-wide operations on one SQLite session database, across every agent.

    This is an operator's view and deliberately **not** scoped to an agent: it sees and
    changes every agent's sessions. Give agents a :class:`~session_manager.SessionManager`
    (isolated per ``agent_id``), never a ``StoreAdmin``.

    >>> from session_manager.admin import StoreAdmin
    >>> with StoreAdmin("./sessions.db") as admin:  # doctest: +SKIP
    ...     for info in admin.sessions(status="active"):
    ...         print(info.session.id, info.session.agent_id, info.events)

    Parameters:
        db_path: the SQLite file (created if missing, like ``SessionManager``'s).
        embedder: used only by :meth:`search` and :meth:`reindex`; ``None`` for the default
            all-MiniLM-L6-v2, loaded on first use.
        batch_size: texts per embedding batch in :meth:`reindex`.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str] = "sessions.db",
        *,
        embedder: Embedder | LoadedEmbedder | None = None,
        batch_size: int = 64,
    ) -> None:
        self.db_path = os.fspath(db_path)
        self._store = SqliteStore(db_path)
        self._embedder_spec = embedder
        self._loaded: LoadedEmbedder | None = None
        self._indexer: Indexer | None = None
        self.batch_size = batch_size

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> StoreAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreAdmin(db_path={self.db_path!r})"

    @property
    def embedder(self) -> LoadedEmbedder:
        """The configured embedder (nothing is loaded until it first embeds)."""
        if self._loaded is None:
            self._loaded = load_embedder(self._embedder_spec)
        return self._loaded

    def _checked_indexer(self) -> Indexer:
        if self._indexer is None:
            # Checks the store's embedder identity: EmbedderMismatch points at reindex.
            self._indexer = Indexer(self._store, self.embedder, batch_size=self.batch_size)
        return self._indexer

    # -- reading ---------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionInfo:
        """One session of any agent, with its size.

        Raises :class:`~session_manager.errors.SessionNotFound` if the store has no such
        session.
        """
        rows = self._session_rows("s.id = ?", [session_id], limit=1)
        if not rows:
            raise SessionNotFound(
                f"Session {session_id!r} does not exist in {self.db_path!r}. "
                "List sessions with `asm sessions`."
            )
        return rows[0]

    def sessions(
        self,
        agent: str | None = None,
        status: str | None = None,
        user: str | None = None,
        since: datetime | timedelta | str | None = None,
        limit: int | None = None,
    ) -> list[SessionInfo]:
        """Sessions of every agent (or of ``agent``), most recently active first.

        ``since`` keeps sessions active since then: a timestamp or an age ("7d").

        >>> [info.session.goal for info in admin.sessions(status="active")]  # doctest: +SKIP
        """
        parts: list[str] = []
        params: list[Any] = []
        if agent is not None:
            parts.append("s.agent_id = ?")
            params.append(agent)
        if status is not None:
            parts.append("s.status = ?")
            params.append(check_status(status))
        if user is not None:
            parts.append("s.user_id = ?")
            params.append(user)
        if since is not None:
            parts.append("s.updated_us >= ?")
            params.append(parse_cutoff(since, "since"))
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInput(f"limit must be an integer, got {limit!r}.")
        return self._session_rows(" AND ".join(parts) or "1", params, limit=limit)

    def _session_rows(
        self, where: str, params: Sequence[Any], *, limit: int | None = None
    ) -> list[SessionInfo]:
        sql = (
            f"SELECT {SESSION_COLUMNS}, "
            "(SELECT count(*) FROM events e WHERE e.session_id = s.id), "
            "(SELECT coalesce(sum(e.token_count), 0) FROM events e WHERE e.session_id = s.id) "
            f"FROM sessions s WHERE {where} ORDER BY s.updated_us DESC, s.id DESC"
        )
        args = list(params)
        if limit is not None:
            sql += " LIMIT ?"
            args.append(max(0, limit))
        return [
            SessionInfo(row_to_session(row[:9]), int(row[9]), int(row[10]))
            for row in self._store.read(sql, args)
        ]

    def events(
        self,
        session_id: str,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """A session's events in log order (any agent's session); ``limit`` keeps the
        *latest* ``limit`` events."""
        self.session(session_id)
        kinds = [validate_kind(kind) for kind in kinds] if kinds else None
        where, params = "e.session_id = ?", [session_id]
        if kinds:
            where += f" AND e.kind IN ({', '.join('?' for _ in kinds)})"
            params.extend(kinds)
        if limit is None:
            return self._store.select_events(where, params)
        latest = self._store.select_events(
            where, params, order="e.created_us DESC, e.seq DESC", limit=max(0, limit)
        )
        return latest[::-1]

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: str = "hybrid",
        agent: str | None = None,
        session: str | None = None,
        kinds: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
    ) -> list[Hit]:
        """Search one agent's memory (``agent``), one session, or every agent's.

        Each agent's own sessions are searched as that agent would search them; across
        agents the best ``k`` hits are kept by score (cosine and BM25 scores compare across
        agents; hybrid scores are rank fusions, so across agents they interleave ranks).
        Unlike ``SessionManager.search``, an operator's search does **not** count recalls:
        looking at memory should not change what agents restore.
        """
        query = text(query, "query")
        if session is not None:
            owner = self.session(session).session.agent_id
            if agent is not None and agent != owner:
                raise SessionNotFound(
                    f"Session {session!r} does not exist for agent {agent!r} (it belongs to "
                    f"{owner!r}). Drop the agent filter, or list sessions with `asm sessions`."
                )
            agents = [owner]
        elif agent is not None:
            agents = [identifier(agent, "agent")]
        else:
            agents = [row[0] for row in self._store.read("SELECT DISTINCT agent_id FROM sessions")]
        indexer = self._checked_indexer()
        hits: list[Hit] = []
        for name in sorted(agents):
            searcher = Searcher(self._store, indexer, Scope(name))
            hits.extend(
                searcher.search(
                    query,
                    k,
                    mode=mode,
                    session_id=session,
                    kinds=kinds,
                    where=where,
                    count_recall=False,
                )
            )
        hits.sort(key=lambda hit: (-hit.score, hit.event.id))
        return hits[:k]

    def stats(self) -> StoreStats:
        """Counts by agent, kind and status; file size; the embedder behind the vectors."""
        read = self._store.read
        by_agent: dict[str, dict[str, int]] = {}
        for agent, kind, count in read(
            "SELECT agent_id, kind, count(*) FROM events GROUP BY agent_id, kind "
            "ORDER BY agent_id, kind"
        ):
            by_agent.setdefault(agent, {})[kind] = int(count)
        by_status = {
            status: int(count)
            for status, count in read(
                "SELECT status, count(*) FROM sessions GROUP BY status ORDER BY status"
            )
        }
        dim = self._store.meta("embedder_dim")
        size = sum(
            path.stat().st_size
            for path in (Path(self.db_path), Path(self.db_path + "-wal"))
            if path.exists()
        )
        return StoreStats(
            path=self.db_path,
            size_bytes=size,
            sessions=sum(by_status.values()),
            events=sum(sum(kinds.values()) for kinds in by_agent.values()),
            sessions_by_status=by_status,
            events_by_agent=by_agent,
            vectors=int(read("SELECT count(*) FROM vectors")[0][0]),
            pending_embeddings=self._store.pending_count(),
            embedder_name=self._store.meta("embedder_name"),
            embedder_dim=int(dim) if dim is not None else None,
            migrations=[row[0] for row in read("SELECT name FROM migrations ORDER BY name")],
        )

    # -- export ----------------------------------------------------------------------------

    def export(
        self, agent: str | None = None, session: str | None = None
    ) -> Generator[dict[str, Any], None, None]:
        """Yield the export records (see the module docstring) for every session, one
        agent's, or one session; write each with :func:`json_line` for a JSON Lines file.

        The records come from one read snapshot, oldest session first, events in log order,
        so the same store always exports the same bytes.

        >>> with open("backup.jsonl", "w", encoding="utf-8") as out:  # doctest: +SKIP
        ...     for record in admin.export(agent="researcher"):
        ...         print(json_line(record), file=out)
        """
        parts: list[str] = []
        params: list[Any] = []
        if session is not None:
            self.session(session)
            parts.append("s.id = ?")
            params.append(session)
        if agent is not None:
            parts.append("s.agent_id = ?")
            params.append(agent)
        yield {"type": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION}
        conn = self._store.connection()
        conn.execute("BEGIN")  # one snapshot for the whole export (WAL: writers go on)
        try:
            sessions = [
                row_to_session(row)
                for row in conn.execute(
                    f"SELECT {SESSION_COLUMNS} FROM sessions s "
                    f"WHERE {' AND '.join(parts) or '1'} ORDER BY s.created_us, s.id",
                    params,
                )
            ]
            for item in sessions:
                yield {"type": "session", **session_to_dict(item)}
                events = self._store.select_events("e.session_id = ?", [item.id])
                for event in events:
                    yield {"type": "event", **event_to_dict(event)}
        finally:
            # ProgrammingError: the admin was closed before the caller dropped the generator
            with contextlib.suppress(sqlite3.ProgrammingError):
                conn.execute("COMMIT")

    # -- import ----------------------------------------------------------------------------

    def import_records(
        self,
        records: Iterable[str | Mapping[str, Any]],
        *,
        dry_run: bool = False,
        skip_bad: bool = False,
        progress: Progress | None = None,
    ) -> ImportResult:
        """Import export records: lines of JSON (e.g. an open file) or decoded dicts.

        Every record is validated with the rules of ``record()``; sessions and events keep
        their ids, times and counts. A record whose id is already in the store is skipped
        (``INSERT OR IGNORE``), so importing a file twice changes nothing. New events are
        queued for embedding (any ``SessionManager`` on the file, or the next search, embeds
        them). A bad record raises :class:`~session_manager.errors.InvalidInput` naming its
        line — records before it stay imported, and importing again skips them — unless
        ``skip_bad``, which reports it in the result and goes on. ``dry_run`` checks
        everything and counts what would happen, writing nothing.

        >>> with open("backup.jsonl", encoding="utf-8") as lines:  # doctest: +SKIP
        ...     result = admin.import_records(lines)
        >>> result.events_inserted, result.skipped  # doctest: +SKIP
        (12, 0)
        """
        return run_import(self._store, records, dry_run, skip_bad, progress)

    # -- deleting --------------------------------------------------------------------------

    def delete_session(self, session_id: str) -> int:
        """Delete any agent's session with its events, vectors and index rows; return the
        number of events deleted."""
        with self._store.atomic() as conn:
            if self._store.owner_of(conn, session_id) is None:
                raise SessionNotFound(
                    f"Session {session_id!r} does not exist in {self.db_path!r}. "
                    "List sessions with `asm sessions`."
                )
            return self._store.delete_session(conn, session_id)

    def prune(
        self,
        older_than: datetime | timedelta | str,
        kind: str | None = None,
        status: str | None = None,
        dry_run: bool = False,
    ) -> PruneResult:
        """Delete what is older than a cutoff (an age such as ``"90d"``, or a timestamp).

        * Without ``kind``: whole sessions (with their events) whose last activity is older
          than the cutoff — a session someone still records into is never cut in half.
        * With ``kind``: only events of that kind created before the cutoff (e.g. bulky
          ``tool_output``), in sessions of any age; the sessions stay. The goal cannot be
          pruned this way (prune the session instead).

        ``status`` restricts either form to sessions with that status (e.g. ``completed``).
        ``dry_run`` reports what would go and deletes nothing. Vector caches of every
        process rebuild after a prune.
        """
        cutoff = parse_cutoff(older_than)
        session_where, params = "1", []
        if status is not None:
            session_where, params = "s.status = ?", [check_status(status)]
        if kind is None:
            doomed = self._session_rows(f"{session_where} AND s.updated_us < ?", [*params, cutoff])
            by_kind = self._kind_counts(
                "e.session_id IN (SELECT s.id FROM sessions s WHERE "
                f"{session_where} AND s.updated_us < ?)",
                [*params, cutoff],
            )
            if not dry_run and doomed:
                with self._store.atomic() as conn:
                    for info in doomed:
                        self._store.delete_session(conn, info.session.id)
            return PruneResult(
                from_us(cutoff),
                doomed,
                sum(info.events for info in doomed),
                by_kind,
                len(doomed),
                dry_run,
            )
        if validate_kind(kind) == "goal":
            raise InvalidInput(
                "Goal events cannot be pruned on their own: a session needs its goal. "
                "Prune whole sessions (leave out the kind) instead."
            )
        event_where = (
            "e.kind = ? AND e.created_us < ? AND e.session_id IN "
            f"(SELECT s.id FROM sessions s WHERE {session_where})"
        )
        event_params = [kind, cutoff, *params]
        by_kind = self._kind_counts(event_where, event_params)
        touched = int(
            self._store.read(
                f"SELECT count(DISTINCT e.session_id) FROM events e WHERE {event_where}",
                event_params,
            )[0][0]
        )
        count = sum(by_kind.values())
        if not dry_run and count:
            with self._store.atomic() as conn:
                conn.execute(f"DELETE FROM events AS e WHERE {event_where}", event_params)
                self._store.bump_generation(conn)
        return PruneResult(from_us(cutoff), [], count, by_kind, touched, dry_run)

    def _kind_counts(self, where: str, params: Sequence[Any]) -> dict[str, int]:
        rows = self._store.read(
            f"SELECT e.kind, count(*) FROM events e WHERE {where} GROUP BY e.kind ORDER BY e.kind",
            params,
        )
        return {kind: int(count) for kind, count in rows}

    # -- projections -----------------------------------------------------------------------

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild every projection from the log: drop all vectors, rebuild the keyword
        index, and embed every event with this admin's embedder (blocking), calling
        ``progress(done, total)`` after each batch. Use it after changing the embedder,
        while no process that uses the old one is running (its background worker would
        embed part of the queue with the old embedder). Returns the number of events queued.
        """
        total = self._store.requeue_all()
        indexer = Indexer(self._store, self.embedder, batch_size=self.batch_size, check=False)
        self._indexer = indexer
        if progress is not None:
            progress(0, total)
        while indexer.embed_batch(force=True):
            if progress is not None:
                # Counted from the outbox: a worker of another process may embed some too.
                progress(max(0, total - self._store.pending_count()), total)
        return total
