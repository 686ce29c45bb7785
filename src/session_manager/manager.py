"""The :class:`SessionManager` façade: the whole public API of the library in one object.

A handful of primitives do the work — :meth:`SessionManager.record` (the single write path),
:meth:`~SessionManager.events`, :meth:`~SessionManager.search` and
:meth:`~SessionManager.restore` — and the conveniences (``record_step``, ``add_message``, ...)
are thin layers over ``record``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from . import _json
from ._engine import Engine, Health, resolve_target, session_not_found
from ._ids import new_id
from ._scope import Scope
from ._time import from_us, now_us, to_us
from ._validate import PreparedEvent, prepare_event
from ._validate import identifier as _identifier
from ._validate import text as _text
from .errors import (
    EventNotFound,
    InvalidInput,
    PermissionDenied,
    SessionClosed,
    SessionKeyTaken,
    StoreReadOnly,
)
from .events import (
    MESSAGE_ROLES,
    SESSION_STATUSES,
    Event,
    EventRecord,
    Hit,
    Session,
    SessionRecord,
    is_message_role,
    validate_kinds,
)
from .protocols import Embedder, Summarizer, TokenCounter
from .restore import BudgetShares, RestoredContext
from .store.base import Capabilities, EventFilter, SessionFilter, Store
from .tokens import tokenizer_for

__all__ = ["SessionManager"]

SearchMode = Literal["hybrid", "semantic", "keyword"]
_DEFAULT_STATUS = {"pending": "open", "error": "unresolved"}


class SessionManager:
    """Durable memory for one agent: an event log, a semantic index and budgeted restore.

    >>> from session_manager import SessionManager
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
        subscribe: shared pools this agent may read.
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
            restores. ``False`` for an observer's reads (``asm``, dashboards) that must not
            change what the agent restores.
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
    ) -> None:
        self.agent_id = _identifier(agent_id, "agent_id")
        if auto_summary is not None and (
            isinstance(auto_summary, bool)
            or not isinstance(auto_summary, int)
            or auto_summary < 100
        ):
            raise InvalidInput(
                f"auto_summary must be a token count of at least 100 (e.g. 4000), not "
                f"{auto_summary!r}: the worker summarises a session each time it grows by that."
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
        self._storage = self._engine.storage  # the log and its vector index
        self._indexer = self._engine.indexer
        self._searcher = self._engine.searcher(self.scope)
        if auto_summary is not None:
            from ._summaries import AutoSummary

            self._indexer.idle_hooks.append(AutoSummary(self, self._searcher, auto_summary))
        if background:
            self._indexer.start()
            self._indexer.notify()  # catch up whatever a crashed process left behind

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background worker and close the database (pending embeddings stay queued)."""
        self._engine.close()

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
        return self._engine.health()

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
        meta_json = _json.dumps(dict(metadata or {}), "session metadata")
        session_id, now = new_id(), now_us()
        prepared = prepare_event("goal", goal, None, 1.0, None, None, from_us(now), self._counter)
        with self._write() as tx:
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
        return self.get_session(session_id)

    def get_session(self, session_id: str) -> Session:
        """The session, if this agent owns it or subscribed to its pool. ``session_id`` may
        also be one of this agent's session keys (:meth:`start_session`'s ``key``)."""
        session = self._store.session(session_id, self.scope)
        if session is None:
            session = self._keyed(session_id)
        if session is None:
            raise session_not_found(session_id, agent=self.agent_id, where=self.url)
        return session

    def _keyed(self, key: object) -> Session | None:
        """This agent's session with that key, if any."""
        if not isinstance(key, str):
            return None
        found = self._store.sessions(
            SessionFilter(self.scope, agent_id=self.agent_id, key=key), limit=1
        )
        return found[0] if found else None

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
    ) -> list[Session]:
        """Visible sessions, most recently active first."""
        flt = SessionFilter(
            self.scope,
            include_shared=include_shared,
            status=None if status is None else self._check_status(status),
            user_id=user_id,
            since_us=None if since is None else to_us(since, "since"),
        )
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
            raise InvalidInput(f"limit must be an integer or None, got {limit!r}.")
        return self._store.sessions(flt, limit=limit)

    @staticmethod
    def _check_status(status: str) -> str:
        if status not in SESSION_STATUSES:
            raise InvalidInput(
                f"Unknown session status {status!r}; use one of {', '.join(SESSION_STATUSES)}."
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

    def delete_session(self, session_id: str) -> int:
        """Delete a session and its events from the log and every index; return the count."""
        with self._write() as tx:
            session_id, _, _ = self._owned(tx, session_id, allow_closed=True)
            return self._storage.delete_session(tx, session_id)

    def delete_event(self, event_id: str) -> Event:
        """Delete one event from the log and every index; return it as it was.

        >>> mgr.delete_event(event.id).content  # doctest: +SKIP
        """
        event = self.get_event(event_id)
        with self._write() as tx:
            self._owned(tx, event.session_id, allow_closed=True)
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
            self._storage.delete_events(tx, EventFilter(None, event_id=newest[0].id))
        return newest[0]

    def clear_session(self, session_id: str, kinds: str | Sequence[str] | None = None) -> int:
        """Delete a session's events (of ``kinds``, if given) from the log and every index,
        keeping the session itself; return how many were deleted.

        >>> mgr.clear_session(session.id, kinds="message")  # doctest: +SKIP
        """
        wanted = validate_kinds(kinds)
        with self._write() as tx:
            session_id, _, _ = self._owned(tx, session_id, allow_closed=True)
            flt = EventFilter(None, session_id=session_id, kinds=wanted)
            return self._storage.delete_events(tx, flt)

    def _owned(
        self, tx: Any, session_id: str, *, allow_closed: bool = False
    ) -> tuple[str, str, str | None]:
        """Check this agent may write the session (an id, or one of its keys); return
        ``(session id, status, shared_pool)``."""
        found = self._store.owner_of(tx, session_id) if isinstance(session_id, str) else None
        if found is None and isinstance(session_id, str):
            keyed = self._store.sessions(
                SessionFilter(None, agent_id=self.agent_id, key=session_id), limit=1, tx=tx
            )
            if keyed:
                session_id = keyed[0].id
                found = self._store.owner_of(tx, session_id)
        if found is None or not self.scope.can_read(found[0], found[2]):
            raise session_not_found(session_id, agent=self.agent_id, where=self.url)
        owner, status, pool = found
        if owner != self.agent_id:
            raise PermissionDenied(
                f"Session {session_id!r} belongs to agent {owner!r}; agent {self.agent_id!r} "
                f"can read it through pool {pool!r} but never write it. Record into a session "
                "of your own (start_session)."
            )
        if status != "active" and not allow_closed:
            raise SessionClosed(
                f"Session {session_id!r} is {status}; it takes no new events. "
                "Start a new session for further work."
            )
        return session_id, status, pool

    # -- the write path --------------------------------------------------------------------

    def record(
        self,
        session_id: str,
        kind: str,
        content: str,
        payload: Any = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | str | None = None,
        index: bool = True,
        replace: Mapping[str, Any] | None = None,
    ) -> Event:
        """Append one event to a session's log: the single write path.

        The event is durable when this returns; its embedding is computed in the background
        (searches still see it at once). ``kind`` is a built-in kind or a namespaced custom
        kind ("custom:plan"); ``importance`` defaults per kind; ``created_at`` may be a past
        time (UTC) when importing history. ``index=False`` keeps the event in the log (events,
        restore, export) but out of search: never embedded, never keyword-indexed — for
        bulky items nobody should search. ``replace`` (a ``where`` filter, as in
        :meth:`search`) makes the write an upsert: the session's events of this kind whose
        metadata match it are deleted in the same transaction, from every index.

        >>> mgr.record(session.id, "fact", "Staging is read-only on Sundays")  # doctest: +SKIP
        """
        # Validated, serialised, counted and previewed before the write lock is taken.
        prepared = prepare_event(
            kind, content, payload, importance, tags, metadata, created_at, self._counter
        )
        if not isinstance(index, bool):
            raise InvalidInput(f"index must be True or False, got {index!r}.")
        if replace is not None and (not isinstance(replace, Mapping) or not replace):
            raise InvalidInput(
                f"replace must be a non-empty where filter such as {{'key': 'k1'}}, got "
                f"{replace!r}; to delete every event of a kind use clear_session(kinds=...)."
            )
        with self._write() as tx:
            session_id, _, pool = self._owned(tx, session_id)
            if replace is not None:
                gone = EventFilter(
                    None, session_id=session_id, kinds=(prepared.kind,), where=replace
                )
                self._storage.delete_events(tx, gone)
            inserted = self._insert(
                tx, session_id, pool, prepared, _DEFAULT_STATUS.get(kind), indexed=index
            )
        if index:
            self._indexer.notify()
        return inserted.event()

    def record_many(self, session_id: str, events: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events to a session in one transaction: all or none.

        Each item holds :meth:`record`'s arguments by name (``kind`` and ``content``
        required; ``payload``, ``importance``, ``tags``, ``metadata``, ``created_at``,
        ``index``), and a ``message`` may give its ``role`` as :meth:`add_message` does. Every
        item is validated before anything is written; a bad one raises naming its position.

        >>> mgr.record_many(sid, [{"kind": "message", "role": "user", "content": "Hi"},
        ...                       {"kind": "fact", "content": "They said hi"}])  # doctest: +SKIP
        """
        if isinstance(events, Mapping | str | bytes):
            raise InvalidInput("record_many takes a list of events (dicts), not a single one.")
        prepared: list[tuple[PreparedEvent, str, bool]] = []
        for position, item in enumerate(events):
            try:
                prepared.append(self._prepared_item(item))
            except InvalidInput as exc:
                raise type(exc)(f"Event {position} of record_many: {exc}") from None
        if not prepared:
            return []
        with self._write() as tx:
            session_id, _, pool = self._owned(tx, session_id)
            inserted = [
                self._insert(tx, session_id, pool, item, _DEFAULT_STATUS.get(kind), indexed=index)
                for item, kind, index in prepared
            ]
        self._indexer.notify()
        return [each.event() for each in inserted]

    def _prepared_item(self, item: Any) -> tuple[PreparedEvent, str, bool]:
        """One record_many item, validated: its prepared event, kind and index flag."""
        if not isinstance(item, Mapping):
            raise InvalidInput(f"each event must be a dict, got {type(item).__name__}.")
        unknown = sorted(set(item) - _RECORD_FIELDS)
        if unknown:
            raise InvalidInput(
                f"unknown fields {unknown}; use {', '.join(sorted(_RECORD_FIELDS))}."
            )
        if "kind" not in item or "content" not in item:
            raise InvalidInput("each event needs a kind and a content.")
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
        if "role" in item:
            if item["kind"] != "message" or not is_message_role(item["role"]):
                raise InvalidInput(
                    f"role {item['role']!r} needs kind 'message' and one of "
                    f"{', '.join(MESSAGE_ROLES)} (or a namespaced role)."
                )
            metadata = {**(metadata or {}), "role": item["role"]}
        index = item.get("index", True)
        if not isinstance(index, bool):
            raise InvalidInput(f"index must be True or False, got {index!r}.")
        prepared = prepare_event(
            item["kind"],
            item["content"],
            item.get("payload"),
            item.get("importance"),
            item.get("tags"),
            metadata,
            item.get("created_at"),
            self._counter,
        )
        return prepared, prepared.kind, index

    def _insert(
        self,
        tx: Any,
        session_id: str,
        pool: str | None,
        prepared: PreparedEvent,
        status: str | None,
        *,
        touch: bool = True,
        indexed: bool = True,
    ) -> Inserted:
        record = prepared.record(new_id(), session_id, self.agent_id, pool, status, indexed=indexed)
        seq = self._store.insert_event(tx, record, touch_us=now_us() if touch else None)
        return Inserted(record, seq or 0, prepared)

    def _write(self) -> Any:
        """A write transaction, unless this manager is read-only (then nothing is touched)."""
        self._check_writable()
        return self._store.atomic()

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreReadOnly(
                f"This SessionManager on {self.url!r} was opened with read_only=True; it "
                "reads, never writes. Open another without read_only to record."
            )

    def _tokenizer(self) -> Any:
        return tokenizer_for(self.model)

    def _counter(self, text: str) -> int:
        """Counts an event's stored tokens (prepare_event calls it before a transaction
        starts: the first count loads a BPE file, ~0.3 s, and a user's counter may be slow;
        other writers would wait on the write lock meanwhile)."""
        return int(self._tokenizer().count(text))

    # -- conveniences ----------------------------------------------------------------------

    def record_step(
        self,
        session_id: str,
        step: str,
        result: Any = None,
        tool: str | None = None,
        input: Any = None,
        **options: Any,
    ) -> Event:
        """Record a completed step, with the tool it used, its input and its result."""
        payload = {
            key: value
            for key, value in (("tool", tool), ("input", input), ("result", result))
            if value is not None
        }
        metadata = {**_metadata(options), **({"tool": tool} if tool else {})}
        return self.record(session_id, "step", step, payload or None, metadata=metadata, **options)

    def record_decision(self, session_id: str, text: str, **options: Any) -> Event:
        """Record a decision the agent took (important by default)."""
        return self.record(session_id, "decision", text, **options)

    def record_fact(self, session_id: str, text: str, **options: Any) -> Event:
        """Record a fact the agent learned."""
        return self.record(session_id, "fact", text, **options)

    def record_error(
        self, session_id: str, text: str, resolved: bool = False, **options: Any
    ) -> Event:
        """Record an error; unresolved errors are kept in view by restore until resolved."""
        event = self.record(session_id, "error", text, **options)
        return self.resolve_error(event.id) if resolved else event

    def resolve_error(self, error_id: str) -> Event:
        """Mark an error event resolved."""
        return self._set_status(error_id, "error", ("unresolved",), "resolved")

    def record_tool_output(
        self, session_id: str, output: Any, tool: str | None = None, **options: Any
    ) -> Event:
        """Record a tool's output: text is stored as content, anything else as JSON payload.

        JSON output is also flattened into searchable text ("key: value; ...") so that
        semantic and keyword search reach inside it.
        """
        if output is None:
            raise InvalidInput(
                "record_tool_output got output=None: pass what the tool returned (text or a "
                "JSON value); to note that a tool returned nothing, record_step(sid, "
                "'called the tool; it returned nothing', tool=...)."
            )
        metadata = {**_metadata(options), **({"tool": tool} if tool else {})}
        if isinstance(output, str):
            return self.record(session_id, "tool_output", output, metadata=metadata, **options)
        _json.dumps(output, "tool output")  # a clear error before flattening anything
        content = _flatten(output) or (f"{tool} output" if tool else "tool output")
        metadata["derived_content"] = True
        return self.record(session_id, "tool_output", content, output, metadata=metadata, **options)

    def add_message(self, session_id: str, role: str, content: str, **options: Any) -> Event:
        """Record a conversation turn. ``role``: user, assistant, system, developer, tool,
        function, chatbot, model, or a namespaced one ("autogen:critic").

        A framework's own message object goes in ``payload=`` and comes back equal (as JSON:
        tool calls with their ids, content lists, reasoning items); ``content`` is the text
        rendering that is indexed and restored.

        >>> mgr.add_message(sid, "assistant", "Searching", payload=native)  # doctest: +SKIP
        """
        if not is_message_role(role):
            raise InvalidInput(
                f"Unknown message role {role!r}; use one of {', '.join(MESSAGE_ROLES)}, or a "
                "namespaced role such as 'myframework:critic'."
            )
        metadata = {**_metadata(options), "role": role}
        return self.record(session_id, "message", content, metadata=metadata, **options)

    def add_pending(self, session_id: str, text: str, **options: Any) -> Event:
        """Queue a step to do later; restore always shows open pending steps."""
        return self.record(session_id, "pending", text, **options)

    def complete_pending(self, pending_id: str, result: Any = None) -> Event:
        """Mark a pending step done and record the step that did it; return that step."""
        pending = self._pending(pending_id)
        payload = {"pending_id": pending.id, **({"result": result} if result is not None else {})}
        prepared = prepare_event(
            "step", pending.content, payload, None, None, None, None, self._counter
        )
        with self._write() as tx:
            _, _, pool = self._owned(tx, pending.session_id)
            if not self._claim_status(tx, pending, "done"):
                raise InvalidInput(f"Pending step {pending_id!r} is no longer open.")
            step = self._insert(tx, pending.session_id, pool, prepared, None)
            self._merge_metadata(tx, pending, {"completed_by": step.record.id})
        self._indexer.notify()
        return step.event()

    def cancel_pending(self, pending_id: str, reason: str | None = None) -> Event:
        """Cancel an open pending step."""
        pending = self._pending(pending_id)
        with self._write() as tx:
            self._owned(tx, pending.session_id)
            if not self._claim_status(tx, pending, "cancelled"):
                raise InvalidInput(f"Pending step {pending_id!r} is no longer open.")
            if reason:
                self._merge_metadata(tx, pending, {"cancel_reason": _text(reason, "reason")})
        return self.get_event(pending_id)

    def _pending(self, pending_id: str) -> Event:
        pending = self.get_event(pending_id)
        if pending.kind != "pending":
            raise InvalidInput(f"Event {pending_id!r} is a {pending.kind}, not a pending step.")
        if pending.status != "open":
            raise InvalidInput(f"Pending step {pending_id!r} is already {pending.status}.")
        return pending

    def _claim_status(self, tx: Any, event: Event, status: str) -> bool:
        return self._store.claim_event_status(tx, event.id, event.status, status)

    def _merge_metadata(self, tx: Any, event: Event, extra: dict[str, Any]) -> None:
        self._store.set_event_metadata(tx, event.id, _json.dumps({**event.metadata, **extra}))

    def _set_status(self, event_id: str, kind: str, before: tuple[str, ...], after: str) -> Event:
        event = self.get_event(event_id)
        if event.kind != kind or event.status not in before:
            raise InvalidInput(
                f"Event {event_id!r} is a {event.kind} ({event.status}); cannot mark it {after}."
            )
        with self._write() as tx:
            self._owned(tx, event.session_id, allow_closed=True)
            if not self._claim_status(tx, event, after):
                current = self.get_event(event_id).status
                raise InvalidInput(
                    f"Event {event_id!r} changed meanwhile (now {current}); it was not marked "
                    f"{after}. Read it again and retry if that is still what you want."
                )
        return self.get_event(event_id)

    # -- reads -----------------------------------------------------------------------------

    def get_event(self, event_id: str) -> Event:
        """One event by id, if this agent may see it."""
        event = self._store.event(event_id, self.scope) if isinstance(event_id, str) else None
        if event is None:
            raise EventNotFound(f"Event {event_id!r} does not exist for agent {self.agent_id!r}.")
        return event

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
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise InvalidInput(f"{name} must be an integer, got {value!r}.")
        if offset < 0:
            raise InvalidInput(f"offset must be 0 or more, got {offset}.")
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
    ) -> list[Hit]:
        """Find past events: ``hybrid`` (default, keyword + semantic fused), ``semantic`` or
        ``keyword``. Every returned event's recall count grows by one (unless the manager
        was opened with ``count_recalls=False``).

        >>> hits = mgr.search("did we turn off 2FA anywhere?", k=3)  # doctest: +SKIP
        >>> hits[0].event.content, round(hits[0].score, 3)  # doctest: +SKIP
        """
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
        )

    def semantic_search(self, query: str, k: int = 5, **filters: Any) -> list[Hit]:
        """Meaning-based search: ``search(query, k, mode="semantic", ...)``."""
        return self.search(query, k, mode="semantic", **filters)

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
        ``exclude`` leaves out these events (ids), wherever they are.

        >>> context = mgr.restore(session.id, max_tokens=4000)  # doctest: +SKIP
        >>> context.token_count <= 4000, context.report.sections  # doctest: +SKIP
        """
        from ._restoring import restore_session

        return restore_session(
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
        )

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
        from ._summaries import plan_summary

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
        from ._summaries import covers

        newest = EventFilter(self.scope, session_id=session_id, kinds=("summary",))
        prepared = prepare_event("summary", text, payload, None, None, None, None, self._counter)
        with self._write() as tx:
            _, _, pool = self._owned(tx, session_id, allow_closed=True)
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
        """Block until every pending event in the store has its embedding."""
        if not self.read_only:  # vectors cannot be stored: nothing to wait for
            self._indexer.flush()

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


