"""``memlane ui``: the local web inspector (:mod:`memlane.ui`).

Starlette, Jinja2 and uvicorn are imported only when the command runs, so every other
command works without the ``[ui]`` extra.
"""

from __future__ import annotations

import click

from ..errors import InvalidInput
from ._app import Env, agent_option, cli, db_option


@cli.command()
@agent_option(
    "Show only what this agent may read: its sessions, its searches, its restores (the "
    "library's own scoping)."
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8760,
    show_default=True,
    help="The port to listen on; 0 takes a free one.",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on. Anything but this machine's loopback lets other "
    "machines reach the page (with the token): a warning is printed.",
)
@click.option(
    "--allow-write",
    is_flag=True,
    help="Open the store writable and offer, each behind a confirmation page and a CSRF "
    "token: delete a session or an event, retract a user's fact, erase a user.",
)
@db_option
@click.pass_obj
def ui(env: Env, port: int, host: str, allow_write: bool) -> None:
    """Open a local web inspector of the store: sessions, timelines, search, restore preview.

    Prints the page's address first, with a random token that every request needs (the
    page keeps it in a cookie), then serves until Ctrl-C. The store is opened read-only
    unless --allow-write: browsing changes nothing, not even recall counts. Pages: the
    sessions (filter by agent, user, status, text), a session's timeline (paged, long
    contents and payloads folded), search (each hit with its score and its keyword and
    semantic ranks), the restore preview (the text and messages restore() returns for a
    budget, each section's tokens, every event's fate; two budgets side by side), what an
    agent knows about a user, knowledge documents and health. docs/ui.md describes it.
    Needs the extra: pip install 'memlane[ui]'.
    """
    try:
        from ..ui import Source, serve
    except ModuleNotFoundError as exc:  # the [ui] extra is missing
        raise InvalidInput(
            f"memlane ui needs the [ui] extra ({exc.name} is not installed): "
            "pip install 'memlane[ui]'."
        ) from None
    admin = env.admin(read_only=not allow_write)
    source = Source(admin, agent=env.agent, url=env.db, index=env.index)
    try:
        serve(source, host=host, port=port, echo=click.echo)
    except OSError as exc:
        raise click.ClickException(
            f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Choose another --port "
            "(0 takes a free one)."
        ) from exc
    finally:
        source.close()
