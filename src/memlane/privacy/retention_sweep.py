"""Applying a :class:`~memlane.retention.RetentionPolicy`: decided and carried out in
one transaction (a dry run reads one snapshot), the chosen sessions locked until the commit
on PostgreSQL — a session someone records into after the decision either was not chosen (it
was active) or cannot be written until the delete has committed, and then is gone. The
counts are what was deleted.

Not part of the public API (``StoreAdmin.apply_retention``, ``memlane retention``,
``SessionManager(retention=...)``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ..core.clock import format_time, from_us, now_us, to_us
from ..core.scope import Scope
from ..engine.storage import Storage
from ..retention import NEVER_EXPIRED_STATUSES, RetentionPolicy
from ..store.base import EventFilter, LogReader, SessionFilter, Tx

__all__ = ["RetentionResult", "RetentionSchedule", "apply_retention"]

log = logging.getLogger("memlane.retention")

#: how often an agent's background worker applies its policy
SCHEDULE_SECONDS = 3600.0


@dataclass(frozen=True)
class RetentionResult:
    """What a retention policy deleted (or, with ``dry_run``, would delete)."""

    policy: RetentionPolicy
    cutoff: datetime
    #: whole sessions deleted (the form without kinds)
    sessions: list[str]
    events: int
    events_by_kind: dict[str, int]
    sessions_touched: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy.to_dict(),
            "cutoff": format_time(self.cutoff),
            "dry_run": self.dry_run,
            "sessions": self.sessions,
            "events": self.events,
            "events_by_kind": self.events_by_kind,
            "sessions_touched": self.sessions_touched,
        }


def apply_retention(
    storage: Storage,
    policy: RetentionPolicy,
    *,
    agent_id: str | None = None,
    dry_run: bool = False,
) -> RetentionResult:
    """Apply ``policy`` to every agent's sessions, or to ``agent_id``'s own."""
    store = storage.log
    cutoff = now_us() - int(policy.max_age.total_seconds() * 1_000_000)
    with store.snapshot() if dry_run else store.atomic() as tx:
        if policy.kinds is None:
            doomed = _old_sessions(store, tx, policy, cutoff, agent_id, lock=not dry_run)
            by_kind: Counter[str] = Counter()
            for session_id in doomed:
                by_kind.update(store.kind_counts(EventFilter(None, session_id=session_id), tx))
                if not dry_run:
                    storage.delete_session(tx, session_id)
            return _result(policy, cutoff, doomed, by_kind, len(doomed), dry_run)
        by_kind = Counter()
        touched: set[str] = set()
        for flt in _old_events(store, tx, policy, cutoff, agent_id):
            counts = store.kind_counts(flt, tx)
            if counts:
                by_kind.update(counts)
                touched.update(store.event_sessions(flt, tx))
                if not dry_run:
                    storage.delete_events(tx, flt)
        return _result(policy, cutoff, [], by_kind, len(touched), dry_run)


def _result(
    policy: RetentionPolicy,
    cutoff: int,
    sessions: list[str],
    by_kind: Counter[str],
    touched: int,
    dry_run: bool,
) -> RetentionResult:
    return RetentionResult(
        policy, from_us(cutoff), sessions, sum(by_kind.values()), dict(sorted(by_kind.items())),
        touched, dry_run,
    )  # fmt: skip


def _old_sessions(
    store: LogReader,
    tx: Tx,
    policy: RetentionPolicy,
    cutoff: int,
    agent_id: str | None,
    *,
    lock: bool,
) -> list[str]:
    """The task sessions inactive since before the cutoff, less each agent's ``keep`` newest
    (memory sessions — users' facts, knowledge — are not tasks: they stay)."""
    found = [
        session
        for status in policy.statuses or (None,)
        for session in store.sessions(
            SessionFilter(None, agent_id=agent_id, status=status, before_us=cutoff),
            tx=tx,
            lock=lock,
        )
        if "asm" not in session.metadata
    ]
    if policy.keep:
        newest: set[str] = set()
        for agent in {session.agent_id for session in found}:
            tasks = [
                s
                for s in store.sessions(SessionFilter(None, agent_id=agent), tx=tx)
                if "asm" not in s.metadata
            ]
            newest.update(s.id for s in tasks[: policy.keep])  # (most recently active first)
        found = [session for session in found if session.id not in newest]
    return sorted({session.id for session in found})


def _old_events(
    store: LogReader, tx: Tx, policy: RetentionPolicy, cutoff: int, agent_id: str | None
) -> list[EventFilter]:
    """One filter per status (and per session when ``keep`` spares each one's newest)."""
    scope = None if agent_id is None else Scope(agent_id, frozenset())
    filters = [
        EventFilter(
            scope,
            include_shared=False,
            kinds=policy.kinds,
            until_us=cutoff,
            exclude_statuses=NEVER_EXPIRED_STATUSES,
            session_status=status,
        )
        for status in policy.statuses or (None,)
    ]
    if not policy.keep:
        return filters
    spared = []
    for flt in filters:
        for session_id in store.event_sessions(flt, tx):
            mine = EventFilter(
                None,
                session_id=session_id,
                kinds=policy.kinds,
                exclude_statuses=NEVER_EXPIRED_STATUSES,
            )
            newest = store.events(mine, newest_first=True, limit=policy.keep, tx=tx)
            if len(newest) < policy.keep:
                continue  # it holds no more than it keeps
            boundary = min(cutoff, to_us(newest[-1].created_at))
            spared.append(replace(flt, session_id=session_id, until_us=boundary))
    return spared


class RetentionSchedule:
    """An idle hook of an agent's background worker: its policy applied to its own sessions
    at most once per :data:`SCHEDULE_SECONDS`, the first time soon after the start."""

    def __init__(self, storage: Storage, policy: RetentionPolicy, agent_id: str) -> None:
        self.storage, self.policy, self.agent_id = storage, policy, agent_id
        self._due = 0.0

    def __call__(self) -> None:
        if time.monotonic() < self._due:
            return
        self._due = time.monotonic() + SCHEDULE_SECONDS
        result = apply_retention(self.storage, self.policy, agent_id=self.agent_id)
        if result.events:
            log.info(
                "retention deleted %d event(s) of agent %s (%s)",
                result.events,
                self.agent_id,
                result.events_by_kind,
            )
