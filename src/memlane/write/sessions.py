"""A session's life on the write path: start (or get by key), list, end, and delete — a
session, one event, the newest event, or a session's events — each from the log and every
index; and the log's events in order. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..core import canonical_json
from ..core.clock import from_us, now_us, to_us
from ..core.ids import new_id
from ..core.observed import observed
from ..engine.engine import session_not_found
from ..errors import EventNotFound, InvalidInput, SessionClosed, SessionKeyTaken, shown
from ..events import SESSION_STATUSES, Event, Session, SessionRecord, validate_kinds
from ..privacy.pool_access import check_write
from ..records.validate import identifier as _identifier
from ..records.validate import prepare_event
from ..records.validate import text as _text
from ..store.base import EventFilter, SessionFilter
from .path import Writer

__all__ = ["Sessions", "check_count"]


class Sessions:
    """The sessions of one agent, through its writer: see each method."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self.agent_id = writer.agent_id
        self.scope = writer.scope
        self._observer = writer.observer

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
        redaction = self._writer.redaction()
        if redaction is not None:
            meta_json = canonical_json.dumps(
                redaction.json(canonical_json.loads(meta_json)), "session metadata"
            )
        prepared = prepare_event(
            "goal",
            goal,
            None,
            1.0,
            None,
            None,
            from_us(now),
            self._writer.count_tokens,
            redaction=redaction,
        )
        goal = prepared.content
        with self._writer.write() as tx:
            if shared_pool is not None:  # (the pool's first session makes this agent its owner)
                check_write(self._writer.log, tx, shared_pool, self.agent_id, create=True)
            inserted = self._writer.log.insert_session(
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
            self._writer.insert(tx, session_id, shared_pool, prepared, None)
        self._writer.indexer.notify()
        self._writer.count_redactions(redaction)
        return self._writer.get_session(session_id)

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
        found = self._writer.keyed(key)
        if found is not None:
            return found
        if goal is None:
            raise session_not_found(key, agent=self.agent_id, where=self._writer.url)
        try:
            return self.start_session(goal, user_id, metadata, shared_pool, key=key)
        except SessionKeyTaken:
            found = self._writer.keyed(key)  # another caller created it a moment ago
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
        check_count("limit", limit, optional=True)
        return self._writer.log.sessions(flt, limit=limit)

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
        with self._writer.write() as tx:
            session_id, current, _ = self._writer.owned(tx, session_id, allow_closed=True)
            if current == status:
                return self._writer.get_session(session_id)  # already ended so: nothing to do
            if current != "active":
                raise SessionClosed(
                    f"Session {session_id!r} already ended as {current}; it cannot be ended "
                    f"again as {status}."
                )
            self._writer.log.set_session_status(tx, session_id, status, now_us())
        return self._writer.get_session(session_id)

    @observed("delete_session")
    def delete_session(self, session_id: str) -> int:
        """Delete a session and its events from the log and every index; return the count."""
        with self._writer.write() as tx:
            session_id, _, _ = self._writer.owned(tx, session_id, allow_closed=True)
            self._writer.unbuffer(tx, session_id)
            return self._writer.storage.delete_session(tx, session_id)

    @observed("delete_event")
    def delete_event(self, event_id: str) -> Event:
        """Delete one event from the log and every index; return it as it was.

        >>> mgr.delete_event(event.id).content  # doctest: +SKIP
        """
        event = self._writer.get_event(event_id)
        with self._writer.write() as tx:
            self._writer.owned(tx, event.session_id, allow_closed=True)
            self._writer.unbuffer(tx, event.session_id)
            if not self._writer.storage.delete_events(tx, EventFilter(None, event_id=event.id)):
                raise EventNotFound(f"Event {event_id!r} was deleted meanwhile.")
        return event

    def pop_event(self, session_id: str, kinds: str | Sequence[str] | None = None) -> Event | None:
        """Remove and return the newest event of a session (of ``kinds``, if given), or
        None when there is none. Atomic: two concurrent pops never return the same event.

        >>> mgr.pop_event(session.id, kinds="message")  # doctest: +SKIP
        """
        wanted = validate_kinds(kinds)
        with self._writer.write() as tx:
            # _owned locks the session (PostgreSQL: FOR UPDATE; SQLite: the write lock), so a
            # concurrent pop reads the newest event only after this one is gone
            session_id, _, _ = self._writer.owned(tx, session_id, allow_closed=True)
            newest = self._writer.log.events(
                EventFilter(None, session_id=session_id, kinds=wanted),
                newest_first=True,
                limit=1,
                tx=tx,
            )
            if not newest:
                return None
            self._writer.unbuffer(tx, session_id)
            self._writer.storage.delete_events(tx, EventFilter(None, event_id=newest[0].id))
        return newest[0]

    @observed("clear_session")
    def clear_session(self, session_id: str, kinds: str | Sequence[str] | None = None) -> int:
        """Delete a session's events (of ``kinds``, if given) from the log and every index,
        keeping the session itself; return how many were deleted.

        >>> mgr.clear_session(session.id, kinds="message")  # doctest: +SKIP
        """
        wanted = validate_kinds(kinds)
        with self._writer.write() as tx:
            session_id, _, _ = self._writer.owned(tx, session_id, allow_closed=True)
            flt = EventFilter(None, session_id=session_id, kinds=wanted)
            self._writer.unbuffer(tx, session_id)
            return self._writer.storage.delete_events(tx, flt)


def check_count(name: str, value: object, *, optional: bool = False) -> None:
    """``limit`` / ``offset``: a whole number from 0 to 2**63 - 1 (what a store's query
    takes), or None when ``optional``."""
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        none = " or None" if optional else ""
        raise InvalidInput(
            f"{name} must be an integer from 0 to 2**63 - 1{none}, got {shown(value)}."
        )
