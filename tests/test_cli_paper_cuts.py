"""The `asm` paper cuts a new user reported (issue 10, items 9 to 15), one test each.

Through click's CliRunner on real SQLite files, with the hash embedder, like test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli import Store, asm, build, cli_env, ok  # noqa: F401  (cli_env: autouse)


@pytest.fixture
def store(db_path: Path) -> Store:
    return build(db_path)


# -- 9: piped output is not padded --------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ("show", "{audit}"),
        ("show", "{audit}", "--full"),
        ("sessions",),
        ("search", "two-factor staging"),
        ("stats",),
        ("restore", "{audit}", "--max-tokens", "300", "--explain"),
    ],
)
def test_piped_output_has_no_trailing_spaces(store: Store, command: tuple[str, ...]) -> None:
    args = [arg.format(audit=store.audit) for arg in command]
    out = ok(asm(store.db, *args)).stdout
    padded = [line for line in out.splitlines() if line != line.rstrip()]
    assert not padded, f"{len(padded)} of {len(out.splitlines())} lines padded: {padded[:3]}"
