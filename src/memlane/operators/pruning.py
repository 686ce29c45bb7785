"""Deleting across every agent, for operators (a part of :class:`~memlane.admin.StoreAdmin`):
pruning by age or kind, expired events, a retention policy, a user's erasure — each from the
log and every index, through the storage. Not part of the public API.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from ..buffer import RedisBuffer, open_buffer
from ..core.clock import from_us, now_us
from ..engine.storage import Storage
from ..errors import InvalidInput
from ..events import validate_kind
from ..privacy.erasure import ErasureReceipt, erase_user
from ..privacy.retention_sweep import RetentionResult, apply_retention
from ..records.validate import identifier
from ..retention import RetentionPolicy
from ..store.base import EventFilter, SessionFilter
from ..transfer.jsonl import check_status
from .results import PruneResult, SessionInfo, parse_cutoff

__all__ = ["StorePruning"]


class StorePruning:
    """``prune``, ``prune_expired``, ``apply_retention`` and ``erase_user`` over a storage."""

    def __init__(self, storage: Storage) -> None:
        self._storage = storage

    def prune(
        self,
        older_than: datetime | timedelta | str,
        kind: str | None = None,
        status: str | None = None,
        dry_run: bool = False,
    ) -> PruneResult:
        """Delete what is older than a cutoff (an age such as ``"90d"``, or a timestamp).

        * Without ``kind``: whole sessions (with their events) whose last activity is older
          than the cutoff — a session someone still records into is never cut in half.
        * With ``kind``: only events of that kind created before the cutoff (e.g. bulky
          ``tool_output``), in sessions of any age; the sessions stay. The goal cannot be
          pruned this way (prune the session instead).

        ``status`` restricts either form to sessions with that status (e.g. ``completed``).
        ``dry_run`` reports what would go and deletes nothing. Vector caches of every
        process rebuild after a prune.
        """
        cutoff = parse_cutoff(older_than)
        status = None if status is None else check_status(status)
        if kind is not None and validate_kind(kind) == "goal":
            raise InvalidInput(
                "Goal events cannot be pruned on their own: a session needs its goal. "
                "Prune whole sessions (leave out the kind) instead."
            )
        # Decided and carried out in one transaction (a dry run: one snapshot): a session
        # someone records into after the decision is not deleted, and the counts are what
        # was deleted. The chosen sessions stay locked until the commit (PostgreSQL).
        with self._storage.log.snapshot() if dry_run else self._storage.log.atomic() as tx:
            if kind is None:
                return self._prune_sessions(tx, cutoff, status, dry_run)
            flt = EventFilter(None, kinds=(kind,), until_us=cutoff, session_status=status)
            by_kind = self._storage.log.kind_counts(flt, tx)
            touched = self._storage.log.sessions_touched(flt, tx)
            count = sum(by_kind.values())
            if not dry_run and count:
                self._storage.delete_events(tx, flt)
            return PruneResult(from_us(cutoff), [], count, by_kind, touched, dry_run)

    def erase_user(
        self, user_id: str, *, buffer: str | RedisBuffer | None = None
    ) -> ErasureReceipt:
        """Erase a user from the whole store: every session of every agent with that
        ``user_id``, as :meth:`SessionManager.erase_user <memlane.SessionManager.
        erase_user>` does for one agent (and the copies in ``buffer``, the Redis working
        buffer the agents use, if given). Safe to run again: it completes an interrupted
        erasure. Returns the receipt."""
        user_id = identifier(user_id, "user_id")
        opened = open_buffer(buffer)
        try:
            return erase_user(self._storage, user_id, agent_id=None, buffer=opened)
        finally:
            if opened is not None and isinstance(buffer, str):
                opened.close()

    def apply_retention(self, policy: RetentionPolicy, dry_run: bool = False) -> RetentionResult:
        """Delete what ``policy`` says the store no longer keeps, in every agent's sessions
        (``memlane retention``): old whole sessions, or old events of some kinds, less the
        newest ``keep`` (:mod:`memlane.retention`). Decided and deleted in one
        transaction; ``dry_run`` counts and deletes nothing."""
        if not isinstance(policy, RetentionPolicy):
            raise InvalidInput(f"policy must be a RetentionPolicy, got {type(policy).__name__}.")
        return apply_retention(self._storage, policy, dry_run=dry_run)

    def prune_expired(self, dry_run: bool = False) -> PruneResult:
        """Delete the events whose time to live has passed (``record(ttl=...)``), with their
        vectors and keyword rows, in every agent's sessions; ``cutoff`` is now.

        Reads stopped seeing them when they expired; a manager's background worker sweeps
        them within about a second too, so this is for stores no worker keeps (``memlane prune
        --expired`` from cron). ``dry_run`` counts them and deletes nothing.
        """
        now = now_us()
        expired = EventFilter(None, expired_by_us=now)
        with self._storage.log.snapshot() as tx:
            by_kind = self._storage.log.kind_counts(expired, tx)
            touched = self._storage.log.sessions_touched(expired, tx)
        if not dry_run:
            by_kind = dict(sorted(self._storage.sweep_expired(now).items()))
        return PruneResult(from_us(now), [], sum(by_kind.values()), by_kind, touched, dry_run)

    def _prune_sessions(
        self, tx: Any, cutoff: int, status: str | None, dry_run: bool
    ) -> PruneResult:
        found = self._storage.log.sessions(
            SessionFilter(None, status=status, before_us=cutoff), tx=tx, lock=not dry_run
        )
        sizes = self._storage.log.session_sizes([session.id for session in found], tx)
        doomed = [SessionInfo(session, *sizes[session.id]) for session in found]
        by_kind = self._storage.log.kind_counts(
            EventFilter(None, session_status=status, session_before_us=cutoff), tx
        )
        if not dry_run:
            for info in doomed:
                self._storage.delete_session(tx, info.session.id)
        return PruneResult(
            from_us(cutoff),
            doomed,
            sum(info.events for info in doomed),
            by_kind,
            len(doomed),
            dry_run,
        )
