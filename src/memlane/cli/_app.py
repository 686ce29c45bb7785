"""The ``memlane`` group: global options, the shared context, and error handling.

Every failure leaves as one line on stderr that names the problem and the fix, with a
non-zero exit status: library errors (:class:`~memlane.SessionManagerError`), file
errors, and click's usage errors alike. ``--debug`` prints the traceback first.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from click.exceptions import NoArgsIsHelpError
from rich.console import Console

from ..admin import StoreAdmin, parse_cutoff
from ..embed import HashEmbedder
from ..engine.engine import DEFAULT_DB
from ..errors import InvalidInput, SessionManagerError, StoreReadOnly
from ..manager import SessionManager
from ..protocols import Embedder
from ..store import sqlite_path
from ._console import make_console, progress_bar

__all__ = [
    "AGE",
    "Env",
    "agent_option",
    "cli",
    "db_option",
    "emit_json",
    "json_option",
    "main",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status of a failed command (click's usage errors exit with 2).
FAILURE = 1
#: The order `memlane --help` and docs/cli.md list the commands in: inspect, then maintain.
COMMAND_ORDER = (
    "sessions",
    "show",
    "search",
    "restore",
    "stats",
    "health",
    "facts",
    "extract",
    "ingest",
    "export",
    "export-md",
    "import",
    "migrate",
    "reindex",
    "delete",
    "prune",
    "retention",
    "erase-user",
    "pool",
    "agent-role",
    "ui",
    "mcp",
    "demo",
)


#: from this many events waiting for vectors a command embeds them first, with a progress
#: bar (fewer: the search embeds them itself, unnoticed)
NOTED_BACKLOG = 64
#: what --embedder (MEMLANE_EMBEDDER) takes
EMBEDDER_CHOICES = ("auto", "minilm", "hash")


def embedder_named(choice: str | None, stored: str | None = None) -> Embedder | None:
    """The embedder for ``--embedder`` (None: the default, all-MiniLM-L6-v2). ``auto`` takes
    the one the store's vectors were made with (``stored``, its recorded name) when this
    command line knows it — the hash embedder of a test or an example, of any size — and
    the default otherwise."""
    choice = (choice or "auto").strip().lower()
    if choice == "auto" and stored is not None:
        size = stored.removeprefix("hash-")
        return HashEmbedder(int(size)) if size != stored and size.isdigit() else None
    if choice in ("auto", "default", "minilm"):
        return None
    if choice == "hash":
        return HashEmbedder()
    raise InvalidInput(
        f"--embedder {choice!r} (or MEMLANE_EMBEDDER) is not an embedder this command line "
        f"knows; use one of {', '.join(EMBEDDER_CHOICES)}."
    )


def embedder_from_env() -> Embedder | None:
    """The embedder ``MEMLANE_EMBEDDER`` names, for commands that make a store (demo)."""
    return embedder_named(os.environ.get("MEMLANE_EMBEDDER"))


@dataclass
class Env:
    """What every command gets: the global options and two consoles (stdout, stderr)."""

    db: str
    agent: str | None
    index: str | None
    debug: bool
    out: Console
    err: Console
    embedder_choice: str = "auto"
    _admin: StoreAdmin | None = field(default=None, init=False, repr=False)
    _embedder: Embedder | None = field(default=None, init=False, repr=False)

    def admin(self, *, must_exist: bool = True, read_only: bool = False) -> StoreAdmin:
        """The command's :class:`StoreAdmin` on ``--db``, closed when the command ends
        (``read_only``: opened for reading only, for the first call).

        Read commands refuse a database file that does not exist rather than creating an
        empty one: a typo in ``--db`` should not look like an empty store.
        """
        if self._admin is not None:
            return self._admin
        admin = open_admin(  # loads no model
            self.db, self.index, must_exist=must_exist, read_only=read_only
        )
        self._embedder = embedder_named(self.embedder_choice, admin.stored_embedder())
        if self._embedder is not None:  # the store's own embedder: open with it instead
            admin = open_admin(
                self.db,
                self.index,
                must_exist=must_exist,
                embedder=self._embedder,
                read_only=read_only,
            )
        self._admin = admin
        click.get_current_context().call_on_close(admin.close)
        return admin

    def manager(self, agent: str, **options: Any) -> SessionManager:
        """A :class:`SessionManager` for ``agent`` on ``--db`` (no background thread). An
        operator's reads count no recalls: looking must not change what the agent restores."""
        mgr = SessionManager(
            agent,
            url=self.db,
            index=self.index,
            embedder=self._embedder if self._admin is not None else self._resolve_embedder(),
            background=False,
            count_recalls=False,
            **options,
        )
        click.get_current_context().call_on_close(mgr.close)
        return mgr

    def _resolve_embedder(self) -> Embedder | None:
        """The embedder for a manager, before any admin was opened: the store's own (see
        :func:`embedder_named`); a SQLite file yet to be made has none."""
        path = sqlite_path(self.db)
        if path is not None and path != ":memory:" and not Path(path).exists():
            return embedder_named(self.embedder_choice)
        self.admin()
        return self._embedder

    def the_agent(self, command: str) -> str:
        """``--agent``, or the store's only agent: a command about one agent's memory needs
        it named only when the store holds several (then the error lists them)."""
        if self.agent is not None:
            return self.agent
        agents = self.admin().agents()
        if len(agents) == 1:
            return agents[0]
        known = f"it holds {', '.join(map(repr, agents))}" if agents else "it holds no agent yet"
        raise click.UsageError(
            f"memlane {command} needs --agent AGENT (or MEMLANE_AGENT): the agent whose memory "
            f"it uses; {known}."
        )

    def embed_backlog(self) -> None:
        """Embed the events that wait for vectors before a command that needs them (a
        search or restore after `memlane import`, `ingest`, or a store whose worker has not
        caught up): a progress bar on a terminal, else one line when done, so the command
        never sits silent. A few are left to the search itself; a read-only store is left
        as it is (its search finds them by keyword)."""
        admin = self.admin()
        waiting = admin.pending_embeddings()
        if waiting < NOTED_BACKLOG:
            return
        started = time.perf_counter()
        description = f"Embedding {waiting:,} event(s) that wait for vectors"
        try:
            with progress_bar(self.err, description, waiting) as bar:
                task = bar.task_ids[0]
                done = admin.embed_pending(
                    progress=lambda count, total: bar.update(task, completed=count, total=total)
                )
        except StoreReadOnly:
            self.note(f"{waiting:,} event(s) have no vectors yet: found by keyword only.")
            return
        self.note(f"Embedded {done:,} event(s) in {time.perf_counter() - started:.1f}s first.")

    def note(self, message: str, style: str = "dim") -> None:
        """A human remark on stderr (never mixed into data on stdout)."""
        self.err.print(message, style=style)


