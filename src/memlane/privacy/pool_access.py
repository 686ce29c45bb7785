"""Who may read and write a shared pool: the rules, and the audit log of every change.

A pool has one **owner**, who grants ``read`` (subscribe to it) or ``write`` (start sessions in
it, and read it) to named agents and revokes them. The current grants are the table
``pool_grants``, which every scoped read consults in the same query (``Scope.sql``) and every
search reads afresh (``Store.pool_view``): a revocation holds from the next read of every
process, with nothing cached to expire. Each grant, revocation and change of owner is also an
event of kind ``asm:grant`` in the owner's **pool log** (a session marked
``{"asm": "pool-log"}``, keyed by the pool, neither embedded nor keyword-indexed), written in
the same transaction: who granted what to whom and when, kept like every other event
(exported, imported, never rewritten).

The manager's methods (``sharing/pools.py``) and the operator's (``StoreAdmin``) both go through
:func:`change_access`; the write path asks :func:`check_write` before a pooled session is
started or written. These rules hold against agents that make mistakes in one process or
many; an agent that can open the database file (or connect with the same credentials) can
bypass them, which only the database itself can prevent (docs/privacy.md, "Threat model").
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..core import canonical_json
from ..core.clock import now_us
from ..core.ids import new_id
from ..errors import InvalidInput, PoolAccessDenied, shown
from ..events import POOL_ACCESS, PoolGrant, SessionRecord
from ..records.validate import prepare_event
from ..store.base import Log, SessionFilter

__all__ = [
    "GRANT_KIND",
    "OPERATOR",
    "POOL_LOG",
    "change_access",
    "check_write",
    "claim",
    "grant_of",
    "log_key",
    "missing_grant",
    "pool_owner",
]

#: the ``asm`` mark of a pool log session (``SessionFilter(marked=POOL_LOG)``)
POOL_LOG = "pool-log"
#: the kind of the events that record a grant, a revocation or a change of owner
GRANT_KIND = "asm:grant"
#: who granted, when the operator did (``StoreAdmin``, ``memlane pool``)
OPERATOR = "operator"


def log_key(pool: str) -> str:
    """The session key of a pool's log (one per owner and pool)."""
    return "asm-pool-log-" + hashlib.sha256(pool.encode()).hexdigest()[:32]


def missing_grant(pool: str, agent_id: str, need: str, owner: str | None) -> PoolAccessDenied:
    """The error for an agent that lacks ``need`` ("read" or "write") on ``pool``."""
    if owner is None:
        return PoolAccessDenied(
            f"Pool {pool!r} does not exist yet, so agent {agent_id!r} cannot {_verb(need)} it. "
            "Its owner creates it (create_pool, or by starting the first session in it) and "
            f"grants {need!r} to {agent_id!r}: mgr.grant({pool!r}, {agent_id!r}, {need!r})."
        )
    return PoolAccessDenied(
        f"Agent {agent_id!r} has no {need!r} grant on pool {pool!r}, so it cannot "
        f"{_verb(need)} it. Ask its owner, agent {owner!r}, to grant it: "
        f"mgr.grant({pool!r}, {agent_id!r}, {need!r}) (or `memlane pool grant {pool} {agent_id} "
        f"--access {need}`)."
    )


def _verb(need: str) -> str:
    return "subscribe to (read)" if need == "read" else "start or write sessions in"


def pool_owner(store: Log, pool: str, tx: Any = None) -> str | None:
    """The agent that owns ``pool``; None when the pool does not exist."""
    return _access(store, tx, pool, "")[1]


def grant_of(store: Log, pool: str, agent_id: str) -> PoolGrant:
    """``agent_id``'s grant on ``pool`` (which it holds)."""
    return next(g for g in store.pool_grants(pool=pool) if g.agent_id == agent_id)


def _access(store: Log, tx: Any, pool: str, agent_id: str) -> tuple[str | None, str | None]:
    """``(this agent's access, the pool's owner)`` inside ``tx``."""
    access, owner = None, None
    for grant in store.pool_grants(pool=pool, tx=tx):
        if grant.agent_id == agent_id:
            access = grant.access
        if grant.access == "owner":
            owner = grant.agent_id
    return access, owner


