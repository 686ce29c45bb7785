"""``memlane demo``: an agent records its work; a fresh process gets it back.

The story a newcomer should take away in one read: every event is durable the moment it is
recorded; another process restores the session within a small token budget (a 22 kB tool
output summarised into valid JSON, the open step and the decision kept); and semantic
search finds "did we turn off 2FA anywhere?" in a note that shares none of those words.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.padding import Padding
from rich.text import Text

from ..manager import SessionManager
from ..store import describe_url
from ._app import Env, cli, db_option, embedder_from_env
from ._render import human_size, shorten, wrap_line

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
    for kind, text in lines:  # cut to the width, so that no line wraps
        env.out.print(Text.assemble(f"   {kind:<12}", shorten(text, max(30, env.out.width - 16))))
    return session.id, len(mgr.mgr.events(session.id))


#: The quote mark before each line a fresh process printed.
GUTTER = "   │ "


def _fresh_process(env: Env, target: str, *args: str) -> str:
    """Run ``memlane --db TARGET ARGS`` in a new Python process, show the command and exactly
    what it prints (stdout, then stderr), quoted; return its stdout. The output is laid out
    for the width inside the quote (COLUMNS), and longer lines wrap inside it."""
    # A password in a PostgreSQL URL is shown as ***, as in every message of ours.
    shown = shlex.join(["memlane", "--db", describe_url(target), *args])
    env.out.print(f"   $ {shown}", style="bold", soft_wrap=True)  # unwrapped: copy-pasteable
    inner = max(40, env.out.width - len(GUTTER))
    child_env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    child_env["COLUMNS"] = str(inner)
    command = [sys.executable, "-m", "memlane", "--db", target, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=child_env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise click.ClickException(f"The fresh process failed: {last}")
    _quote(env, done.stdout, inner)
    _quote(env, done.stderr, inner, style="dim")
    return done.stdout


def _quote(env: Env, output: str, width: int, style: str = "") -> None:
    """``output`` line by line behind the gutter, each wrapped to ``width`` so that every
    piece of a long line keeps the gutter too."""
    for line in output.splitlines():
        for piece in wrap_line(line, width):  # never inside a token (ids, numbers, JSON)
            gutter = GUTTER if piece else GUTTER.rstrip()  # no trailing space on a blank line
            env.out.print(Text.assemble((gutter, "dim"), (piece, style)), soft_wrap=True)


def _say(env: Env, text: str, style: str = "") -> None:
    """A paragraph of the story, indented like the steps, wrapped inside that indent."""
    env.out.print(Padding(Text(text, style=style), (0, 0, 0, 3), expand=False))


def _first_hit(search_output: str) -> str:
    """The two lines of hit 1 in `memlane search` output: where it is, then what it says."""
    lines = search_output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("1. ")), len(lines))
    return "\n".join(lines[start : start + 2])


def _demo_target(env: Env) -> tuple[str, bool]:
    """The store the demo writes into: the one --db (or MEMLANE_DB) names, else a new
    temporary folder kept for you to explore. True when it is a store the user named."""
    ctx = click.get_current_context()
    sources = (ctx.find_root().get_parameter_source("db"), ctx.get_parameter_source("db"))
    if any(source not in (None, ParameterSource.DEFAULT) for source in sources):
        return env.db, True
    return str(Path(tempfile.mkdtemp(prefix="memlane-demo-")) / "sessions.db"), False


@cli.command()
@db_option
@click.pass_obj
def demo(env: Env) -> None:
    """Run a short scripted agent session, then restore it in a fresh process.

    Process A records a research task (tool calls, a 22 kB JSON tool output, an error
    that gets resolved, a decision, a pending step). Process B, started afresh, restores
    the session within 600 tokens and asks "did we turn off 2FA anywhere?" semantically;
    the demo shows each command it runs and exactly what it prints. Runs offline with
    the real model. Writes into the store --db (or MEMLANE_DB) names, if given; else into a
    new temporary folder, kept for you to explore.
    """
    started = time.perf_counter()
    target, named = _demo_target(env)
    out = env.out
    with SessionManager(AGENT, url=target, embedder=embedder_from_env()) as mgr:
        out.print(Text("memlane demo: an agent's memory outlives its process", style="bold"))
        out.print(
            f"Database {describe_url(target)} · embedder {mgr.embedder_name} (CPU, offline)\n",
            style="dim",
        )
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
    _say(
        env,
        f"{count} events, each durable in the store as soon as its call returned "
        f"(median {statistics.median(timed.seconds) * 1000:.1f}ms per call). The embeddings were "
        f"computed by a background thread (finished {embedded:.1f}s later). Process A "
        "closes its SessionManager; from here on, only the store remembers.",
    )
    out.print()

    out.print(
        Text(
            f"2. Process B, a new Python process, restores the session within {BUDGET} tokens.",
            style="bold cyan",
        )
    )
    _fresh_process(env, target, "restore", session_id, "--max-tokens", str(BUDGET))
    _say(
        env,
        "The goal and the open step are pinned, the decision and errors come next, then "
        "the latest events; a JSON output too big for the budget is summarised into JSON "
        "that still parses. `--explain` lists every event with what happened to it and why.",
    )
    out.print()

    out.print(
        Text(
            f'3. Process B asks "{QUESTION}" — the answer shares none of those words.',
            style="bold cyan",
        )
    )
    search = (QUESTION, "--mode", "semantic", "--k", "3")
    printed = _fresh_process(env, target, "search", *search)
    if "two-factor" in _first_hit(printed):
        _say(
            env,
            'Semantic search matched "turn off 2FA" with "Disabled two-factor '
            'authentication": same meaning, no shared keyword.',
        )
    out.print()
    out.print(
        Text(f"Done in {time.perf_counter() - started:.1f}s. Explore the database:", style="bold")
    )
    explore = [
        ["sessions"],
        ["show", session_id],
        ["restore", session_id, "--max-tokens", "300", "--explain"],
        ["search", QUESTION],
    ]
    if named:  # the user's own store: say how to take the demo out again
        explore.append(["delete", session_id])
    for args in explore:
        out.print(
            f"   {shlex.join(['memlane', '--db', describe_url(target), *args])}", soft_wrap=True
        )
