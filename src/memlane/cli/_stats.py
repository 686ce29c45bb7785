"""The store's own state: ``stats`` (what it holds: events by agent and kind, sessions by
status, size, the embedder behind the vectors) and ``health`` (whether it is well, with an exit
status for monitoring).

Apart from the read commands (:mod:`._read`), which look at sessions and events: these two
read the store as a whole.
"""

from __future__ import annotations

import click
from rich.text import Text

from ._app import FAILURE, Env, cli, db_option, emit_json, json_option
from ._render import human_size, stamp, table_of

_KIND_ORDER = ("goal", "step", "tool_output", "decision", "fact", "pending", "error", "message")


# -- stats --------------------------------------------------------------------------------


@cli.command()
@json_option
@db_option
@click.pass_obj
def stats(env: Env, as_json: bool) -> None:
    """Show what the database holds: events by agent and kind, sessions by status, file
    size, the embedder behind the vectors, and events still waiting for embedding."""
    admin = env.admin()
    st = admin.stats()
    if as_json:
        data = st.to_dict()
        data["cli_embedder"] = admin.embedder.name
        emit_json(data)
        return
    out = env.out
    out.print(Text.assemble(("Database  ", "bold"), f"{st.path} ({human_size(st.size_bytes)})"))
    statuses = ", ".join(f"{n:,} {status}" for status, n in st.sessions_by_status.items())
    out.print(
        Text.assemble(
            ("Sessions  ", "bold"), f"{st.sessions:,}" + (f": {statuses}" if statuses else "")
        )
    )
    out.print(
        Text.assemble(
            ("Events    ", "bold"),
            f"{st.events:,}; {st.vectors:,} vectors (a long event has one per passage), ",
            (
                f"{st.pending_embeddings:,} waiting for embedding",
                "yellow" if st.pending_embeddings else "",
            ),
        )
    )
    if st.embedder_name:
        made_by = f"{st.embedder_name} (dim {st.embedder_dim}) made the stored vectors"
    else:
        made_by = "no vectors yet"
    line = Text.assemble(("Embedder  ", "bold"), made_by)
    if st.embedder_name and st.embedder_name != admin.embedder.name:
        line.append(
            f"; this CLI embeds with {admin.embedder.name}: run `memlane reindex` to switch",
            style="yellow",
        )
    out.print(line)
    out.print(Text.assemble(("Schema    ", "bold"), ", ".join(st.migrations)))
    if not st.events_by_agent:
        return
    present = {kind for kinds in st.events_by_agent.values() for kind in kinds}
    columns = [k for k in _KIND_ORDER if k in present]
    columns += sorted(present - set(columns))
    headers = ["AGENT", *[c.upper().replace("_", " ") for c in columns], "TOTAL"]
    rows = [
        [agent, *[f"{kinds.get(c, 0):,}" for c in columns], f"{sum(kinds.values()):,}"]
        for agent, kinds in st.events_by_agent.items()
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    if sum(widths) + 3 * (len(widths) - 1) > out.width:
        # Too many kinds for the terminal: one row per agent and kind instead.
        headers = ["AGENT", "KIND", "EVENTS"]
        rows = [
            [agent, kind, f"{count:,}"]
            for agent, kinds in st.events_by_agent.items()
            for kind, count in kinds.items()
        ]
    table = table_of(*headers)
    for col in table.columns[1:]:
        col.justify = "right"
    for row in rows:
        table.add_row(*row)
    out.print()
    out.print(table)


# -- health -------------------------------------------------------------------------------


@cli.command()
@json_option
@db_option
@click.pass_obj
def health(env: Env, as_json: bool) -> None:
    """Say whether the store is healthy; exit 1 when it is not (for monitoring).

    Not healthy: events wait for embedding and no process has stored a batch for two
    minutes (no worker runs, or every one is failing), or an index cannot be reached. Also
    shows the store's size, its WAL's (SQLite) and the schema version.
    """
    admin = env.admin()
    report = admin.health()
    if as_json:
        emit_json(report.to_dict())
    else:
        out = env.out
        state = ("healthy", "green") if report.ok else ("NOT HEALTHY", "bold red")
        out.print(Text.assemble(("Health    ", "bold"), state))
        last = report.last_embedded_at
        since = "never" if last is None else f"{stamp(last)} UTC"
        backlog_style = "yellow" if report.backlog else ""
        out.print(
            Text.assemble(
                ("Backlog   ", "bold"),
                (f"{report.backlog:,} event(s) waiting for embedding", backlog_style),
                f"; last batch stored {since}",
                (" (stalled: is a worker running?)", "bold red") if report.stalled else "",
            )
        )
        if report.oldest_pending_at is not None and report.backlog_seconds is not None:
            waited = f"{report.backlog_seconds:,.0f} s"
            out.print(
                Text.assemble(
                    ("Lag       ", "bold"),
                    f"the oldest waiting event was recorded {waited} ago "
                    f"({stamp(report.oldest_pending_at)} UTC)",
                )
            )
        for label, error in (("Index", report.index_error), ("Worker", report.last_error)):
            if error:
                out.print(Text.assemble((f"{label:<10}", "bold"), (error, "red")))
        if report.worker_error is not None:
            when = (
                "" if report.worker_error_at is None else f" ({stamp(report.worker_error_at)} UTC)"
            )
            out.print(Text.assemble(("Last fail ", "bold"), (report.worker_error, "yellow"), when))
        size = human_size(report.store_bytes or 0)
        wal = "" if report.wal_bytes is None else f"; WAL {human_size(report.wal_bytes)}"
        out.print(Text.assemble(("Store     ", "bold"), f"{report.store} ({size}{wal})"))
        out.print(Text.assemble(("Schema    ", "bold"), report.schema or "none"))
        out.print(Text.assemble(("Embedder  ", "bold"), report.embedder))
    if not report.ok:
        raise SystemExit(FAILURE)
