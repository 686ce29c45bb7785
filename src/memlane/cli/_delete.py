"""Commands that delete: delete, prune (by age, kind or expiry), retention, erase-user —
each asks first on a terminal and needs ``--yes`` without one."""

from __future__ import annotations

import json
import sys

import click

from ..admin import PruneResult
from ..events import SESSION_STATUSES
from ..privacy.retention_sweep import RetentionResult
from ..retention import RetentionPolicy
from ._app import AGE, Env, cli, db_option
from ._render import shorten, stamp


def _confirmed(question: str, yes: bool, *, instead: str = "") -> bool:
    """Whether to go ahead: --yes, or "y" to ``question`` (asked on stderr; default no).

    Declining is an answer, not an error. Having no answer to read (stdin closed or
    /dev/null, as under cron or in CI) is a usage error that names --yes: a script that
    deletes must say so. ``instead`` is a further way out for that message.
    """
    if yes:
        return True
    click.echo(f"{question} [y/N]: ", nl=False, err=True)
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        click.echo(err=True)  # a piped answer is not echoed: end the question's line
        if not answer:  # end of input, not a person pressing Ctrl-D at the question
            raise click.UsageError(
                "This deletes data, so it asks first, and there is no terminal to answer on. "
                f"Pass --yes to delete without asking{instead}."
            )
    return answer.strip().lower() in ("y", "yes")


def _nothing_deleted(env: Env) -> None:
    env.out.print("Nothing deleted.")


# -- delete and prune ---------------------------------------------------------------------


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@db_option
@click.pass_obj
def delete(env: Env, session_id: str, yes: bool) -> None:
    """Delete one session (of any agent) with its events, vectors and index entries.

    Asks first unless --yes (a script, with no terminal to answer on, must pass --yes).
    This cannot be undone; `memlane export --session ID` keeps a copy.
    """
    admin = env.admin()
    info = admin.session(session_id)
    s = info.session
    question = (
        f"Delete session {s.id} of agent {s.agent_id!r} ({shorten(s.goal, 50)!r}, "
        f"{info.events:,} events)? This cannot be undone."
    )
    if not _confirmed(question, yes):
        _nothing_deleted(env)
        return
    count = admin.delete_session(s.id)
    env.out.print(f"Deleted session {s.id} of agent {s.agent_id!r} and its {count:,} event(s).")


