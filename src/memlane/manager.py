"""The :class:`SessionManager` façade: the whole public API of the library in one object.

A handful of primitives do the work — :meth:`SessionManager.record` (the single write path),
:meth:`~SessionManager.events`, :meth:`~SessionManager.search` and
:meth:`~SessionManager.restore` — and the conveniences (``record_step``, ``add_message``, ...)
are thin layers over ``record``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, cast

from .buffer import RedisBuffer, open_buffer
from .core.delegate import Delegated
from .core.observed import Observer
from .core.scope import Scope
from .engine.engine import Health, resolve_target
from .engine.shared import open_engine
from .errors import InvalidInput, shown
from .extraction.calling import extractor_of
from .extraction.reports import ExtractionReport, Forgotten
from .extraction.stage import ExtractionStage
from .extraction.types import Extractor
from .longterm.knowledge import KnowledgeMemory
from .longterm.users import UserMemory
from .memory import FactResolver
from .metrics import Metrics
from .privacy.agent import AgentPrivacy
from .privacy.retention_sweep import RetentionSchedule
from .protocols import Embedder, Summarizer, TokenCounter
from .records.validate import identifier as _identifier
from .redaction import Redactor, redactor_of
from .restore.restorer import Restorer
from .restore.summaries import AutoSummary
from .retention import RetentionPolicy
from .sharing.pools import PoolSharing
from .store import store_identity
from .store.base import Capabilities
from .text.tokens import tokenizer_for
from .tracing import Tracing
from .write.buffer_epoch import BufferEpoch
from .write.conveniences import Conveniences
from .write.path import Writer
from .write.reads import Reads
from .write.sessions import Sessions

__all__ = ["SessionManager"]


class SessionManager:
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
        extractor: form memory from conversations, off the write path: ``"rules"`` (the
            offline :class:`~memlane.extraction.RuleExtractor`), an
            :class:`~memlane.extraction.LLMExtractor`, or any callable
            ``batch -> Extraction``. A background thread of its own (or :meth:`flush`) reads
            the new messages of this agent's sessions that have a ``user_id`` (or opted in:
            ``metadata={"memlane_extract": True}``), a window at a time,
            and writes the facts it finds through :meth:`remember`'s rules and the entities
            and tags as the messages' ``memlane_extracted`` metadata
            (:mod:`memlane.extraction`); :meth:`forget_extracted` undoes it.
        worker_priority: ``"idle"`` (the default, on Linux): the background worker's model
            runs only on a core no other thread wants (``SCHED_IDLE``), so ``record()`` and
            searches never wait for it; on a machine busy with other work, embedding then
            waits for a free core (ingest 99 s instead of 31 s measured beside a loaded
            machine's other work). ``"normal"``: the model shares the cores with the
            application, so the backlog keeps moving on a busy machine, at the cost of
            ``record()``'s tail while it embeds
            (docs/decisions/2026-11-23-worker-at-idle-priority.md).
    """

    #: the configuration, as given and checked (read them; changing them changes nothing)
    agent_id: str
    scope: Scope
    url: str
    db_path: str
    model: str | TokenCounter
    summarizer: Summarizer | None
    fact_resolver: FactResolver | None
    read_only: bool
    count_recalls: bool
    #: the extractor in use (``"rules"`` given: a RuleExtractor), or None
    extractor: Extractor | None

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
        extractor: Extractor | Literal["rules"] | None = None,
        worker_priority: Literal["idle", "normal"] = "idle",
    ) -> None:
        self.agent_id = _identifier(agent_id, "agent_id")
        if worker_priority not in ("idle", "normal"):
            raise InvalidInput(
                f"worker_priority must be 'idle' or 'normal', got {shown(worker_priority)}."
            )
        chosen = extractor_of(extractor)
        self.extractor = cast("Extractor | None", chosen)  # (checked callable: the protocol)
        if chosen is not None and read_only:
            raise InvalidInput(
                "extractor= writes what it extracts, which read_only=True cannot; open the "
                "manager without read_only, or without an extractor."
            )
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
        if tracing is not None and not isinstance(tracing, Tracing):
            raise InvalidInput(
                f"tracing must be a memlane.tracing.Tracing, got {type(tracing).__name__}."
            )
        if retention is not None and not isinstance(retention, RetentionPolicy):
            raise InvalidInput(
                f"retention must be a RetentionPolicy, got {type(retention).__name__}."
            )
        if retention is not None and not background:
            raise InvalidInput(
                "retention= is applied by the background worker; open the manager with "
                "background=True, or call apply_retention() yourself."
            )
        # Managers of one store in a process share its engine (engine/shared.py): one
        # connection, one worker, one set of caches for every agent the process serves.
        self._engine = open_engine(
            resolve_target(db_path, url),
            index,
            embedder=embedder,
            batch_size=batch_size,
            autocheckpoint=not background,
            reindex=reindex,
            worker_priority=worker_priority,
            read_only=self.read_only,
            model=model,
        )
        try:
            self.url, self.db_path = self._engine.url, self._engine.db_path
            engine = self._engine
            # (what describes the manager stays readable after close)
            self._capabilities = engine.storage.capabilities
            self._embedder = engine.indexer.embedder
            backend = engine.storage.capabilities.name
            self._writer = Writer(
                agent_id=self.agent_id,
                scope=self.scope,
                url=self.url,
                model=model,
                read_only=self.read_only,
                storage=engine.storage,
                indexer=engine.indexer,
                searcher=engine.searcher(self.scope),
                observer=Observer(self.agent_id, backend, metrics, tracing),
                buffer=self._buffer,
                buffer_epoch=None
                if self._buffer is None
                else BufferEpoch(engine.store, self._buffer, writable=not self.read_only),
                redactor=self._redactor,
            )
            self._observer = self._writer.observer
            self._sessions = Sessions(self._writer)
            self._conveniences = Conveniences(self._writer)
            self._users = UserMemory(self._writer, self._sessions, fact_resolver)
            self._knowledge = KnowledgeMemory(self._writer, self._sessions)
            self._pools = PoolSharing(self._writer)
            self._reads = Reads(self._writer, self._users.facts, count_recalls=self.count_recalls)
            self._privacy = AgentPrivacy(
                engine.storage, self._writer.observer, self._writer.check_writable, self._buffer
            )
            self._restorer = Restorer(self._writer, summarizer, count_recalls=self.count_recalls)
            self._pools.check_subscriptions()
            engine.indexer.count_tokens = self._writer.count_tokens  # deferred events: this model
            if metrics is not None:
                metrics.attach(engine.store, backend, store_identity(self.url) or self.url)
            #: what this manager asked the (maybe shared) worker to run when idle; close() takes
            #: them back
            self._idle_hooks: list[Callable[[], Any]] = []
            if retention is not None:
                self._idle_hooks.append(RetentionSchedule(engine.storage, retention, self.agent_id))
            if auto_summary is not None:
                self._idle_hooks.append(AutoSummary(self, self._writer.searcher, auto_summary))
            self._extraction = (
                None if chosen is None else ExtractionStage(self._writer, self._users, chosen)
            )
            if self._extraction is not None and background:
                self._extraction.start()  # (a thread of its own: an LLM never holds up embedding)
                self._idle_hooks.append(self._extraction.notify)
            engine.indexer.idle_hooks.extend(self._idle_hooks)
            if background:
                engine.indexer.start()
                engine.indexer.notify()  # catch up whatever a crashed process left behind
        except BaseException:
            self._engine.close()  # (this manager's hold: the engine may be shared)
            raise

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the background worker and close the database (pending embeddings stay queued).

        The worker stops after the slice of its batch it is embedding (at most 64 texts); the
        rest of the batch stays queued for the next process. When that takes more than a
        second, a warning on the ``memlane.indexer`` logger says what it waits for.

        Managers of one store in a process share its engine: the worker stops and the store
        closes with the last of them. A closed manager refuses every call, whoever else still
        holds the engine. Closing again does nothing.
        """
        if isinstance(self._engine, _Closed):
            return
        if self._extraction is not None:  # (first: its batches write through the engine)
            self._extraction.stop()
        self._engine.drop_idle_hooks(self._idle_hooks)  # (another manager may keep it on)
        self._idle_hooks = []
        engine = self._engine
        # Every part goes: a call reaching one says the manager is closed, as a closed store
        # does (the shared engine may stay open for the other managers).
        for part in _PARTS:
            setattr(self, part, _CLOSED)
        engine.close()
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
        return self._capabilities

    @property
    def embedder_name(self) -> str:
        return self._embedder.name

    def health(self) -> Health:
        """The embedding backlog, how far behind the worker is, and its last error.

        >>> mgr.health().backlog, mgr.health().last_error  # doctest: +SKIP
        (0, None)
        """
        health = self._engine.health()
        if self._buffer is not None and self._buffer.error is not None:
            health = replace(health, buffer_error=self._buffer.error)
        if self._extraction is not None:
            error, failing, tokens = self._extraction.health()
            health = replace(
                health,
                extraction_error=error,
                extraction_failing=failing,
                extraction_tokens=tokens,
            )
        return health

    # -- the parts' methods, each carried by one part -------------------------------------

    start_session = Delegated("_sessions", Sessions.start_session)
    session_for = Delegated("_sessions", Sessions.session_for)
    get_session = Delegated("_writer", Writer.get_session)
    list_sessions = Delegated("_sessions", Sessions.list_sessions)
    end_session = Delegated("_sessions", Sessions.end_session)
    delete_session = Delegated("_sessions", Sessions.delete_session)
    delete_event = Delegated("_sessions", Sessions.delete_event)
    pop_event = Delegated("_sessions", Sessions.pop_event)
    clear_session = Delegated("_sessions", Sessions.clear_session)
    events = Delegated("_reads", Reads.events)
    search = Delegated("_reads", Reads.search)
    semantic_search = Delegated("_reads", Reads.semantic_search)
    export_markdown = Delegated("_reads", Reads.export_markdown)
    get_event = Delegated("_writer", Writer.get_event)
    recent_messages = Delegated("_writer", Writer.recent_messages)
    record = Delegated("_writer", Writer.record)
    record_many = Delegated("_writer", Writer.record_many)
    record_step = Delegated("_conveniences", Conveniences.record_step)
    record_decision = Delegated("_conveniences", Conveniences.record_decision)
    record_fact = Delegated("_conveniences", Conveniences.record_fact)
    record_error = Delegated("_conveniences", Conveniences.record_error)
    resolve_error = Delegated("_conveniences", Conveniences.resolve_error)
    record_tool_output = Delegated("_conveniences", Conveniences.record_tool_output)
    add_message = Delegated("_conveniences", Conveniences.add_message)
    add_pending = Delegated("_conveniences", Conveniences.add_pending)
    complete_pending = Delegated("_conveniences", Conveniences.complete_pending)
    cancel_pending = Delegated("_conveniences", Conveniences.cancel_pending)
    restore = Delegated("_restorer", Restorer.restore)
    summarize = Delegated("_restorer", Restorer.summarize)
    remember = Delegated("_users", UserMemory.remember)
    facts = Delegated("_users", UserMemory.facts)
    fact_history = Delegated("_users", UserMemory.fact_history)
    retract_fact = Delegated("_users", UserMemory.retract_fact)
    ingest = Delegated("_knowledge", KnowledgeMemory.ingest)
    documents = Delegated("_knowledge", KnowledgeMemory.documents)
    delete_document = Delegated("_knowledge", KnowledgeMemory.delete_document)
    create_pool = Delegated("_pools", PoolSharing.create_pool)
    grant = Delegated("_pools", PoolSharing.grant)
    revoke = Delegated("_pools", PoolSharing.revoke)
    pools = Delegated("_pools", PoolSharing.pools)
    pool_grants = Delegated("_pools", PoolSharing.pool_grants)
    pool_log = Delegated("_pools", PoolSharing.pool_log)
    apply_retention = Delegated("_privacy", AgentPrivacy.apply_retention)
    erase_user = Delegated("_privacy", AgentPrivacy.erase_user)

    # -- maintenance -----------------------------------------------------------------------

    def flush(self) -> None:
        """Block until every pending event in the store has its embedding, and write the
        recall counts searches made since the last batch (written at most once a second
        otherwise). Then a SQLite store empties its write-ahead log into the database when
        no other process is reading it: after ``flush()`` the ``.db`` file alone holds
        everything recorded (a copy of it is a complete backup)."""
        if not self.read_only:  # vectors cannot be stored: nothing to wait for
            self._engine.indexer.flush()
            self._engine.recalls.flush()
        if self._extraction is not None:  # every window, full or not (failing ones wait)
            self._extraction.run(force=False, dry_run=False, flush=True)
            self._engine.indexer.flush()  # (the facts it wrote are embedded too)
        if not self.read_only:
            self._engine.store.settle()

    def extract(self, session_id: str | None = None, *, dry_run: bool = False) -> ExtractionReport:
        """Run this manager's extractor now over the new messages of ``session_id`` (or of
        every session of this agent that has a user), full windows or not, batches that
        failed before included; ``dry_run``: say what it would write, writing nothing (the
        watermark does not move). Returns an :class:`~memlane.extraction.ExtractionReport`.

        >>> mgr = SessionManager("assistant", db_path="a.db", extractor="rules")  # doctest: +SKIP
        >>> [f.text for f in mgr.extract(session.id, dry_run=True).facts]  # doctest: +SKIP
        ['Lives in Porto']
        """
        return self._stage().run(session_id, force=True, dry_run=dry_run)

    def forget_extracted(
        self, since: datetime | str | None = None, extractor: str | None = None
    ) -> Forgotten:
        """Undo what extraction wrote (of ``extractor``, by name; recorded ``since``): each
        extracted fact is retracted (:meth:`retract_fact`: kept for audit, never current
        again; the value it superseded does not come back) and the ``memlane_extracted``
        metadata of messages is removed. The watermarks stay: those messages are not
        extracted again.

        >>> mgr.forget_extracted(since="2026-11-27")  # doctest: +SKIP
        Forgotten(facts=3, messages=5)
        """
        return self._stage().forget(since, extractor)

    def _stage(self) -> ExtractionStage:
        if self._extraction is None:
            raise InvalidInput(
                'This SessionManager has no extractor; open it with extractor="rules", an '
                "LLMExtractor or a callable (memlane.extraction)."
            )
        return self._extraction

    def warm_up(self, wait: float = 0.0) -> bool:
        """Load now what this agent's first search and restore would otherwise wait for:
        the embedding model, the tokenizer of :attr:`model`, the vectors of every partition
        the agent reads (from their snapshot beside the store, or the store) and, in the
        background, its in-memory keyword index (until it is built, keyword searches rank
        with the store's full-text index, slower). Waits up to ``wait`` seconds for that
        index; returns whether it is ready. Records nothing and counts no recalls: for a
        server to call at start (``memlane ui`` does, in a thread of its own) so that its
        first request is not the one that waits. At 100k events the first restore of a cold
        process took 4 s, the next ones ~0.2 s until the keyword index was built, then
        ~0.1 s (docs/benchmarks.md).

        >>> mgr.warm_up(wait=60)  # doctest: +SKIP
        True
        """
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not wait >= 0:
            raise InvalidInput(f"wait must be a number of seconds >= 0, got {shown(wait)}.")
        tokenizer_for(self.model).count("warm up")
        return self._writer.searcher.warm_up(float(wait))

    def pending_embeddings(self) -> int:
        """How many events still wait for their embedding (all agents)."""
        return self._engine.store.pending_count()

    def reindex(self) -> int:
        """Drop every vector and re-embed the whole log with this manager's embedder.

        Use it after changing the embedder. Returns the number of events queued.
        """
        self._writer.check_writable()
        count = self._engine.storage.reindex()
        self.flush()
        return count


class _Closed:
    """What a closed manager's parts become: any use says the manager is closed."""

    def __getattr__(self, name: str) -> Any:
        raise InvalidInput("This SessionManager is closed; open a new one.")

    def __bool__(self) -> bool:
        return False


_CLOSED: Any = _Closed()
#: the manager's parts a call goes through (``Delegated`` holders and the engine)
_PARTS = (
    "_engine",
    "_writer",
    "_sessions",
    "_conveniences",
    "_users",
    "_knowledge",
    "_pools",
    "_reads",
    "_privacy",
    "_restorer",
)
