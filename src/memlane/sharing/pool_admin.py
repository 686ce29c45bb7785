"""The operator's side of pool sharing, a part of :class:`~memlane.admin.StoreAdmin`:
every pool's grants, granting and revoking as the operator (handing a pool to a new owner
included), a pool's whole audit log, and PostgreSQL roles confined by row-level security."""

from __future__ import annotations

from ..errors import InvalidInput
from ..events import Event, PoolGrant
from ..privacy.pool_access import GRANT_KIND, OPERATOR, POOL_LOG, change_access, claim, grant_of
from ..records.validate import identifier
from ..store.base import EventFilter, Log, SessionFilter

__all__ = ["PoolAdministration"]


class PoolAdministration:
    """Pools across every agent (a mixin of ``StoreAdmin``; see the module docstring)."""

    _store: Log
    url: str

    def pools(self, pool: str | None = None, agent_id: str | None = None) -> list[PoolGrant]:
        """Every grant in the store (or on ``pool`` / of ``agent_id``), by pool, owner first."""
        if pool is not None:
            pool = identifier(pool, "pool")
        if agent_id is not None:
            agent_id = identifier(agent_id, "agent_id")
        return self._store.pool_grants(pool=pool, agent_id=agent_id)

    def grant(self, pool: str, agent_id: str, access: str = "read") -> PoolGrant:
        """Grant ``access`` on ``pool`` as the operator: ``"read"``, ``"write"``, or ``"owner"``
        (hand the pool to ``agent_id``, the old owner keeping ``write``; a pool nobody owns
        yet is created for it). Logged in the owner's pool log with ``by="operator"``."""
        pool, agent_id = identifier(pool, "pool"), identifier(agent_id, "agent_id")
        with self._store.atomic() as tx:
            if not (access == "owner" and claim(self._store, tx, pool, agent_id, OPERATOR)):
                change_access(self._store, tx, pool, agent_id, access, OPERATOR)
        return grant_of(self._store, pool, agent_id)

    def revoke(self, pool: str, agent_id: str) -> bool:
        """Take ``agent_id``'s grant on ``pool`` away as the operator (not the owner's: hand
        the pool over first); False if it had none."""
        pool, agent_id = identifier(pool, "pool"), identifier(agent_id, "agent_id")
        with self._store.atomic() as tx:
            return change_access(self._store, tx, pool, agent_id, None, OPERATOR)

    def pool_log(self, pool: str) -> list[Event]:
        """Every grant, revocation and change of owner of ``pool``, oldest first, across its
        owners' pool logs (an owner's :meth:`SessionManager.pool_log` shows its own)."""
        pool = identifier(pool, "pool")
        logs = self._store.sessions(SessionFilter(None, marked=POOL_LOG), limit=None)
        found: list[Event] = []
        for log in logs:
            if log.metadata.get("pool") == pool:
                found += self._store.events(
                    EventFilter(None, session_id=log.id, kinds=(GRANT_KIND,)), limit=None
                )
        return sorted(found, key=lambda e: (e.created_at, e.seq))

    def create_agent_role(
        self, agent_id: str, role: str | None = None, password: str | None = None
    ) -> str:
        """PostgreSQL only: give ``agent_id`` a database role of its own, confined by
        row-level security to what the agent may see — its own sessions, the pools it holds a
        grant on — and may write; return the role's name (default ``asm_<agent_id>``).

        The first call enables row-level security on the store (idempotent; connections as
        the schema's owner, like this admin's, are not subject to it). The role is created
        (``LOGIN``, with ``password`` if given) unless it exists, is granted what an agent
        needs, and is mapped to the agent. The agent then connects with it::

            SessionManager("bob", url="postgresql://asm_bob:secret@db/agents")

        Opening a manager as another agent with that role is refused. The threat model:
        docs/privacy.md.
        """
        agent_id = identifier(agent_id, "agent_id")
        role = identifier(role if role is not None else f"asm_{agent_id}", "role")
        if len(role.encode()) > 63:
            raise InvalidInput(
                f"The role name {role!r} is longer than PostgreSQL's 63 bytes; pass role=..."
            )
        create = getattr(self._store, "create_agent_role", None)
        if create is None:
            raise InvalidInput(
                f"Row-level security is PostgreSQL's; {self.url!r} is not a PostgreSQL store. "
                "On SQLite, give agents that do not trust each other separate files."
            )
        return str(create(agent_id, role, password))