#: what a record_many item may hold: record()'s arguments, and a message's role
_RECORD_FIELDS = frozenset(
    {"kind", "content", "payload", "importance", "tags", "metadata", "created_at", "index", "role"}
)


@dataclass(frozen=True)
class Inserted:
    """What ``_insert`` wrote; :meth:`event` builds the returned Event after the commit (a
    large payload is parsed back outside the write lock)."""

    record: EventRecord
    seq: int
    prepared: PreparedEvent

    def event(self) -> Event:
        record = self.record
        return Event(
            id=record.id,
            session_id=record.session_id,
            agent_id=record.agent_id,
            kind=record.kind,
            content=record.content,
            payload=_json.loads(record.payload_json),
            importance=record.importance,
            tags=self.prepared.tags,
            metadata=self.prepared.metadata,
            status=record.status,
            created_at=from_us(record.created_us),
            token_count=record.token_count,
            seq=self.seq,
            indexed=record.indexed,
            payload_chars=record.payload_chars,
        )


def _metadata(options: dict[str, Any]) -> Mapping[str, Any]:
    """A convenience's ``metadata=`` option (None means none), checked before merging."""
    metadata = options.pop("metadata", None)
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
    return metadata


def _flatten(value: Any, prefix: str = "", limit: int = 4_000) -> str:
    """``{"a": {"b": 1}, "c": [2]}`` → ``"a.b: 1; c: 2"``: JSON made searchable as text."""
    parts: list[str] = []
    size = 0

    def walk(item: Any, path: str) -> None:
        nonlocal size
        if size > limit:
            return
        if isinstance(item, Mapping):
            for key, sub in item.items():
                walk(sub, f"{path}.{key}" if path else str(key))
        elif isinstance(item, list | tuple):
            for sub in item:
                walk(sub, path)
        elif item is not None:
            text = f"{path}: {item}" if path else str(item)
            parts.append(text)
            size += len(text) + 2

    walk(value, prefix)
    return "; ".join(parts)[:limit]
