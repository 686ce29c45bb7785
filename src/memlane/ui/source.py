"""What the inspector reads, and through what: :class:`Source` holds one read-only
:class:`~memlane.admin.StoreAdmin` (sessions, timelines, search across agents) and, for
restore and for an agent's scope (``--agent``), read-only
:class:`~memlane.SessionManager` s opened on demand, one per agent.

Everything goes through the library's public API, with the library's own scoping: with
``agent`` set, a session is shown only if that agent's manager can read it, and search runs
as that agent's search. Nothing here counts a recall or writes anything: both views are
opened read-only (:attr:`SessionManager.count_recalls` is then False).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..admin import SessionInfo, StoreAdmin, StoreStats
from ..engine.engine import Health
from ..errors import InvalidInput, SessionManagerError
from ..events import Event, Hits, PoolGrant
from ..longterm.knowledge import DocumentInfo
from ..manager import SessionManager
from ..memory import Fact
from ..privacy.erasure import ErasureReceipt
from ..protocols import Embedder
from ..restore.result import RestoredContext

__all__ = ["SessionPage", "Source"]

log = logging.getLogger("memlane.ui")

#: Without --agent, how many agents the inspector warms at start: those of the most recently
#: active sessions (each is a manager holding its agent's vectors in memory, as its first
#: page would make it anyway).
WARM_AGENTS = 3


@dataclass(frozen=True)
class SessionPage:
    """One page of the sessions list: ``rows``, and whether a next page exists."""

    rows: list[SessionInfo]
    page: int
    per_page: int
    more: bool


class Source:
    """The inspector's read handle on one store (see the module's docstring).

    ``admin`` must have been opened with ``read_only=True`` unless the caller means to let
    the inspector write (there are no write routes yet). ``embedder`` is the one the
    managers embed queries with; by default the admin's own, so that one model is loaded.
    ``url`` and ``index``: the store as the admin was opened on (default: ``admin.url``,
    which is enough for a SQLite file).
    """

    def __init__(
        self,
        admin: StoreAdmin,
        *,
        agent: str | None = None,
        embedder: Embedder | None = None,
        url: str | None = None,
        index: str | None = None,
    ) -> None:
        self.admin = admin
        #: the store as given (``admin.url`` hides a password: the managers need it)
        self.url = url if url is not None else admin.url
        self.index = index
        self.agent = agent
        self.embedder = embedder
        #: by agent and the pools it held grants on when opened
        self._managers: dict[tuple[str, frozenset[str]], SessionManager] = {}
        self._lock = threading.Lock()

    @property
    def read_only(self) -> bool:
        return self.admin.read_only

    def close(self) -> None:
        with self._lock:
            managers, self._managers = list(self._managers.values()), {}
        for manager in managers:
            manager.close()
        self.admin.close()

    def manager(self, agent: str) -> SessionManager:
        """A read-only manager for ``agent`` (no worker, no recall counts), kept open,
        subscribed to every pool the agent holds a grant on: it reads what the agent may
        read. A grant given since opens a new one (a revoked one is checked by every read)."""
        pools = frozenset(grant.pool for grant in self.admin.pools(agent_id=agent))
        with self._lock:
            found = self._managers.get((agent, pools))
            if found is None:
                embedder = self.embedder
                if embedder is None:  # the admin's model (loaded on its first use)
                    embedder = self.admin.embedder.embedder
                found = SessionManager(
                    agent,
                    url=self.url,
                    index=self.index,
                    embedder=embedder,
                    background=False,
                    count_recalls=False,
                    read_only=self.read_only,
                    subscribe=sorted(pools),
                )
                self._managers[agent, pools] = found
            return found

    def warm_up(self, wait: float = 0.0) -> list[str]:
        """Load what the first pages would otherwise wait for (the model, the tokenizer, the
        vectors and keyword index of the agents most likely looked at: ``--agent``'s, else
        those of the most recently active sessions; :meth:`SessionManager.warm_up`); return
        those agents. ``memlane ui`` calls it in a thread at start. A failure is logged, not
        raised: the page that meets it shows it."""
        try:
            if self.agent is not None:
                agents = [self.agent]
            else:
                recent = self.admin.sessions(limit=50)
                agents = list(dict.fromkeys(info.session.agent_id for info in recent))
            for agent in agents[:WARM_AGENTS]:
                self.manager(agent).warm_up(wait)
            if self.agent is None:  # the operator's search reads through the admin's caches
                self.admin.warm_up(agents[:WARM_AGENTS], wait)
            return agents[:WARM_AGENTS]
        except SessionManagerError as exc:
            log.warning("memlane ui: warming up failed (the pages will say why): %s", exc)
            return []

    # -- reads -----------------------------------------------------------------------------

    def agents(self) -> list[str]:
        return [self.agent] if self.agent is not None else self.admin.agents()

    def sessions(
        self,
        *,
        agent: str | None = None,
        user: str | None = None,
        status: str | None = None,
        text: str | None = None,
        page: int = 1,
        per_page: int = 50,
        scan: int | None = None,
    ) -> SessionPage:
        """A page of sessions, most recently active first. With ``--agent``, the sessions
        that agent may read (its own and those of the pools it holds a grant on: the
        library's scope), whatever ``agent`` asks. ``scan``: ``text`` looks at that many of
        the most recently active sessions only (``StoreAdmin.sessions``)."""
        rows = self.admin.sessions(
            agent=agent if self.agent is None else None,
            readable_by=self.agent,
            status=status,
            user=user,
            text=text,
            scan=scan,
            limit=per_page + 1,  # one more than shown says whether a next page exists
            offset=(page - 1) * per_page,
        )
        return SessionPage(rows[:per_page], page, per_page, len(rows) > per_page)

    def session(self, ref: str) -> SessionInfo:
        """A session by id, key or id prefix, with its size; with ``--agent``, only one that
        agent may read (its own, or in a pool it subscribes to): the library decides."""
        info = self.admin.session(ref)
        if self.agent is not None:
            self.manager(self.agent).get_session(info.session.id)  # SessionNotFound if not
        return info

    def events(
        self, session_id: str, *, page: int, per_page: int, kinds: Sequence[str] | None = None
    ) -> list[Event]:
        """One page of a session's timeline, in log order (never the whole session)."""
        return self.admin.events_page(
            session_id, offset=(page - 1) * per_page, limit=per_page, kinds=kinds
        )

    def event_page(self, session_id: str, event_id: str, per_page: int) -> int:
        """The timeline page (from 1) that shows ``event_id``."""
        position = self.admin.event_position(session_id, event_id)
        page = position // per_page + 1
        for _ in range(8):  # events that share its microsecond may push it a page or more on
            if any(e.id == event_id for e in self.events(session_id, page=page, per_page=per_page)):
                return page
            page += 1
        return position // per_page + 1

    def search(
        self,
        query: str,
        *,
        k: int,
        mode: str,
        session: str | None = None,
        kinds: Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Hits:
        """Search as the operator (every agent) or, with ``--agent``, as that agent would.
        ``since`` / ``until``: ISO-8601 times; ``where``: a metadata filter."""
        if self.agent is not None:
            session_id = None if session is None else self.session(session).session.id
            return self.manager(self.agent).search(
                query,
                k,
                mode=mode,  # type: ignore[arg-type]  # (checked by the library)
                session_id=session_id,
                kinds=kinds,
                where=where,
                since=since,
                until=until,
            )
        return self.admin.search(
            query,
            k,
            mode=mode,
            session=session,
            kinds=kinds,
            where=where,
            since=since,
            until=until,
        )

    def restore(
        self, session: str, budget: int, *, query: str | None, model: str | None
    ) -> RestoredContext:
        """What ``restore()`` returns for ``session`` within ``budget`` tokens: run by the
        agent of ``--agent``, or else by the session's owner, read-only. The session is
        resolved without its size (``StoreAdmin.resolve``: counting a 100k-event session's
        tokens would add a third to the page)."""
        found = self.admin.resolve(session)
        agent = self.agent or found.agent_id
        if model is not None and not model.strip():
            raise InvalidInput("The model is empty; name one (e.g. 'gpt-4o') or leave it out.")
        # (with --agent, the agent's own restore refuses a session it may not read)
        return self.manager(agent).restore(found.id, budget, query=query, model=model)

    def agent_for(self, agent: str | None) -> str:
        """The agent a page about one agent's memory is about: ``--agent``'s, else the one
        asked for, else the store's only agent."""
        if self.agent is not None:
            return self.agent
        if agent is not None:
            return agent
        agents = self.admin.agents()
        if len(agents) == 1:
            return agents[0]
        raise InvalidInput(
            "Which agent? This store holds "
            + (", ".join(map(repr, agents)) if agents else "no agent yet")
            + ": choose one."
        )

    def fact_history(self, agent: str | None, user: str) -> list[Fact]:
        """Every fact the agent ever remembered about ``user`` (current, superseded and
        retracted), in the order recorded: ``SessionManager.fact_history``."""
        return self.manager(self.agent_for(agent)).fact_history(user)

    def documents(self, agent: str | None) -> list[DocumentInfo]:
        """The documents in the agent's knowledge (and its subscribed pools')."""
        return self.manager(self.agent_for(agent)).documents()

    def pools(self) -> list[PoolGrant]:
        """The grants: every one in the store, or with ``--agent`` that agent's own."""
        if self.agent is not None:
            return self.manager(self.agent).pools()
        return self.admin.pools()

    def pool_log(self, pool: str) -> list[Event]:
        """The grants, revocations and changes of owner of ``pool``: all of them, or with
        ``--agent`` those recorded while that agent owned it."""
        if self.agent is not None:
            return self.manager(self.agent).pool_log(pool)
        return self.admin.pool_log(pool)

    def chunks(self, agent: str | None, document_id: str, limit: int = 500) -> list[Event]:
        """A document's chunks as the agent reads them (at most ``limit``), in chunk order:
        its ``knowledge`` events with that ``doc_id``."""
        found = self.manager(self.agent_for(agent)).events(
            None, kinds="knowledge", where={"doc_id": document_id}, limit=limit
        )
        return sorted(found, key=lambda e: (_number(e.metadata.get("chunk")), e.created_at))

    def health(self) -> Health:
        return self.admin.health()

    def stats(self) -> StoreStats:
        return self.admin.stats()

    # -- writes (memlane ui --allow-write only: a read-only store refuses each) -------------

    def delete_session(self, ref: str) -> int:
        """Delete a session with its events (from every index); how many events went. With
        ``--agent``, only one that agent owns (the library checks)."""
        info = self.session(ref)
        if self.agent is not None:
            return self.manager(self.agent).delete_session(info.session.id)
        return self.admin.delete_session(info.session.id)

    def delete_event(self, session: str, event_id: str) -> Event:
        """Delete one event of ``session`` (by the agent of ``--agent``, else the session's
        owner, as the library allows); returns it as it was."""
        info = self.session(session)
        return self.manager(self.agent or info.session.agent_id).delete_event(event_id)

    def retract_fact(self, agent: str | None, fact_id: str, reason: str) -> Fact:
        """Retract a user fact of ``agent``, with the reason kept for audit."""
        return self.manager(self.agent_for(agent)).retract_fact(fact_id, reason)

    def erase_user(self, user: str, agent: str | None = None) -> ErasureReceipt:
        """Erase a user from one agent's memory (``--agent``'s, else ``agent``), or with
        neither from every agent's. The receipt."""
        agent = self.agent or agent
        if agent is not None:
            return self.manager(agent).erase_user(user)
        return self.admin.erase_user(user)

    def event(self, session: str, event_id: str) -> Event:
        """One event of ``session``, as the agent of ``--agent`` (else the session's owner)
        reads it."""
        info = self.session(session)
        event = self.manager(self.agent or info.session.agent_id).get_event(event_id)
        if event.session_id != info.session.id:
            raise InvalidInput(f"Event {event_id!r} is not in session {info.session.id}.")
        return event


def _number(value: object) -> int:
    return value if isinstance(value, int) else 0
