"""Long-term user memory on the write path: ``remember``, ``facts``, ``fact_history`` and
``retract_fact`` (the rules are in :mod:`memlane.memory`).

A user's facts are events of kind ``fact`` in a memory session: one per agent, user and
pool, created on first use (``session_for`` with a key derived from the user and the pool),
with the user as its ``user_id``. Every change happens in one write transaction that first
locks that session (``_owned``: ``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's write lock
is the whole file), so eight processes remembering one key at once leave exactly one
current value. Not part of the public API: ``SessionManager`` inherits it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..core import canonical_json
from ..core.clock import now_us, to_us
from ..core.observed import observed
from ..errors import FactNotFound, InvalidInput, StoreError, shown
from ..events import Event, Session
from ..memory import (
    EXTRACTED_BY,
    FACT_KINDS,
    KEY,
    KIND,
    MEMORY_SESSION,
    NORMALIZED,
    RESERVED,
    RETRACTED_AT,
    RETRACTED_REASON,
    SEEN,
    SOURCE,
    SUPERSEDED_BY,
    USER,
    VALID_FROM,
    VALID_UNTIL,
    Fact,
    FactResolver,
    RememberResult,
    Resolution,
    fact_digest,
    resolution_of,
)
from ..records.redacting import RecordRedaction
from ..records.validate import PreparedEvent, identifier, prepare_event, storable_key
from ..records.validate import text as _text
from ..store.base import EventFilter, SessionFilter
from ..write.path import Writer
from ..write.sessions import Sessions

__all__ = ["FactPlan", "UserMemory"]

#: cosine similarity from which a current fact is reported as ``similar`` (MiniLM: a
#: restatement scores ~0.8-0.95; "lives in Paris" / "lives in Berlin" ~0.7)
SIMILAR_COSINE = 0.7
#: at most this many similar facts are reported (and shown to a resolver)
SIMILAR_LIMIT = 5


@dataclasses.dataclass(frozen=True)
class FactPlan:
    """A ``remember`` checked and prepared before any lock (validation, the memory session,
    the similar facts and the resolver's answer), for :meth:`UserMemory.apply` to carry out
    in a transaction: ``remember`` alone, or several with what else a caller writes
    atomically beside them (the extraction stage: its facts, annotations and watermark)."""

    user_id: str
    key: str | None
    digest: str
    start: int
    session_id: str
    prepare: Callable[[Mapping[str, Any]], PreparedEvent]
    similar: list[Fact]
    resolution: Resolution
    note: str | None
    redaction: RecordRedaction | None
    #: the fact's metadata names the extractor that drew it (``extracted_by``)
    extracted: bool = False


def _start(event: Event) -> int:
    """A fact event's ``valid_from`` (microseconds)."""
    return int(event.metadata[VALID_FROM])


class UserMemory:
    """What a ``SessionManager`` knows about users (see the module docstring), kept through
    its writer in sessions of its own (``sessions.session_for``)."""

    def __init__(
        self, writer: Writer, sessions: Sessions, fact_resolver: FactResolver | None = None
    ) -> None:
        self._writer = writer
        self._sessions = sessions
        self.agent_id = writer.agent_id
        self.scope = writer.scope
        self._observer = writer.observer
        self.fact_resolver = fact_resolver

    @observed("remember")
    def remember(
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
        """Remember a fact (or a ``kind="preference"``) about a user.

        A fact with a ``key`` supersedes the current value of that key (the old one is kept,
        valid until the new one's ``valid_from``); one identical to a current fact is
        ``unchanged`` (seen once more); otherwise it is ``added``. Facts close in meaning
        come back as ``similar`` and are left alone, unless this manager has a
        ``fact_resolver``. ``valid_from`` (default: now) is when it became true — a keyed
        fact dated before the key's current value is stored as history. ``pool``: keep the
        user's memory in a shared pool (agents subscribed to it read it).

        >>> mgr.remember("u1", "Lives in Berlin", key="city").status  # doctest: +SKIP
        'added'
        >>> mgr.remember("u1", "Lives in Zurich", key="city").superseded[0].text  # doctest: +SKIP
        'Lives in Berlin'
        """
        plan = self.plan(
            user_id, text, key, kind, source, valid_from, importance, metadata,
            valid_until=valid_until, pool=pool,
        )  # fmt: skip
        with self._writer.write() as tx:
            result = self.apply(tx, plan)
        self.applied(plan, result)
        return result

    def plan(
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
    ) -> FactPlan:
        """:meth:`remember`'s checks and preparations, before any lock (see
        :class:`FactPlan`); :meth:`apply` carries the plan out."""
        user_id = identifier(user_id, "user_id")
        text = _text(text, "text")
        # redacted first: what is compared, digested and stored is the redacted fact
        redaction = self._writer.redaction()
        if redaction is not None:
            text = redaction.text(text)
        if key is not None:
            key = identifier(key, "key")
        if kind not in FACT_KINDS:
            raise InvalidInput(
                f"Unknown fact kind {shown(kind)}; use one of {', '.join(FACT_KINDS)}."
            )
        if source is not None:
            source = identifier(source, "source")
        if pool is not None:
            pool = identifier(pool, "pool")
        start = now_us() if valid_from is None else to_us(valid_from, "valid_from")
        end = None if valid_until is None else to_us(valid_until, "valid_until")
        if end is not None and end <= start:
            raise InvalidInput(
                f"valid_until ({valid_until}) must be after valid_from "
                f"({valid_from or 'now'}): a fact is true from valid_from until valid_until."
            )
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
        taken = sorted(RESERVED & set(metadata or {}))
        if taken:
            raise InvalidInput(
                f"metadata keys {taken} are the fact's own; use other names for yours."
            )
        digest = fact_digest(text)
        own: dict[str, Any] = {USER: user_id, KIND: kind, NORMALIZED: digest, VALID_FROM: start}
        if key is not None:
            own[KEY] = key
        if source is not None:
            own[SOURCE] = source
        if end is not None:
            own[VALID_UNTIL] = end

        def prepare(extra: Mapping[str, Any]) -> PreparedEvent:
            meta = {**(metadata or {}), **own, **extra}
            return prepare_event(
                "fact", text, None, importance, None, meta, None, self._writer.count_tokens,
                redaction=redaction,
            )  # fmt: skip

        prepare({})  # validated, serialised and counted before any lock is taken
        session = self._memory_session(user_id, pool)
        similar = self._similar(user_id, text, digest, key)
        resolution, note = Resolution("add"), None
        if self.fact_resolver is not None and similar and key is None:
            answer = self.fact_resolver(text, list(similar))
            resolution, note = resolution_of(answer, {fact.id: fact for fact in similar})
        return FactPlan(
            user_id, key, digest, start, session.id, prepare, similar, resolution, note,
            redaction, extracted=EXTRACTED_BY in (metadata or {}),
        )  # fmt: skip

    def applied(self, plan: FactPlan, result: RememberResult) -> None:
        """After the commit of :meth:`apply`: the worker woken, redactions counted."""
        if result.status in ("added", "superseded"):
            self._writer.indexer.notify()
            self._writer.count_redactions(plan.redaction)

    def apply(self, tx: Any, plan: FactPlan) -> RememberResult:
        """Carry out a planned ``remember`` in ``tx`` (the memory session is locked first).

        An extracted fact (``plan.extracted``) of a key whose values a program wrote is
        skipped: an extractor never overrides what code remembered (docs/memory.md)."""
        user_id, key, digest, start = plan.user_id, plan.key, plan.digest, plan.start
        similar, resolution, note, prepare = plan.similar, plan.resolution, plan.note, plan.prepare
        session_id, _, shared = self._writer.owned(tx, plan.session_id)
        current = [
            event
            for event in self._writer.log.events(
                EventFilter(None, session_id=session_id, kinds=("fact",), status="current"),
                tx=tx,
            )
            if event.metadata.get(USER) == user_id
        ]
        same = [
            e
            for e in current
            if e.metadata.get(NORMALIZED) == digest and e.metadata.get(KEY) == key
        ]
        if same:
            seen = {**same[0].metadata, SEEN: int(same[0].metadata.get(SEEN, 1)) + 1}
            self._writer.log.set_event_metadata(
                tx, same[0].id, canonical_json.dumps(seen, "metadata")
            )
            fact = Fact.from_event(dataclasses.replace(same[0], metadata=seen))
            return RememberResult("unchanged", fact, similar=similar, note=note)
        if resolution.action == "skip":
            return RememberResult("skipped", None, similar=similar, note=note)
        if key is not None:
            values = self._writer.log.events(
                EventFilter(None, session_id=session_id, kinds=("fact",), where={KEY: key}),
                tx=tx,
            )
            values = [
                e for e in values if e.metadata.get(USER) == user_id and e.status != "retracted"
            ]
            if plan.extracted and any(EXTRACTED_BY not in e.metadata for e in values):
                held = (
                    f"key {key!r} has a value a program remembered: an extracted fact never "
                    "overrides it"
                )
                return RememberResult("skipped", None, similar=similar, note=held)
            if any(_start(e) > start for e in values):  # before the key's current value
                history = self._insert_history(tx, session_id, shared, values, start, prepare)
                note = f"valid_from is before the current value of key {key!r}: kept as history"
                return RememberResult("added", history, [], similar, note)
            targets = [e for e in current if e.metadata.get(KEY) == key]
        else:
            chosen = set(resolution.ids)
            targets = [e for e in current if e.id in chosen]
            if len(targets) < len(chosen):
                note = "some facts the resolver named were no longer current: left alone"
        inserted = self._writer.insert(tx, session_id, shared, prepare({}), "current")
        superseded = [self._supersede(tx, event, inserted.record.id, start) for event in targets]
        fact = Fact.from_event(inserted.event())
        if superseded:
            return RememberResult("superseded", fact, superseded, similar, note)
        return RememberResult("added", fact, [], similar, note)

    def facts(
        self,
        user_id: str,
        key: str | None = None,
        include_superseded: bool = False,
        as_of: datetime | str | None = None,
    ) -> list[Fact]:
        """What this agent knows about a user now (the current facts), or what was true
        ``as_of`` a time, oldest first; ``include_superseded`` adds the values keys had
        before (retracted facts never appear: see :meth:`fact_history`).

        >>> [f.text for f in mgr.facts("u1")]  # doctest: +SKIP
        ['Lives in Zurich']
        >>> [f.text for f in mgr.facts("u1", as_of="2024-01-01")]  # doctest: +SKIP
        ['Lives in Berlin']
        """
        everything = self.fact_history(user_id, key)
        if as_of is not None:
            when = to_us(as_of, "as_of")
            return [fact for fact in everything if fact.true_at(when)]
        if include_superseded:
            return [fact for fact in everything if fact.status != "retracted"]
        return [fact for fact in everything if fact.status == "current"]

    def fact_history(self, user_id: str, key: str | None = None) -> list[Fact]:
        """Every fact ever remembered about a user (of ``key``), superseded and retracted
        ones too, in the order they were recorded."""
        user_id = identifier(user_id, "user_id")
        if key is not None:
            key = identifier(key, "key")
        where: dict[str, Any] = {USER: user_id}
        if key is not None:
            where[KEY] = key
        found: list[Event] = []
        for session in self._memory_sessions(user_id):
            found += self._writer.log.events(
                EventFilter(self.scope, session_id=session.id, kinds=("fact",), where=where)
            )
        found.sort(key=lambda event: (event.created_at, event.seq))
        return [Fact.from_event(event) for event in found]

    def retract_fact(self, fact_id: str, reason: str) -> Fact:
        """Mark a fact as wrong: kept for audit with ``reason``, never current or true again
        (the value it superseded does not come back). Only the agent that owns it may."""
        reason = _text(reason, "reason")
        event = self._writer.log.event(fact_id, self.scope) if storable_key(fact_id) else None
        if event is None or event.kind != "fact" or USER not in event.metadata:
            raise FactNotFound(
                f"No user fact {shown(fact_id)} for agent {self.agent_id!r} (facts(user_id) lists "
                "the ids)."
            )
        with self._writer.write() as tx:
            self._writer.owned(tx, event.session_id, allow_closed=True)
            (fresh,) = self._writer.log.events(EventFilter(None, event_id=event.id), tx=tx)
            if fresh.status == "retracted":
                return Fact.from_event(fresh)
            self._writer.log.claim_event_status(tx, fresh.id, fresh.status, "retracted")
            meta = {**fresh.metadata, RETRACTED_AT: now_us(), RETRACTED_REASON: reason}
            self._writer.log.set_event_metadata(
                tx, fresh.id, canonical_json.dumps(meta, "metadata")
            )
        return Fact.from_event(dataclasses.replace(fresh, status="retracted", metadata=meta))

    # -- the parts -------------------------------------------------------------------------

    def _insert_history(
        self,
        tx: Any,
        session_id: str,
        pool: str | None,
        values: list[Event],
        start: int,
        prepare: Callable[[Mapping[str, Any]], PreparedEvent],
    ) -> Fact:
        """Insert a keyed fact dated before its key's current value into the key's
        timeline: valid until the next value's ``valid_from``; the value before it (if any)
        now ends where it starts."""
        successor = min((e for e in values if _start(e) > start), key=_start)
        until = {VALID_UNTIL: _start(successor), SUPERSEDED_BY: successor.id}
        inserted = self._writer.insert(tx, session_id, pool, prepare(until), "superseded")
        earlier = [e for e in values if _start(e) <= start]
        if earlier:
            before = max(earlier, key=_start)
            ends = before.metadata.get(VALID_UNTIL)
            if ends is None or int(ends) > start:
                self._supersede(tx, before, inserted.record.id, start)
        return Fact.from_event(inserted.event())

    def _supersede(self, tx: Any, event: Event, by: str, at_us: int) -> Fact:
        """Mark a fact superseded by ``by`` from ``at_us`` on (same transaction)."""
        self._writer.log.claim_event_status(tx, event.id, "current", "superseded")
        until = event.metadata.get(VALID_UNTIL)
        meta = {
            **event.metadata,
            VALID_UNTIL: at_us if until is None else min(int(until), at_us),
            SUPERSEDED_BY: by,
        }
        self._writer.log.set_event_metadata(tx, event.id, canonical_json.dumps(meta, "metadata"))
        return Fact.from_event(dataclasses.replace(event, status="superseded", metadata=meta))

    def _memory_session(self, user_id: str, pool: str | None) -> Session:
        """This agent's memory session for the user (in ``pool``), created on first use."""
        name = json.dumps([self.agent_id, pool, user_id])
        key = "asm-user-memory-" + hashlib.sha256(name.encode()).hexdigest()[:32]
        return self._sessions.session_for(
            key,
            goal=f"What agent {self.agent_id} knows about user {user_id}",
            user_id=user_id,
            metadata={"asm": MEMORY_SESSION},
            shared_pool=pool,
        )

    def _memory_sessions(self, user_id: str) -> list[Session]:
        """Every memory session of the user this agent may read (its own, its pools')."""
        marked = SessionFilter(self.scope, user_id=user_id, marked=MEMORY_SESSION)
        return self._writer.log.sessions(marked, limit=None)

    def _similar(self, user_id: str, text: str, digest: str, key: str | None) -> list[Fact]:
        """Current facts about the user close in meaning to ``text`` (not identical to it,
        not of its key: those it replaces anyway), best first."""
        try:
            hits = self._writer.searcher.search(
                text,
                SIMILAR_LIMIT * 4,
                mode="semantic",
                kinds="fact",
                where={USER: user_id},
                count_recall=False,
            )
        except StoreError:  # no vectors to compare with now: nothing is reported
            return []
        similar = []
        for hit in hits:
            meta = hit.event.metadata
            if hit.score < SIMILAR_COSINE or hit.event.status != "current":
                continue
            if meta.get(NORMALIZED) == digest or (key is not None and meta.get(KEY) == key):
                continue
            similar.append(Fact.from_event(hit.event))
        return similar[:SIMILAR_LIMIT]
