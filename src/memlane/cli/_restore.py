"""The ``memlane restore`` command: what ``restore()`` hands a model, and with ``--explain``
why each event is in it or not."""

from __future__ import annotations

from collections import Counter
from typing import Any

import click
from rich.text import Text

from ..errors import EventNotFound
from ._app import Env, agent_option, cli, db_option, emit_json, json_option
from ._read import owned_session
from ._render import (
    shorten,
    table_of,
)

# -- restore ------------------------------------------------------------------------------

#: in --explain, this many events dropped for the same reason are shown as one row
DROPPED_GROUP = 3


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=4000,
    show_default=True,
    help="The budget the restored text never exceeds.",
)
@click.option("--query", help="What the next turn is about (default: the goal and pending steps).")
@click.option(
    "--model",
    default="gpt-4o",
    show_default=True,
    help="Model family whose tokenizer counts the budget (gpt-4o, gpt-4, claude-3-5-sonnet, ...).",
)
@click.option(
    "--explain", is_flag=True, help="Also show what was included, summarised or dropped, and why."
)
@agent_option("Restore as this agent (default: the session's owner).")
@json_option
@db_option
@click.pass_obj
def restore(
    env: Env,
    session_id: str,
    max_tokens: int,
    query: str | None,
    model: str,
    explain: bool,
    as_json: bool,
) -> None:
    """Print the context restore() rebuilds for a session within --max-tokens.

    This is exactly what an agent would get back from SessionManager.restore(). --explain
    adds the report: every candidate event with its section, action, tokens and reason,
    the tokens each section used, and the share of the budget each section was offered
    and why. --json always includes the report, and the chat view (system and turns).
    """
    found = owned_session(env, session_id).session
    session_id, agent = found.id, found.agent_id
    env.embed_backlog()  # restore searches for relevant history: with every vector
    mgr = env.manager(agent, model=model)
    context = mgr.restore(session_id, max_tokens, query=query)
    report = context.report
    if as_json:
        emit_json(
            {
                "session_id": session_id,
                "agent_id": agent,
                "max_tokens": max_tokens,
                "model": model,
                "token_count": context.token_count,
                "text": context.text,
                "messages": context.messages,
                "system": context.system,
                "turns": context.turns,
                "report": report.to_dict(),
            }
        )
        return
    click.echo(context.text)
    counts = Counter(item.action for item in report.items)
    env.note(
        f"— {context.token_count:,} of {max_tokens:,} tokens ({report.model}, {report.encoding}"
        f"{', estimate' if report.estimate else ''}) · {counts['included']} included, "
        f"{counts['summarised']} summarised, {counts['dropped']} dropped of "
        f"{report.total_events} events" + ("" if explain else " · --explain says why")
    )
    if not explain:
        return
    admin = env.admin()
    contents = {e.id: e.content for e in admin.events(session_id)}
    table = table_of("SECTION", "ACTION", "KIND", "TOKENS", "EVENT", "REASON")
    table.columns[3].justify = "right"
    table.columns[4].ratio = 1
    table.columns[5].ratio = 1
    styles = {"included": "green", "summarised": "yellow", "dropped": "red"}
    # Knowledge chunks are no events of the session: each is shown as document#chunk.
    documents: dict[str, str] = {}
    for item in report.items:
        if item.kind == "knowledge" and item.event_id not in contents:
            try:
                chunk = mgr.get_event(item.event_id)
            except EventNotFound:  # deleted since
                continue
            name = str(chunk.metadata.get("document", "?")).rstrip("/").rsplit("/", 1)[-1]
            documents[item.event_id] = name
            contents[item.event_id] = f"{name}#{chunk.metadata.get('chunk', '?')}"

    # Events dropped alike are one row, not 19; --json lists every one. Alike: the chunks of
    # one document, whatever each one's reason ("19 chunks of handbook.md"), or events of
    # the same section, kind and reason.
    def alike_key(item: Any) -> tuple[str, str, str, str]:
        if item.event_id in documents:
            return (item.section, item.kind, "document", documents[item.event_id])
        return (item.section, item.kind, "reason", item.reason)

    dropped = [item for item in report.items if item.action == "dropped"]
    alike = Counter(alike_key(item) for item in dropped)
    reasons: dict[tuple[str, str, str, str], dict[str, None]] = {}  # (distinct, in order)
    for item in dropped:
        reasons.setdefault(alike_key(item), {})[item.reason] = None
    grouped: set[tuple[str, str, str, str]] = set()
    for item in report.items:
        key = alike_key(item)
        if item.action == "dropped" and alike[key] >= DROPPED_GROUP:
            if key not in grouped:
                grouped.add(key)
                why = list(reasons[key])
                table.add_row(
                    item.section,
                    Text("dropped", style="red"),
                    item.kind,
                    "0",
                    Text(
                        f"{alike[key]} chunks of {key[3]}"
                        if key[2] == "document"
                        else f"{alike[key]} events",
                        style="dim",
                    ),
                    why[0] if len(why) == 1 else f"{why[0]} (+{len(why) - 1} other reason(s))",
                )
            continue
        table.add_row(
            item.section,
            Text(item.action, style=styles.get(item.action, "")),
            item.kind,
            str(item.tokens),
            Text(f"{shorten(contents.get(item.event_id, ''), 48)}  ").append(
                item.event_id, style="dim"
            ),
            item.reason,
        )
    env.out.print(table)
    budget = table_of("SECTION", "TOKENS", "SHARE OF BUDGET")
    budget.columns[1].justify = "right"
    budget.columns[2].justify = "right"
    for section, tokens in report.sections.items():
        budget.add_row(section, f"{tokens:,}", f"{tokens / max_tokens:.0%}")
    budget.add_row(
        Text("whole text", style="bold"),
        f"{context.token_count:,}",
        f"{context.token_count / max_tokens:.0%}",
    )
    env.out.print(budget)
    offered = table_of("SECTION", "OFFERED", "USED", "WHY")
    offered.columns[1].justify = "right"
    offered.columns[2].justify = "right"
    offered.columns[3].ratio = 1
    for share in report.shares:
        offered.add_row(share.section, f"{share.offered:,}", f"{share.used:,}", share.why)
    env.out.print(offered)
    env.note(report.note)
