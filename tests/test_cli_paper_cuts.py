"""The `memlane` paper cuts a new user reported (issue 10, items 9 to 15), one test each.

Through click's CliRunner on real SQLite files, with the hash embedder, like test_cli.py.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memlane import SessionManager
from memlane.cli import cli
from memlane.testing import HashEmbedder

from .test_cli import (  # noqa: F401  (cli_env: autouse)
    Store,
    _age,
    as_json,
    asm,
    build,
    cli_env,
    count_rows,
    fails,
    ok,
)


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


# -- 10: exit statuses --------------------------------------------------------------------


def test_a_bad_age_is_a_usage_error(store: Store) -> None:
    line = fails(asm(store.db, "prune", "--older-than", "90"), "--older-than", "'90d'", code=2)
    assert "memlane prune --help" in line
    fails(asm(store.db, "sessions", "--since", "last tuesday"), "--since", "'90d'", code=2)


def test_declining_to_delete_is_not_an_error(store: Store) -> None:
    declined = ok(asm(store.db, "delete", store.other, input="n\n"))
    assert "Nothing deleted." in declined.stdout and "Error" not in declined.output
    _age(store.db, store.other, 100)
    declined = ok(asm(store.db, "prune", "--older-than", "90d", input="\n"))  # the default: no
    assert "Nothing deleted." in declined.stdout
    assert count_rows(store.db, "SELECT count(*) FROM sessions") == 2


def test_no_terminal_to_confirm_on_says_to_pass_yes(store: Store) -> None:
    fails(asm(store.db, "delete", store.other), "--yes", code=2)
    _age(store.db, store.other, 100)
    fails(asm(store.db, "prune", "--older-than", "90d"), "--yes", "--dry-run", code=2)
    assert count_rows(store.db, "SELECT count(*) FROM sessions") == 2


# -- 11: memlane migrate names the right store -----------------------------------------------


def test_migrate_refuses_the_same_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(store.db.parent)
    name = store.db.name
    for source, target in [
        (name, name),
        (name, str(store.db)),
        (f"sqlite:///{name}", f"./sub/../{name}"),
        (f"sqlite:///{name}", f"sqlite:///{store.db}"),
    ]:
        line = fails(asm(None, "migrate", "--from", source, "--to", target), "same store", code=2)
        assert "--from" in line and "--to" in line, line
    assert not (store.db.parent / "sub").exists()


def test_migrate_names_the_option_of_a_missing_store(tmp_path: Path) -> None:
    line = fails(
        asm(None, "migrate", "--from", str(tmp_path / "missing.db"), "--to", str(tmp_path / "b")),
        "missing.db",
        "does not exist",
        "--from",
    )
    assert "--db" not in line and "MEMLANE_DB" not in line


# -- 12: one wording for "not this agent's session" ---------------------------------------


def test_another_agents_session_is_one_message(store: Store) -> None:
    show = fails(asm(store.db, "show", store.audit, "--agent", "writer"), "belongs to")
    restore = fails(asm(store.db, "restore", store.audit, "--agent", "writer"))
    search = fails(asm(store.db, "search", "x", "--session", store.audit, "--agent", "writer"))
    assert show == restore == search
    assert f"'{store.audit}'" in show and "'writer'" in show and "'researcher'" in show


# -- 13: memlane show folds long contents by lines --------------------------------------------


def _traceback(frames: int = 8) -> str:
    lines = ["Traceback (most recent call last):"]
    for i in range(frames):
        lines += [f'  File "/app/step_{i}.py", line {i + 10}, in run', f"    step_{i}()"]
    return "\n".join([*lines, "RuntimeError: the scan timed out"])  # 18 lines


def test_show_folds_long_contents_by_lines(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("ops", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("Run the nightly scan")
        mgr.record_tool_output(session.id, _traceback(), tool="pytest")
        mgr.record_error(session.id, _traceback(), tags=["flaky"])
    out = ok(asm(db, "show", session.id)).stdout
    lines = out.splitlines()
    firsts = [line for line in lines if "Traceback (most recent call last):" in line]
    assert len(firsts) == 2
    assert "(tool: pytest)" in firsts[0]  # the labels stay on the first line ...
    assert "[unresolved]" in firsts[1] and "#flaky" in firsts[1]
    assert sum('File "/app/' in line for line in lines) <= 2 * 3  # ... and few lines follow
    assert sum("RuntimeError" in line for line in lines) == 0
    folds = [line for line in lines if "more lines" in line]
    assert len(folds) == 2 and "14 more lines" in folds[0] and "--full" in folds[0], folds
    full = ok(asm(db, "show", session.id, "--full")).stdout
    assert sum("RuntimeError" in line for line in full.splitlines()) == 2
    assert "more lines" not in full


def test_show_still_folds_one_long_line(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("ops", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("Read the log")
        mgr.record_tool_output(session.id, "word " * 400, tool="cat")
    out = ok(asm(db, "show", session.id)).stdout
    first = next(line for line in out.splitlines() if "word word" in line)
    assert "(tool: cat)" in first and first.count("word") < 100
    assert "2.0 kB in all; --full shows it all" in out


# -- 14: memlane search says what its scores are ---------------------------------------------


@pytest.mark.parametrize(
    ("mode", "label", "scale"),
    [
        ("hybrid", "fused (RRF)", "rrf"),
        ("semantic", "cosine", "cosine"),
        ("keyword", "BM25", "bm25"),
    ],
)
def test_search_labels_the_score_scale(store: Store, mode: str, label: str, scale: str) -> None:
    out = ok(asm(store.db, "search", "staging accounts", "--mode", mode)).stdout
    header, first = out.splitlines()[:2]
    assert label in header and first.startswith("1. "), out
    hits = as_json(asm(store.db, "search", "staging accounts", "--mode", mode, "--json"))
    assert hits and all(hit["score_scale"] == scale for hit in hits)
    named = {"hybrid": {"keyword", "semantic"}, "semantic": {"semantic"}, "keyword": {"keyword"}}
    assert all(hit["ranks"] and set(hit["ranks"]) <= named[mode] for hit in hits)
    assert all(isinstance(hit["score"], float) and hit["rank"] >= 1 for hit in hits)


# -- 15: memlane demo shows what its commands print, and writes where --db says ---------------


def _quoted_after(lines: list[str], command: str) -> tuple[list[str], list[str]]:
    """The `$ memlane ...` line that contains ``command``, and the quoted lines under it."""
    start = next(i for i, line in enumerate(lines) if line.startswith("   $ ") and command in line)
    quoted = []
    for line in lines[start + 1 :]:
        if not line.startswith("   │"):
            break
        quoted.append(line[len("   │ ") :])
    return lines[start].split(), quoted


def _same_text(quoted: list[str], printed: Result) -> bool:
    """Whether the quote is what the command prints, but for where lines wrap."""
    return "".join("".join(quoted).split()) == "".join((printed.stdout + printed.stderr).split())


def test_demo_quotes_exactly_what_it_runs_into_the_named_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    db = tmp_path / "mine.db"
    result = CliRunner(env={"COLUMNS": "100"}).invoke(cli, ["--db", str(db), "demo"])
    out = ok(result).stdout
    assert not list(tmp_path.glob("asm-demo-*")), "wrote to a temporary folder, not --db"
    (session,) = as_json(asm(db, "sessions", "--json"))
    assert session["events"] == 8
    assert "--json" not in out
    lines = out.splitlines()
    commands = ("   $ ", "   memlane --db ")  # left unwrapped, to copy and paste
    assert all(len(line) <= 100 for line in lines if not line.startswith(commands))
    inside = CliRunner(env={"COLUMNS": str(100 - len("   │ "))})  # the width in the quote
    argv, quoted = _quoted_after(lines, " restore ")
    assert argv[1:4] == ["memlane", "--db", str(db)] and len(quoted) > 20
    assert _same_text(quoted, inside.invoke(cli, argv[2:]))
    assert any("payload:" in line for line in quoted)  # the long JSON line wrapped inside
    _, quoted = _quoted_after(lines, " search ")
    search = ["search", "did we turn off 2FA anywhere?", "--mode", "semantic", "--k", "3"]
    # (a header, then two lines a hit and a third for the long tool output's passage)
    assert len(quoted) == 10 and _same_text(quoted, inside.invoke(cli, ["--db", str(db), *search]))
    assert f"memlane --db {db} delete {session['id']}" in out  # how to take it out again
