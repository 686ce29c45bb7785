"""Sharing a pool explicitly: create it, grant and revoke access, see who has it;
``SessionManager`` inherits it.

A pool name alone is no longer a capability: its owner grants ``read`` (subscribe to it) or
``write`` (start sessions in it) to named agents, and every process sees a grant or a
revocation at its next read. The rules and the audit log are in :mod:`._pool_access`; the
threat model (what this guarantees, what only the database can) in docs/privacy.md.

>>> alice = SessionManager("alice", "memory.db")  # doctest: +SKIP
>>> alice.create_pool("research")  # doctest: +SKIP
>>> alice.grant("research", "bob")  # read  # doctest: +SKIP
>>> bob = SessionManager("bob", "memory.db", subscribe=["research"])  # doctest: +SKIP
>>> alice.revoke("research", "bob")  # bob's next search no longer sees the pool  # doctest: +SKIP
"""

from __future__ import annotations

from ..errors import InvalidInput, PoolAccessDenied, StoreMisconfigured, shown
from ..events import Event, PoolGrant
from ..privacy.pool_access import (
    GRANT_KIND,
    change_access,
    claim,
    grant_of,
    log_key,
    missing_grant,
    pool_owner,
)
from ..records.validate import identifier
from ..store.base import EventFilter, SessionFilter, Tx
from ..write.path import Writer

__all__ = ["PoolSharing"]


class PoolSharing:
    """Pools this agent owns or was granted (see the module docstring), changed through
    the writer."""

    def __init__(self, writer: Writer) -> None:
        self._writer = writer
        self.agent_id = writer.agent_id
        self.scope = writer.scope

    def create_pool(self, pool: str) -> PoolGrant:
        """Create ``pool`` with this agent as its owner (starting the first session in a pool
        nobody owns does the same). Creating a pool this agent already owns changes nothing;
        one another agent owns is :class:`~memlane.errors.PoolAccessDenied`."""
        pool = identifier(pool, "pool")
        with self._writer.write() as tx:
            if not claim(self._writer.log, tx, pool, self.agent_id, self.agent_id):
                owner = pool_owner(self._writer.log, pool, tx)
                if owner != self.agent_id:
                    raise PoolAccessDenied(
                        f"Pool {pool!r} already exists and belongs to agent {owner!r}. Ask it "
                        f"for a grant (mgr.grant({pool!r}, {self.agent_id!r}, 'write')), or "
                        "choose another name."
                    )
        return grant_of(self._writer.log, pool, self.agent_id)

    def grant(self, pool: str, agent_id: str, access: str = "read") -> PoolGrant:
        """Let ``agent_id`` read (``"read"``: subscribe to) or also write (``"write"``: start
        sessions in) ``pool``; only its owner may. Takes effect at the other agent's next read
        or write, in every process; recorded in the pool's log (:meth:`pool_log`)."""
        pool, agent_id = identifier(pool, "pool"), identifier(agent_id, "agent_id")
        if access not in ("read", "write"):
            raise InvalidInput(
                f"access must be 'read' or 'write', not {shown(access)} (the operator hands a pool "
                "to a new owner: StoreAdmin.grant(pool, agent, 'owner'))."
            )
        self._change(pool, agent_id, access)
        return grant_of(self._writer.log, pool, agent_id)

    def revoke(self, pool: str, agent_id: str) -> bool:
        """Take ``agent_id``'s access to ``pool`` away; only its owner may. From its next read
        the agent sees none of the pool's sessions but its own, and it can no longer add to
        those (closing or deleting them stays possible). False if it had no grant."""
        pool, agent_id = identifier(pool, "pool"), identifier(agent_id, "agent_id")
        return self._change(pool, agent_id, None)

    def pools(self) -> list[PoolGrant]:
        """This agent's grants: the pools it owns, may write or may read, by name."""
        return self._writer.log.pool_grants(agent_id=self.agent_id)

    def pool_grants(self, pool: str) -> list[PoolGrant]:
        """Every grant on ``pool``, owner first; only its owner may list them."""
        pool = identifier(pool, "pool")
        self._require_owner(pool)
        return self._writer.log.pool_grants(pool=pool)

    def pool_log(self, pool: str) -> list[Event]:
        """The grants and revocations of ``pool`` recorded while this agent owned it, oldest
        first (events of kind ``asm:grant``: payload ``pool``, ``agent``, ``access`` — None
        for a revocation — and ``by``)."""
        pool = identifier(pool, "pool")
        self._require_owner(pool)
        found = self._writer.log.sessions(
            SessionFilter(None, agent_id=self.agent_id, key=log_key(pool)), limit=1
        )
        if not found:  # (a pool the migration gave this agent: nothing granted since)
            return []
        flt = EventFilter(self.scope, session_id=found[0].id, kinds=(GRANT_KIND,))
        return self._writer.log.events(flt, limit=None)

    def _change(self, pool: str, agent_id: str, access: str | None) -> bool:
        with self._writer.write() as tx:
            self._require_owner(pool, tx)
            return change_access(self._writer.log, tx, pool, agent_id, access, self.agent_id)

    def _require_owner(self, pool: str, tx: Tx | None = None) -> None:
        owner = pool_owner(self._writer.log, pool, tx)
        if owner is None:
            raise PoolAccessDenied(
                f"Pool {pool!r} does not exist: create it first (create_pool({pool!r}), or "
                "start a session in it), then grant access to it."
            )
        if owner != self.agent_id:
            raise PoolAccessDenied(
                f"Only the owner of pool {pool!r}, agent {owner!r}, may grant, revoke or list "
                f"its access; agent {self.agent_id!r} is not it."
            )

    def check_subscriptions(self) -> None:
        """Subscribing is asking to read: each pool must have granted it (at least read).
        A database role confined to an agent (PostgreSQL row-level security) must be this
        agent's."""
        confined = self._writer.log.confined_agent
        if confined is not None and confined != self.agent_id:
            raise StoreMisconfigured(
                f"{self._writer.url!r} connects as a database role of agent {confined!r}, which "
                f"row-level security confines to that agent's rows: agent {self.agent_id!r} would "
                f"see none of its own. Connect with agent {self.agent_id!r}'s role "
                "(StoreAdmin.create_agent_role), or open the manager as "
                f"{confined!r}."
            )
        if not self.scope.subscriptions:
            return
        for pool in sorted(self.scope.subscriptions - self._writer.granted()):
            raise missing_grant(pool, self.agent_id, "read", pool_owner(self._writer.log, pool))
