"""Isolation, decided in one place.

An agent sees the sessions it owns and every session tagged with a ``shared_pool`` it subscribed
to *and was granted* (``pool_grants``, managed by the pool's owner: ``sharing/pools.py``); it writes
only into sessions it owns. A subscription is a request, the grant the permission: the SQL below
checks the grant in the same query, and the partition list is built from the grants read at each
search, so a revocation holds from the next read of every process. Every read in the storage
layer gets its restriction from :class:`Scope` — the SQL clause for queries (SQLite and
PostgreSQL share it: both take ``?`` placeholders here), the partition list for the in-memory
vector matrices, the collections and ``where`` for Chroma — never from callers building their
own ``WHERE``.

Vectors are partitioned the same way: an event of a session without a pool lives in the
partition ``agent:<agent_id>``; an event of a pooled session lives in ``pool:<pool>``, so that
subscribers and the owner search the same matrix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Scope", "partition_of"]


def partition_of(agent_id: str, shared_pool: str | None) -> str:
    """The vector partition an event of this session belongs to."""
    return f"pool:{shared_pool}" if shared_pool else f"agent:{agent_id}"


@dataclass(frozen=True)
class Scope:
    """What one agent may read: its own sessions plus the pools it subscribed to and was
    granted (the grant is checked at each read, not here: see :meth:`sql`)."""

    agent_id: str
    subscriptions: frozenset[str] = frozenset()

    def sql(self, alias: str = "s", *, include_shared: bool = True) -> tuple[str, list[Any]]:
        """The ``WHERE`` fragment restricting a sessions table (aliased ``alias``) to this scope.

        >>> Scope("a", frozenset({"p"})).sql()[1]
        ['a', 'a', 'p']
        """
        params: list[Any] = [self.agent_id]
        pools = sorted(self.subscriptions) if include_shared else []
        if not pools:
            return f"({alias}.agent_id = ?)", params
        params.append(self.agent_id)
        params.extend(pools)
        marks = ", ".join("?" for _ in pools)
        granted = f"SELECT g.pool FROM pool_grants g WHERE g.agent_id = ? AND g.pool IN ({marks})"
        return f"({alias}.agent_id = ? OR {alias}.shared_pool IN ({granted}))", params

    def partitions(
        self, own_pools: set[str], granted: set[str], *, include_shared: bool = True
    ) -> list[tuple[str, bool]]:
        """``(partition, owner_only)`` pairs this agent may search, given the pools it has
        sessions in and the pools it holds a grant on now.

        ``owner_only`` means: only rows of this agent's own sessions in that partition (a pool
        the agent writes into without having subscribed to it, or whose grant was revoked).

        >>> Scope("a", frozenset({"p", "q"})).partitions({"r"}, {"p"})
        [('agent:a', False), ('pool:p', False), ('pool:r', True)]
        """
        parts = [(partition_of(self.agent_id, None), False)]
        subscribed = self.subscriptions & granted if include_shared else frozenset()
        for pool in sorted(own_pools | set(subscribed)):
            parts.append((partition_of(self.agent_id, pool), pool not in subscribed))
        return parts

    def partition_sql(
        self, partitions: list[tuple[str, bool]], alias: str = "v"
    ) -> tuple[str, list[Any]]:
        """The ``WHERE`` fragment restricting a vectors table (with ``partition`` and
        ``agent_id`` columns) to ``partitions`` (from :meth:`partitions`); ``owner_only`` ones
        to this agent's own rows.

        >>> Scope("a").partition_sql([("agent:a", False), ("pool:p", True)])
        ('(v.partition IN (?) OR (v.partition = ? AND v.agent_id = ?))', ['agent:a', 'pool:p', 'a'])
        """
        whole = [name for name, owner_only in partitions if not owner_only]
        clauses: list[str] = []
        params: list[Any] = []
        if whole:
            clauses.append(f"{alias}.partition IN ({', '.join('?' for _ in whole)})")
            params.extend(whole)
        for name, owner_only in partitions:
            if owner_only:
                clauses.append(f"({alias}.partition = ? AND {alias}.agent_id = ?)")
                params.extend((name, self.agent_id))
        return ("(" + " OR ".join(clauses) + ")" if clauses else "FALSE"), params

    def chroma_where(self, owner_only: bool) -> dict[str, Any] | None:
        """The Chroma ``where`` for one partition's collection (Chroma keeps a collection per
        partition): nothing more in the agent's own partition and its subscribed pools; only
        its own rows (``owner_only``) in a pool it writes into without subscribing.

        >>> Scope("a").chroma_where(True), Scope("a").chroma_where(False)
        ({'agent': 'a'}, None)
        """
        return {"agent": self.agent_id} if owner_only else None

    def can_read(self, owner: str, shared_pool: str | None, granted: set[str]) -> bool:
        """Whether a session of ``owner`` in ``shared_pool`` is visible, given the pools this
        agent holds a grant on now."""
        return owner == self.agent_id or (
            shared_pool is not None and shared_pool in self.subscriptions and shared_pool in granted
        )
