"""What a new user tripped over in the command line (issue 29), one test each: session keys and
id prefixes wherever a session is named, the library's own sessions out of listings, and a
`--limit` note that tells the truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlane import InvalidInput, SessionManager, SessionNotFound
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder

from .test_cli import asm, fails, ok


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")


def build(db: Path) -> str:
    with SessionManager("support", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("refund order 1042", key="thread-42", user_id="u1")
        mgr.add_message(session.id, "user", "the parcel arrived broken")
        mgr.record_decision(session.id, "refund without a restocking fee")
        mgr.remember("u1", "Lives in Porto", key="city")  # a session the library keeps
        return session.id


def test_a_key_works_wherever_a_session_id_does(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sid = build(db)
    assert "the parcel arrived broken" in ok(asm(db, "show", "thread-42")).output
    restored = json.loads(ok(asm(db, "restore", "thread-42", "--json")).stdout)
    assert restored["session_id"] == sid and "restocking fee" in restored["text"]
    assert "restocking" in ok(asm(db, "search", "refund", "--session", "thread-42")).output
    exported = ok(asm(db, "export", "--session", "thread-42")).stdout.splitlines()
    assert any(sid in line for line in exported[1:])


def test_a_unique_prefix_of_an_id_works_too(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sid = build(db)
    assert "the parcel arrived broken" in ok(asm(db, "show", sid[:10])).output
    fails(asm(db, "show", sid[:3]), "does not exist")  # too short to be taken as a prefix


def test_a_near_miss_gets_a_suggestion(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    fails(asm(db, "show", "thread-24"), "does not exist", "Did you mean 'thread-42'?")


def test_an_ambiguous_key_or_prefix_is_refused_with_the_way_out(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    with SessionManager("billing", db, embedder=HashEmbedder(), background=False) as mgr:
        other = mgr.start_session("the same ticket, billing's side", key="thread-42")
        mgr.add_message(other.id, "user", "invoice please")
    fails(asm(db, "show", "thread-42"), "several agents", "--agent")
    assert "invoice please" in ok(asm(db, "--agent", "billing", "show", "thread-42")).output
    with StoreAdmin(db, embedder=HashEmbedder()) as admin:
        with pytest.raises(InvalidInput, match="several agents"):
            admin.session("thread-42")
        assert admin.session("thread-42", agent="billing").session.id == other.id
        with pytest.raises(SessionNotFound):
            admin.delete_session("thread-4")  # neither an id, a key nor an id's start


def test_listings_leave_out_the_librarys_own_sessions(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sid = build(db)
    listed = json.loads(ok(asm(db, "sessions", "--json")).stdout)
    assert [row["id"] for row in listed] == [sid]
    everything = json.loads(ok(asm(db, "sessions", "--internal", "--json")).stdout)
    assert len(everything) == 2 and "What agent support knows" in str(everything)
    with SessionManager("support", db, embedder=HashEmbedder(), background=False) as mgr:
        assert [s.id for s in mgr.list_sessions()] == [sid]
        assert len(mgr.list_sessions(internal=True)) == 2


def test_the_limit_note_appears_only_when_the_limit_cut_the_list(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        for i in range(3):
            mgr.start_session(f"task {i}")
    assert "--limit for more" not in asm(db, "sessions", "--limit", "3").stderr
    assert "--limit for more" in asm(db, "sessions", "--limit", "2").stderr


def test_errors_under_json_are_json_on_stderr(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    result = asm(db, "show", "nope-nope", "--json")
    assert result.exit_code == 1 and result.stdout == ""
    error = json.loads(result.stderr)["error"]
    assert error["type"] == "SessionNotFound" and error["exit_code"] == 1
    assert "does not exist" in error["message"]
    usage = asm(db, "sessions", "--json", "--limit", "0")
    assert usage.exit_code == 2 and json.loads(usage.stderr)["error"]["type"] == "UsageError"


def test_errors_speak_of_the_options_the_command_line_has(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder" / "s.db"
    message = fails(asm(missing, "import", "-", input='{"type": "header"}\n'))
    assert "--db" in message and "db_path" not in message


def test_one_time_format_in_every_json_output(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    build(db)
    with SessionManager("support", db, embedder=HashEmbedder()) as mgr:
        mgr.flush()  # so health has a last_embedded_at
    stamps = [
        json.loads(ok(asm(db, "sessions", "--json")).stdout)[0]["created_at"],
        json.loads(ok(asm(db, "health", "--json")).stdout)["last_embedded_at"],
        json.loads(ok(asm(db, "facts", "u1", "--json")).stdout)[0]["valid_from"],
    ]
    assert all(stamp.endswith("Z") and "+00:00" not in stamp for stamp in stamps), stamps


def test_ingest_help_names_the_option_search_has() -> None:
    from click.testing import CliRunner

    from memlane.cli import cli

    text = CliRunner().invoke(cli, ["ingest", "--help"]).output
    assert "--kind knowledge" in text and "--kinds" not in text


def test_the_demo_wraps_between_tokens_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: the demo broke `"version⏎":"1.2.0"` and `0.5⏎ s`. Lines now break only
    after a space, a comma or a semicolon: every quoted JSON line keeps its strings whole."""
    import tempfile

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    out = ok(asm(None, "demo")).stdout
    quoted = [line[5:] for line in out.splitlines() if line.startswith("   │ ")]
    json_lines = [line for line in quoted if '":' in line]
    assert len(json_lines) >= 3, out  # the summarised pip_audit output spans lines
    for line in json_lines:
        assert line.count('"') % 2 == 0, line  # no string cut in two
    assert not [line for line in out.splitlines() if line.strip().startswith(("s later", "ms "))]


