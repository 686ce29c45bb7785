"""What the façade reads over its writer's scope: a session's events in order, search, and
the agent's memory as Markdown. Not part of the public API.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from ..core.clock import to_us
from ..core.observed import observed
from ..events import Event, Hits, validate_kinds
from ..memory import MEMORY_SESSION, Fact
from ..records.validate import identifier as _identifier
from ..records.validate import path_of
from ..records.validate import text as _text
from ..search.recency import Recency, recency_of
from ..store.base import EventFilter, SessionFilter
from ..transfer.markdown import DAILY_KINDS, MarkdownExport, memory_files, write_files
from .path import Writer
from .sessions import check_count

__all__ = ["Reads", "SearchMode"]

SearchMode = Literal["hybrid", "semantic", "keyword"]


class Reads:
    """Reads of one agent's memory, through its writer: see each method. ``facts`` is the
    user memory's (the Markdown export writes what the agent knows about each user)."""

    def __init__(
        self, writer: Writer, facts: Callable[[str], list[Fact]], *, count_recalls: bool = True
    ) -> None:
        self._writer = writer
        self._facts = facts
        self._observer = writer.observer
        self.agent_id = writer.agent_id
        self.scope = writer.scope
        self.count_recalls = count_recalls

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
            session_id = self._writer.get_session(session_id).id
        check_count("limit", limit, optional=True)
        check_count("offset", offset)
        flt = EventFilter(
            self.scope,
            include_shared=include_shared,
            session_id=session_id,
            kinds=validate_kinds(kinds),
            since_us=None if since is None else to_us(since, "since"),
            until_us=None if until is None else to_us(until, "until"),
            where=where,
        )
        return self._writer.log.events(flt, limit=limit, newest_first=newest_first, offset=offset)

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
            session_id = self._writer.get_session(session_id).id
        return self._writer.searcher.search(
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
        sessions = {s.id: s for s in self._writer.log.sessions(owned, limit=None)}
        memories = SessionFilter(
            self.scope, include_shared=False, user_id=user_id, marked=MEMORY_SESSION
        )
        users = sorted(
            {s.user_id for s in self._writer.log.sessions(memories, limit=None) if s.user_id}
        )
        facts = {
            user: [fact for fact in self._facts(user) if fact.agent_id == self.agent_id]
            for user in users
        }
        # the daily files hold the agent's tasks, not the sessions the library keeps for it
        # (a user's memory, its knowledge documents: marked in their metadata), and no
        # short-term memory (record(ttl=...)): a file would outlive it
        daily = EventFilter(self.scope, include_shared=False, kinds=DAILY_KINDS, lasting=True)
        events = [
            event
            for event in self._writer.log.events(daily, previews=True)
            if event.session_id in sessions and "asm" not in sessions[event.session_id].metadata
        ]
        return write_files(directory, memory_files(self.agent_id, facts, events, sessions))

    def semantic_search(self, /, query: str, k: int = 5, **filters: Any) -> Hits:
        """Meaning-based search: ``search(query, k, mode="semantic", ...)``."""
        return self.search(query, k, mode="semantic", **filters)
