"""Commands that move data: export, export-md, import, migrate, reindex."""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any

import click

from ..admin import ImportResult, StoreAdmin, json_line
from ..store import describe_url, sqlite_path, store_identity
from ._app import Env, agent_option, cli, db_option, embedder_named, open_admin
from ._console import progress_bar

# -- export -------------------------------------------------------------------------------


@cli.command()
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="Write to FILE instead of stdout (replaced if it exists); `-` is stdout.",
)
@agent_option("Export only this agent's sessions.")
@click.option("--session", "session_id", metavar="SESSION", help="Export only this session.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "yaml"]),
    default="jsonl",
    show_default=True,
    help="JSON Lines, or YAML (one document per record); `memlane import` reads both.",
)
@db_option
@click.pass_obj
def export(env: Env, output: str | None, session_id: str | None, fmt: str) -> None:
    """Export sessions and their events as JSON Lines (or YAML), losslessly.

    The first line is a header; then, oldest session first, each session followed by its
    events. Ids, times (ISO-8601 UTC, microseconds), payloads, importance, tags,
    metadata, statuses, token and recall counts and pools are all kept; vectors are not
    (`memlane import` queues the events for embedding). The same database always exports
    the same bytes.

    \b
    memlane export -o backup.jsonl
    memlane export --agent researcher | gzip > researcher.jsonl.gz
    memlane export --format yaml -o backup.yaml
    """
    if output == "-":  # the usual spelling of stdout
        output = None
    records = env.admin().export(agent=env.agent, session=session_id)
    encode: Callable[[Mapping[str, Any]], bytes]
    if fmt == "yaml":
        from ..transfer.yaml_format import yaml_document

        def encode(record: Mapping[str, Any]) -> bytes:
            return yaml_document(record).encode()
    else:

        def encode(record: Mapping[str, Any]) -> bytes:
            return json_line(record).encode() + b"\n"

    header = next(records)  # checks --session before any file is touched
    sessions = events = 0
    # Bytes, not text: UTF-8 and "\n" whatever the platform or locale, so the same store
    # always gives the same file. closing(): end the read snapshot even if writing fails.
    with closing(records), open(output, "wb") if output else _stdout() as out:
        out.write(encode(header))
        for record in records:
            out.write(encode(record))
            sessions += record["type"] == "session"
            events += record["type"] == "event"
    target = output or "stdout"
    env.note(f"Exported {sessions:,} session(s) and {events:,} event(s) to {target}.")


@cli.command(name="export-md")
@click.argument("directory", metavar="DIR")
@agent_option(
    "The agent whose memory to write (or MEMLANE_AGENT; needed when the store holds several)."
)
@click.option("--user", "user_id", metavar="USER", help="Only this user's sessions and facts.")
@db_option
@click.pass_obj
def export_md(env: Env, directory: str, user_id: str | None) -> None:
    """Write an agent's memory as Markdown files into DIR.

    MEMORY.md holds what the agent knows now: the current facts about each user (by key)
    and the pinned decisions, each with its date and a stable anchor. memory/YYYY-MM-DD.md
    holds each UTC day's goals, decisions, steps, errors and summaries, by session. The
    files say they are generated; unchanged files are left byte for byte as they were.

    \b
    memlane export-md ./memory --agent assistant
    memlane export-md ./memory --agent assistant --user u1
    """
    agent = env.the_agent("export-md")
    result = env.manager(agent, read_only=True).export_markdown(directory, user_id=user_id)
    env.out.print(
        f"Wrote {len(result.written):,} file(s) to {result.directory}; "
        f"{len(result.unchanged):,} unchanged, {len(result.removed):,} removed."
    )


@contextmanager
def _stdout() -> Iterator[IO[bytes]]:
    sys.stdout.flush()
    try:
        yield sys.stdout.buffer
    finally:
        sys.stdout.buffer.flush()


# -- import -------------------------------------------------------------------------------


def _count_lines(path: str) -> int | None:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except OSError:
        return None


