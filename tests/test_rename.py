"""The rename to memlane (issue 29): old imports, old environment names and old export headers
keep working; nothing the package installs answers to the names another project owns."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder

from .conftest import child_env

#: Names another project on the package index installs (checked 2026-11-26):
#: `agent-session-manager` ships an `asm` package and an `asm` command.
TAKEN_COMMANDS = {"asm"}


def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        env={**child_env(), **env},
        timeout=120,
    )


def test_the_distribution_and_its_command_have_the_new_name() -> None:
    assert distribution("memlane").metadata["Name"] == "memlane"
    ours = {
        ep.name for ep in entry_points(group="console_scripts") if ep.value.startswith("memlane")
    }
    assert ours == {"memlane"} and not ours & TAKEN_COMMANDS


def test_the_old_import_name_warns_and_hands_out_the_same_objects() -> None:
    code = (
        "import memlane, memlane.testing, memlane.integrations;"
        "import session_manager;"
        "from session_manager.testing import HashEmbedder;"
        "import session_manager.store.sqlite as old_sqlite, memlane.store.sqlite as new_sqlite;"
        "assert session_manager.SessionManager is memlane.SessionManager;"
        "assert HashEmbedder is memlane.testing.HashEmbedder;"
        "assert old_sqlite is new_sqlite;"
        "print('ok')"
    )
    out = run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert "DeprecationWarning" in out.stderr and "import memlane" in out.stderr


def test_a_missing_old_submodule_is_still_an_import_error() -> None:
    out = run("import session_manager.no_such_module")
    assert out.returncode == 1 and "ModuleNotFoundError" in out.stderr


def test_an_export_with_the_old_header_still_imports(tmp_path: Path) -> None:
    with SessionManager("a", tmp_path / "old.db", embedder=HashEmbedder()) as mgr:
        sid = mgr.start_session("written before the rename").id
        mgr.add_message(sid, "user", "hello from the old name")
    with StoreAdmin(tmp_path / "old.db", embedder=HashEmbedder()) as admin:
        lines = [dict(record) for record in admin.export()]
    assert lines[0]["format"] == "memlane/export"
    lines[0]["format"] = "agent-session-manager/export"
    with StoreAdmin(tmp_path / "new.db", embedder=HashEmbedder()) as admin:
        result = admin.import_records([json.dumps(line) for line in lines])
    assert result.events_inserted == 2  # the goal and the message


def test_the_old_environment_names_are_still_read(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with SessionManager("a", db, embedder=HashEmbedder()) as mgr:
        mgr.start_session("found through ASM_DB")
    out = subprocess.run(
        [sys.executable, "-m", "memlane", "sessions", "--json"],
        capture_output=True,
        text=True,
        env={**child_env(), "ASM_DB": str(db), "MEMLANE_EMBEDDER": "hash"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "found through ASM_DB" in out.stdout
