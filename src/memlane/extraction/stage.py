"""The extraction stage: new messages of users' sessions → facts, entities and tags, off the
write path.

``SessionManager(extractor=...)`` runs this stage in a thread of its own, woken by the
background worker's idle hook (``engine/indexer.py``), so a slow extractor never holds up
embedding; with ``background=False``, ``flush()`` runs it. ``record()`` and
``add_message()`` never call it. A pass looks at this agent's own sessions that have a
``user_id``; for each, it reads the messages stored after the session's **watermark** (the
``seq`` of the last message extracted, kept in the store's ``meta`` table, so a restart
neither repeats nor skips one), a window of ``window`` turns at a time (a window not yet full
waits for :data:`QUIET_SECONDS` of quiet in the session), and asks the extractor, with the
user's current facts as context. The answer is checked whole (``types.extraction_of``), then
written in **one transaction**: each fact through ``remember``'s own rules (``UserMemory.
apply``: keys, supersession, the resolver; an extracted fact never overrides a key a program
wrote), the entities and tags as the messages' ``memlane_extracted`` metadata, and the
watermark. A failure of any kind — the extractor raises, hangs past its ``timeout``, answers
something malformed — writes nothing: the batch is retried later, with a growing delay
(:data:`BACKOFF`), and ``health()`` says what happened.

Beside it: ``calling.py`` checks and asks the extractor, ``reports.py`` holds what a pass
reports, ``undo.py`` undoes what extraction wrote. Not part of the public API
(``SessionManager.extract`` and ``forget_extracted`` are).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core import canonical_json
from ..core.clock import now_us, to_us
from ..errors import InvalidInput, SessionManagerError
from ..events import Session
from ..longterm.users import FactPlan, UserMemory
from ..memory import EXTRACTED_BY, EXTRACTED_FROM, EXTRACTOR_VERSION, RememberResult, watermark_key
from ..records.validate import identifier
from ..store.base import EventFilter, SessionFilter
from ..write.path import Writer
from .calling import Asker, Hung, Stopping
from .reports import ExtractionReport, Forgotten, ReportBuilder
from .types import MARK, Extraction, ExtractionBatch, Rejected, Turn
from .undo import forget_extracted

__all__ = ["BACKOFF", "MARK", "OPT_IN", "ExtractionStage", "wanted"]

log = logging.getLogger("memlane.extraction")

#: the session metadata key that opts a session in or out: ``True`` has a session without a
#: ``user_id`` read (entities and tags only: it has no user to hold facts), ``False`` leaves a
#: user's session alone; absent, a session is read when it has a user
OPT_IN = "memlane_extract"
#: seconds before a failed batch is tried again: after the 1st, 2nd, 3rd, ... failure
BACKOFF = (30.0, 120.0, 600.0, 3600.0)

#: how often the stage's thread looks for due windows when nothing wakes it (seconds)
POLL_SECONDS = 1.0
#: how long close() waits for a pass to stop (between batches, or abandoning a call)
STOP_SECONDS = 10.0

#: stages whose thread runs; stopped at interpreter exit (a daemon thread inside SQLite while
#: the interpreter tears itself down can crash it: engine/indexer.py)
_RUNNING: weakref.WeakSet[ExtractionStage] = weakref.WeakSet()


@atexit.register
def _stop_stages_at_exit() -> None:
    for stage in list(_RUNNING):
        stage.stop(timeout=STOP_SECONDS)


def wanted(session: Session) -> bool:
    """Whether the stage reads ``session``: it has a ``user_id`` or opted in
    (``metadata={"memlane_extract": True}``), and did not opt out (``False``)."""
    choice = session.metadata.get(OPT_IN)
    if isinstance(choice, bool):
        return choice
    return session.user_id is not None


@dataclass
class _Failing:
    count: int
    retry_at: float  # monotonic
    why: str


class _Raced(Exception):
    """Another process extracted this window meanwhile (the watermark moved)."""


class ExtractionStage:
    """See the module docstring. One pass at a time per manager."""

    def __init__(
        self, writer: Writer, users: UserMemory, extractor: Callable[[ExtractionBatch], Any]
    ) -> None:
        self._writer = writer
        self._users = users
        self.asker = Asker(extractor)
        self.name = self.asker.name
        self.window = self.asker.window
        self.quiet_seconds = self.asker.quiet_seconds
        self._lock = threading.Lock()
        self._failing: dict[str, _Failing] = {}
        #: sessions a pass left messages in; and when the last whole pass began (microseconds,
        #: less a second): the next looks only at sessions active since, and these
        self._waiting: set[str] = set()
        self._checked_us: int | None = None
        self.last_error: str | None = None
        self.batches = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- its own thread ------------------------------------------------------------------------

    def start(self) -> None:
        """Run passes in a thread of its own (``background=True``): a slow extractor (an LLM
        call of seconds) never holds up the embedding worker, nor any caller."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._loop, name="memlane-extraction", daemon=True
            )
            _RUNNING.add(self)
            self._thread.start()

    def notify(self) -> None:
        """Look for due windows now (the embedding worker's idle hook calls it)."""
        self._wake.set()

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop the thread: after the batch it is writing, or abandoning a call in progress
        (nothing of that batch is written; the next process extracts it)."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        _RUNNING.discard(self)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(POLL_SECONDS)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run()
            except Exception as exc:  # (kept alive; health() says it)
                if self._stop.is_set():
                    return
                self.last_error = f"extraction pass: {type(exc).__name__}: {exc}"
                log.warning("extraction: %s", self.last_error)
                self._stop.wait(POLL_SECONDS)

    def health(self) -> tuple[str | None, int, int]:
        """``(last error, sessions whose batch is failing now, tokens used)``."""
        if self.asker.hanging:
            error = (
                f"the extractor {self.name!r} has not answered a call for over "
                f"{self.asker.timeout:g} s"
            )
            return error, max(1, len(self._failing)), self.asker.tokens
        return self.last_error, len(self._failing), self.asker.tokens

    # -- a pass ----------------------------------------------------------------------------

    def run(
        self,
        session_id: str | None = None,
        *,
        force: bool = False,
        dry_run: bool = False,
        flush: bool = False,
    ) -> ExtractionReport:
        """Extract what is due: the full windows of ``session_id`` (or of every user session
        of this agent), and those of quiet sessions; ``flush``: every window, full or not
        (failing batches still wait for their retry); ``force``: failing batches now too."""
        with self._lock:
            return self._run(session_id, force=force, dry_run=dry_run, flush=flush)

    def _run(
        self, session_id: str | None, *, force: bool, dry_run: bool, flush: bool
    ) -> ExtractionReport:
        started = now_us()
        if session_id is not None:
            session = self._writer.get_session(session_id)
            if session.metadata.get(OPT_IN) is False:
                raise InvalidInput(
                    f"Session {session.id!r} opted out of extraction (its metadata has "
                    f'"{OPT_IN}": false); start a session without it to have it read.'
                )
            if session.agent_id != self._writer.agent_id or not wanted(session):
                raise InvalidInput(
                    f"Session {session.id!r} is another agent's, or has no user_id and did "
                    "not opt in: extraction reads the messages of this agent's sessions with "
                    f'a user, and of those started with metadata={{"{OPT_IN}": True}}.'
                )
            sessions = [session]
        else:
            sessions = self._due_sessions()
        report = ReportBuilder(dry_run=dry_run)
        complete = True
        for session in sessions:
            if self.asker.hanging or self._stop.is_set():
                complete = False
                break  # (a call still hangs: no second one beside it; or closing)
            failing = self._failing.get(session.id)
            if failing is not None and not force and time.monotonic() < failing.retry_at:
                continue  # (still waiting: it stays among the sessions looked at again)
            whole = force or flush or failing is not None
            left = self._session(session, report, force=whole)
            if not dry_run:
                if left:
                    self._waiting.add(session.id)
                else:
                    self._waiting.discard(session.id)
        if session_id is None and not dry_run and complete:
            self._checked_us = started - 1_000_000  # (a second of overlap: clocks, commits)
        return report.done()

    def _due_sessions(self) -> list[Session]:
        """The sessions a pass looks at: every session of this agent with a user at the
        first pass; then those active since the last pass, and those it left something in
        (a window not full yet, a failing batch). A pass costs what changed, not the store."""
        since = self._checked_us
        listed = self._writer.log.sessions(
            SessionFilter(
                self._writer.scope,
                include_shared=False,
                agent_id=self._writer.agent_id,
                unmarked=True,
                since_us=since,
            ),
            limit=None,
        )
        sessions = {s.id: s for s in listed if wanted(s)}
        for waiting in sorted(self._waiting | set(self._failing)):
            if waiting not in sessions:
                found = self._writer.log.session(waiting, self._writer.scope)
                if found is None:  # (deleted meanwhile)
                    self._waiting.discard(waiting)
                    self._failing.pop(waiting, None)
                else:
                    sessions[waiting] = found
        return list(sessions.values())

    def _session(self, session: Session, report: ReportBuilder, *, force: bool) -> bool:
        """Extract the session's due windows; whether it has messages left to extract."""
        mark = self._watermark(session.id)
        while True:
            turns = self._turns(session.id, mark)
            if not turns:
                return False
            window = turns[: self.window]
            idle = (now_us() - to_us(session.updated_at, "updated_at")) / 1e6
            quiet = idle >= self.quiet_seconds
            if len(window) < self.window and not (force or quiet or report.dry_run):
                return True  # a window not full waits for the session to be quiet
            known = () if session.user_id is None else tuple(self._users.facts(session.user_id))
            batch = ExtractionBatch(session.user_id, session.id, tuple(window), known)
            try:
                extraction = self.asker.ask(batch, self._stop)
                if report.dry_run:
                    report.planned(batch, extraction)
                    mark = window[-1].seq
                    continue
                self._write(session, batch, extraction, mark, report)
            except _Raced:
                return True  # another process took this window: the next pass reads on
            except Stopping:
                return True
            except (Rejected, SessionManagerError, Hung) as exc:
                self._failed(session.id, str(exc), report)
                self._measured(False, getattr(exc, "tokens", 0))
                return True
            except Exception as exc:  # (a bug, or a driver's: rolled back, reported, kept)
                log.exception("extraction of session %s failed", session.id)
                self._failed(session.id, f"{type(exc).__name__}: {exc}", report)
                self._measured(False, 0)
                return True
            self._measured(True, extraction.tokens)
            self._failing.pop(session.id, None)
            if not self._failing:
                self.last_error = None
            mark = window[-1].seq

    def _turns(self, session_id: str, mark: int) -> list[Turn]:
        # (lasting: a message with an expiry is short-term by its writer's intent, "my
        # one-time code is ...": it never becomes a fact that outlives it)
        flt = EventFilter(
            self._writer.scope,
            session_id=session_id,
            kinds=("message",),
            after_seq=mark,
            lasting=True,
        )
        events = sorted(self._writer.log.events(flt), key=lambda event: event.seq)
        return [
            Turn(event.id, event.role, event.content, event.created_at, event.seq)
            for event in events
        ]

    def _watermark(self, session_id: str, tx: Any = None) -> int:
        value = self._writer.log.get_meta(self._key(session_id), tx)
        return int(value) if value else 0

    def _key(self, session_id: str) -> str:
        return watermark_key(self._writer.agent_id, session_id)

    # -- after asking the extractor --------------------------------------------------------

    def _measured(self, ok: bool, tokens: Any) -> None:
        metrics = self._writer.observer.metrics
        if metrics is not None:
            metrics.extracted(self.name, ok, tokens if isinstance(tokens, int) else 0)

    def _failed(self, session_id: str, why: str, report: ReportBuilder) -> None:
        before = self._failing.get(session_id)
        count = 1 if before is None else before.count + 1
        delay = BACKOFF[min(count, len(BACKOFF)) - 1]
        self._failing[session_id] = _Failing(count, time.monotonic() + delay, why)
        self.last_error = f"session {session_id}: {why} (try {count}; again in {delay:g} s)"
        log.warning("extraction: %s", self.last_error)
        report.failed[session_id] = why

    # -- writing -----------------------------------------------------------------------------

    def _plans(self, batch: ExtractionBatch, extraction: Extraction) -> list[tuple[Any, FactPlan]]:
        """Each fact prepared by ``remember``'s own checks, before the transaction (none for
        a session without a user: no one to hold them)."""
        if batch.user_id is None:
            return []
        turns = {turn.id: turn for turn in batch.turns}
        users = [t.id for t in batch.turns if t.role in (None, "user", "human")]
        plans = []
        for fact in extraction.facts:
            sources = fact.sources or tuple(users) or tuple(turns)
            valid_from = max(turns[s].created_at for s in sources)
            metadata = {
                EXTRACTED_BY: self.name,
                EXTRACTOR_VERSION: self.asker.version,
                EXTRACTED_FROM: list(sources),
            }
            plan = self._users.plan(
                batch.user_id,
                fact.text,
                fact.key,
                fact.kind,
                _source(sources),
                valid_from,
                None,
                metadata,
            )
            plans.append((fact, plan))
        return plans

    def _write(
        self,
        session: Session,
        batch: ExtractionBatch,
        extraction: Extraction,
        mark: int,
        report: ReportBuilder,
    ) -> None:
        plans = self._plans(batch, extraction)
        last = batch.turns[-1].seq
        done: list[tuple[Any, FactPlan, RememberResult]] = []
        annotated = 0
        with self._writer.write() as tx:
            self._writer.owned(tx, session.id, allow_closed=True, adds=False)  # (locks it)
            if self._watermark(session.id, tx) != mark:
                raise _Raced
            for fact, plan in plans:
                done.append((fact, plan, self._users.apply(tx, plan)))
            for turn in batch.turns:
                found = extraction.entities.get(turn.id, ())
                tags = extraction.tags.get(turn.id, ())
                if (found or tags) and self._annotate(tx, turn.id, found, tags):
                    annotated += 1
            self._writer.log.set_meta(tx, self._key(session.id), str(last))
            if annotated:
                self._writer.unbuffer(tx, session.id)  # (buffered copies lack the mark)
        for _, plan, result in done:
            self._users.applied(plan, result)
        self.batches += 1
        report.written(batch, done, annotated, extraction)

    def _annotate(self, tx: Any, event_id: str, found: Sequence[Any], tags: Sequence[str]) -> bool:
        found_now = self._writer.log.events(EventFilter(None, event_id=event_id), tx=tx)
        if not found_now:
            return False  # (deleted or expired since it was read: nothing to note)
        event = found_now[0]
        entities: dict[str, list[str]] = {}
        for entity in found:
            entities.setdefault(entity.type, []).append(entity.value or entity.text)
        mark = {
            "by": self.name,
            "version": self.asker.version,
            "at": now_us(),
            "entities": entities,
            "tags": {tag: True for tag in tags},
        }
        metadata = {**event.metadata, MARK: mark}
        self._writer.log.set_event_metadata(tx, event.id, canonical_json.dumps(metadata))
        return True

    # -- undoing -------------------------------------------------------------------------------

    def forget(self, since: datetime | str | None, extractor: str | None) -> Forgotten:
        """Retract the facts extracted (by ``extractor``, since ``since``) and remove the
        extracted metadata of messages (``undo.py``); watermarks stay."""
        since_us = None if since is None else to_us(since, "since")
        if extractor is not None:
            extractor = identifier(extractor, "extractor")
        with self._lock:
            return forget_extracted(self._writer, self._users, since_us, extractor)


def _source(ids: Sequence[str]) -> str:
    """A fact's ``source``: the message ids it came from, as many as fit 200 characters
    (all of them are in its ``extracted_from`` metadata)."""
    text = ""
    for position, event_id in enumerate(ids):
        more = f",+{len(ids) - position}" if position else ""
        candidate = f"{text},{event_id}" if text else event_id
        if len(candidate) + len(more) > 190:
            return text + f",+{len(ids) - position}"
        text = candidate
    return text