def test_a_store_made_with_the_hash_embedder_is_read_with_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: the LangGraph example's store (HashEmbedder) could not be searched or
    restored with the command line. `--embedder auto` (the default) takes the embedder the
    store's vectors were made with, of any size."""
    monkeypatch.delenv("MEMLANE_EMBEDDER")
    db = tmp_path / "example.db"
    with SessionManager("a", db, embedder=HashEmbedder(64)) as mgr:
        sid = mgr.start_session("watch the cache").id
        mgr.add_message(sid, "user", "redis is slow today")
        mgr.flush()
    for mode in ("keyword", "hybrid", "semantic"):
        assert "redis is slow today" in ok(asm(db, "search", "redis", "--mode", mode)).output
    assert "redis is slow today" in ok(asm(db, "restore", sid)).output
    fails(asm(db, "--embedder", "nope", "sessions"), "nope", code=2)


def test_search_shows_current_facts_and_the_history_with_statuses(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("assistant", db, embedder=HashEmbedder(), background=False) as mgr:
        mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2023-01-01")
        mgr.remember("u1", "Lives in Zurich", key="city")
    now = ok(asm(db, "search", "where does the user live?", "--kind", "fact")).output
    assert "Lives in Zurich" in now and "[current]" in now and "Berlin" not in now
    history = ok(asm(db, "search", "where does the user live?", "--kind", "fact", "--history"))
    assert "Lives in Berlin" in history.output and "[superseded]" in history.output


def test_explain_groups_events_dropped_alike(tmp_path: Path) -> None:
    """Issue 29: `--explain` listed 19 dropped knowledge chunks, one row each."""
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("answer questions about the handbook").id
        sections = "\n\n".join(f"## Part {i}\n\nRotate key {i} every {i} days." for i in range(30))
        mgr.ingest(text="# Handbook\n\n" + sections, name="handbook.md")
        for i in range(40):
            mgr.add_message(sid, "user", f"question {i} about rotating keys")
    out = ok(asm(db, "restore", sid, "--max-tokens", "200", "--query", "rotate keys", "--explain"))
    import re

    dropped = int(re.search(r"(\d+) dropped of", out.output).group(1))  # type: ignore[union-attr]
    rows = [line for line in out.output.splitlines() if " dropped " in f" {line} "]
    grouped = [line for line in rows if re.search(r"\b\d+ events\b", line)]
    assert dropped >= 10 and grouped and len(rows) < dropped, out.output