@cli.command()
@click.option(
    "--older-than",
    type=AGE,
    metavar="AGE",
    help="An age (90d, 12h, 2w) or an ISO-8601 time; what is older goes.",
)
@click.option(
    "--expired",
    is_flag=True,
    help="Delete the events whose time to live has passed (record(ttl=...)) instead.",
)
@click.option(
    "--kind",
    metavar="KIND",
    help="Delete only events of this kind (e.g. tool_output), keeping the sessions.",
)
@click.option(
    "--status", type=click.Choice(SESSION_STATUSES), help="Only in sessions with this status."
)
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@db_option
@click.pass_obj
def prune(
    env: Env,
    older_than: str | None,
    expired: bool,
    kind: str | None,
    status: str | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete old data, of every agent.

    Without --kind: whole sessions whose last activity is older than --older-than (a
    session still in use is never cut in half). With --kind: only events of that kind
    created before the cutoff, in any session; the sessions stay. --status limits either
    to sessions with that status. --expired instead deletes the short-term memory whose
    time to live has passed (a running manager's worker does it too). Asks first unless
    --yes or --dry-run (a script, with no terminal to answer on, must pass one of them).

    \b
    memlane prune --older-than 90d --status completed
    memlane prune --older-than 30d --kind tool_output --dry-run
    memlane prune --expired --yes
    """
    if expired:
        if older_than is not None or kind is not None or status is not None:
            raise click.UsageError(
                "--expired deletes every expired event; it takes no --older-than, --kind "
                "or --status."
            )
        _prune_expired(env, dry_run, yes)
        return
    if older_than is None:
        raise click.UsageError("Say what to delete: --older-than AGE, or --expired.")
    admin = env.admin()
    plan = admin.prune(older_than, kind=kind, status=status, dry_run=True)
    if not plan.events and not plan.sessions:
        env.out.print(f"Nothing is older than {stamp(plan.cutoff)} UTC; nothing to prune.")
        return
    _describe_prune(env, plan)
    if dry_run:
        env.note("Dry run: nothing was deleted.")
        return
    question = "Delete all of that? This cannot be undone."
    if not _confirmed(question, yes, instead=", or --dry-run to only list what would go"):
        _nothing_deleted(env)
        return
    done = admin.prune(plan.cutoff, kind=kind, status=status)
    _describe_prune(env, done)


def _prune_expired(env: Env, dry_run: bool, yes: bool) -> None:
    admin = env.admin()
    plan = admin.prune_expired(dry_run=True)
    if not plan.events:
        env.out.print("No event has expired; nothing to prune.")
        return
    _describe_expired(env, plan)
    if dry_run:
        env.note("Dry run: nothing was deleted.")
        return
    if not _confirmed("Delete them? This cannot be undone.", yes, instead=", or --dry-run"):
        _nothing_deleted(env)
        return
    _describe_expired(env, admin.prune_expired())


def _describe_expired(env: Env, result: PruneResult) -> None:
    verb = "Would delete" if result.dry_run else "Deleted"
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in result.events_by_kind.items())
    env.out.print(
        f"{verb} {result.events:,} expired event(s) ({kinds}) from "
        f"{result.sessions_touched:,} session(s)."
    )


@cli.command()
@click.option(
    "--max-age", required=True, metavar="AGE", help="What is older than this goes (90d, 12h, 2w)."
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="KIND",
    help="Only events of this kind (repeatable), keeping the sessions.",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(SESSION_STATUSES),
    help="Only in sessions with this status (repeatable).",
)
@click.option(
    "--keep",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Spare the newest this many sessions of each agent (events of each session, with --kind).",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@db_option
@click.pass_obj
def retention(
    env: Env,
    max_age: str,
    kinds: tuple[str, ...],
    statuses: tuple[str, ...],
    keep: int,
    dry_run: bool,
    as_json: bool,
    yes: bool,
) -> None:
    """Apply a retention policy to every agent's sessions.

    Without --kind: whole task sessions inactive for longer than --max-age (memory sessions,
    which hold users' facts and knowledge, stay). With --kind: the events of those kinds
    older than that. Never deleted: goals, open pending steps, users' current facts,
    knowledge documents. Decided and deleted in one transaction. Asks first unless --yes or
    --dry-run.

    \b
    memlane retention --max-age 180d --status completed --status abandoned --dry-run
    memlane retention --max-age 30d --kind tool_output --kind message --keep 50 --yes
    """
    policy = RetentionPolicy(max_age, kinds=kinds or None, statuses=statuses or None, keep=keep)
    admin = env.admin()
    plan = admin.apply_retention(policy, dry_run=True)
    if dry_run or not plan.events:
        _report_retention(env, plan, as_json)
        return
    _report_retention(env, plan, False)
    if not _confirmed("Delete all of that? This cannot be undone.", yes, instead=", or --dry-run"):
        _nothing_deleted(env)
        return
    _report_retention(env, admin.apply_retention(policy), as_json)


def _report_retention(env: Env, result: RetentionResult, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    verb = "Would delete" if result.dry_run else "Deleted"
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in result.events_by_kind.items())
    what = f"{len(result.sessions):,} session(s) with " if result.policy.kinds is None else ""
    env.out.print(
        f"{verb} {what}{result.events:,} event(s){f' ({kinds})' if kinds else ''} older than "
        f"{stamp(result.cutoff)} UTC, from {result.sessions_touched:,} session(s)."
    )


@cli.command("erase-user")
@click.argument("user_id", metavar="USER")
@click.option("--buffer", metavar="URL", help="The agents' Redis working buffer, to erase too.")
@click.option("--json", "as_json", is_flag=True, help="Print the receipt as JSON.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@db_option
@click.pass_obj
def erase_user(env: Env, user_id: str, buffer: str | None, as_json: bool, yes: bool) -> None:
    """Erase a user from the store: every session of every agent with that user id.

    Events, vectors, keyword rows, summaries and the facts agents remembered about the user
    go, physically (freed pages overwritten, the keyword index merged, the log truncated;
    PostgreSQL vacuumed). Prints a receipt, with the copies no erasure reaches. Running it
    again completes an interrupted erasure. Asks first unless --yes.

    \b
    memlane erase-user u-4711 --yes --json > receipt.json
    """
    admin = env.admin()
    found = admin.sessions(user=user_id)
    events = sum(info.events for info in found)
    question = (
        f"Erase user {user_id!r}: {len(found):,} session(s) with {events:,} event(s), of "
        f"{len({info.session.agent_id for info in found}):,} agent(s)? This cannot be undone."
    )
    if not _confirmed(question, yes):
        _nothing_deleted(env)
        return
    receipt = admin.erase_user(user_id, buffer=buffer)
    if as_json:
        click.echo(json.dumps(receipt.to_dict(), indent=2))
        return
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in receipt.events.items()) or "no events"
    env.out.print(
        f"Erased user {user_id!r}: {receipt.sessions:,} session(s), {kinds} "
        f"({receipt.facts:,} fact(s) about them)."
    )
    env.out.print("Not reached by this erasure:")
    for note in receipt.unreachable:
        env.out.print(f"  - {note}")


def _describe_prune(env: Env, result: PruneResult) -> None:
    verb = "Would delete" if result.dry_run else "Deleted"
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in result.events_by_kind.items())
    cutoff = f"{stamp(result.cutoff)} UTC"
    if result.sessions:
        env.out.print(
            f"{verb} {len(result.sessions):,} session(s) inactive since before {cutoff}, "
            f"with {result.events:,} event(s) ({kinds}):"
        )
        for info in result.sessions[:20]:
            s = info.session
            env.out.print(f"  {s.id}  {s.agent_id}  {s.status}  {shorten(s.goal, 60)}")
        if len(result.sessions) > 20:
            env.out.print(f"  ... and {len(result.sessions) - 20:,} more")
    else:
        env.out.print(
            f"{verb} {result.events:,} event(s) ({kinds}) created before {cutoff}, from "
            f"{result.sessions_touched:,} session(s)."
        )
