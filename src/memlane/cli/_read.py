"""Read commands over sessions and events: sessions, show, search. Each calls one library
method. ``restore`` is in :mod:`._restore`; ``stats`` and ``health``, which read the store as
a whole, are in :mod:`._stats`."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from ..admin import SessionInfo, event_to_dict
from ..errors import InvalidInput, SessionNotFound
from ..events import SESSION_STATUSES, Hit
from ._app import AGE, Env, agent_option, cli, db_option, emit_json, json_option
from ._render import (
    STATUS_STYLES,
    ago,
    event_body,
    kind_label,
    shorten,
    snippet,
    stamp,
    status_text,
    table_of,
)

# -- sessions -----------------------------------------------------------------------------


@cli.command()
@agent_option("Only this agent's sessions.")
@click.option(
    "--status", type=click.Choice(SESSION_STATUSES), help="Only sessions with this status."
)
@click.option("--user", metavar="USER", help="Only sessions of this user_id.")
@click.option(
    "--since",
    type=AGE,
    metavar="WHEN",
    help="Only sessions active since then: an age (7d, 12h, 30min) or an ISO-8601 time.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="At most this many sessions.",
)
@click.option(
    "--internal",
    is_flag=True,
    help="Also list the sessions the library keeps for itself (what each agent knows about "
    "a user, knowledge documents, pool logs).",
)
@json_option
@db_option
@click.pass_obj
def sessions(
    env: Env,
    status: str | None,
    user: str | None,
    since: str | None,
    limit: int,
    internal: bool,
    as_json: bool,
) -> None:
    """List sessions of every agent, most recently active first.

    Columns: id, agent, user, goal (shortened), status, events, tokens (the sum of the
    events' token counts) and last activity.
    """
    rows = env.admin().sessions(
        agent=env.agent, status=status, user=user, since=since, limit=limit + 1, internal=internal
    )
    more = len(rows) > limit  # one more than asked for says whether --limit cut the list
    rows = rows[:limit]
    if as_json:
        emit_json([info.to_dict() for info in rows])
        return
    if not rows:
        env.note("No sessions match. Record some with SessionManager, or run `memlane demo`.")
        return
    headers = ("ID", "AGENT", "USER", "GOAL", "STATUS", "EVENTS", "TOKENS", "LAST ACTIVITY")
    cells = [
        [
            info.session.id,
            info.session.agent_id,
            info.session.user_id or "",
            info.session.goal,
            info.session.status,
            f"{info.events:,}",
            f"{info.tokens:,}",
            ago(info.last_activity),
        ]
        for info in rows
    ]
    # Ids are never cut. On a narrow terminal the goal gives way first, then whole columns
    # of lesser use (tokens, user, events, last activity) are left out.
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    shown = list(range(len(headers)))

    def others() -> int:
        return sum(widths[i] for i in shown if i != 3) + 3 * (len(shown) - 1)

    for optional in (6, 2, 5, 7):
        if others() + min(16, widths[3]) <= env.out.width:
            break
        shown.remove(optional)
    goal_width = max(16, min(60, env.out.width - others()))
    table = table_of(*(headers[i] for i in shown))
    for column, i in zip(table.columns, shown, strict=True):
        column.no_wrap = True
        column.justify = "right" if i in (5, 6) else "left"
    for row in cells:
        row[3] = shorten(row[3], goal_width)
        styled: list[str | Text] = list(row)
        styled[4] = Text(row[4], style=STATUS_STYLES.get(row[4], ""))
        table.add_row(*(styled[i] for i in shown))
    env.out.print(table)
    hint = " (--limit for more)" if more else ""
    env.note(f"{len(rows)} session(s){hint}. Timeline of one: memlane show ID")


# -- show ---------------------------------------------------------------------------------


def owned_session(env: Env, session_id: str) -> SessionInfo:
    """The session, checked against --agent when one is given: the one wording of "not
    this agent's session" for show, search and restore (the library words it for agents).
    ``session_id`` may be an id, a key or a unique prefix of an id."""
    try:
        info = env.admin().session(session_id)
    except InvalidInput:  # a key several agents use: --agent says whose
        if env.agent is None:
            raise
        info = env.admin().session(session_id, agent=env.agent)
    owner = info.session.agent_id
    if env.agent is not None and env.agent != owner:
        raise SessionNotFound(
            f"Session {session_id!r} does not exist for agent {env.agent!r} (it belongs to "
            f"{owner!r}). Drop --agent (or unset MEMLANE_AGENT) to look at any agent's session."
        )
    return info


@cli.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--kind", "kinds", multiple=True, metavar="KIND", help="Only events of this kind (repeatable)."
)
@click.option("--limit", type=click.IntRange(min=1), help="Only the latest N events.")
@click.option("--full", is_flag=True, help="Show long contents and payloads in full.")
@agent_option("Show the session only if this agent owns it.")
@json_option
@db_option
@click.pass_obj
def show(
    env: Env,
    session_id: str,
    kinds: tuple[str, ...],
    limit: int | None,
    full: bool,
    as_json: bool,
) -> None:
    """Show a session's timeline: goal, steps with their tool and result, tool outputs,
    decisions, facts, errors (resolved or not), pending steps and messages.

    Long contents are folded to their first lines and long payloads to 160 characters,
    each with its size; --full shows them whole.
    The summary at the end lists the open pending queue and unresolved errors.
    """
    info = owned_session(env, session_id)
    session_id = info.session.id
    events = env.admin().events(session_id, kinds=list(kinds) or None, limit=limit)
    if as_json:
        emit_json({"session": info.to_dict(), "events": [event_to_dict(e) for e in events]})
        return
    s = info.session
    header = Text()
    header.append(f"Session {s.id}", style="bold")
    header.append(f"  agent {s.agent_id}")
    if s.user_id:
        header.append(f" · user {s.user_id}")
    if s.shared_pool:
        header.append(f" · pool {s.shared_pool}")
    header.append(" · ")
    header.append(s.status, style=STATUS_STYLES.get(s.status, ""))
    env.out.print(header)
    env.out.print(Text.assemble(("Goal: ", "bold"), s.goal))
    env.out.print(
        f"Started {stamp(s.created_at)} UTC · last activity {ago(info.last_activity)} · "
        f"{info.events:,} events · {info.tokens:,} tokens",
        style="dim",
    )
    if len(events) < info.events:
        env.out.print(f"Showing {len(events):,} of {info.events:,} events.", style="dim")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="dim")
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    labels = [kind_label(event) for event in events]
    # What is left of the width after the day (or time) and kind columns and their gaps:
    # folded lines are cut to it, so that they do not wrap.
    kind_width = max((label.cell_len for label in labels), default=0)
    width = env.out.width - len("2026-11-22") - kind_width - 4
    day = None
    for event, label in zip(events, labels, strict=True):
        if stamp(event.created_at)[:10] != day:
            day = stamp(event.created_at)[:10]
            grid.add_row(Text(day, style="bold"), "", "")
        body = event_body(event, full=full, width=max(30, width))
        grid.add_row(stamp(event.created_at)[11:], label, body)
    env.out.print()
    env.out.print(grid)
    env.out.print()
    _show_summary(env, events)


def _show_summary(env: Env, events: list[Any]) -> None:
    counts = Counter(e.kind for e in events)
    open_steps = [e for e in events if e.kind == "pending" and e.status == "open"]
    unresolved = [e for e in events if e.kind == "error" and e.status == "unresolved"]
    line = Text("Pending queue: ", style="bold")
    if open_steps:
        line.append(f"{len(open_steps)} open — ", style="yellow")
        line.append("; ".join(shorten(e.content, 60) for e in open_steps))
    else:
        line.append("nothing open")
    env.out.print(line)
    errors = Text("Errors: ", style="bold")
    errors.append(f"{counts['error'] - len(unresolved)} resolved, ")
    errors.append(f"{len(unresolved)} unresolved", style="bold red" if unresolved else "")
    errors.append(
        f" · decisions {counts['decision']} · facts {counts['fact']} · "
        f"steps {counts['step']} · tool outputs {counts['tool_output']} · "
        f"messages {counts['message']}"
    )
    env.out.print(errors)


# -- search -------------------------------------------------------------------------------


def _parse_where(values: tuple[str, ...]) -> dict[str, Any] | None:
    filters: list[dict[str, Any]] = []
    for value in values:
        text = value.strip()
        if text.startswith("{"):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as exc:
                raise click.BadParameter(
                    f"{value!r} is not a valid JSON filter ({exc.msg}); e.g. "
                    """'{"year": {"$gte": 2024}}'.""",
                    param_hint="--where",
                ) from None
            filters.append(parsed)
            continue
        key, sep, raw = text.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(
                f"{value!r} is not key=value; e.g. --where tool=arxiv or --where http.status=200",
                param_hint="--where",
            )
        try:
            parsed_value = json.loads(raw)  # 200, true, null, "quoted"
        except json.JSONDecodeError:
            parsed_value = raw
        filters.append({key.strip(): parsed_value})
    if not filters:
        return None
    return filters[0] if len(filters) == 1 else {"$and": filters}


@cli.command()
@click.argument("query")
@agent_option("Search only this agent's sessions (default: every agent's).")
@click.option("--session", "session_id", metavar="SESSION", help="Search only this session.")
@click.option(
    "--kind", "kinds", multiple=True, metavar="KIND", help="Only events of this kind (repeatable)."
)
@click.option(
    "--k", "k", type=click.IntRange(min=1), default=5, show_default=True, help="How many hits."
)
@click.option(
    "--mode",
    type=click.Choice(["hybrid", "semantic", "keyword"]),
    default="hybrid",
    show_default=True,
    help="hybrid fuses keyword (BM25) and semantic (cosine) rankings; each mode's scores "
    "are on its own scale, so compare them within one search only.",
)
@click.option(
    "--where",
    "wheres",
    multiple=True,
    metavar="KEY=VALUE",
    help="Filter on event metadata (repeatable, all must hold); VALUE is JSON if it parses "
    """(200, true), else text; or a JSON filter such as '{"year": {"$gte": 2024}}'.""",
)
@click.option(
    "--history",
    is_flag=True,
    help="Also find users' facts that were superseded or retracted (left out by default); "
    "each hit shows its status.",
)
@json_option
@db_option
@click.pass_obj
def search(
    env: Env,
    query: str,
    session_id: str | None,
    kinds: tuple[str, ...],
    k: int,
    mode: str,
    wheres: tuple[str, ...],
    history: bool,
    as_json: bool,
) -> None:
    """Search past events by meaning and keywords: ranked hits with score, kind, session
    and a snippet (a long event's matching passage; a JSON tool output's records the
    query points at, each with its path).

    The header names the scores' scale, which depends on --mode: fused (RRF) for hybrid
    (rank fusion, at most about 0.3), cosine for semantic (at most 1), BM25 for keyword
    (unbounded). With --json each hit says it in score_scale: rrf, cosine or bm25.

    Without --agent or --session every agent's memory is searched. Looking does not
    count as a recall (restore ranking is left as it was).
    """
    if mode != "keyword":  # keyword search needs no vectors
        env.embed_backlog()
    where = _parse_where(wheres)
    if session_id is not None:
        session_id = owned_session(env, session_id).session.id
    hits = env.admin().search(
        query,
        k,
        mode=mode,
        agent=env.agent,
        session=session_id,
        kinds=list(kinds) or None,
        where=where,
        current_only=not history,
    )
    label, scale = _SCORE_SCALES[mode]
    if as_json:
        emit_json(
            [
                {
                    "rank": rank,
                    "score": hit.score,
                    "score_scale": scale,
                    # its place in the keyword and semantic rankings (Hit.ranks)
                    "ranks": None if hit.ranks is None else dict(hit.ranks),
                    "passage": None
                    if hit.passage is None
                    else {
                        "text": hit.passage.text,
                        "start": hit.passage.start,
                        "stop": hit.passage.stop,
                    },
                    "records": list(hit.records),
                    **event_to_dict(hit.event),
                }
                for rank, hit in enumerate(hits, start=1)
            ]
        )
        return
    if not hits:
        env.note("No hits. Try --mode semantic, fewer filters, or another wording.")
        return
    _print_hits(env, hits, query, label)


#: What a score is in each search mode: its label in the header, its --json score_scale.
#: The three differ by an order of magnitude (≈0.2 fused, ≤1 cosine, ≈4 BM25).
_SCORE_SCALES = {
    "hybrid": ("fused (RRF)", "rrf"),
    "semantic": ("cosine", "cosine"),
    "keyword": ("BM25", "bm25"),
}


def _print_hits(env: Env, hits: list[Hit], query: str, label: str) -> None:
    """Two lines per hit, so it reads well at any terminal width: where it is, then what;
    under a header that names the scale of the scores."""
    scores = [f"{hit.score:.3f}" for hit in hits]
    width = max(len(label), *(len(score) for score in scores))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row(
        Text("#", style="bold"),
        Text.assemble((label.ljust(width), "bold"), ("  kind · agent · session · time", "dim")),
    )
    for rank, (hit, score) in enumerate(zip(hits, scores, strict=True), start=1):
        event = hit.event
        located = Text.assemble(
            kind_label(event),
            (f" · {event.agent_id} · session {event.session_id} · ", "dim"),
            (stamp(event.created_at, seconds=False), "dim"),
        )
        if event.status:  # a fact's current / superseded / retracted, a to-do's open / done
            located.append("  ")
            located.append_text(status_text(event.status))
        grid.add_row(
            Text(f"{rank}.", style="bold"),
            Text.assemble((f"{score.ljust(width)}  ", "bold"), located),
        )
        width = max(40, env.out.width - 8)
        if hit.records:
            # a JSON output: the records the query points at, each with its path
            shown = "record" if len(hit.records) == 1 else f"{len(hit.records)} records"
            grid.add_row("", Text(f"{shown} of its payload", style="dim"))
            for record in hit.records:
                grid.add_row("", snippet(record, query, width=width))
            continue
        if hit.passage is None:
            grid.add_row("", snippet(event.content, query, width=width))
            continue
        # a long event found by one of its passages: show that passage, and where it sits
        where = f"passage, characters {hit.passage.start:,}–{hit.passage.stop:,} of "
        grid.add_row("", Text(f"{where}{len(event.content):,}", style="dim"))
        grid.add_row("", snippet(hit.passage.text, query, width=width))
    env.out.print(grid)
