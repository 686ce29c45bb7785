"""``memlane pool``: who may read and write each shared pool (the operator's view)."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..admin import event_to_dict
from ..core.clock import format_time
from ..events import PoolGrant
from ._app import Env, cli, db_option, emit_json, json_option
from ._render import table_of


def grant_to_dict(grant: PoolGrant) -> dict[str, Any]:
    """A grant as a JSON-able dict with stable field names."""
    return {
        "pool": grant.pool,
        "agent_id": grant.agent_id,
        "access": grant.access,
        "granted_at": format_time(grant.granted_at),
        "granted_by": grant.granted_by,
    }


@cli.group()
def pool() -> None:
    """Who may read and write each shared pool.

    A pool has an owner (the agent that created it, or started its first session), who
    grants read or write to named agents; an agent subscribing to a pool it was not granted
    is refused. These commands are the operator's: they act on every pool in the store.

    \b
    memlane pool list
    memlane pool grant research reviewer             # read
    memlane pool grant research writer --access write
    memlane pool grant research new-owner --access owner
    memlane pool revoke research reviewer
    memlane pool log research
    """


@pool.command("list")
@click.option("--pool", "name", metavar="POOL", help="Only this pool's grants.")
@click.option("--agent", "agent_id", metavar="AGENT", help="Only this agent's grants.")
@json_option
@db_option
@click.pass_obj
def list_(env: Env, name: str | None, agent_id: str | None, as_json: bool) -> None:
    """List the grants: each pool's owner first, then its writers and readers."""
    grants = env.admin().pools(name, agent_id)
    if as_json:
        emit_json([grant_to_dict(g) for g in grants])
        return
    if not grants:
        env.out.print("No pools here." if name is None else f"No grants on pool {name}.")
        return
    table = table_of("pool", "agent", "access", "since", "granted by")
    for g in grants:
        since = g.granted_at.strftime("%Y-%m-%d %H:%M")
        table.add_row(g.pool, g.agent_id, g.access, since, g.granted_by)
    env.out.print(table)


@pool.command()
@click.argument("name", metavar="POOL")
@click.argument("agent_id", metavar="AGENT")
@click.option(
    "--access",
    type=click.Choice(["read", "write", "owner"]),
    default="read",
    show_default=True,
    help="read: subscribe to it; write: also start sessions in it; owner: hand it over.",
)
@json_option
@db_option
@click.pass_obj
def grant(env: Env, name: str, agent_id: str, access: str, as_json: bool) -> None:
    """Grant AGENT access to POOL (logged in the pool's log as the operator's)."""
    done = env.admin().grant(name, agent_id, access)
    if as_json:
        emit_json(grant_to_dict(done))
        return
    env.out.print(f"Agent {done.agent_id} has {done.access} access to pool {done.pool}.")


@pool.command()
@click.argument("name", metavar="POOL")
@json_option
@db_option
@click.pass_obj
def log(env: Env, name: str, as_json: bool) -> None:
    """The audit log of POOL: every grant, revocation and change of owner, oldest first."""
    events = env.admin().pool_log(name)
    if as_json:
        emit_json([event_to_dict(e) for e in events])
        return
    if not events:
        env.out.print(f"No grant of pool {name} was logged (only its creation, if any).")
        return
    table = table_of("when (UTC)", "by", "agent", "access")
    for event in events:
        change = event.payload if isinstance(event.payload, dict) else {}
        table.add_row(
            event.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            str(change.get("by", "")),
            str(change.get("agent", "")),
            str(change.get("access") or "revoked"),
        )
    env.out.print(table)


@pool.command()
@click.argument("name", metavar="POOL")
@click.argument("agent_id", metavar="AGENT")
@db_option
@click.pass_obj
def revoke(env: Env, name: str, agent_id: str) -> None:
    """Take AGENT's access to POOL away; its next read in any process no longer sees it."""
    if env.admin().revoke(name, agent_id):
        env.out.print(f"Revoked agent {agent_id}'s access to pool {name}.")
    else:
        env.out.print(f"Agent {agent_id} had no grant on pool {name}; nothing changed.")


@cli.command("agent-role")
@click.argument("agent_id", metavar="AGENT")
@click.option("--role", metavar="NAME", help="The role's name (default: asm_AGENT).")
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the role's password from the first line of stdin (never from the command line).",
)
@db_option
@click.pass_obj
def agent_role(env: Env, agent_id: str, role: str | None, password_stdin: bool) -> None:
    """PostgreSQL: give AGENT a database role that row-level security confines to its rows.

    The role sees AGENT's own sessions and the pools it was granted, and writes only its own
    rows, whatever SQL it sends; the agent connects with it (postgresql://ROLE:...@host/db).
    The first use enables row-level security on the store; the store's owner (the --db URL
    here) is not subject to it. Run it as the schema's owner, with the right to create roles.

    \b
    echo "$SECRET" | memlane --db postgresql://owner@db/agents agent-role bob --password-stdin
    """
    password = sys.stdin.readline().rstrip("\r\n") if password_stdin else None
    if password_stdin and not password:
        raise click.UsageError("--password-stdin read an empty line: give the password on stdin.")
    made = env.admin().create_agent_role(agent_id, role, password)
    env.out.print(
        f"Role {made} is agent {agent_id}'s: it reads and writes only what that agent may."
    )