def open_admin(
    target: str,
    index: str | None,
    *,
    must_exist: bool = True,
    option: str = "--db (or MEMLANE_DB)",
    embedder: Embedder | None = None,
    read_only: bool = False,
) -> StoreAdmin:
    """A :class:`StoreAdmin` on a path or URL, closed when the command ends.

    Read commands refuse a SQLite file that does not exist rather than creating an empty
    one: a typo in ``--db`` should not look like an empty store. ``option`` is what the
    user gave the store with, for that message.
    """
    path_text = sqlite_path(target)
    if must_exist and path_text is not None and path_text != ":memory:":
        path = Path(path_text)
        if path.parent.is_dir() and not path.exists():
            raise InvalidInput(
                f"The database {target!r} does not exist. Point {option} at a session "
                "database, or run `memlane demo` to make one to explore."
            )
    admin = StoreAdmin(url=target, index=index, embedder=embedder, read_only=read_only)
    click.get_current_context().call_on_close(admin.close)
    return admin


def emit_json(data: Any) -> None:
    """One JSON document on stdout: UTF-8, indented, stable key order."""
    click.echo(json.dumps(data, ensure_ascii=False, indent=2))


class AgeOrTime(click.ParamType[str]):
    """An age (``90d``, ``12h``, ``30min``, ``2w``) or an ISO-8601 time, checked while the
    command line is parsed: a malformed one is a usage error (exit 2), like any bad option
    value, and nothing is opened. The command passes the text on to the library."""

    name = "age"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        try:
            parse_cutoff(text)
        except InvalidInput:
            self.fail(self._advice(text), param, ctx)
        return text

    @staticmethod
    def _advice(text: str) -> str:
        number = text.strip()
        if number.replace(".", "", 1).isdigit():
            return (
                f"{text!r} has no unit; write e.g. '{number}d' for {number} days (units: s, "
                "min, h, d, w) or an ISO-8601 time such as '2026-05-01T12:00:00Z'."
            )
        return (
            f"{text!r} is neither an age nor an ISO-8601 time; write e.g. '90d', '12h', "
            "'30min', '2w' or '2026-05-01T12:00:00Z'."
        )


#: The type of --older-than and --since.
AGE = AgeOrTime()


def _set_local(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is not None:
            setattr(ctx.ensure_object(Env), name, value)

    return callback


def db_option(func: F) -> F:
    """``--db`` on a command too (``memlane sessions --db x.db``), overriding the global one."""
    return click.option(
        "--db",
        metavar="PATH",
        expose_value=False,
        callback=_set_local("db"),
        help="The store: a SQLite path or a URL (same as the global --db).",
    )(func)


def agent_option(help_text: str) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        return click.option(
            "--agent",
            metavar="AGENT",
            expose_value=False,
            callback=_set_local("agent"),
            help=help_text,
        )(func)

    return decorate


def json_option(func: F) -> F:
    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print JSON (stable field names, for jq) instead of the human view.",
    )(func)


def _fail(message: str, code: int = FAILURE, *, as_json: bool = False, kind: str = "") -> NoReturn:
    """One line on stderr; under ``--json`` one JSON document of a stable shape instead:
    ``{"error": {"type": "SessionNotFound", "message": "...", "exit_code": 1}}``."""
    if as_json:
        error = {"type": kind or "Error", "message": message, "exit_code": code}
        click.echo(json.dumps({"error": error}, ensure_ascii=False), err=True)
    else:
        click.secho(f"Error: {message}", err=True, fg="red")
    sys.exit(code)


