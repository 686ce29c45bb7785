"""Store-wide operations for operators and the ``memlane`` command line.

:class:`StoreAdmin` opens the same SQLite file a :class:`~memlane.SessionManager`
uses, but it is deliberately **not scoped to one agent**: it lists, exports, imports,
deletes and prunes the sessions of every agent in the file. It is the operator's view of the
whole store (like a database shell), not something to hand to an agent. Agents keep using
``SessionManager``, whose isolation this module does not touch: nothing here changes what a
``SessionManager`` may read or write.

The export format (JSON Lines, one object per line, UTF-8):

* a header ``{"type": "header", "format": "memlane/export", "version": 1}``;
* the pool grants (all of them, or the exported agent's): ``{"type": "grant", "pool",
  "agent_id", "access", "granted_at", "granted_by"}``, before any session so that an import
  puts them in place first (an import of sessions from a file without them gives each pooled
  session's agent the access the migration would: owner of a pool nobody owns, else write);
* per session, oldest first: a ``{"type": "session", ...}`` record followed by its
  ``{"type": "event", ...}`` records in log order.

Timestamps are ISO-8601 UTC with microseconds (``2026-11-22T10:31:00.123456Z``); payloads and
metadata are JSON values. Everything in the log is exported (ids, times, payloads, importance,
tags, metadata, statuses, token and recall counts, pools); vectors and the keyword index are
projections and are rebuilt after an import. Exporting, importing into a fresh file and
exporting again gives a byte-identical file.
"""

from __future__ import annotations

import difflib
import os
import time
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .core.clock import format_time, to_us
from .core.delegate import Delegated
from .core.progress import Progress
from .core.scope import Scope
from .embed import LoadedEmbedder
from .engine.engine import Engine, Health, resolve_target, session_not_found
from .errors import EventNotFound, InvalidInput, SessionNotFound
from .events import Event, Hits, Session, validate_kind
from .operators.pruning import StorePruning
from .operators.results import PruneResult, SessionInfo, StoreStats, parse_cutoff
from .protocols import Embedder
from .records.validate import identifier, text
from .sharing.pool_admin import PoolAdministration
from .store.base import EventFilter, SessionFilter, Store
from .transfer.jsonl import (
    EXPORT_FORMAT,
    EXPORT_VERSION,
    BadRecord,
    ImportResult,
    check_status,
    event_to_dict,
    grant_to_dict,
    json_line,
    run_import,
    session_to_dict,
)

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

#: the shortest id prefix that names a session (shorter ones name too many)
MIN_PREFIX = 4
#: how many recent sessions a "did you mean" looks through
SUGGEST_FROM = 500
_EXPORT_PAGE = 1_000


