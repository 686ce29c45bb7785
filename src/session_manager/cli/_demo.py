"""``asm demo``: an agent records its work; a fresh process gets it back.

The story a newcomer should take away in one read: every event is durable the moment it is
recorded; another process restores the session within a small token budget (a 22 kB tool
output summarised into valid JSON, the open step and the decision kept); and semantic
search finds "did we turn off 2FA anywhere?" in a note that shares none of those words.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from ..manager import SessionManager
from ._app import Env, cli, embedder_from_env
from ._render import human_size, shorten

AGENT = "researcher"
BUDGET = 600
QUESTION = "did we turn off 2FA anywhere?"


class _Timed:
    """Wraps the manager so the demo can report how long each recording call took."""

    def __init__(self, mgr: SessionManager) -> None:
        self.mgr = mgr
        self.seconds: list[float] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.mgr, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            tick = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.seconds.append(time.perf_counter() - tick)

        return timed


def _record(mgr: Any, env: Env) -> tuple[str, int]:
    """Process A's work; prints one line per event. Returns (session id, events)."""
    lines: list[tuple[str, str]] = []
    session = mgr.start_session(
        goal="Audit the staging environment before the release", user_id="alice"
    )
    lines.append(("goal", session.goal))
    mgr.record_step(
        session.id,
        step="listed staging accounts",
        tool="admin_api",
        result={"accounts": 14, "admins": 2},
    )
    lines.append(("step", 'listed staging accounts (tool admin_api) → {"accounts":14,"admins":2}'))
    audit = {
        "scan": "dependency audit",
        "packages": [
            {"name": f"pkg-{i}", "version": f"1.{i}.0", "advisories": []} for i in range(400)
        ],
    }
    mgr.record_tool_output(session.id, audit, tool="pip_audit")
    size = human_size(len(json.dumps(audit, separators=(",", ":")).encode()))
    lines.append(("tool_output", f"pip_audit: a {size} JSON report on 400 packages"))
    note = (
        "Disabled two-factor authentication for the test account qa-bot so the e2e suite "
        "can log in."
    )
    mgr.record_tool_output(session.id, note, tool="admin_api")
    lines.append(("tool_output", f"admin_api: {note}"))
    error = mgr.record_error(session.id, "login page returned HTTP 502 during the scan")
    lines.append(("error", error.content))
    mgr.record_step(session.id, step="re-ran the scan after the load balancer restart")
    mgr.resolve_error(error.id)
    lines.append(("step", "re-ran the scan after the load balancer restart → error resolved"))
    mgr.record_decision(session.id, text="review service accounts before human ones")
    lines.append(("decision", "review service accounts before human ones"))
    mgr.add_pending(session.id, "rotate the CI deploy key")
    lines.append(("pending", "rotate the CI deploy key (not done yet)"))
    for kind, text in lines:
        env.out.print(Text.assemble(f"   {kind:<12}", shorten(text, 96)))
    return session.id, len(mgr.mgr.events(session.id))


def _fresh_process(env: Env, db: Path, *args: str) -> Any:
    """Run ``asm --db DB ARGS --json`` in a new Python process; return its parsed output."""
    command = [sys.executable, "-m", "session_manager", "--db", str(db), *args, "--json"]
    shown = " ".join(
        [
            "asm",
            "--db",
            str(db),
            *(f'"{a}"' if " " in a else a for a in args),
            "--json",
        ]
    )
    env.out.print(f"   $ {shown}", style="bold", soft_wrap=True)  # unwrapped: copy-pasteable
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise click.ClickException(f"The fresh process failed: {last}")
    return json.loads(done.stdout)


def _explain(env: Env, restored: dict[str, Any]) -> None:
    report = restored["report"]
    sections = ", ".join(f"{name} {tokens}" for name, tokens in report["sections"].items())
    env.out.print(
        f"   {restored['token_count']} of {BUDGET} tokens, by section: {sections}.",
        style="bold",
    )
    counts = report["counts"]
    env.out.print(
        f"   {counts['included']} events in full, {counts['summarised']} summarised, "
        f"{counts['dropped']} dropped, of {report['total_events']}:"
    )
    for item in report["items"]:
        if item["action"] != "included":
            env.out.print(f"     {item['kind']} {item['action']}: {item['reason']}", style="dim")
    env.out.print(
        "   The goal and the open step are pinned, the decision and errors come next, then "
        "the latest events; a JSON output too big for the budget is summarised into JSON "
        "that still parses."
    )


@cli.command()
@click.pass_obj
def demo(env: Env) -> None:
    """Run a short scripted agent session, then restore it in a fresh process.

    Process A records a research task (tool calls, a 22 kB JSON tool output, an error
    that gets resolved, a decision, a pending step). Process B, started afresh, restores
    the session within 600 tokens and asks "did we turn off 2FA anywhere?" semantically.
    Runs offline with the real model; writes to a new temporary folder (never --db) and
    keeps it for you to explore.
    """
    started = time.perf_counter()
    db = Path(tempfile.mkdtemp(prefix="asm-demo-")) / "sessions.db"
    out = env.out
    with SessionManager(AGENT, db, embedder=embedder_from_env()) as mgr:
        out.print(Text("asm demo: an agent's memory outlives its process", style="bold"))
        out.print(f"Database {db} · embedder {mgr.embedder_name} (CPU, offline)\n", style="dim")
        out.print(
            Text(
                f'1. Process A: agent "{AGENT}" works on a task and records each event.',
                style="bold cyan",
            )
        )
        timed = _Timed(mgr)
        session_id, count = _record(timed, env)
        tick = time.perf_counter()
        mgr.flush()
        embedded = time.perf_counter() - tick
    out.print(
        f"   {count} events, each durable in SQLite as soon as its call returned "
        f"(median {statistics.median(timed.seconds) * 1000:.1f} ms per call). The embeddings were "
        f"computed by a background thread (finished {embedded:.1f} s later). Process A "
        "closes its SessionManager; from here on, only the SQLite file remembers.\n"
    )

    out.print(
        Text(
            f"2. Process B, a new Python process, restores the session within {BUDGET} tokens.",
            style="bold cyan",
        )
    )
    restored = _fresh_process(env, db, "restore", session_id, "--max-tokens", str(BUDGET))
    quoted = Table.grid()
    quoted.add_column(style="dim", no_wrap=True)
    quoted.add_column(overflow="fold")
    for line in restored["text"].splitlines():
        quoted.add_row("   │ ", line)  # wrapped lines stay inside the quote
    out.print(quoted)
    _explain(env, restored)
    out.print()

    out.print(
        Text(
            f'3. Process B asks "{QUESTION}" — the answer shares none of those words.',
            style="bold cyan",
        )
    )
    hits = _fresh_process(env, db, "search", QUESTION, "--mode", "semantic", "--k", "3")
    for hit in hits:
        out.print(
            f"   {hit['rank']}. cosine {hit['score']:.2f}  {hit['kind']:<12} "
            f"{shorten(hit['content'], 80)}"
        )
    if hits and "two-factor" in hits[0]["content"]:
        out.print(
            '   Semantic search matched "turn off 2FA" with "Disabled two-factor '
            'authentication": same meaning, no shared keyword.'
        )
    out.print()
    out.print(
        Text(f"Done in {time.perf_counter() - started:.1f} s. Explore the database:", style="bold")
    )
    for command in (
        "sessions",
        f"show {session_id}",
        f"restore {session_id} --max-tokens 300 --explain",
        f'search "{QUESTION}"',
    ):
        out.print(f"   asm --db {db} {command}", soft_wrap=True)
