"""``memlane mcp``: serve one agent's memory to MCP clients over stdio.

The MCP SDK is imported only when the command runs, so ``memlane --help`` and every other command
work without the ``[mcp]`` extra.
"""

from __future__ import annotations

import logging

import click

from ._app import Env, agent_option, cli, db_option, embedder_from_env


@cli.command()
@agent_option("The agent whose memory the server exposes (required here, or MEMLANE_AGENT).")
@click.option(
    "--read-only",
    is_flag=True,
    help="Offer only the read tools (list_sessions, search_memory, restore_context, "
    "get_events) and open the store read-only.",
)
@click.option(
    "--max-chars",
    type=click.IntRange(min=100),
    default=2000,
    show_default=True,
    help="Characters of each event's content, payload and metadata a tool returns; "
    "longer ones are cut with a marker.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
    default="info",
    show_default=True,
    help="What the server logs, on stderr (stdout carries only MCP messages).",
)
@click.option(
    "--extract",
    type=click.Choice(["rules"]),
    default=None,
    help="Form user memory from the sessions' messages in the background (facts, entities, "
    "tags; docs/memory.md): the offline rule extractor.",
)
@db_option
@click.pass_obj
def mcp(env: Env, read_only: bool, max_chars: int, log_level: str, extract: str | None) -> None:
    """Serve one agent's memory to MCP clients (Claude Desktop, IDEs, agent frameworks).

    Speaks MCP over stdin/stdout until the client closes stdin; an MCP client starts it
    itself, e.g. with the command `memlane` and the arguments `mcp --db /path/memory.db --agent
    assistant`. The tools start and end sessions, record events and pending steps, search
    the memory and restore a session's context within a token budget
    (docs/integrations/mcp.md). Needs the extra: pip install 'memlane[mcp]'.
    """
    if env.agent is None:
        raise click.UsageError(
            "memlane mcp needs --agent AGENT (or MEMLANE_AGENT): the agent whose memory it serves."
        )
    if extract is not None and read_only:
        raise click.UsageError("--extract writes what it finds; it cannot go with --read-only.")
    # Imported here: the SDK must not load unless this command runs (memlane --help, and every
    # other command, work without the [mcp] extra). Raises InvalidInput naming the extra.
    from ..aio import AsyncSessionManager
    from ..integrations import mcp as server

    agent, db, index = env.agent, env.db, env.index

    def open_manager() -> AsyncSessionManager:
        return AsyncSessionManager(
            agent,
            url=db,
            index=index,
            embedder=embedder_from_env(),
            read_only=read_only,
            extractor="rules" if extract == "rules" else None,
        )

    server.run_stdio(
        open_manager,
        read_only=read_only,
        max_chars=max_chars,
        log_level=getattr(logging, log_level.upper()),
    )
