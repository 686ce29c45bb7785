"""`memlane` as users run it: real processes (`python -m memlane`), real pipes."""

from __future__ import annotations

import json
import os
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env
from .test_cli import Store, build


def asm_env(**extra: str) -> dict[str, str]:
    env = child_env()
    env.update({"MEMLANE_EMBEDDER": "hash", **extra})
    for name in ("MEMLANE_DB", "MEMLANE_AGENT"):
        env.pop(name, None)
    return env


def asm(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "memlane", *args],
        capture_output=True,
        text=True,
        env=env or asm_env(),
        timeout=timeout,
    )


@pytest.fixture
def store(db_path: Path) -> Store:
    return build(db_path)


def test_export_pipe_import_round_trip(store: Store, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    export = subprocess.Popen(
        [PYTHON, "-m", "memlane", "--db", str(store.db), "export"],
        stdout=subprocess.PIPE,
        env=asm_env(),
    )
    imported = subprocess.run(
        [PYTHON, "-m", "memlane", "--db", str(fresh), "import", "-"],
        stdin=export.stdout,
        capture_output=True,
        text=True,
        env=asm_env(),
        timeout=120,
    )
    assert export.stdout is not None
    export.stdout.close()
    assert export.wait(timeout=120) == 0
    assert imported.returncode == 0, imported.stderr
    assert "Imported 2 session(s) and 11 event(s)" in imported.stdout
    first = asm("--db", str(store.db), "export")
    second = asm("--db", str(fresh), "export")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout and first.stdout.count("\n") == 15  # + the pool's grant


def test_restore_explain_json(store: Store) -> None:
    done = asm(
        "--db", str(store.db), "restore", store.audit, "--max-tokens", "250", "--explain", "--json"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["session_id"] == store.audit and data["token_count"] <= 250
    report = data["report"]
    assert report["budget"] == 250 and report["model"] == "gpt-4o"
    assert sum(report["counts"].values()) == len(report["items"]) == report["total_events"]
    assert {"event_id", "kind", "section", "action", "reason", "tokens", "passages"} == set(
        report["items"][0]
    )


def test_errors_are_one_line_without_traceback(store: Store, tmp_path: Path) -> None:
    done = asm("--db", str(store.db), "show", "01NOPE")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"Error: Session '01NOPE' does not exist in '{store.db}'. List sessions with "
        "`memlane sessions`."
    ]
    assert done.stdout == ""
    usage = asm("--db", str(store.db), "sessions", "--nope")
    assert usage.returncode == 2 and len(usage.stderr.strip().splitlines()) == 1


def test_export_into_a_closed_pipe_stops_quietly(store: Store) -> None:
    export = subprocess.Popen(
        [PYTHON, "-m", "memlane", "--db", str(store.db), "export"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=asm_env(),
    )
    assert export.stdout is not None and export.stderr is not None
    export.stdout.readline()
    export.stdout.close()
    _, stderr = export.communicate(timeout=120)
    assert "Traceback" not in stderr.decode() and "Exception" not in stderr.decode()


def test_asm_script_is_declared() -> None:
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("memlane") == "memlane.cli:main"


@pytest.mark.real_model
def test_demo_with_the_real_model(tmp_path: Path) -> None:
    env = child_env()
    env.pop("MEMLANE_EMBEDDER", None)
    env["TMPDIR"] = str(tmp_path)
    # (issue 29: < 30 s was asserted; it took 7 s, 19 s beside two busy loops. How fast the
    # demo is stays bench/speed_targets.py's; the timeout only catches a hang)
    done = asm("demo", env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "all-MiniLM-L6-v2" in out
    restored = out[out.index("2. Process B") : out.index("3. Process B")]
    for text in ("## Goal", "rotate the CI deploy key", "[summarised]", "review service accounts"):
        assert text in restored, text
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("   │ 1. "))
    assert "cosine" in lines[first - 1]  # the header names the scale of the scores
    assert "Disabled two-factor" in lines[first + 1], lines[first : first + 2]
    assert "no shared keyword" in out
    assert os.listdir(tmp_path)  # the database is kept to explore


def test_piped_show_has_no_trailing_spaces(store: Store) -> None:
    done = asm("--db", str(store.db), "show", store.audit)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) > 10 and all(line == line.rstrip() for line in lines)


@pytest.mark.parametrize("command", [["export"], ["show", "SID"]])
def test_a_reader_that_goes_away_ends_the_command_with_success(
    tmp_path: Path, command: list[str]
) -> None:
    """Issue 29: `memlane export | head -1` exited 1. A store big enough that the output
    outlasts the pipe's buffer, so the command really writes into a closed pipe."""
    db = tmp_path / "big.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("a long chat").id
        mgr.record_many(
            sid,
            [
                {"kind": "message", "role": "user", "content": f"turn {i} " + "words " * 60}
                for i in range(3_000)
            ],
        )
    argv = [sid if part == "SID" else part for part in command]
    reader = subprocess.Popen(
        [PYTHON, "-m", "memlane", "--db", str(db), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=asm_env(),
    )
    assert reader.stdout is not None
    assert reader.stdout.readline()
    reader.stdout.close()
    _, stderr = reader.communicate(timeout=120)
    assert reader.returncode == 0 and stderr.decode().strip() == "", stderr.decode()


def test_dash_means_stdout(store: Store, tmp_path: Path) -> None:
    done = asm("--db", str(store.db), "export", "-o", "-")
    assert done.returncode == 0 and done.stdout.startswith('{"type":"header"')
    assert not (tmp_path / "-").exists() and not Path("-").exists()