class StoreAdmin(PoolAdministration):
    """Store-wide operations on one SQLite session database, across every agent.

    This is an operator's view and deliberately **not** scoped to an agent: it sees and
    changes every agent's sessions. Give agents a :class:`~memlane.SessionManager`
    (isolated per ``agent_id``), never a ``StoreAdmin``.

    >>> from memlane.admin import StoreAdmin
    >>> with StoreAdmin("./sessions.db") as admin:  # doctest: +SKIP
    ...     for info in admin.sessions(status="active"):
    ...         print(info.session.id, info.session.agent_id, info.events)

    Parameters:
        db_path: the SQLite file (created if missing, like ``SessionManager``'s).
        url, index: instead of ``db_path``, any store ``SessionManager`` opens
            (docs/backends.md): ``postgresql://...``, ``index="chroma+http://host:port"``.
        embedder: used only by :meth:`search` and :meth:`reindex`; ``None`` for the default
            all-MiniLM-L6-v2, loaded on first use.
        batch_size: texts per embedding batch in :meth:`reindex`.
        read_only: open the store for reading only (``memlane ui`` without
            ``--allow-write``): anything that would write raises
            :class:`~memlane.errors.StoreReadOnly`, and a search embeds nothing pending.
    """

    def __init__(
        self,
        db_path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        index: str | None = None,
        embedder: Embedder | LoadedEmbedder | None = None,
        batch_size: int = 64,
        read_only: bool = False,
    ) -> None:
        # The embedder's identity is checked on first use, not at open: an operator may
        # list and export a store whatever embedder made its vectors.
        self._engine = Engine(
            resolve_target(db_path, url),
            index,
            embedder=embedder,
            batch_size=batch_size,
            check_embedder=False,
            read_only=read_only,
        )
        self.read_only = read_only
        self.url, self.db_path = self._engine.url, self._engine.db_path
        self._store: Store = self._engine.store
        self._storage = self._engine.storage  # the log and its vector index
        self._pruning = StorePruning(self._storage)
        self.batch_size = batch_size

    def close(self) -> None:
        self._engine.close()

    def __enter__(self) -> StoreAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StoreAdmin(url={self.url!r})"

    @property
    def store(self) -> Store:
        """The backend (for tools built on this admin, such as ``memlane migrate``)."""
        return self._store

    @property
    def embedder(self) -> LoadedEmbedder:
        """The configured embedder (nothing is loaded until it first embeds)."""
        return self._engine.embedder

    # -- reading ---------------------------------------------------------------------------

    def session(self, session_id: str, agent: str | None = None) -> SessionInfo:
        """One session of any agent (or of ``agent``), with its size: ``session_id`` is its
        id, its key, or a unique prefix of its id (at least :data:`MIN_PREFIX` characters),
        tried in that order.

        Raises :class:`~memlane.errors.SessionNotFound` if nothing matches (with the closest
        ids and keys as suggestions), :class:`~memlane.errors.InvalidInput` if a key or a
        prefix matches more than one session.
        """
        found = self.resolve(session_id, agent)
        return SessionInfo(found, *self._store.session_sizes([found.id])[found.id])

    def resolve(self, session_id: str, agent: str | None = None) -> Session:
        """The session ``session_id`` names, found as :meth:`session` finds it (id, key, id
        prefix; the same errors), without its size: counting a large session's events and
        tokens costs ~70 ms at 100k events, which a caller that only needs the session (the
        inspector's restore preview) should not pay.

        >>> admin.resolve("nightly-report").id  # doctest: +SKIP
        """
        ref = session_id
        if not isinstance(ref, str) or not ref:
            raise InvalidInput(f"A session is named by its id or its key, not {ref!r}.")
        rows = self._store.sessions(SessionFilter(None, session_id=ref, agent_id=agent), limit=1)
        if rows:
            return rows[0]
        rows = self._store.sessions(SessionFilter(None, key=ref, agent_id=agent), limit=5)
        if len(rows) > 1:  # a key is unique per agent, not across agents
            owners = ", ".join(sorted(repr(found.agent_id) for found in rows))
            raise InvalidInput(
                f"Key {ref!r} names sessions of several agents ({owners}). Say which agent "
                "with --agent (agent=...), or use the session's id."
            )
        if not rows and len(ref) >= MIN_PREFIX:
            rows = self._store.sessions(SessionFilter(None, id_prefix=ref, agent_id=agent), limit=5)
            if len(rows) > 1:
                shown = ", ".join(found.id for found in rows[:4])
                raise InvalidInput(
                    f"{ref!r} is the start of more than one session id ({shown}"
                    f"{', ...' if len(rows) > 4 else ''}). Type more of the id."
                )
        if rows:
            return rows[0]
        error = session_not_found(ref, agent=agent, where=self.db_path)
        close = self._closest_sessions(ref, agent)
        if close:
            error.args = (f"{error.args[0]} Did you mean {' or '.join(map(repr, close))}?",)
        raise error

    def _closest_sessions(self, ref: str, agent: str | None) -> list[str]:
        """Ids and keys of the most recent sessions that look like ``ref`` (a typo)."""
        recent = self._store.sessions(SessionFilter(None, agent_id=agent), limit=SUGGEST_FROM)
        names = [s.id for s in recent] + [s.key for s in recent if s.key]
        return difflib.get_close_matches(ref, names, n=2, cutoff=0.75)

    def sessions(
        self,
        agent: str | None = None,
        status: str | None = None,
        user: str | None = None,
        since: datetime | timedelta | str | None = None,
        limit: int | None = None,
        *,
        internal: bool = False,
        text: str | None = None,
        offset: int = 0,
        scan: int | None = None,
        readable_by: str | None = None,
    ) -> list[SessionInfo]:
        """Sessions of every agent (or of ``agent``), most recently active first.

        ``since`` keeps sessions active since then: a timestamp or an age ("7d"). The
        sessions the library keeps for itself (users' facts, knowledge documents, pool logs)
        are left out unless ``internal=True``. ``text`` keeps the sessions whose goal, id or
        key contains it (ignoring case); ``offset`` skips that many first (pages).

        ``scan`` bounds the text's work: it looks only at the ``scan`` most recently active
        sessions the other filters select (a substring has no index, so without it a text
        that few sessions contain reads every session: ~135 ms at 100k sessions).
        ``readable_by`` keeps the sessions that agent may read: its own and those of every
        pool it holds a grant on (as a manager of that agent subscribed to all of them reads
        them; the grant is checked in the same query, so a revoked pool's vanish at once).

        >>> [info.session.goal for info in admin.sessions(status="active")]  # doctest: +SKIP
        >>> admin.sessions(readable_by="support-bot", text="refund", scan=10_000)  # doctest: +SKIP
        """
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInput(f"limit must be an integer, got {limit!r}.")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput(f"offset must be a non-negative integer, got {offset!r}.")
        if text is not None and not isinstance(text, str):
            raise InvalidInput(f"text must be a string, got {type(text).__name__}.")
        if scan is not None and (isinstance(scan, bool) or not isinstance(scan, int) or scan < 1):
            raise InvalidInput(f"scan must be a positive integer (or None: all), got {scan!r}.")
        flt = SessionFilter(
            None if readable_by is None else self._readable_by(readable_by),
            agent_id=agent,
            status=None if status is None else check_status(status),
            user_id=user,
            since_us=None if since is None else parse_cutoff(since, "since"),
            unmarked=not internal,
            text=text or None,
            text_scan=scan,
        )
        return self._infos(flt, limit=limit, offset=offset)

    def _readable_by(self, agent: str) -> Scope:
        """What ``agent`` may read, subscribed to every pool it holds a grant on."""
        agent = identifier(agent, "readable_by")
        granted = frozenset(grant.pool for grant in self._store.pool_grants(agent_id=agent))
        return Scope(agent, granted)

    def _infos(
        self, flt: SessionFilter, *, limit: int | None = None, offset: int = 0
    ) -> list[SessionInfo]:
        found = self._store.sessions(flt, limit=limit, offset=offset)
        sizes = self._store.session_sizes([session.id for session in found])
        return [SessionInfo(session, *sizes[session.id]) for session in found]

    def events(
        self,
        session_id: str,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """A session's events in log order (any agent's session); ``limit`` keeps the
        *latest* ``limit`` events."""
        session_id = self.session(session_id).session.id
        flt = EventFilter(
            None,
            session_id=session_id,
            kinds=tuple(validate_kind(kind) for kind in kinds) if kinds else None,
        )
        if limit is None:
            return self._store.events(flt)
        return self._store.events(flt, newest_first=True, limit=max(0, limit))[::-1]

    def events_page(
        self,
        session_id: str,
        *,
        offset: int = 0,
        limit: int = 100,
        kinds: Sequence[str] | None = None,
    ) -> list[Event]:
        """One page of a session's events in log order: ``limit`` events after the first
        ``offset`` (the inspector's timeline; a 100k-event session is never read whole). A
        large payload comes as its bounded preview (:attr:`Event.preview` is True, and
        :attr:`Event.payload_chars` gives the full size), as restore reads it.

        >>> page = admin.events_page(session.id, offset=100, limit=50)  # doctest: +SKIP
        """
        for name, value in (("offset", offset), ("limit", limit)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInput(f"{name} must be a non-negative integer, got {value!r}.")
        # an id is looked up alone: session() would also count the session's events, which
        # costs more than the page itself on a long session
        found = self._store.session(session_id, None) if isinstance(session_id, str) else None
        session_id = found.id if found is not None else self.session(session_id).session.id
        flt = EventFilter(
            None,
            session_id=session_id,
            kinds=tuple(validate_kind(kind) for kind in kinds) if kinds else None,
        )
        return self._store.events(flt, limit=limit, offset=offset, previews=True)

    def event_position(self, session_id: str, event_id: str) -> int:
        """How many of the session's events were recorded before ``event_id`` (at an earlier
        time): the event is at that index of the session's log order, or a little after it
        when others share its microsecond. Where a page of :meth:`events_page` finds it.

        Raises :class:`~memlane.errors.EventNotFound` if the session holds no such event.

        >>> first = admin.event_position(sid, eid) // 100 * 100  # doctest: +SKIP
        >>> eid in [e.id for e in admin.events_page(sid, offset=first)]  # doctest: +SKIP
        """
        session_id = self.session(session_id).session.id
        found = (
            self._store.events(EventFilter(None, session_id=session_id, event_id=event_id))
            if isinstance(event_id, str)
            else []
        )
        if not found:
            raise EventNotFound(
                f"Session {session_id!r} holds no event {event_id!r}. List its events with "
                f"`memlane show {session_id}`."
            )
        created_us = to_us(found[0].created_at, "created_at")
        return self._store.count_events(
            EventFilter(None, session_id=session_id, until_us=created_us)
        )

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
        current_only: bool = True,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
    ) -> Hits:
        """Search one agent's memory (``agent``), one session, or every agent's.
        Superseded and retracted facts are left out unless ``current_only=False``;
        ``since`` / ``until`` keep events recorded in that time, as ``SessionManager.search``.

        Each agent's own sessions are searched as that agent would search them; across
        agents the best ``k`` hits are kept by score (cosine and BM25 scores compare across
        agents; hybrid scores are rank fusions, so across agents they interleave ranks).
        Unlike ``SessionManager.search``, an operator's search does **not** count recalls:
        looking at memory should not change what agents restore.
        """
        query = text(query, "query")
        if session is not None:
            found = self.session(session).session
            session, owner = found.id, found.agent_id
            if agent is not None and agent != owner:
                raise SessionNotFound(
                    f"Session {session!r} does not exist for agent {agent!r} (it belongs to "
                    f"{owner!r}). Drop the agent filter, or list sessions with `memlane sessions`."
                )
            agents = [owner]
        elif agent is not None:
            agents = [identifier(agent, "agent")]
        else:
            agents = self._store.agents()
        hits = Hits()
        for name in sorted(agents):
            searcher = self._engine.searcher(Scope(name))
            answer = searcher.search(
                query,
                k,
                mode=mode,
                session_id=session,
                kinds=kinds,
                where=where,
                since=since,
                until=until,
                count_recall=False,
                current_only=current_only,
            )
            hits.extend(answer)
            hits.waiting += answer.waiting
        hits.sort(key=lambda hit: (-hit.score, hit.event.id))
        del hits[k:]
        return hits

    def warm_up(self, agents: Sequence[str] | None = None, wait: float = 0.0) -> bool:
        """Load now what :meth:`search` of ``agents`` (default: every agent) would otherwise
        wait for: the model, each agent's vectors and, in the background, its in-memory
        keyword index (until it is built, keyword rankings use the store's full-text index:
        ~200 ms instead of ~2 ms for a hybrid search at 100k events). Waits up to ``wait``
        seconds for the keyword indexes; returns whether they are all ready. Counts nothing
        and writes nothing. ``memlane ui`` calls it at start for the operator's search, as
        :meth:`SessionManager.warm_up` for the agents' restores.

        >>> admin.warm_up(["support-bot"], wait=60)  # doctest: +SKIP
        True
        """
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
            raise InvalidInput(f"wait must be a number of seconds >= 0, got {wait!r}.")
        names = self._store.agents() if agents is None else [identifier(a, "agent") for a in agents]
        deadline = time.monotonic() + float(wait)
        ready = True
        for name in names:
            left = max(0.0, deadline - time.monotonic())
            ready = self._engine.searcher(Scope(name)).warm_up(left) and ready
        return ready

    def pending_embeddings(self) -> int:
        """How many events of the store wait for their vectors (a cheap count)."""
        return self._store.pending_count()

    def health(self) -> Health:
        """The store's health as any process sees it (``memlane health``): the embedding backlog
        and whether anyone is draining it (:attr:`Health.stalled`: no batch stored for two
        minutes while events wait), the store's and its WAL's size, the schema version. This
        view runs no worker: ``worker_running`` is False here."""
        return self._engine.health()

    def stored_embedder(self) -> str | None:
        """The name of the embedder the store's vectors were made with (None: no vectors
        yet); reading it loads no model."""
        return self._store.get_meta("embedder_name")

    def agents(self) -> list[str]:
        """The agents that have sessions in the store, sorted."""
        return sorted(self._store.agents())

    def stats(self) -> StoreStats:
        """Counts by agent, kind and status; file size; the embedder behind the vectors."""
        raw = self._storage.stats()
        dim = self._store.get_meta("embedder_dim")
        by_agent: dict[str, dict[str, int]] = raw["events_by_agent"]
        by_status: dict[str, int] = raw["sessions_by_status"]
        return StoreStats(
            path=self.db_path,
            size_bytes=int(raw["size_bytes"]),
            sessions=sum(by_status.values()),
            events=sum(sum(kinds.values()) for kinds in by_agent.values()),
            sessions_by_status=by_status,
            events_by_agent=by_agent,
            vectors=int(raw["vectors"]),
            pending_embeddings=self._store.pending_count(),
            embedder_name=self._store.get_meta("embedder_name"),
            embedder_dim=int(dim) if dim is not None else None,
            migrations=list(raw["migrations"]),
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
        if session is not None:
            session = self.session(session).session.id
        yield {"type": "header", "format": EXPORT_FORMAT, "version": EXPORT_VERSION}
        # one snapshot for the whole export (writers go on meanwhile); events in pages, so a
        # long session streams instead of loading at once
        with self._store.snapshot() as tx:
            if session is None:  # (before the sessions: an import sets them first)
                for grant in self._store.pool_grants(agent_id=agent, tx=tx):
                    yield {"type": "grant", **grant_to_dict(grant)}
            found = self._store.sessions(
                SessionFilter(None, session_id=session, agent_id=agent), oldest_first=True, tx=tx
            )
            for item in found:
                yield {"type": "session", **session_to_dict(item)}
                flt = EventFilter(None, session_id=item.id)
                after: tuple[int, int] | None = None
                while True:
                    page = self._store.events(flt, limit=_EXPORT_PAGE, after=after, tx=tx)
                    for event in page:
                        yield {"type": "event", **event_to_dict(event)}
                    if len(page) < _EXPORT_PAGE:
                        break
                    after = (to_us(page[-1].created_at), page[-1].seq)

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
        their ids, times and counts. A record whose id is already in the store is skipped,
        so importing a file twice changes nothing (and an interrupted import resumes where
        it stopped). New events are queued for embedding (any ``SessionManager`` on the
        store, or the next search, embeds them). A bad record raises
        :class:`~memlane.errors.InvalidInput` naming its line — records before it
        stay imported, and importing again skips them — unless ``skip_bad``, which reports
        it in the result and goes on. ``dry_run`` checks everything and counts what would
        happen, writing nothing.

        >>> with open("backup.jsonl", encoding="utf-8") as lines:  # doctest: +SKIP
        ...     result = admin.import_records(lines)
        >>> result.events_inserted, result.skipped  # doctest: +SKIP
        (12, 0)
        """
        return run_import(self._store, records, dry_run, skip_bad, progress)

    def copy_to(self, target: StoreAdmin, *, progress: Progress | None = None) -> ImportResult:
        """Copy every session and event of this store into ``target`` (any backend), streaming:
        this store's export feeds ``target``'s import, 500 records per transaction.

        Lossless (the export then reads the same from both stores) and resumable: records
        already in ``target`` are skipped, so after an interruption the same call carries on
        where it stopped. ``progress(done, total)`` counts records. Vectors are not copied;
        ``target`` queues every new event for embedding (``memlane migrate --embed`` drains it).

        >>> with StoreAdmin("sessions.db") as old, StoreAdmin(url=pg_url) as new:  # doctest: +SKIP
        ...     old.copy_to(new)
        """
        same = self._engine.identity
        if self._store is target._store or (same is not None and same == target._engine.identity):
            raise InvalidInput(
                f"{self.url!r} and {target.url!r} are the same store; migrating a store into "
                "itself copies nothing. Give another target."
            )
        stats = self._storage.stats()
        total = 1 + sum(stats["sessions_by_status"].values())
        total += sum(sum(kinds.values()) for kinds in stats["events_by_agent"].values())
        total += len(self._store.pool_grants())

        def report(done: int, _: int | None) -> None:
            if progress is not None:
                progress(done, total)

        records = self.export()
        try:
            return target.import_records(records, progress=report)
        finally:
            records.close()

    def embed_pending(self, progress: Progress | None = None) -> int:
        """Embed everything waiting in the outbox with this admin's embedder (blocking),
        calling ``progress(done, total)`` after each batch; return how many were embedded."""
        return self._engine.embed_pending(progress)

    # -- deleting --------------------------------------------------------------------------

    prune = Delegated("_pruning", StorePruning.prune)
    erase_user = Delegated("_pruning", StorePruning.erase_user)
    apply_retention = Delegated("_pruning", StorePruning.apply_retention)
    prune_expired = Delegated("_pruning", StorePruning.prune_expired)

    def delete_session(self, session_id: str) -> int:
        """Delete any agent's session with its events, vectors and index rows; return the
        number of events deleted. ``session_id`` may also be its key or a unique prefix of
        its id (see :meth:`session`)."""
        session_id = self.session(session_id).session.id
        with self._store.atomic() as tx:
            if self._store.owner_of(tx, session_id) is None:
                raise session_not_found(session_id, agent=None, where=self.db_path)
            return self._storage.delete_session(tx, session_id)

    # -- projections -----------------------------------------------------------------------

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild every projection from the log: drop all vectors, rebuild the keyword
        index, and embed every event with this admin's embedder (blocking), calling
        ``progress(done, total)`` after each batch. Use it after changing the embedder,
        while no process that uses the old one is running (its background worker would
        embed part of the queue with the old embedder). Returns the number of events queued.
        """
        return self._engine.reindex(progress)
