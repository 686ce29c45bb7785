"""export_markdown / `memlane export-md`: MEMORY.md and daily files, generated, atomic,
byte-identical when unchanged, and proof against forged structure."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane import InvalidInput, SessionManager
from memlane.cli import cli
from memlane.testing import HashEmbedder
from memlane.transfer.markdown import GENERATED

FORGERY = 'line one\n# Forged heading\n---\ntitle: forged\n---\n<a id="fact-x"></a> <!-- x -->'


def fill(mgr: SessionManager) -> dict[str, str]:
    ids = {}
    mgr.remember("u1", "Lives in Oslo", key="city", valid_from="2025-02-01")
    mgr.remember("u1", FORGERY)
    ids["pref"] = mgr.remember("u1", "Likes tea", kind="preference").fact.id  # type: ignore[union-attr]
    day1 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
    day2 = datetime(2026, 3, 2, 14, 5, tzinfo=UTC)
    session = mgr.start_session(f"Plan the trip {FORGERY}", user_id="u1")
    ids["decision"] = mgr.record_decision(session.id, "Book the night train", importance=0.9).id
    mgr.record(session.id, "step", "searched trains", created_at=day1, metadata={"tool": "web"})
    mgr.record(session.id, "error", f"the booking API failed {FORGERY}", created_at=day2)
    mgr.add_message(session.id, "user", "chat turns are not in the daily files")
    return ids


def test_memory_and_daily_files(mgr: SessionManager, tmp_path: Path) -> None:
    ids = fill(mgr)
    out = tmp_path / "export"
    result = mgr.export_markdown(out)
    names = sorted(result.written)
    assert (
        "MEMORY.md" in names and "memory/2026-03-01.md" in names and "memory/2026-03-02.md" in names
    )
    memory = (out / "MEMORY.md").read_text(encoding="utf-8")
    assert memory.startswith(GENERATED + "\n")
    assert '- **city**: Lives in Oslo (since 2025-02-01) <a id="fact-' in memory
    assert "Likes tea (preference, since " in memory and f'<a id="fact-{ids["pref"]}">' in memory
    assert f'<a id="event-{ids["decision"]}"></a>' in memory and "Book the night train" in memory
    day1 = (out / "memory/2026-03-01.md").read_text(encoding="utf-8")
    assert "- 09:30 step (web): searched trains" in day1
    assert "chat turns" not in "".join(p.read_text() for p in (out / "memory").iterdir())
    # the sessions the library keeps (a user's memory, knowledge documents) are not tasks
    mgr.ingest(text="# Notes\n\nThe vault key is rotated yearly.", name="notes")
    mgr.export_markdown(out)
    days = "".join(p.read_text(encoding="utf-8") for p in (out / "memory").iterdir())
    assert "Knowledge documents of agent" not in days and "knows about user" not in days
    # nothing user-written makes structure: every heading, anchor and list item is ours
    for path in [out / "MEMORY.md", *(out / "memory").iterdir()]:
        text = path.read_text(encoding="utf-8")
        assert "Forged heading" in text or path.name != "MEMORY.md"
        for line in text.splitlines():
            assert not line.startswith(("# Forged", "---", "title:")), (path, line)
        assert len(re.findall(r"<!--", text)) == 1  # the generated line only
        anchors = re.findall(r'<a id="([^"]+)"></a>', text)
        assert "fact-x" not in anchors
        assert text.count("<a ") == len(anchors)


def test_regenerating_changes_nothing_and_stale_days_go(
    mgr: SessionManager, tmp_path: Path
) -> None:
    fill(mgr)
    out = tmp_path / "export"
    mgr.export_markdown(out)
    before = {p: p.read_bytes() for p in out.rglob("*.md")}
    stamps = {p: p.stat().st_mtime_ns for p in before}
    again = mgr.export_markdown(out)
    assert again.written == [] and len(again.unchanged) == len(before)
    assert {p: p.read_bytes() for p in out.rglob("*.md")} == before
    assert {p: p.stat().st_mtime_ns for p in before} == stamps  # not even rewritten
    mine = out / "memory" / "notes.md"
    mine.write_text("my own notes", encoding="utf-8")
    (out / "memory" / "2020-01-01.md").write_text(GENERATED + "\nold\n", encoding="utf-8")
    (out / "memory" / "2020-01-02.md").write_text("hand written\n", encoding="utf-8")
    result = mgr.export_markdown(out)
    assert result.removed == ["memory/2020-01-01.md"]
    assert mine.exists() and (out / "memory" / "2020-01-02.md").exists()
    assert not list(out.rglob("*.tmp"))


def test_only_one_user_and_bad_directories(mgr: SessionManager, tmp_path: Path) -> None:
    fill(mgr)
    mgr.remember("u2", "Lives in Rome", key="city")
    only = mgr.export_markdown(tmp_path / "u1", user_id="u1")
    text = (only.directory / "MEMORY.md").read_text(encoding="utf-8")
    assert "Oslo" in text and "Rome" not in text
    file = tmp_path / "a-file"
    file.write_text("x")
    with pytest.raises(InvalidInput, match="is a file"):
        mgr.export_markdown(file)


def test_the_command(mgr: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")
    fill(mgr)
    db = mgr.db_path
    out = tmp_path / "cli"
    run = CliRunner().invoke(cli, ["--db", str(db), "export-md", str(out), "--agent", "researcher"])
    assert run.exit_code == 0, run.output
    assert "Wrote" in run.output and (out / "MEMORY.md").is_file()
    # the store's only agent needs no naming (issue 29); with two, the error lists them
    only = CliRunner().invoke(cli, ["--db", str(db), "export-md", str(tmp_path / "only")])
    assert (
        only.exit_code == 0
        and (tmp_path / "only" / "MEMORY.md").read_bytes() == (out / "MEMORY.md").read_bytes()
    )
    with SessionManager("critic", db, embedder=HashEmbedder(), background=False) as other:
        other.start_session("a second agent")
    missing = CliRunner().invoke(cli, ["--db", str(db), "export-md", str(out)])
    assert missing.exit_code == 2 and "'critic', 'researcher'" in missing.output
