"""``memlane facts`` and ``memlane ingest``: an agent's user memory and knowledge documents."""

from __future__ import annotations

from typing import Any

import click

from ..core.clock import format_time
from ..memory import Fact
from ._app import AGE, Env, agent_option, cli, db_option, emit_json, json_option
from ._render import table_of


def _agent(env: Env, command: str) -> str:
    if env.agent is None:
        raise click.UsageError(
            f"memlane {command} needs --agent AGENT (or MEMLANE_AGENT): "
            "the agent whose memory it uses."
        )
    return env.agent


def fact_to_dict(fact: Fact) -> dict[str, Any]:
    """A fact as a JSON-able dict with stable field names."""
    return {
        "id": fact.id,
        "user_id": fact.user_id,
        "text": fact.text,
        "kind": fact.kind,
        "key": fact.key,
        "status": fact.status,
        "valid_from": format_time(fact.valid_from),
        "valid_until": None if fact.valid_until is None else format_time(fact.valid_until),
        "recorded_at": format_time(fact.recorded_at),
        "seen": fact.seen,
        "source": fact.source,
        "importance": fact.importance,
        "superseded_by": fact.superseded_by,
        "retracted_reason": fact.retracted_reason,
        "metadata": fact.metadata,
    }


@cli.command()
@click.argument("user_id", metavar="USER")
@agent_option("The agent whose memory to read (required; or MEMLANE_AGENT).")
@click.option("--key", metavar="KEY", help="Only the values of this key.")
@click.option(
    "--as-of",
    "as_of",
    type=AGE,
    metavar="WHEN",
    help="What was true then: an age (30d) or an ISO-8601 time.",
)
@click.option(
    "--history", is_flag=True, help="Every fact ever remembered: superseded and retracted too."
)
@json_option
@db_option
@click.pass_obj
def facts(
    env: Env, user_id: str, key: str | None, as_of: str | None, history: bool, as_json: bool
) -> None:
    """Show what an agent knows about a user (remember() / the MCP remember tool).

    By default the current facts; --as-of what was true at a time; --history everything,
    with each fact's status. Keyed facts show their key.

    \b
    memlane facts u1 --agent assistant
    memlane facts u1 --agent assistant --key city --history --json
    """
    mgr = env.manager(env.the_agent("facts"), read_only=True)
    found = mgr.fact_history(user_id, key) if history else mgr.facts(user_id, key, as_of=as_of)
    if as_json:
        emit_json([fact_to_dict(fact) for fact in found])
        return
    if not found:
        env.out.print(f"Agent {env.agent} knows nothing about user {user_id} here.")
        return
    table = table_of("key", "fact", "kind", "since", "status", "seen", "id")
    for fact in found:
        table.add_row(
            fact.key or "",
            fact.text,
            fact.kind,
            fact.valid_from.strftime("%Y-%m-%d"),
            fact.status,
            str(fact.seen),
            fact.id,
        )
    env.out.print(table)


@cli.command()
@click.argument("file", metavar="FILE")
@agent_option("The agent whose knowledge it joins (required; or MEMLANE_AGENT).")
@click.option("--name", metavar="NAME", help="The document's name (default: its absolute path).")
@click.option("--pool", metavar="POOL", help="Share it through this pool.")
@click.option("--user", metavar="USER", help="The user it came from: erasing them deletes it too.")
@db_option
@click.pass_obj
def ingest(env: Env, file: str, name: str | None, pool: str | None, user: str | None) -> None:
    """Add a UTF-8 document (Markdown or text) to an agent's knowledge.

    It is cut into chunks the embedder reads whole (headings kept); ingesting the same
    document again adds only what changed. Search it with --kind knowledge.

    \b
    memlane ingest docs/runbook.md --agent assistant
    memlane search "how often do we rotate keys?" --kind knowledge
    """
    mgr = env.manager(_agent(env, "ingest"))
    result = mgr.ingest(file, name=name, pool=pool, user_id=user)
    env.out.print(
        f"Document {result.name} (id {result.document_id}), version {result.version}: "
        f"{result.added:,} chunk(s) added, {result.unchanged:,} unchanged, "
        f"{result.removed:,} removed."
    )
    env.embed_backlog()  # now, with a progress bar, rather than in the next search


@cli.command()
@click.argument("session_id", metavar="SESSION")
@agent_option("The agent whose session it is (required when the store holds several).")
@click.option(
    "--dry-run", is_flag=True, help="Show what would be written; write nothing (no watermark)."
)
@click.option(
    "--llm",
    "llm_url",
    metavar="URL",
    help="An OpenAI-compatible API's base URL (http://host:port/v1) instead of the rules.",
)
@click.option("--model", metavar="MODEL", help="The model to ask, with --llm.")
@json_option
@db_option
@click.pass_obj
def extract(
    env: Env,
    session_id: str,
    dry_run: bool,
    llm_url: str | None,
    model: str | None,
    as_json: bool,
) -> None:
    """Form memory from a session's new messages: facts about its user, entities and tags.

    Reads the messages after the session's watermark (all of them the first time), with
    the offline rule extractor unless --llm names a chat endpoint. Facts go through
    remember()'s rules (an extracted fact never overrides one a program wrote); entities
    and tags become the messages' memlane_extracted metadata. --dry-run only shows it.

    \b
    memlane extract 01J9... --agent assistant --dry-run
    memlane extract 01J9... --agent assistant --llm http://localhost:11434/v1 --model qwen2.5
    """
    from ..extraction import LLMExtractor

    extractor: Any = "rules"
    if llm_url is not None:
        extractor = LLMExtractor(llm_url, model=model)
    elif model is not None:
        raise click.UsageError("--model names the model of --llm; give --llm URL too.")
    mgr = env.manager(env.the_agent("extract"), extractor=extractor)
    report = mgr.extract(session_id, dry_run=dry_run)
    if as_json:
        emit_json(
            {
                "dry_run": report.dry_run,
                "batches": report.batches,
                "messages": report.messages,
                "facts": [
                    {
                        "text": f.text,
                        "key": f.key,
                        "kind": f.kind,
                        "status": f.status,
                        "note": f.note,
                        "sources": list(f.sources),
                        "fact_id": f.fact_id,
                    }
                    for f in report.facts
                ],
                "annotated": report.annotated,
                "entities": {k: list(v) for k, v in report.entities.items()},
                "failed": dict(report.failed),
                "tokens": report.tokens,
            }
        )
        return
    verb = "would write" if report.dry_run else "wrote"
    env.out.print(
        f"{report.messages:,} new message(s) in {report.batches:,} batch(es); "
        f"{len(report.facts):,} fact(s), {report.annotated:,} message(s) with entities or tags "
        f"({verb})."
    )
    if report.facts:
        table = table_of("key", "fact", "kind", "status", "note")
        for fact in report.facts:
            table.add_row(fact.key or "", fact.text, fact.kind, fact.status, fact.note or "")
        env.out.print(table)
    for session, why in report.failed.items():
        env.out.print(f"[red]Failed[/red] for session {session}: {why} (nothing written).")
