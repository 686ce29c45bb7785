"""The :class:`SessionManager` façade: the whole public API of the library in one object.

A handful of primitives do the work — :meth:`SessionManager.record` (the single write path),
:meth:`~SessionManager.events`, :meth:`~SessionManager.search` and
:meth:`~SessionManager.restore` — and the conveniences (``record_step``, ``add_message``, ...)
are thin layers over ``record``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from .buffer import RedisBuffer, open_buffer
from .core import canonical_json
from .core.clock import from_us, now_us, to_us
from .core.ids import new_id
from .core.observed import observed
from .core.scope import Scope
from .engine.engine import Engine, Health, resolve_target, session_not_found
from .errors import (
    EventNotFound,
    InvalidInput,
    SessionClosed,
    SessionKeyTaken,
    shown,
)
from .events import (
    SESSION_STATUSES,
    Event,
    Hits,
    Session,
    SessionRecord,
    validate_kinds,
)
from .longterm.knowledge import KnowledgeMemory
from .longterm.users import UserMemory
from .memory import MEMORY_SESSION, FactResolver
from .metrics import Metrics
from .privacy.erasure import ErasureReceipt, erase_user
from .privacy.pool_access import check_write
from .privacy.retention_sweep import RetentionResult, RetentionSchedule, apply_retention
from .protocols import Embedder, Summarizer, TokenCounter
from .records.validate import identifier as _identifier
from .records.validate import path_of, prepare_event
from .records.validate import text as _text
from .redaction import Redactor, redactor_of
from .restore.plan import BudgetShares, RestoredContext
from .retention import RetentionPolicy
from .search.recency import Recency, recency_of
from .sharing.pools import PoolSharing
from .store import store_identity
from .store.base import Capabilities, EventFilter, SessionFilter, Store
from .text.tokens import tokenizer_for
from .tracing import Tracing
from .transfer.markdown import DAILY_KINDS, MarkdownExport, memory_files, write_files
from .write.buffer_epoch import BufferEpoch

__all__ = ["SessionManager"]

SearchMode = Literal["hybrid", "semantic", "keyword"]


class SessionManager(UserMemory, KnowledgeMemory, PoolSharing):
    """Durable memory for one agent: an event log, a semantic index and budgeted restore.

    >>> from memlane import SessionManager
    >>> mgr = SessionManager(agent_id="researcher", db_path="./sessions.db")  # doctest: +SKIP
    >>> session = mgr.start_session(goal="Survey 2026 sparse attention methods")  # doctest: +SKIP
    >>> mgr.record_step(session.id, step="queried arxiv", result={"papers": 12})  # doctest: +SKIP
    >>> context = mgr.restore(session.id, max_tokens=4000)  # doctest: +SKIP

    The same code runs on every backend (docs/backends.md): one SQLite file (``db_path``, the
    default), PostgreSQL + pgvector (``url="postgresql://..."``), and either of them with the
    vectors in ChromaDB (``index="chroma+http://host:port"`` or ``"chroma:///dir"``).

    >>> mgr = SessionManager("researcher", url="postgresql://app@db/agents")  # doctest: +SKIP

    Parameters:
        agent_id: the agent whose memory this is; every read and write is scoped to it.
        db_path: the SQLite file (created with its folder's permission if missing).
        url: instead of ``db_path``, the store as a URL: ``sqlite:///path.db`` or
            ``postgresql://user@host/database`` (extra ``[postgres]``).
        index: where the vectors live: ``None`` (the log's own store), ``"chroma"`` (beside
            the SQLite file), ``"chroma:///dir"`` (embedded, one process) or
            ``"chroma+http://host:port"`` (a Chroma server; extra ``[chroma]``).
        embedder: ``None`` for all-MiniLM-L6-v2 on onnxruntime, or any embedder object or
            ``list[str] -> vectors`` callable.
        model: the model family whose tokenizer counts restore budgets ("gpt-4o", "gpt-4",
            "claude-3-5-sonnet", ...), or a ``str -> int`` token counter.
        subscribe: shared pools this agent reads; each must have granted it ``read`` (or
            ``write``) — :meth:`grant` by the pool's owner — else
            :class:`~memlane.errors.PoolAccessDenied`. A revocation takes the pool out
            of this manager's reads at once.
        summarizer: optional ``(text, max_tokens) -> str`` used by restore for oversize events.
        background: embed in a background thread (default); ``False`` embeds only on
            ``flush()`` and before searches.
        reindex: when the store's vectors were made by another embedder, rebuild them with
            this one (blocking) instead of raising :class:`EmbedderMismatch`.
        auto_summary: a token count; when an active session of this agent has grown by
            about this many tokens since its last summary, the background worker writes a
            new one (:meth:`summarize`, this manager's summarizer). Never inside
            ``record()``; needs ``background=True``.
        count_recalls: every event :meth:`search` returns (and every relevant event
            :meth:`restore` shows) counts one recall, which ranks it higher in later
            restores. ``False`` for an observer's reads (``memlane``, dashboards) that must not
            change what the agent restores.
        fact_resolver: optional ``(text, similar_facts) -> Resolution`` (e.g. an LLM call)
            that :meth:`remember` asks what to do with an unkeyed fact's near-duplicates:
            add, supersede some of them, or skip. Its answer is validated; it never deletes.
        redactor: what to remove from everything written before it is stored: ``"default"``
            for :class:`~memlane.redaction.PiiRedactor` (e-mail addresses, card
            numbers, IBANs, IPs, SSNs, phone numbers, API keys and tokens; not names), or any
            :class:`~memlane.redaction.Redactor`; values become placeholders such as
            ``[EMAIL_1]`` (:mod:`memlane.redaction`). None (the default) stores text as
            given.
        metrics: a :class:`~memlane.metrics.Metrics` (Prometheus, the ``[prometheus]``
            extra) that observes this manager's operations; none by default.
        tracing: a :class:`~memlane.tracing.Tracing` (OpenTelemetry, the ``[otel]``
            extra): a span per memory operation; none by default.
        retention: a :class:`~memlane.retention.RetentionPolicy` the background
            worker applies to this agent's own sessions, once an hour.
        buffer: a Redis working buffer (``"redis://host:6379/0"`` or a
            :class:`~memlane.buffer.RedisBuffer`; the ``[redis]`` extra) that keeps the
            newest messages of active sessions for :meth:`recent_messages`, shared by every
            host; the log stays the truth and answers whenever Redis cannot
            (:mod:`memlane.buffer`).
    """

    def __init__(
        self,
        agent_id: str,
        db_path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        index: str | None = None,
        embedder: Embedder | None = None,
        model: str | TokenCounter = "gpt-4o",
        subscribe: Iterable[str] = (),
        summarizer: Summarizer | None = None,
        background: bool = True,
        batch_size: int = 64,
        reindex: bool = False,
        auto_summary: int | None = None,
        count_recalls: bool = True,
        read_only: bool = False,
        fact_resolver: FactResolver | None = None,
        buffer: str | RedisBuffer | None = None,
        redactor: Redactor | Literal["default"] | None = None,
        retention: RetentionPolicy | None = None,
        metrics: Metrics | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.agent_id = _identifier(agent_id, "agent_id")
        self._redactor = redactor_of(redactor)
        if fact_resolver is not None and not callable(fact_resolver):
            raise InvalidInput(
                f"fact_resolver must be a callable (text, similar_facts) -> Resolution, got "
                f"{type(fact_resolver).__name__}."
            )
        self.fact_resolver = fact_resolver
        if auto_summary is not None and (
            isinstance(auto_summary, bool)
            or not isinstance(auto_summary, int)
            or auto_summary < 100
        ):
            raise InvalidInput(
                f"auto_summary must be a token count of at least 100 (e.g. 4000), not "
                f"{shown(auto_summary)}: the worker summarises a session each time it grows "
                "by that."
            )
        if isinstance(subscribe, str):
            subscribe = (subscribe,)
        pools = frozenset(_identifier(pool, "subscribed pool") for pool in subscribe)
        self.scope = Scope(self.agent_id, pools)
        tokenizer_for(model)  # a misspelt family warns now, not at the first count
        self.model = model
        self.summarizer = summarizer
        self.read_only = bool(read_only)
        if self.read_only and auto_summary is not None:
            raise InvalidInput("auto_summary writes summaries, which read_only=True cannot.")
        self.count_recalls = bool(count_recalls) and not self.read_only
        background = background and not self.read_only  # nothing to embed into
        self._buffer = open_buffer(buffer)
        self._owns_buffer = isinstance(buffer, str)  # (a RedisBuffer given is the caller's)
        if metrics is not None and not isinstance(metrics, Metrics):
            raise InvalidInput(
                f"metrics must be a memlane.metrics.Metrics, got {type(metrics).__name__}."
            )
        self._metrics = metrics
        if tracing is not None and not isinstance(tracing, Tracing):
            raise InvalidInput(
                f"tracing must be a memlane.tracing.Tracing, got {type(tracing).__name__}."
            )
        self._tracing = tracing
        self._engine = Engine(
            resolve_target(db_path, url),
            index,
            embedder=embedder,
            batch_size=batch_size,
            autocheckpoint=not background,
            reindex=reindex,
            read_only=self.read_only,
        )
        self.url, self.db_path = self._engine.url, self._engine.db_path
        self._store: Store = self._engine.store
        self._buffer_epoch = (
            None
            if self._buffer is None
            else BufferEpoch(self._store, self._buffer, writable=not self.read_only)
        )
        try:
            self._check_subscriptions()
        except BaseException:
            self._engine.close()
            raise
        self._storage = self._engine.storage  # the log and its vector index
        self._indexer = self._engine.indexer
        self._searcher = self._engine.searcher(self.scope)
        self._indexer.count_tokens = self._counter  # deferred events count under this model
        self._backend = self._storage.capabilities.name
        if metrics is not None:
            metrics.attach(self._store, self._backend, store_identity(self.url) or self.url)
        if retention is not None:
            if not isinstance(retention, RetentionPolicy):
                raise InvalidInput(
                    f"retention must be a RetentionPolicy, got {type(retention).__name__}."
                )
            if not background:
                raise InvalidInput(
                    "retention= is applied by the background worker; open the manager with "
                    "background=True, or call apply_retention() yourself."
                )
            self._indexer.idle_hooks.append(
                RetentionSchedule(self._storage, retention, self.agent_id)
            )
        if auto_summary is not None:
            from .restore.summaries import AutoSummary

            self._indexer.idle_hooks.append(AutoSummary(self, self._searcher, auto_summary))
        if background:
            self._indexer.start()
            self._indexer.notify()  # catch up whatever a crashed process left behind

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background worker and close the database (pending embeddings stay queued).

        The worker stops after the slice of its batch it is embedding (at most 64 texts); the
        rest of the batch stays queued for the next process. When that takes more than a
        second, a warning on the ``memlane.indexer`` logger says what it waits for.
        """
        self._engine.close()
        if self._buffer is not None and self._owns_buffer:
            self._buffer.close()

    def __enter__(self) -> SessionManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SessionManager(agent_id={self.agent_id!r}, url={self.url!r})"

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do: several processes or hosts, exact vectors, ...

        >>> mgr.capabilities.multi_process  # doctest: +SKIP
        True
        """
        return self._storage.capabilities

    @property
    def embedder_name(self) -> str:
        return self._indexer.embedder.name

    def health(self) -> Health:
        """The embedding backlog, how far behind the worker is, and its last error.

        >>> mgr.health().backlog, mgr.health().last_error  # doctest: +SKIP
        (0, None)
        """
        health = self._engine.health()
        if self._buffer is not None and self._buffer.error is not None:
            health = replace(health, buffer_error=self._buffer.error)
        return health

    # -- sessions --------------------------------------------------------------------------

    def start_session(
        self,
        goal: str,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        shared_pool: str | None = None,
        key: str | None = None,
    ) -> Session:
        """Open a new active session; its goal is recorded as the session's first event.

        ``key`` is the caller's own name for it (a framework's thread or conversation id),
        unique per agent and usable wherever a session id is; :meth:`session_for` gets or
        creates a session by key.

        >>> session = mgr.start_session("Fix the flaky login test", user_id="u1")  # doctest: +SKIP
        >>> mgr.start_session("Answer the user", key="thread-42").key  # doctest: +SKIP
        'thread-42'
        """
        goal = _text(goal, "goal")
        if user_id is not None:
            user_id = _identifier(user_id, "user_id")
        if shared_pool is not None:
            shared_pool = _identifier(shared_pool, "shared_pool")
        if key is not None:
            key = _identifier(key, "key")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a dict, got {shown(metadata)}.")
        meta_json = canonical_json.dumps(dict(metadata or {}), "session metadata")
        session_id, now = new_id(), now_us()
        # one numbering for the session's metadata and goal; the goal event keeps the counts
        redaction = self._redaction()
        if redaction is not None:
            meta_json = canonical_json.dumps(
                redaction.json(canonical_json.loads(meta_json)), "session metadata"
            )
        prepared = prepare_event(
            "goal", goal, None, 1.0, None, None, from_us(now), self._counter, redaction=redaction
        )
        goal = prepared.content
        with self._write() as tx:
            if shared_pool is not None:  # (the pool's first session makes this agent its owner)
                check_write(self._store, tx, shared_pool, self.agent_id, create=True)
            inserted = self._store.insert_session(
                tx,
                SessionRecord(
                    id=session_id,
                    agent_id=self.agent_id,
                    user_id=user_id,
                    goal=goal,
                    status="active",
                    shared_pool=shared_pool,
                    metadata_json=meta_json,
                    created_us=now,
                    updated_us=now,
                    key=key,
                ),
            )
            if not inserted:  # the id is new: the key is what another session holds
                raise SessionKeyTaken(
                    f"Agent {self.agent_id!r} already has a session with key {key!r}. Use "
                    "session_for(key, goal=...) to get it (or create it), or choose another key."
                )
            self._insert(tx, session_id, shared_pool, prepared, None)
        self._indexer.notify()
        self._count_redactions(redaction)
        return self.get_session(session_id)

    def session_for(
        self,
        key: str,
        goal: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        shared_pool: str | None = None,
    ) -> Session:
        """The session with this key, created (with ``goal``) if this agent has none: the
        get-or-create a framework's thread id needs. Safe under concurrency: callers racing
        on one key all get the one session.

        >>> session = mgr.session_for("thread-42", goal="Answer the user")  # doctest: +SKIP
        >>> mgr.record_fact("thread-42", "The user prefers metric units")  # doctest: +SKIP
        """
        key = _identifier(key, "key")
        found = self._keyed(key)
        if found is not None:
            return found
        if goal is None:
            raise session_not_found(key, agent=self.agent_id, where=self.url)
        try:
            return self.start_session(goal, user_id, metadata, shared_pool, key=key)
        except SessionKeyTaken:
            found = self._keyed(key)  # another caller created it a moment ago
            if found is None:
                raise
            return found

    def list_sessions(
        self,
        status: str | None = None,
        user_id: str | None = None,
        since: datetime | str | None = None,
        limit: int | None = 100,
        *,
        include_shared: bool = True,
        internal: bool = False,
    ) -> list[Session]:
        """Visible sessions, most recently active first.

        The sessions the library keeps for itself (what the agent knows about each user,
        its knowledge documents, pool logs) are left out unless ``internal=True``.
        """
        if user_id is not None:
            user_id = _identifier(user_id, "user_id")
        flt = SessionFilter(
            self.scope,
            include_shared=include_shared,
            unmarked=not internal,
            status=None if status is None else self._check_status(status),
            user_id=user_id,
            since_us=None if since is None else to_us(since, "since"),
        )
        _check_count("limit", limit, optional=True)
        return self._store.sessions(flt, limit=limit)

    @staticmethod
    def _check_status(status: str) -> str:
        if status not in SESSION_STATUSES:
            raise InvalidInput(
                f"Unknown session status {shown(status)}; use one of {', '.join(SESSION_STATUSES)}."
            )
        return status

    def end_session(self, session_id: str, status: str = "completed") -> Session:
        """Close a session (completed / failed / abandoned); it then takes no new events.

        Ending an ended session again with the same status changes nothing; with another
        status it raises :class:`SessionClosed`. Open pending steps stay open (restore of the
        ended session still lists them, as work that was left undone); cancel them first with
        :meth:`cancel_pending` if they no longer apply.
        """
        if self._check_status(status) == "active":
            raise InvalidInput("end_session needs a final status: completed, failed or abandoned.")
        with self._write() as tx:
            session_id, current, _ = self._owned(tx, session_id, allow_closed=True)
            if current == status:
                return self.get_session(session_id)  # already ended so: nothing to do
            if current != "active":
                raise SessionClosed(
                    f"Session {session_id!r} already ended as {current}; it cannot be ended "
                    f"again as {status}."
                )
            self._store.set_session_status(tx, session_id, status, now_us())
        return self.get_session(session_id)

    @observed("delete_session")
    def delete_session(self, session_id: str) -> int:
        """Delete a session and its events from the log and every index; return the count."""
        with self._write() as tx:
            session_id, _, _ = self._owned(tx, session_id, allow_closed=True)
            self._unbuffer(tx, session_id)
            return self._storage.delete_session(tx, session_id)

    def apply_retention(self, policy: RetentionPolicy, dry_run: bool = False) -> RetentionResult:
        """Apply ``policy`` to this agent's own sessions now (``StoreAdmin.apply_retention``
        for every agent's): :mod:`memlane.retention` says what it deletes and what
        never. ``dry_run`` counts and deletes nothing.

        >>> policy = RetentionPolicy("30d", kinds=["tool_output"])  # doctest: +SKIP
        >>> mgr.apply_retention(policy).events  # doctest: +SKIP
        12
        """
        if not isinstance(policy, RetentionPolicy):
            raise InvalidInput(f"policy must be a RetentionPolicy, got {type(policy).__name__}.")
        if not dry_run:
            self._check_writable()
        return apply_retention(self._storage, policy, agent_id=self.agent_id, dry_run=dry_run)

    @observed("erase_user")
    def erase_user(self, user_id: str) -> ErasureReceipt:
        """Erase everything this agent keeps about a user: every session of this agent with
        that ``user_id`` (their events, vectors, keyword rows, summaries, the facts
        ``remember`` kept), physically (SQLite overwrites the freed pages, merges the keyword
        index and truncates its log; PostgreSQL vacuums), and the working buffer's copies.
        Reads stop seeing the user when its transaction commits; after a crash, calling it
        again completes it. Returns a receipt: what was erased, and the copies no erasure
        reaches (backups, earlier exports). Other agents' sessions with the user stay:
        ``StoreAdmin.erase_user`` erases across agents.

        >>> mgr.erase_user("u1").sessions  # doctest: +SKIP
        3
        """
        user_id = _identifier(user_id, "user_id")
        self._check_writable()
        return erase_user(self._storage, user_id, agent_id=self.agent_id, buffer=self._buffer)

    @observed("delete_event")
    def delete_event(self, event_id: str) -> Event:
        """Delete one event from the log and every index; return it as it was.

        >>> mgr.delete_event(event.id).content  # doctest: +SKIP
        """
        event = self.get_event(event_id)
        with self._write() as tx:
            self._owned(tx, event.session_id, allow_closed=True)
            self._unbuffer(tx, event.session_id)
            if not self._storage.delete_events(tx, EventFilter(None, event_id=event.id)):
                raise EventNotFound(f"Event {event_id!r} was deleted meanwhile.")
        return event

    def pop_event(self, session_id: str, kinds: str | Sequence[str] | None = None) -> Event | None:
        """Remove and return the newest event of a session (of ``kinds``, if given), or
        None when there is none. Atomic: two concurrent pops never return the same event.

        >>> mgr.pop_event(session.id, kinds="message")  # doctest: +SKIP
        """
        wanted = validate_kinds(kinds)
        with self._write() as tx:
            # _owned locks the session (PostgreSQL: FOR UPDATE; SQLite: the write lock), so a
            # concurrent pop reads the newest event only after this one is gone
            session_id, _, _ = self._owned(tx, session_id, allow_closed=True)
            newest = self._store.events(
                EventFilter(None, session_id=session_id, kinds=wanted),
                newest_first=True,
                limit=1,
                tx=tx,
            )
            if not newest:
                return None
            self._unbuffer(tx, session_id)
            self._storage.delete_events(tx, EventFilter(None, event_id=newest[0].id))
        return newest[0]

    @observed("clear_session")
    def clear_session(self, session_id: str, kinds: str | Sequence[str] | None = None) -> int:
        """Delete a session's events (of ``kinds``, if given) from the log and every index,
        keeping the session itself; return how many were deleted.

        >>> mgr.clear_session(session.id, kinds="message")  # doctest: +SKIP
        """
        wanted = validate_kinds(kinds)
        with self._write() as tx:
            session_id, _, _ = self._owned(tx, session_id, allow_closed=True)
            flt = EventFilter(None, session_id=session_id, kinds=wanted)
            self._unbuffer(tx, session_id)
            return self._storage.delete_events(tx, flt)

    # -- the write path --------------------------------------------------------------------

    # -- conveniences ----------------------------------------------------------------------

    # -- reads -----------------------------------------------------------------------------

    def events(
        self,
        session_id: str | None,
        kinds: str | Sequence[str] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        limit: int | None = None,
        *,
        newest_first: bool = False,
        where: Mapping[str, Any] | None = None,
        offset: int = 0,
        include_shared: bool = True,
    ) -> list[Event]:
        """A session's events in order (by time, then recording order); ``kinds`` is a kind
        or a list of kinds. ``limit`` keeps the oldest events, or with ``newest_first=True``
        the newest, newest first; ``offset`` skips that many first (pages). ``where``
        filters metadata as in :meth:`search`. ``session_id=None`` lists events across
        every session this agent may read (its own, and with ``include_shared`` its
        subscribed pools) — a filter-only search, in log order.

        >>> mgr.events(session.id, kinds="decision", limit=3, newest_first=True)  # doctest: +SKIP
        >>> mgr.events(None, where={"tool": "pytest"}, limit=20, offset=20)  # doctest: +SKIP
        """
        if session_id is not None:
            session_id = self.get_session(session_id).id
        _check_count("limit", limit, optional=True)
        _check_count("offset", offset)
        flt = EventFilter(
            self.scope,
            include_shared=include_shared,
            session_id=session_id,
            kinds=validate_kinds(kinds),
            since_us=None if since is None else to_us(since, "since"),
            until_us=None if until is None else to_us(until, "until"),
            where=where,
        )
        return self._store.events(flt, limit=limit, newest_first=newest_first, offset=offset)

    @observed("search")
    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        session_id: str | None = None,
        kinds: str | Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        include_shared: bool = True,
        recency: Recency | str | None = None,
        current_only: bool = True,
    ) -> Hits:
        """Find past events: ``hybrid`` (default, keyword + semantic fused), ``semantic`` or
        ``keyword``. Every returned event's recall count grows by one (unless the manager
        was opened with ``count_recalls=False``). ``recency="default"`` (or a
        :class:`~memlane.Recency`) also ranks what the query found by freshness —
        chat turns fade in days, decisions and facts in months, the goal, open pending
        steps, important events and keyed user facts never (:mod:`memlane.search.recency`);
        ``None`` leaves the ranking exactly as it is without it. A user's facts that were
        superseded or retracted (:meth:`remember`, :meth:`retract_fact`) are history: left
        out unless ``current_only=False``; each hit's ``event.status`` says which it is.

        >>> hits = mgr.search("did we turn off 2FA anywhere?", k=3)  # doctest: +SKIP
        >>> hits[0].event.content, round(hits[0].score, 3)  # doctest: +SKIP
        >>> mgr.search("what did the user ask?", recency="default")  # doctest: +SKIP
        """
        fading = recency_of(recency)
        if session_id is not None:
            session_id = self.get_session(session_id).id
        return self._searcher.search(
            _text(query, "query"),
            k,
            mode=mode,
            session_id=session_id,
            kinds=kinds,
            where=where,
            since=since,
            until=until,
            include_shared=include_shared,
            count_recall=self.count_recalls,
            recency=fading,
            current_only=current_only,
        )

    def export_markdown(
        self, directory: str | os.PathLike[str], *, user_id: str | None = None
    ) -> MarkdownExport:
        """Write this agent's memory as Markdown (``memlane export-md``): ``MEMORY.md`` (the
        current facts about each user, the pinned decisions) and ``memory/YYYY-MM-DD.md``
        per UTC day (goals, decisions, steps, errors, summaries), generated, atomic, and
        byte-identical when nothing changed (:mod:`memlane.transfer.markdown`).
        ``user_id``: only that user's sessions and facts. Reads only this agent's own
        sessions (not its pools').

        >>> mgr.export_markdown("./memory-export").written  # doctest: +SKIP
        ['MEMORY.md', 'memory/2026-11-24.md']
        """
        directory = path_of(directory, "directory")
        if user_id is not None:
            user_id = _identifier(user_id, "user_id")
        owned = SessionFilter(self.scope, include_shared=False, user_id=user_id)
        sessions = {s.id: s for s in self._store.sessions(owned, limit=None)}
        memories = SessionFilter(
            self.scope, include_shared=False, user_id=user_id, marked=MEMORY_SESSION
        )
        users = sorted({s.user_id for s in self._store.sessions(memories, limit=None) if s.user_id})
        facts = {
            user: [fact for fact in self.facts(user) if fact.agent_id == self.agent_id]
            for user in users
        }
        # the daily files hold the agent's tasks, not the sessions the library keeps for it
        # (a user's memory, its knowledge documents: marked in their metadata), and no
        # short-term memory (record(ttl=...)): a file would outlive it
        daily = EventFilter(self.scope, include_shared=False, kinds=DAILY_KINDS, lasting=True)
        events = [
            event
            for event in self._store.events(daily, previews=True)
            if event.session_id in sessions and "asm" not in sessions[event.session_id].metadata
        ]
        return write_files(directory, memory_files(self.agent_id, facts, events, sessions))

    def semantic_search(self, query: str, k: int = 5, **filters: Any) -> Hits:
        """Meaning-based search: ``search(query, k, mode="semantic", ...)``."""
        return self.search(query, k, mode="semantic", **filters)

    @observed("restore")
    def restore(
        self,
        session_id: str,
        max_tokens: int,
        query: str | None = None,
        model: str | TokenCounter | None = None,
        *,
        summarizer: Summarizer | None = None,
        other_sessions: bool = False,
        shares: BudgetShares | None = None,
        exclude_newest: int = 0,
        exclude: Collection[str] = (),
        knowledge: bool | None = None,
    ) -> RestoredContext:
        """Rebuild prompt context for a session within ``max_tokens``.

        After the goal, the budget is shared (:class:`BudgetShares`; docs/architecture.md §6):
        open pending steps, important events and unresolved errors, the session's rolling
        summary, a floor of the newest events, history relevant to ``query`` (default: the
        goal and the pending steps) — from this session, or with ``other_sessions=True`` also
        from this agent's other sessions and subscribed pools — then the rest of the recent
        events. ``model`` overrides the manager's model family for counting; ``summarizer``
        the manager's summariser; ``shares`` the default shares. ``exclude_newest=N`` leaves
        out the session's N newest events (the goal always stays): a framework that already
        puts the latest turns in the model's input restores only what it does not have;
        ``exclude`` leaves out these events (ids), wherever they are. ``knowledge``: a
        *Reference* section of the chunks of ingested documents relevant to the query
        (``True``: always; ``None``, the default: when a ``query`` is given; ``False``:
        never).

        >>> context = mgr.restore(session.id, max_tokens=4000)  # doctest: +SKIP
        >>> context.token_count <= 4000, context.report.sections  # doctest: +SKIP
        """
        from .restore.gather import restore_session

        context = restore_session(
            self._store,
            self._searcher,
            self.get_session(session_id),
            max_tokens,
            query,
            tokenizer_for(model if model is not None else self.model),
            summarizer or self.summarizer,
            other_sessions=other_sessions,
            shares=shares,
            count_recall=self.count_recalls,
            exclude_newest=exclude_newest,
            exclude=exclude,
            knowledge=knowledge,
        )
        if self._metrics is not None:
            self._metrics.restored(context.report.sections, context.token_count, max_tokens)
        return context

    @observed("summarize")
    def summarize(
        self,
        session_id: str,
        upto: str | datetime | None = None,
        max_tokens: int = 400,
        summarizer: Summarizer | None = None,
    ) -> Event:
        """Write a rolling ``summary`` event standing in for the session up to ``upto``.

        ``upto`` is an event id of the session or a time (default: its newest event). The
        summary covers everything from the session's first event to there: the previous
        summary (superseded, kept, no longer shown) plus the events after it. Sources are
        never changed. restore() shows the current summary in an *Earlier (summarised)*
        section when covered events do not fit. Works on ended sessions too.

        The default is offline and deterministic (extractive, dated bullets: decisions,
        unresolved errors, facts and completed steps first, then the turns closest to the
        goal by the stored vectors), within ``max_tokens`` as counted for this manager's
        model. ``summarizer`` (``(text, max_tokens) -> str``, e.g. an LLM; default: the
        manager's) is given the material; an empty, non-string or too long answer falls back
        to the extractive summary (``payload["method"]`` says so); an exception it raises
        propagates and nothing is written. If the current summary already reaches ``upto``,
        it is returned and nothing is written.

        >>> summary = mgr.summarize(session.id, max_tokens=300)  # doctest: +SKIP
        >>> summary.payload["covers"]["events"], summary.payload["method"]  # doctest: +SKIP
        (412, 'extractive')
        """
        from .restore.summaries import plan_summary

        self._check_writable()
        session = self.get_session(session_id)
        plan = plan_summary(
            self._searcher,
            session,
            upto,
            max_tokens,
            summarizer or self.summarizer,
            self._tokenizer().count,
        )
        if isinstance(plan, Event):
            return plan  # the current summary already reaches that far
        return self._write_summary(session.id, plan.text, plan.payload, plan.previous)

    def _write_summary(
        self, session_id: str, text: str, payload: dict[str, Any], based_on: Event | None
    ) -> Event:
        """Append a summary unless another process wrote one that reaches as far meanwhile."""
        from .restore.summaries import covers

        newest = EventFilter(self.scope, session_id=session_id, kinds=("summary",))
        prepared = prepare_event("summary", text, payload, None, None, None, None, self._counter)
        with self._write() as tx:
            _, _, pool = self._owned(tx, session_id, allow_closed=True, adds=True)
            current = self._store.events(newest, newest_first=True, limit=1, tx=tx)
            if current and (based_on is None or current[0].id != based_on.id):
                theirs = covers(current[0])
                if theirs is not None and theirs["to_us"] >= payload["covers"]["to_us"]:
                    return current[0]  # a concurrent summary already stands for this span
                # Rare (another process summarised meanwhile): counted again under the lock.
                payload = {**payload, "supersedes": current[0].id}
                prepared = prepare_event(
                    "summary", text, payload, None, None, None, None, self._counter
                )
            inserted = self._insert(tx, session_id, pool, prepared, None, touch=False)
        self._indexer.notify()
        return inserted.event()

    # -- maintenance -----------------------------------------------------------------------

    def flush(self) -> None:
        """Block until every pending event in the store has its embedding, and write the
        recall counts searches made since the last batch (written at most once a second
        otherwise)."""
        if not self.read_only:  # vectors cannot be stored: nothing to wait for
            self._indexer.flush()
            self._engine.recalls.flush()

    def pending_embeddings(self) -> int:
        """How many events still wait for their embedding (all agents)."""
        return self._store.pending_count()

    def reindex(self) -> int:
        """Drop every vector and re-embed the whole log with this manager's embedder.

        Use it after changing the embedder. Returns the number of events queued.
        """
        self._check_writable()
        count = self._storage.reindex()
        self.flush()
        return count


def _check_count(name: str, value: object, *, optional: bool = False) -> None:
    """``limit`` / ``offset``: a whole number from 0 to 2**63 - 1 (what a store's query
    takes), or None when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        none = " or None" if optional else ""
        raise InvalidInput(
            f"{name} must be an integer from 0 to 2**63 - 1{none}, got {shown(value)}."
        )
