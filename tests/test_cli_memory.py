"""`memlane facts` and `memlane ingest` on a real SQLite file (MEMLANE_EMBEDDER=hash)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memlane import SessionManager
from memlane.cli import cli
from memlane.testing import HashEmbedder


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")


def asm(db: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *args])


def test_facts_now_then_and_history(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("assistant", db, embedder=HashEmbedder(), background=False) as mgr:
        mgr.remember("u1", "Lives in Oslo", key="city", valid_from="2023-01-01")
        mgr.remember("u1", "Lives in Rome", key="city", valid_from="2025-01-01")
        mgr.remember("u1", "Likes tea", kind="preference")
    now = asm(db, "facts", "u1", "--agent", "assistant")
    assert now.exit_code == 0, now.output
    assert "Lives in Rome" in now.output and "Oslo" not in now.output and "city" in now.output
    then = json.loads(
        asm(db, "facts", "u1", "--agent", "assistant", "--as-of", "2024-06-01", "--json").output
    )
    assert [f["text"] for f in then] == ["Lives in Oslo"]
    history = json.loads(
        asm(db, "facts", "u1", "--agent", "assistant", "--history", "--json").output
    )
    assert [f["status"] for f in history] == ["superseded", "current", "current"]
    assert "knows nothing" in asm(db, "facts", "u2", "--agent", "assistant").output
    only = asm(db, "facts", "u1")  # one agent in the store: no need to name it (issue 29)
    assert only.exit_code == 0 and "Lives in Rome" in only.output
    with SessionManager("critic", db, embedder=HashEmbedder(), background=False) as other:
        other.start_session("a second agent")
    missing = asm(db, "facts", "u1")
    assert missing.exit_code == 2 and "--agent" in missing.output
    assert "'assistant', 'critic'" in missing.output


def test_ingest_then_search_then_again(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    doc = tmp_path / "runbook.md"
    doc.write_text(
        "# Runbook\n\nRotate the keys every ninety days.\n\n## Deploy\n\nCanary first.\n"
    )
    first = asm(db, "ingest", str(doc), "--agent", "assistant", "--name", "runbook")
    assert first.exit_code == 0, first.output
    assert "version 1: 2 chunk(s) added" in first.output
    found = asm(
        db, "search", "rotate keys", "--agent", "assistant", "--kind", "knowledge", "--json"
    )
    assert found.exit_code == 0, found.output
    assert "ninety" in json.loads(found.output)[0]["content"]
    again = asm(db, "ingest", str(doc), "--agent", "assistant", "--name", "runbook")
    assert "0 chunk(s) added, 2 unchanged" in again.output
    latin = tmp_path / "latin.md"
    latin.write_bytes("caf\xe9".encode("latin-1"))
    bad = asm(db, "ingest", str(latin), "--agent", "assistant")
    assert bad.exit_code == 1 and "not UTF-8" in bad.output
    upload = tmp_path / "upload.md"
    upload.write_text("# Upload\n\nA contract from the user.\n")
    theirs = asm(db, "ingest", str(upload), "--agent", "assistant", "--user", "u7")
    assert theirs.exit_code == 0, theirs.output
    erased = asm(db, "erase-user", "u7", "--yes", "--json")
    assert json.loads(erased.output)["events"] == {"knowledge": 1}