def check_write(store: Log, tx: Any, pool: str, agent_id: str, *, create: bool) -> None:
    """Refuse (:class:`PoolAccessDenied`) unless ``agent_id`` may write into ``pool``; with
    ``create``, a pool nobody owns yet becomes this agent's (its first session starts it)."""
    access, owner = _access(store, tx, pool, agent_id)
    if access in ("owner", "write"):
        return
    if owner is None and create:
        if claim(store, tx, pool, agent_id, agent_id):
            return
        _, owner = _access(store, tx, pool, agent_id)  # (another process created it first)
    raise missing_grant(pool, agent_id, "write", owner)


def claim(store: Log, tx: Any, pool: str, agent_id: str, by: str) -> bool:
    """Make ``agent_id`` the owner of ``pool`` if it has none; False when another agent
    already owns it (two processes racing to create one pool: the first commit wins)."""
    # (not logged: the owner's row says when and by whom; an agent that never grants gets
    # no log session among its own)
    return store.set_pool_access(tx, pool, agent_id, "owner", now_us(), by)


def change_access(
    store: Log, tx: Any, pool: str, agent_id: str, access: str | None, by: str
) -> bool:
    """Grant ``access`` ("read", "write"; None revokes; "owner" hands the pool over, the old
    owner keeping ``write``) and log it in the owner's pool log; False when nothing changed."""
    if access is not None and access not in POOL_ACCESS:
        raise InvalidInput(
            f"access must be one of {', '.join(map(repr, POOL_ACCESS))} (or None to revoke), "
            f"not {shown(access)}."
        )
    current, owner = _access(store, tx, pool, agent_id)
    if owner is None:
        raise PoolAccessDenied(
            f"Pool {pool!r} does not exist: create it first (create_pool, or start a session "
            "in it), then grant access to it."
        )
    if current == "owner" and access != "owner":
        raise InvalidInput(
            f"Agent {agent_id!r} owns pool {pool!r}; its access cannot be changed or revoked. "
            "Hand the pool to another agent first (StoreAdmin.grant(pool, agent, 'owner'), "
            "`memlane pool grant POOL AGENT --access owner`)."
        )
    if current == access:
        return False
    at = now_us()
    if access == "owner":  # the old owner keeps write; then the new one takes over
        store.set_pool_access(tx, pool, owner, None, at, by)
        store.set_pool_access(tx, pool, owner, "write", at, by)
        store.set_pool_access(tx, pool, agent_id, None, at, by)
        store.set_pool_access(tx, pool, agent_id, "owner", at, by)
        _log(store, tx, pool, agent_id, owner, "write", by)
        _log(store, tx, pool, agent_id, agent_id, "owner", by)
        return True
    changed = store.set_pool_access(tx, pool, agent_id, access, at, by)
    if changed:
        _log(store, tx, pool, owner, agent_id, access, by)
    return changed


def _log(
    store: Log, tx: Any, pool: str, owner: str, agent_id: str, access: str | None, by: str
) -> None:
    """Append one ``asm:grant`` event to ``owner``'s log of ``pool`` (created on first use)."""
    session_id = _log_session(store, tx, pool, owner)
    if access is None:
        content = f"{by} revoked agent {agent_id}'s access to pool {pool}"
    elif access == "owner":
        content = f"{by} made agent {agent_id} the owner of pool {pool}"
    else:
        content = f"{by} granted {access} on pool {pool} to agent {agent_id}"
    payload = {"pool": pool, "agent": agent_id, "access": access, "by": by}
    prepared = prepare_event(GRANT_KIND, content, payload, 0.1, None, None, None)
    record = prepared.record(new_id(), session_id, owner, None, None, indexed=False)
    store.insert_event(tx, record, touch_us=None)


def _log_session(store: Log, tx: Any, pool: str, owner: str) -> str:
    key = log_key(pool)
    found = store.sessions(SessionFilter(None, agent_id=owner, key=key), limit=1, tx=tx)
    if found:
        return found[0].id
    session_id, now = new_id(), now_us()
    goal = f"Access log of pool {pool}: who was granted what, by whom, when"
    store.insert_session(
        tx,
        SessionRecord(
            id=session_id,
            agent_id=owner,
            user_id=None,
            goal=goal,
            status="active",
            shared_pool=None,
            metadata_json=canonical_json.dumps({"asm": POOL_LOG, "pool": pool}, "session metadata"),
            created_us=now,
            updated_us=now,
            key=key,
        ),
    )
    prepared = prepare_event("goal", goal, None, 1.0, None, None, None)
    store.insert_event(
        tx, prepared.record(new_id(), session_id, owner, None, None, indexed=False), touch_us=None
    )
    return session_id
