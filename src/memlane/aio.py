"""The asyncio twin of :class:`~memlane.SessionManager`.

:class:`AsyncSessionManager` has the same methods with the same names and signatures, each
awaitable; properties and attributes read the same. It is **off-loading, not a native async
driver**: every call runs the synchronous engine (validation, filters, fusion, packing, the
store's driver) on a bounded pool of worker threads (``max_threads``, default 4), so the event
loop never waits on SQLite, PostgreSQL or the embedding model. The thread pool bounds how many
calls run at once; more wait their turn without blocking the loop.

>>> from memlane import AsyncSessionManager
>>> async def main() -> None:  # doctest: +SKIP
...     async with AsyncSessionManager("researcher", "sessions.db") as mgr:
...         session = await mgr.start_session("Survey sparse attention")
...         await mgr.record_fact(session.id, "RWKV is attention-free")
...         context = await mgr.restore(session.id, max_tokens=2000)

Cancelling an awaiting task does not stop its call: the thread finishes it, and a write that
finishes is durable (as with any database driver that off-loads). Constructing the manager
opens the store in the calling thread (a file open, or a PostgreSQL connect bounded by its
connect timeout); the embedding model loads on first use, in a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

from .buffer import RedisBuffer
from .engine.engine import Health
from .errors import InvalidInput
from .events import Event, Hits, PoolGrant, Session
from .longterm.knowledge import Chunker, DocumentInfo, IngestResult
from .manager import SearchMode, SessionManager
from .memory import Fact, FactResolver, RememberResult
from .metrics import Metrics
from .privacy.erasure import ErasureReceipt
from .privacy.retention_sweep import RetentionResult
from .protocols import Embedder, Summarizer, TokenCounter
from .redaction import Redactor
from .restore.plan import BudgetShares, RestoredContext
from .retention import RetentionPolicy
from .search.recency import Recency
from .store.base import Capabilities
from .tracing import Tracing
from .transfer.markdown import MarkdownExport

__all__ = ["AsyncSessionManager"]

T = TypeVar("T")


class AsyncSessionManager:
    """Durable memory for one agent, for asyncio code: :class:`SessionManager`, awaitable.

    Takes :class:`SessionManager`'s parameters, plus ``max_threads``: how many calls may run
    at once in worker threads (each holds at most one database connection).

    >>> mgr = AsyncSessionManager("researcher", url="postgresql://app@db/agents")  # doctest: +SKIP
    >>> hits = await mgr.search("did we turn off 2FA anywhere?")  # doctest: +SKIP
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
        max_threads: int = 4,
    ) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise InvalidInput(f"max_threads must be a positive int (e.g. 4), not {max_threads!r}.")
        self._sync = SessionManager(
            agent_id,
            db_path,
            url=url,
            index=index,
            embedder=embedder,
            model=model,
            subscribe=subscribe,
            summarizer=summarizer,
            background=background,
            batch_size=batch_size,
            reindex=reindex,
            auto_summary=auto_summary,
            count_recalls=count_recalls,
            read_only=read_only,
            fact_resolver=fact_resolver,
            buffer=buffer,
            redactor=redactor,
            retention=retention,
            metrics=metrics,
            tracing=tracing,
        )
        self._pool = ThreadPoolExecutor(max_threads, thread_name_prefix="asm-async")
        self._closed = False
        self.agent_id = self._sync.agent_id
        self.scope = self._sync.scope
        self.model = self._sync.model
        self.summarizer = self._sync.summarizer
        self.fact_resolver = self._sync.fact_resolver
        self.url = self._sync.url
        self.db_path = self._sync.db_path
        self.count_recalls = self._sync.count_recalls
        self.read_only = self._sync.read_only

    async def _run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            # as a closed file does: ValueError (InvalidInput), not the pool's RuntimeError
            raise InvalidInput(f"{self!r} is closed; open a new AsyncSessionManager.")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(call, *args, **kwargs))

    # -- lifecycle -------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop the background worker and close the database (pending embeddings stay queued).

        Calls already submitted finish first; the waiting happens off the event loop.
        Closing twice is allowed."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        self._sync.close()

    async def __aenter__(self) -> AsyncSessionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSessionManager(agent_id={self.agent_id!r}, url={self.url!r})"

    @property
    def capabilities(self) -> Capabilities:
        """What this backend can do (see :attr:`SessionManager.capabilities`)."""
        return self._sync.capabilities

    @property
    def embedder_name(self) -> str:
        return self._sync.embedder_name

    @property
    def sync(self) -> SessionManager:
        """The synchronous manager underneath (same store, same worker), for code that
        runs in a thread of its own."""
        return self._sync

    async def health(self) -> Health:
        """The embedding backlog, how far behind the worker is, and its last error."""
        return await self._run(self._sync.health)

    async def start_session(
        self,
        goal: str,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        shared_pool: str | None = None,
        key: str | None = None,
    ) -> Session:
        """Open a new active session; its goal is recorded as the session's first event."""
        return await self._run(self._sync.start_session, goal, user_id, metadata, shared_pool, key)

    async def delete_event(self, event_id: str) -> Event:
        """Delete one event from the log and every index; return it as it was."""
        return await self._run(self._sync.delete_event, event_id)

    async def pop_event(
        self, session_id: str, kinds: str | Sequence[str] | None = None
    ) -> Event | None:
        """Remove and return the newest event of a session (of ``kinds``), atomically."""
        return await self._run(self._sync.pop_event, session_id, kinds)

    async def clear_session(self, session_id: str, kinds: str | Sequence[str] | None = None) -> int:
        """Delete a session's events (of ``kinds``), keeping the session; return the count."""
        return await self._run(self._sync.clear_session, session_id, kinds)

    async def get_session(self, session_id: str) -> Session:
        """The session (by id or key), if this agent owns it or subscribed to its pool."""
        return await self._run(self._sync.get_session, session_id)

    async def session_for(
        self,
        key: str,
        goal: str | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        shared_pool: str | None = None,
    ) -> Session:
        """The session with this key, created (with ``goal``) if this agent has none."""
        return await self._run(self._sync.session_for, key, goal, user_id, metadata, shared_pool)

    async def list_sessions(
        self,
        status: str | None = None,
        user_id: str | None = None,
        since: datetime | str | None = None,
        limit: int | None = 100,
        *,
        include_shared: bool = True,
        internal: bool = False,
    ) -> list[Session]:
        """Visible sessions, most recently active first (the library's own only with
        ``internal=True``)."""
        return await self._run(
            self._sync.list_sessions,
            status,
            user_id,
            since,
            limit,
            include_shared=include_shared,
            internal=internal,
        )

    async def end_session(self, session_id: str, status: str = "completed") -> Session:
        """Close a session (completed / failed / abandoned); it then takes no new events."""
        return await self._run(self._sync.end_session, session_id, status)

    async def delete_session(self, session_id: str) -> int:
        """Delete a session and its events from the log and every index; return the count."""
        return await self._run(self._sync.delete_session, session_id)

    async def record(
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
        ttl: timedelta | float | None = None,
        expires_at: datetime | str | None = None,
    ) -> Event:
        """Append one event to a session's log: the single write path."""
        return await self._run(
            self._sync.record,
            session_id,
            kind,
            content,
            payload,
            importance,
            tags,
            metadata,
            created_at,
            index,
            replace,
            ttl,
            expires_at,
        )

    async def record_many(
        self, session_id: str, events: Iterable[Mapping[str, Any]]
    ) -> list[Event]:
        """Append several events to a session in one transaction: all or none."""
        return await self._run(self._sync.record_many, session_id, list(events))

    async def record_step(
        self,
        session_id: str,
        step: str,
        result: Any = None,
        tool: str | None = None,
        input: Any = None,
        **options: Any,
    ) -> Event:
        """Record a completed step, with the tool it used, its input and its result."""
        return await self._run(
            self._sync.record_step, session_id, step, result, tool, input, **options
        )

    async def record_decision(self, session_id: str, text: str, **options: Any) -> Event:
        """Record a decision the agent took (important by default)."""
        return await self._run(self._sync.record_decision, session_id, text, **options)

    async def record_fact(self, session_id: str, text: str, **options: Any) -> Event:
        """Record a fact the agent learned."""
        return await self._run(self._sync.record_fact, session_id, text, **options)

    async def record_error(
        self, session_id: str, text: str, resolved: bool = False, **options: Any
    ) -> Event:
        """Record an error; unresolved errors are kept in view by restore until resolved."""
        return await self._run(self._sync.record_error, session_id, text, resolved, **options)

    async def resolve_error(self, error_id: str) -> Event:
        """Mark an error event resolved."""
        return await self._run(self._sync.resolve_error, error_id)

    async def record_tool_output(
        self, session_id: str, output: Any, tool: str | None = None, **options: Any
    ) -> Event:
        """Record a tool's output: text is stored as content, anything else as JSON payload."""
        return await self._run(self._sync.record_tool_output, session_id, output, tool, **options)

    async def add_message(self, session_id: str, role: str, content: str, **options: Any) -> Event:
        """Record a conversation turn (role: user / assistant / system / tool)."""
        return await self._run(self._sync.add_message, session_id, role, content, **options)

    async def add_pending(self, session_id: str, text: str, **options: Any) -> Event:
        """Queue a step to do later; restore always shows open pending steps."""
        return await self._run(self._sync.add_pending, session_id, text, **options)

    async def complete_pending(self, pending_id: str, result: Any = None) -> Event:
        """Mark a pending step done and record the step that did it; return that step."""
        return await self._run(self._sync.complete_pending, pending_id, result)

    async def cancel_pending(self, pending_id: str, reason: str | None = None) -> Event:
        """Cancel an open pending step."""
        return await self._run(self._sync.cancel_pending, pending_id, reason)

    async def get_event(self, event_id: str) -> Event:
        """One event by id, if this agent may see it."""
        return await self._run(self._sync.get_event, event_id)

    async def apply_retention(
        self, policy: RetentionPolicy, dry_run: bool = False
    ) -> RetentionResult:
        """Apply ``policy`` to this agent's own sessions now."""
        return await self._run(self._sync.apply_retention, policy, dry_run)

    async def erase_user(self, user_id: str) -> ErasureReceipt:
        """Erase everything this agent keeps about a user; return the receipt."""
        return await self._run(self._sync.erase_user, user_id)

    async def create_pool(self, pool: str) -> PoolGrant:
        """Create ``pool`` with this agent as its owner."""
        return await self._run(self._sync.create_pool, pool)

    async def grant(self, pool: str, agent_id: str, access: str = "read") -> PoolGrant:
        """Let ``agent_id`` read (or write) ``pool``; only its owner may."""
        return await self._run(self._sync.grant, pool, agent_id, access)

    async def revoke(self, pool: str, agent_id: str) -> bool:
        """Take ``agent_id``'s access to ``pool`` away; only its owner may."""
        return await self._run(self._sync.revoke, pool, agent_id)

    async def pools(self) -> list[PoolGrant]:
        """This agent's grants: the pools it owns, may write or may read."""
        return await self._run(self._sync.pools)

    async def pool_grants(self, pool: str) -> list[PoolGrant]:
        """Every grant on ``pool``, owner first; only its owner may list them."""
        return await self._run(self._sync.pool_grants, pool)

    async def pool_log(self, pool: str) -> list[Event]:
        """The grants and revocations of ``pool`` recorded while this agent owned it."""
        return await self._run(self._sync.pool_log, pool)

    async def recent_messages(self, session_id: str, limit: int = 20) -> list[Event]:
        """The session's newest ``limit`` messages, oldest first (from the working buffer
        when it holds them)."""
        return await self._run(self._sync.recent_messages, session_id, limit)

    async def events(
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
        """A session's events in log order, or (``session_id=None``) every readable one's."""
        return await self._run(
            self._sync.events,
            session_id,
            kinds,
            since,
            until,
            limit,
            newest_first=newest_first,
            where=where,
            offset=offset,
            include_shared=include_shared,
        )

    async def search(
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
        """Find past events: ``hybrid`` (default), ``semantic`` or ``keyword``; ``recency``
        also ranks them by freshness; ``current_only=False`` includes superseded facts."""
        return await self._run(
            self._sync.search,
            query,
            k,
            mode=mode,
            session_id=session_id,
            kinds=kinds,
            where=where,
            since=since,
            until=until,
            include_shared=include_shared,
            recency=recency,
            current_only=current_only,
        )

    async def semantic_search(self, query: str, k: int = 5, **filters: Any) -> Hits:
        """Meaning-based search: ``search(query, k, mode="semantic", ...)``."""
        return await self._run(self._sync.semantic_search, query, k, **filters)

    async def restore(
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
        """Rebuild prompt context for a session within ``max_tokens``."""
        return await self._run(
            self._sync.restore,
            session_id,
            max_tokens,
            query,
            model,
            summarizer=summarizer,
            other_sessions=other_sessions,
            shares=shares,
            exclude_newest=exclude_newest,
            exclude=exclude,
            knowledge=knowledge,
        )

    async def summarize(
        self,
        session_id: str,
        upto: str | datetime | None = None,
        max_tokens: int = 400,
        summarizer: Summarizer | None = None,
    ) -> Event:
        """Write a rolling ``summary`` event standing in for the session up to ``upto``."""
        return await self._run(self._sync.summarize, session_id, upto, max_tokens, summarizer)

    async def remember(
        self,
        user_id: str,
        text: str,
        key: str | None = None,
        kind: str = "fact",
        source: str | None = None,
        valid_from: datetime | str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        valid_until: datetime | str | None = None,
        pool: str | None = None,
    ) -> RememberResult:
        """Remember a fact or preference about a user (a keyed one supersedes its key's
        current value)."""
        return await self._run(
            self._sync.remember,
            user_id,
            text,
            key,
            kind,
            source,
            valid_from,
            importance,
            metadata,
            valid_until=valid_until,
            pool=pool,
        )

    async def facts(
        self,
        user_id: str,
        key: str | None = None,
        include_superseded: bool = False,
        as_of: datetime | str | None = None,
    ) -> list[Fact]:
        """The user's current facts, or what was true ``as_of`` a time."""
        return await self._run(self._sync.facts, user_id, key, include_superseded, as_of)

    async def fact_history(self, user_id: str, key: str | None = None) -> list[Fact]:
        """Every fact ever remembered about the user, superseded and retracted ones too."""
        return await self._run(self._sync.fact_history, user_id, key)

    async def retract_fact(self, fact_id: str, reason: str) -> Fact:
        """Mark a fact as wrong (kept for audit, never current again)."""
        return await self._run(self._sync.retract_fact, fact_id, reason)

    async def ingest(
        self,
        source: str | os.PathLike[str] | None = None,
        text: str | None = None,
        *,
        name: str | None = None,
        pool: str | None = None,
        chunker: Chunker | None = None,
        metadata: Mapping[str, Any] | None = None,
        user_id: str | None = None,
    ) -> IngestResult:
        """Add a document to the agent's knowledge as chunks (again: only what changed)."""
        return await self._run(
            self._sync.ingest,
            source,
            text,
            name=name,
            pool=pool,
            chunker=chunker,
            metadata=metadata,
            user_id=user_id,
        )

    async def documents(self) -> list[DocumentInfo]:
        """The documents in this agent's knowledge and its subscribed pools'."""
        return await self._run(self._sync.documents)

    async def delete_document(self, document_id: str) -> int:
        """Delete a knowledge document's chunks everywhere; return how many."""
        return await self._run(self._sync.delete_document, document_id)

    async def export_markdown(
        self, directory: str | os.PathLike[str], *, user_id: str | None = None
    ) -> MarkdownExport:
        """Write this agent's memory as Markdown: ``MEMORY.md`` and ``memory/DAY.md``."""
        return await self._run(self._sync.export_markdown, directory, user_id=user_id)

    async def flush(self) -> None:
        """Block until every pending event in the store has its embedding."""
        return await self._run(self._sync.flush)

    async def pending_embeddings(self) -> int:
        """How many events still wait for their embedding (all agents)."""
        return await self._run(self._sync.pending_embeddings)

    async def reindex(self) -> int:
        """Drop every vector and re-embed the whole log with this manager's embedder."""
        return await self._run(self._sync.reindex)