@cli.command(name="import")
@click.argument("file", metavar="FILE")
@click.option(
    "--dry-run", is_flag=True, help="Check every record and count what would change; write nothing."
)
@click.option(
    "--skip-bad",
    is_flag=True,
    help="Report bad lines and import the rest (default: stop at the first).",
)
@db_option
@click.pass_obj
def import_(env: Env, file: str, dry_run: bool, skip_bad: bool) -> None:
    """Import a file written by `memlane export`, JSON Lines or YAML (- reads stdin).

    Sessions and events keep their ids and times; a record whose id is already in the
    database is skipped, so importing the same file twice changes nothing. The database
    is created if missing. A bad line stops the import with its line number (lines before
    it stay imported; importing again skips them) unless --skip-bad.

    \b
    memlane export --db old.db | memlane import --db new.db -
    """
    total = None if file == "-" else _count_lines(file)
    verb = "Checking" if dry_run else "Importing"
    with open(file, "rb") if file != "-" else nullcontext(sys.stdin.buffer) as raw:
        # (peekable, to tell YAML from JSON Lines by the first bytes)
        stream = raw if hasattr(raw, "peek") else io.BufferedReader(raw)  # type: ignore[type-var]
        if _is_yaml(stream):
            total = None  # (records are not lines there)
        path = sqlite_path(env.db)
        if dry_run and path is not None and Path(path).parent.is_dir() and not Path(path).exists():
            # Check against an empty store in memory: a dry run creates no file either.
            admin = StoreAdmin(":memory:")
            click.get_current_context().call_on_close(admin.close)
        else:
            admin = env.admin(must_exist=False)
        with progress_bar(env.err, verb, total) as bar:
            result = admin.import_records(
                _records(stream),
                dry_run=dry_run,
                skip_bad=skip_bad,
                progress=lambda done, _: bar.update(bar.task_ids[0], completed=done),
            )
    _report_import(env, result)


def _is_yaml(stream: IO[bytes]) -> bool:
    """Whether an export is YAML (``memlane export --format yaml``: it starts with ``---``)."""
    peek = getattr(stream, "peek", None)
    head = peek(16)[:16] if peek is not None else b""
    return bool(head.lstrip().startswith((b"---", b"%YAML")))


def _records(stream: IO[bytes]) -> Iterator[Any]:
    """The records of an export: YAML documents, or lines of JSON."""
    if _is_yaml(stream):
        from ..transfer.yaml_format import yaml_records

        return yaml_records(stream)
    return _lines(stream)


def _lines(stream: IO[bytes]) -> Iterator[str]:
    # surrogateescape: a line that is not UTF-8 becomes a bad record with its line number
    # (its text holds lone surrogates, which validation rejects), not a crash of the run.
    for line in stream:
        yield line.decode("utf-8", "surrogateescape")


def _report_import(env: Env, result: ImportResult) -> None:
    would = "Would import" if result.dry_run else "Imported"
    env.out.print(
        f"{would} {result.sessions_inserted:,} session(s) and {result.events_inserted:,} "
        f"event(s); {result.skipped:,} record(s) already in the database were skipped."
    )
    if result.grants_inserted or result.grants_skipped:
        env.note(
            f"Pool grants: {result.grants_inserted:,} "
            f"{'to import' if result.dry_run else 'imported'}, {result.grants_skipped:,} "
            "skipped (the agent already had a grant there, or the pool another owner)."
        )
    if result.events_expired:
        env.note(f"{result.events_expired:,} event(s) had expired (expires_at): not imported.")
    if result.events_inserted and not result.dry_run:
        env.note(
            f"{result.events_inserted:,} new event(s) wait for embedding: the next search (or "
            "any SessionManager on this database) embeds them."
        )
    if result.bad:
        env.err.print(f"Skipped {len(result.bad):,} bad line(s):", style="yellow")
        for bad in result.bad[:20]:
            env.err.print(f"  line {bad.line}: {bad.message}")
        if len(result.bad) > 20:
            env.err.print(f"  ... and {len(result.bad) - 20:,} more")
    if result.dry_run:
        env.note("Dry run: nothing was written.")


