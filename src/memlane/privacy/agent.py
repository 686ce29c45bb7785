"""One agent's privacy operations (a part of :class:`~memlane.SessionManager`): applying a
retention policy to its own sessions now, and erasing a user from them. The store-wide ones
are :class:`~memlane.admin.StoreAdmin`'s. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Callable

from ..buffer import RedisBuffer
from ..core.observed import Observer, observed
from ..engine.storage import Storage
from ..errors import InvalidInput
from ..records.validate import identifier as _identifier
from ..retention import RetentionPolicy
from .erasure import ErasureReceipt, erase_user
from .retention_sweep import RetentionResult, apply_retention

__all__ = ["AgentPrivacy"]


class AgentPrivacy:
    """``apply_retention`` and ``erase_user`` for the agent of ``observer``: see each."""

    def __init__(
        self,
        storage: Storage,
        observer: Observer,
        check_writable: Callable[[], None],
        buffer: RedisBuffer | None = None,
    ) -> None:
        self._storage = storage
        self._observer = observer
        self._check_writable = check_writable
        self._buffer = buffer
        self.agent_id = observer.agent_id

    def apply_retention(self, policy: RetentionPolicy, dry_run: bool = False) -> RetentionResult:
        """Apply ``policy`` to this agent's own sessions now (``StoreAdmin.apply_retention``
        for every agent's): :mod:`memlane.retention` says what it deletes and what
        never. ``dry_run`` counts and deletes nothing.

        >>> policy = RetentionPolicy("30d", kinds=["tool_output"])  # doctest: +SKIP
        >>> mgr.apply_retention(policy).events  # doctest: +SKIP
        12
        """
        if not isinstance(policy, RetentionPolicy):
            raise InvalidInput(f"policy must be a RetentionPolicy, got {type(policy).__name__}.")
        if not dry_run:
            self._check_writable()
        return apply_retention(self._storage, policy, agent_id=self.agent_id, dry_run=dry_run)

    @observed("erase_user")
    def erase_user(self, user_id: str) -> ErasureReceipt:
        """Erase everything this agent keeps about a user: every session of this agent with
        that ``user_id`` (their events, vectors, keyword rows, summaries, the facts
        ``remember`` kept), physically (SQLite overwrites the freed pages, merges the keyword
        index and truncates its log; PostgreSQL vacuums), and the working buffer's copies.
        Reads stop seeing the user when its transaction commits; after a crash, calling it
        again completes it. Returns a receipt: what was erased, and the copies no erasure
        reaches (backups, earlier exports). Other agents' sessions with the user stay:
        ``StoreAdmin.erase_user`` erases across agents.

        >>> mgr.erase_user("u1").sessions  # doctest: +SKIP
        3
        """
        user_id = _identifier(user_id, "user_id")
        self._check_writable()
        return erase_user(self._storage, user_id, agent_id=self.agent_id, buffer=self._buffer)
