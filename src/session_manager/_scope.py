"""Isolation, decided in one place.

An agent sees the sessions it owns and every session tagged with a ``shared_pool`` it
subscribed to; it writes only into sessions it owns. Every read in the storage layer gets
its restriction from :class:`Scope` — the SQL clause for queries, the partition list for the
in-memory vector matrices — never from callers building their own ``WHERE``.

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
    """What one agent may read: its own sessions plus the pools it subscribed to."""

    agent_id: str
    subscriptions: frozenset[str] = frozenset()

    def sql(self, alias: str = "s", *, include_shared: bool = True) -> tuple[str, list[Any]]:
        """The ``WHERE`` fragment restricting a sessions table (aliased ``alias``) to this scope.

        >>> Scope("a", frozenset({"p"})).sql()
        ('(s.agent_id = ? OR s.shared_pool IN (?))', ['a', 'p'])
        """
        params: list[Any] = [self.agent_id]
        pools = sorted(self.subscriptions) if include_shared else []
        if not pools:
            return f"({alias}.agent_id = ?)", params
        params.extend(pools)
        marks = ", ".join("?" for _ in pools)
        return f"({alias}.agent_id = ? OR {alias}.shared_pool IN ({marks}))", params

    def partitions(
        self, own_pools: set[str], *, include_shared: bool = True
    ) -> list[tuple[str, bool]]:
        """``(partition, owner_only)`` pairs this agent may search.

        ``owner_only`` means: only rows of this agent's own sessions in that partition (a pool
        the agent writes into without having subscribed to it).
        """
        parts = [(partition_of(self.agent_id, None), False)]
        subscribed = self.subscriptions if include_shared else frozenset()
        for pool in sorted(own_pools | set(subscribed)):
            parts.append((partition_of(self.agent_id, pool), pool not in subscribed))
        return parts

    def can_read(self, owner: str, shared_pool: str | None) -> bool:
        return owner == self.agent_id or (
            shared_pool is not None and shared_pool in self.subscriptions
        )