# -- migrate ------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--from", "source", required=True, metavar="URL", help="The store to copy from (path or URL)."
)
@click.option(
    "--to", "target", required=True, metavar="URL", help="The store to copy into (created if new)."
)
@click.option("--from-index", metavar="URL", help="The source's Chroma index, if it has one.")
@click.option("--to-index", metavar="URL", help="Keep the target's vectors in Chroma (URL).")
@click.option(
    "--embed",
    is_flag=True,
    help="Also embed the copied events in the target now (default: its next user does).",
)
@click.pass_obj
def migrate(
    env: Env,
    source: str,
    target: str,
    from_index: str | None,
    to_index: str | None,
    embed: bool,
) -> None:
    """Copy every session and event from one store to another, losslessly.

    Works between any two backends (SQLite, PostgreSQL, either with a Chroma index),
    streaming, with a progress bar. Interrupted? Run the same command again: what is
    already in the target is skipped, and the copy carries on. Vectors are not copied: the
    target embeds the events (at once with --embed, else in the background of its next
    SessionManager). --from and --to must be two stores, however they are spelt.

    \b
    memlane migrate --from sessions.db --to postgresql://app@db/agents
    memlane migrate --from postgresql://app@db/agents --to sqlite:///backup.db
    """
    _refuse_the_same_store(source, target)
    old = open_admin(source, from_index, option="--from")
    # --embedder auto: the target embeds with the source's embedder (when known here)
    embedder = embedder_named(env.embedder_choice, old.stored_embedder())
    new = open_admin(target, to_index, must_exist=False, option="--to", embedder=embedder)
    started = time.perf_counter()
    with progress_bar(env.err, "Copying", None) as bar:
        task = bar.task_ids[0]
        result = old.copy_to(
            new, progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    env.out.print(
        f"Copied {result.sessions_inserted:,} session(s) and {result.events_inserted:,} "
        f"event(s) in {time.perf_counter() - started:.1f} s; {result.skipped:,} record(s) "
        "already in the target were skipped."
    )
    if embed:
        with progress_bar(env.err, f"Embedding with {new.embedder.name}", None) as bar:
            task = bar.task_ids[0]
            count = new.embed_pending(
                progress=lambda done, total: bar.update(task, completed=done, total=total)
            )
        env.out.print(f"Embedded {count:,} event(s) in the target.")
    elif result.events_inserted:
        env.note(
            f"{result.events_inserted:,} event(s) wait for embedding in the target: its next "
            "SessionManager (or `memlane migrate ... --embed`) embeds them."
        )


def _refuse_the_same_store(source: str, target: str) -> None:
    """A usage error when --from and --to name one store, however each is spelt: the copy
    would skip every record as already there and "succeed" having done nothing."""
    same = store_identity(source)
    if same is None or same != store_identity(target):
        return
    spelt = f"{describe_url(source)!r} and {describe_url(target)!r} both name {same}"
    if source == target:
        spelt = f"both are {describe_url(source)!r}"
    raise click.UsageError(
        f"--from and --to name the same store ({spelt}); migrating a store into itself "
        "copies nothing. Give --to another path or URL."
    )


# -- reindex ------------------------------------------------------------------------------


@cli.command()
@db_option
@click.pass_obj
def reindex(env: Env) -> None:
    """Rebuild every projection from the log: re-embed all events and rebuild the
    keyword index.

    Needed after changing the embedder (the error that says so names this command);
    safe at any time. Shows a progress bar with an ETA.
    """
    admin = env.admin()
    started = time.perf_counter()
    name = admin.embedder.name
    with progress_bar(env.err, f"Embedding with {name}", None) as bar:
        task = bar.task_ids[0]
        count = admin.reindex(
            progress=lambda done, total: bar.update(task, completed=done, total=total)
        )
    env.out.print(
        f"Re-embedded {count:,} event(s) with {name} and rebuilt the keyword index in "
        f"{time.perf_counter() - started:.1f} s."
    )
