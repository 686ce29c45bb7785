"""docs/cli.md is generated from the commands' help; it must be complete and current."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from memlane.cli import cli
from memlane.cli._app import COMMAND_ORDER
from memlane.cli._docs import render

DOCS = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
ISSUE_COMMANDS = {
    "mcp",
    "ui",  # issue 32
    "sessions",
    "show",
    "search",
    "restore",
    "stats",
    "export",
    "export-md",
    "facts",
    "extract",  # issue 33: memory formed from a session's messages
    "ingest",
    "import",
    "reindex",
    "delete",
    "prune",
    "demo",
    "migrate",  # issue 5: between any two backends
    "erase-user",  # issue 14
    "retention",
    "health",
    "pool",  # issue 14: who may read and write a shared pool
    "agent-role",  # issue 14: PostgreSQL row-level security, one role per agent
}


def commands() -> list[tuple[str, click.Command]]:
    return sorted(cli.commands.items())


def test_every_command_of_the_issue_exists() -> None:
    assert set(cli.commands) == ISSUE_COMMANDS == set(COMMAND_ORDER)


@pytest.mark.parametrize(("name", "command"), commands())
def test_every_command_and_option_has_help(name: str, command: click.Command) -> None:
    assert command.help and command.help.strip(), f"`memlane {name}` has no help text"
    assert command.short_help or command.help.split(".")[0], name
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            assert param.help, f"`memlane {name} {param.opts[0]}` has no help text"


def test_global_options_have_help() -> None:
    for param in cli.params:
        if isinstance(param, click.Option):
            assert param.help, param.opts


def test_read_commands_take_json() -> None:
    for name in ("sessions", "show", "search", "restore", "stats"):
        assert "as_json" in {p.name for p in cli.commands[name].params}, name


def test_docs_cover_every_command() -> None:
    text = DOCS.read_text(encoding="utf-8")
    headings = re.findall(r"^### `memlane ([\w-]+)`$", text, flags=re.MULTILINE)
    assert headings == [name for name in COMMAND_ORDER], headings
    assert "MEMLANE_EMBEDDER" in text  # the testing aid is documented here, not in --help


def test_docs_are_current() -> None:
    assert DOCS.read_text(encoding="utf-8") == render(), (
        "docs/cli.md is out of date: run `make docs` (scripts/gen_cli_docs.py)."
    )


def test_docs_state_the_exit_statuses() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## Exit status") : text.index("## Commands")]
    for status in ("`0`", "`1`", "`2`"):
        assert status in section, status
    assert "--yes" in section and "declin" in section