def _cli_words(message: str) -> str:
    """A library message in the command line's words: its ``db_path`` is ``--db`` here."""
    return message.replace("db_path", "--db")


class MemlaneGroup(click.Group):
    """Lists commands in :data:`COMMAND_ORDER`; turns every error into one line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        order = {name: i for i, name in enumerate(COMMAND_ORDER)}
        return sorted(self.commands, key=lambda name: (order.get(name, len(order)), name))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:
            # The reader went away (`memlane export | head`): it has what it wanted, so stop
            # quietly with success, like `git log | head` (click itself would exit 1). stdout
            # goes to /dev/null so that the interpreter's last flush cannot raise again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise click.exceptions.Exit(0) from None
        except SessionManagerError as exc:
            self._debug(ctx)
            raise click.ClickException(str(exc)) from exc
        except OSError as exc:
            self._debug(ctx)
            where = f" {exc.filename!r}" if exc.filename else ""
            raise click.ClickException(
                f"Cannot access{where}: {exc.strerror or exc}. Check the path and its permissions."
            ) from exc
        except Exception as exc:
            self._debug(ctx)
            raise click.ClickException(
                f"Unexpected {type(exc).__name__}: {exc}. Rerun with --debug for the "
                "traceback, and please report it."
            ) from exc

    @staticmethod
    def _debug(ctx: click.Context) -> None:
        if getattr(ctx.obj, "debug", False):
            traceback.print_exc()

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        prog_name = prog_name or "memlane"
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        as_json = "--json" in (sys.argv[1:] if args is None else list(args))
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as exc:  # plain `memlane`: the help, as click shows it
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f" See `{exc.ctx.command_path} --help`." if exc.ctx is not None else ""
            message = exc.format_message().rstrip()
            message += ("" if message.endswith((".", "?")) else ".") + hint
            _fail(message, exc.exit_code, as_json=as_json, kind="UsageError")
        except click.ClickException as exc:
            cause = exc.__cause__
            kind = type(cause).__name__ if isinstance(cause, SessionManagerError) else "Error"
            _fail(_cli_words(exc.format_message()), exc.exit_code, as_json=as_json, kind=kind)
        except click.Abort:
            _fail("Aborted; nothing more was done.", FAILURE, as_json=as_json, kind="Aborted")
        except BrokenPipeError:  # (the same, when it happens outside a command's invoke)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(
    name="memlane", cls=MemlaneGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--db",
    default=DEFAULT_DB,
    show_default=True,
    envvar=["MEMLANE_DB", "ASM_DB"],  # ASM_*: the names before 0.2.0
    show_envvar=True,
    metavar="PATH|URL",
    help="The store: a SQLite file, sqlite:///path.db or postgresql://user@host/db "
    "(docs/backends.md).",
)
@click.option(
    "--index",
    envvar=["MEMLANE_INDEX", "ASM_INDEX"],  # ASM_*: the names before 0.2.0
    show_envvar=True,
    metavar="URL",
    help="Where the vectors live when not in the store itself: chroma:///dir or "
    "chroma+http://host:port.",
)
@click.option(
    "--agent",
    envvar=["MEMLANE_AGENT", "ASM_AGENT"],  # ASM_*: the names before 0.2.0
    show_envvar=True,
    metavar="AGENT",
    help="Restrict commands to one agent's sessions (see each command).",
)
@click.option(
    "--embedder",
    type=click.Choice(EMBEDDER_CHOICES, case_sensitive=False),
    default="auto",
    show_default=True,
    envvar="MEMLANE_EMBEDDER",
    show_envvar=True,
    help="What embeds queries for search and restore: auto (the embedder the store's vectors "
    "were made with, when it is minilm or hash; else minilm), minilm (all-MiniLM-L6-v2), or "
    "hash (fast, for tests).",
)
@click.option("--debug", is_flag=True, help="On errors, print the full traceback too.")
@click.version_option(package_name="memlane", prog_name="memlane")
@click.pass_context
def cli(
    ctx: click.Context,
    db: str,
    index: str | None,
    agent: str | None,
    embedder: str,
    debug: bool,
) -> None:
    """memlane: look into, search, restore and maintain memlane databases.

    Every command reads or changes one store (--db: a SQLite file, or a PostgreSQL URL;
    --index for vectors kept in Chroma). Read commands print tables
    for people and JSON with --json; commands that delete ask first unless --yes.
    Start with `memlane demo`, then `memlane sessions`.

    Exit status: 0 when done (also when nothing matched, or you declined to delete), 1
    when the command failed, 2 for a usage error.
    """
    ctx.obj = Env(
        db=db,
        agent=agent,
        index=index,
        debug=debug,
        out=make_console(stderr=False),
        err=make_console(stderr=True),
        embedder_choice=embedder,
    )


def main() -> None:
    """Entry point of the ``memlane`` script and of ``python -m memlane``."""
    cli.main(prog_name="memlane")
