"""The `memlane` command line through click's CliRunner, on real SQLite files.

Commands embed with the hash embedder (MEMLANE_EMBEDDER=hash); the real-model demo and the
subprocess round trips are in tests/test_cli_processes.py.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.cli import cli
from memlane.testing import HashEmbedder


@dataclass
class Store:
    db: Path
    audit: str  # researcher's session: every kind of event
    other: str  # writer's completed session


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")
    for name in ("MEMLANE_DB", "MEMLANE_AGENT", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def build(db: Path) -> Store:
    with SessionManager("researcher", db, embedder=HashEmbedder(), background=False) as mgr:
        audit = mgr.start_session(
            "Audit the staging environment", user_id="alice", metadata={"ticket": "SEC-1"}
        )
        mgr.record_step(
            audit.id, "listed staging accounts", tool="admin_api", result={"accounts": 14}
        )
        mgr.record_tool_output(
            audit.id,
            {"packages": [{"name": f"pkg-{i}", "version": f"1.{i}"} for i in range(300)]},
            tool="pip_audit",
        )
        mgr.record_tool_output(
            audit.id, "Disabled two-factor authentication for qa-bot.", tool="admin_api"
        )
        error = mgr.record_error(audit.id, "login page returned HTTP 502")
        mgr.resolve_error(error.id)
        mgr.record_decision(audit.id, "review service accounts first", tags=["policy"])
        mgr.record_fact(audit.id, "staging runs PostgreSQL 16", metadata={"source": "psql"})
        mgr.add_pending(audit.id, "rotate the CI deploy key")
        mgr.add_message(audit.id, "user", "also check the firewall, please")
        mgr.search("two-factor", k=2)  # some recall counts, so the export carries them
        mgr.flush()
    with SessionManager("writer", db, embedder=HashEmbedder(), background=False) as mgr:
        other = mgr.start_session("Draft the release notes", shared_pool="team")
        mgr.record_fact(other.id, "the release is 2.4.0")
        mgr.end_session(other.id)
        mgr.flush()
    return Store(db, audit.id, other.id)


@pytest.fixture
def store(db_path: Path) -> Store:
    return build(db_path)


def asm(db: Path | str | None, *args: str, input: str | bytes | None = None) -> Result:
    argv = (["--db", str(db)] if db is not None else []) + list(args)
    return CliRunner().invoke(cli, argv, input=input, catch_exceptions=False)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def fails(result: Result, *needles: str, code: int = 1) -> str:
    """The error line; asserts one line, no traceback, and the expected words."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip() and "[y/N]" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def as_json(result: Result) -> Any:
    return json.loads(ok(result).stdout)


def count_rows(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


# -- sessions -----------------------------------------------------------------------------


def test_sessions_table_and_json(store: Store) -> None:
    out = ok(asm(store.db, "sessions")).stdout
    for text in (store.audit, store.other, "researcher", "writer", "alice", "completed"):
        assert text in out
    rows = as_json(asm(store.db, "sessions", "--json"))
    assert [row["id"] for row in rows] == [store.other, store.audit]  # latest activity first
    audit = rows[1]
    assert audit["agent_id"] == "researcher" and audit["user_id"] == "alice"
    assert audit["events"] == 9 and audit["tokens"] > 0
    assert audit["metadata"] == {"ticket": "SEC-1"}
    assert audit["last_activity"].endswith("Z")


def test_sessions_filters(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def ids(*args: str) -> list[str]:
        return [row["id"] for row in as_json(asm(store.db, "sessions", "--json", *args))]

    assert ids("--agent", "writer") == [store.other]
    assert ids("--status", "active") == [store.audit]
    assert ids("--user", "alice") == [store.audit]
    assert ids("--since", "1h") == [store.other, store.audit]
    assert ids("--since", "2999-01-01T00:00:00Z") == []
    assert ids("--limit", "1") == [store.other]
    monkeypatch.setenv("MEMLANE_AGENT", "researcher")
    assert ids() == [store.audit]
    assert [r["id"] for r in as_json(asm(store.db, "--agent", "writer", "sessions", "--json"))] == [
        store.other
    ]
    fails(asm(store.db, "sessions", "--since", "last tuesday"), "'90d'", code=2)


def test_sessions_empty_store_says_what_to_do(tmp_path: Path) -> None:
    with StoreAdmin(tmp_path / "empty.db"):
        pass
    result = ok(asm(tmp_path / "empty.db", "sessions"))
    assert "No sessions" in result.stderr and "memlane demo" in result.stderr
    assert as_json(asm(tmp_path / "empty.db", "sessions", "--json")) == []


# -- show ---------------------------------------------------------------------------------


def test_show_timeline(store: Store) -> None:
    out = ok(asm(store.db, "show", store.audit)).stdout
    for text in (
        "Audit the staging environment",
        "listed staging accounts",
        "(tool: admin_api)",
        '"accounts": 14',
        "pip_audit returned",
        "--full shows it all",  # the large JSON output is folded ...
        "kB, 1 key",  # ... with its size
        "[resolved]",
        "[open]",
        "#policy",
        "Pending queue: 1 open — rotate the CI deploy key",
        "1 resolved, 0 unresolved",
    ):
        assert text in out, text
    assert "pkg-299" not in out
    full = ok(asm(store.db, "show", store.audit, "--full")).stdout
    assert "pkg-299" in full


def test_show_filters_and_json(store: Store) -> None:
    data = as_json(asm(store.db, "show", store.audit, "--json"))
    assert data["session"]["id"] == store.audit
    kinds = [event["kind"] for event in data["events"]]
    assert kinds[0] == "goal" and "tool_output" in kinds and len(kinds) == 9
    event = data["events"][1]
    assert set(event) == {
        "id",
        "session_id",
        "agent_id",
        "kind",
        "content",
        "payload",
        "importance",
        "tags",
        "metadata",
        "status",
        "created_at",
        "token_count",
        "recall_count",
    }
    only = as_json(asm(store.db, "show", store.audit, "--json", "--kind", "decision"))
    assert [e["content"] for e in only["events"]] == ["review service accounts first"]
    latest = as_json(asm(store.db, "show", store.audit, "--json", "--limit", "2"))
    assert [e["kind"] for e in latest["events"]] == ["pending", "message"]
    out = ok(asm(store.db, "show", store.audit, "--limit", "2")).stdout
    assert "Showing 2 of 9 events" in out


def test_show_respects_agent(store: Store) -> None:
    assert ok(asm(store.db, "--agent", "researcher", "show", store.audit))
    fails(asm(store.db, "show", store.audit, "--agent", "writer"), "belongs to 'researcher'")
    fails(asm(store.db, "show", store.audit, "--kind", "decison"), "Unknown event kind")


# -- search -------------------------------------------------------------------------------


def test_search_ranks_across_agents(store: Store) -> None:
    out = ok(asm(store.db, "search", "two-factor qa-bot")).stdout
    assert out.splitlines()[1].startswith("1. ") and "Disabled two-factor" in out
    assert f"researcher · session {store.audit}" in out
    hits = as_json(asm(store.db, "search", "release notes", "--json"))
    assert hits[0]["agent_id"] == "writer" and hits[0]["rank"] == 1
    assert {"rank", "score", "id", "kind", "session_id", "content"} <= set(hits[0])
    assert [h["rank"] for h in hits] == list(range(1, len(hits) + 1))


def test_search_filters(store: Store) -> None:
    def search(*args: str) -> list[dict[str, Any]]:
        return as_json(asm(store.db, "search", "staging release accounts", "--json", *args))  # type: ignore[no-any-return]

    assert {h["agent_id"] for h in search("--agent", "writer")} == {"writer"}
    assert {h["session_id"] for h in search("--session", store.audit)} == {store.audit}
    assert {h["kind"] for h in search("--kind", "fact")} == {"fact"}
    assert len(search("--k", "2")) == 2
    tool = search("--where", "tool=admin_api", "--k", "10")
    assert tool and {h["metadata"]["tool"] for h in tool} == {"admin_api"}
    assert {h["kind"] for h in search("--where", '{"source": {"$in": ["psql"]}}')} == {"fact"}
    words = ("staging", "release", "account")
    keyword = search("--mode", "keyword")
    assert keyword and all(any(w in h["content"].lower() for w in words) for h in keyword)
    fails(
        asm(store.db, "search", "x", "--session", store.other, "--agent", "researcher"),
        "belongs to 'writer'",
    )


def test_search_shows_the_passage_of_a_long_event(tmp_path: Path) -> None:
    db = tmp_path / "long.db"
    planted = "The failover runbook says: promote replica db-7 before draining the queue."
    filler = [f"Paragraph {i} is about lunch menus and office plants." for i in range(60)]
    essay = "\n\n".join([*filler[:45], planted, *filler[45:]])
    with SessionManager("writer", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("notes")
        mgr.add_message(session.id, "assistant", essay)
    hits = as_json(asm(db, "search", planted, "--json", "--mode", "semantic", "--agent", "writer"))
    assert hits[0]["content"] == essay
    passage = hits[0]["passage"]
    assert (
        planted in passage["text"] and essay[passage["start"] : passage["stop"]] == passage["text"]
    )
    out = ok(asm(db, "search", planted, "--mode", "semantic", "--agent", "writer")).stdout
    assert f"passage, characters {passage['start']:,}–{passage['stop']:,} of {len(essay):,}" in out
    assert "promote replica db-7" in out and "Paragraph 0 " not in out


def test_search_does_not_count_recalls(store: Store) -> None:
    before = count_rows(store.db, "SELECT sum(recall_count) FROM events")
    ok(asm(store.db, "search", "two-factor"))
    assert count_rows(store.db, "SELECT sum(recall_count) FROM events") == before


def test_restore_does_not_count_recalls(store: Store) -> None:
    """An operator looking at what an agent would restore must not change it (§7)."""
    before = count_rows(store.db, "SELECT sum(recall_count) FROM events")
    for query in ("two-factor", "firewall", "release notes"):
        ok(asm(store.db, "restore", store.audit, "--query", query, "--max-tokens", "2000"))
    assert count_rows(store.db, "SELECT sum(recall_count) FROM events") == before


def test_malformed_where_is_a_usage_error(store: Store) -> None:
    line = fails(asm(store.db, "search", "x", "--where", "tool"), "key=value", code=2)
    assert "memlane search --help" in line
    fails(asm(store.db, "search", "x", "--where", "{oops"), "not a valid JSON filter", code=2)
    fails(asm(store.db, "search", "x", "--where", '{"a": {"$regex": "x"}}'), "$regex")


# -- restore ------------------------------------------------------------------------------


def test_restore_prints_the_context(store: Store) -> None:
    result = ok(asm(store.db, "restore", store.audit, "--max-tokens", "300"))
    assert result.stdout.startswith("## Goal")  # 300 tokens: no room for the opening line
    roomy = ok(asm(store.db, "restore", store.audit, "--max-tokens", "2000")).stdout
    assert roomy.startswith("Memory of agent researcher, user alice (session active since")
    assert "rotate the CI deploy key" in result.stdout
    assert "of 300 tokens" in result.stderr and "--explain" in result.stderr


def test_restore_explain_and_json(store: Store) -> None:
    out = ok(asm(store.db, "restore", store.audit, "--max-tokens", "300", "--explain")).stdout
    for text in (
        "SECTION",
        "ACTION",
        "REASON",
        "SHARE OF BUDGET",
        "whole text",
        "summarised",
        "OFFERED",
        "WHY",
    ):
        assert text in out, text
    data = as_json(asm(store.db, "restore", store.audit, "--max-tokens", "300", "--json"))
    assert data["token_count"] <= 300 and data["agent_id"] == "researcher"
    assert data["messages"] == [{"role": "system", "content": data["system"]}, *data["turns"]]
    assert all(turn["content"] in data["text"] for turn in data["turns"])
    report = data["report"]
    assert report["budget"] == 300 and report["counts"]["summarised"] >= 1
    assert {item["action"] for item in report["items"]} <= {"included", "summarised", "dropped"}
    assert set(report["sections"]) <= {
        "goal",
        "pending",
        "important",
        "earlier",
        "recent",
        "relevant",
    }
    assert {share["section"] for share in report["shares"]} >= {"important", "relevant"}


def test_restore_errors(store: Store) -> None:
    fails(asm(store.db, "restore", "01NOPE"), "'01NOPE' does not exist", "memlane sessions")
    fails(
        asm(store.db, "restore", store.audit, "--agent", "writer"),
        "does not exist for agent 'writer'",
    )
    fails(asm(store.db, "restore", store.audit, "--max-tokens", "5"), "max_tokens")
    fails(asm(store.db, "restore", store.audit, "--max-tokens", "0"), "--max-tokens", code=2)


# -- stats --------------------------------------------------------------------------------


def test_stats(store: Store) -> None:
    out = ok(asm(store.db, "stats")).stdout
    for text in ("Sessions  2: 1 active, 1 completed", "hash-384 (dim 384)", "researcher", "TOTAL"):
        assert text in out, text
    narrow = CliRunner(env={"COLUMNS": "40"}).invoke(cli, ["--db", str(store.db), "stats"])
    assert "KIND" in ok(narrow).stdout and "tool_output" in narrow.stdout
    data = as_json(asm(store.db, "stats", "--json"))
    assert data["sessions"] == 2 and data["events"] == 11
    assert data["events_by_agent"]["writer"] == {"fact": 1, "goal": 1}
    assert data["sessions_by_status"] == {"active": 1, "completed": 1}
    assert data["embedder"] == {"name": "hash-384", "dim": 384}
    assert data["pending_embeddings"] == 0
    # a vector per event, and one per passage of the long pip_audit output (not one)
    passages = count_rows(store.db, "SELECT count(*) FROM vectors WHERE stop > 0")
    assert passages > 1 and data["vectors"] == 11 - 1 + passages
    assert data["size_bytes"] > 0 and data["cli_embedder"] == "hash-384"


# -- export / import ----------------------------------------------------------------------


def test_export_import_round_trip_is_byte_identical(store: Store, tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    result = ok(asm(store.db, "export", "-o", str(first)))
    assert "Exported 2 session(s) and 11 event(s)" in result.stderr
    fresh = tmp_path / "fresh.db"
    imported = ok(asm(fresh, "import", str(first)))
    assert "Imported 2 session(s) and 11 event(s)" in imported.stdout
    ok(asm(fresh, "export", "-o", str(second)))
    assert first.read_bytes() == second.read_bytes()
    lines = [json.loads(line) for line in first.read_text(encoding="utf-8").splitlines()]
    assert lines[0] == {"type": "header", "format": "memlane/export", "version": 1}
    assert [r["type"] for r in lines].count("session") == 2
    assert any(r["type"] == "event" and r["recall_count"] > 0 for r in lines)
    pooled = next(r for r in lines if r["type"] == "session" and r["agent_id"] == "writer")
    assert pooled["shared_pool"] == "team"
    # The imported events wait in the outbox; a search embeds them and finds them.
    assert count_rows(fresh, "SELECT count(*) FROM outbox") == 11
    hits = as_json(asm(fresh, "search", "two-factor", "--json"))
    assert "two-factor" in hits[0]["content"]


def test_import_twice_changes_nothing(store: Store, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    ok(asm(store.db, "export", "-o", str(dump)))
    fresh = tmp_path / "fresh.db"
    ok(asm(fresh, "import", str(dump)))
    before = ok(asm(fresh, "export")).stdout
    again = ok(asm(fresh, "import", str(dump)))
    assert "Imported 0 session(s) and 0 event(s); 13 record(s) already" in again.stdout
    assert ok(asm(fresh, "export")).stdout == before
    assert count_rows(fresh, "SELECT count(*) FROM events") == 11


def test_export_filters_and_stdin_import(store: Store, tmp_path: Path) -> None:
    one = ok(asm(store.db, "export", "--session", store.other)).stdout
    records = [json.loads(line) for line in one.splitlines()]
    assert [r["type"] for r in records] == ["header", "session", "event", "event"]
    agent = ok(asm(store.db, "--agent", "researcher", "export")).stdout
    assert store.other not in agent and store.audit in agent
    fresh = tmp_path / "fresh.db"
    ok(asm(fresh, "import", "-", input=one.encode()))
    assert as_json(asm(fresh, "sessions", "--json"))[0]["id"] == store.other
    fails(asm(store.db, "export", "--session", "01NOPE", "-o", str(tmp_path / "x.jsonl")), "01NOPE")
    assert not (tmp_path / "x.jsonl").exists()


def test_import_dry_run_writes_nothing(store: Store, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    ok(asm(store.db, "export", "-o", str(dump)))
    fresh = tmp_path / "fresh.db"
    result = ok(asm(fresh, "import", str(dump), "--dry-run"))
    assert "Would import 2 session(s) and 11 event(s)" in result.stdout
    assert not fresh.exists()
    same = ok(asm(store.db, "import", str(dump), "--dry-run"))
    assert "Would import 0 session(s) and 0 event(s); 13 record(s)" in same.stdout


def _corrupt_dump(store: Store, tmp_path: Path) -> Path:
    lines = ok(asm(store.db, "export", "--session", store.other)).stdout.splitlines()
    lines.insert(3, '{"type": "event", "id": "broken", ')  # line 4: cut mid-record
    path = tmp_path / "corrupt.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_corrupt_line_is_reported_with_its_number(store: Store, tmp_path: Path) -> None:
    path = _corrupt_dump(store, tmp_path)
    fresh = tmp_path / "fresh.db"
    fails(asm(fresh, "import", str(path)), "Line 4", "not valid JSON", "--skip-bad")
    result = ok(asm(fresh, "import", str(path), "--skip-bad"))
    assert "line 4: not valid JSON" in result.stderr
    assert count_rows(fresh, "SELECT count(*) FROM events") == 2  # both good events


def test_import_rejects_what_record_would(store: Store, tmp_path: Path) -> None:
    records = [json.loads(line) for line in ok(asm(store.db, "export")).stdout.splitlines()]
    event = next(r for r in records if r["type"] == "event" and r["kind"] == "fact")
    session = next(r for r in records if r["type"] == "session" and r["id"] == event["session_id"])
    bad_cases = {
        "Unknown event kind": {**event, "kind": "decison"},
        "importance": {**event, "importance": 1.5},
        "content is empty": {**event, "content": "  "},
        "cannot have status": {**event, "status": "open"},
        "unknown fields": {**event, "colour": "red"},
        "neither earlier in the import": {**event, "session_id": "01NOPE"},
        "not an ISO-8601": {**event, "created_at": "yesterday"},
    }
    for needle, bad in bad_cases.items():
        lines = [json.dumps(records[0]), json.dumps(session), json.dumps(bad)]
        path = tmp_path / "bad.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        fails(asm(tmp_path / "x.db", "import", str(path)), "Line 3", needle)
    path.write_text('{"type": "session"}\n', encoding="utf-8")
    fails(asm(tmp_path / "x.db", "import", str(path)), "Line 1", "export header")
    path.write_text(json.dumps({**records[0], "version": 99}) + "\n", encoding="utf-8")
    fails(asm(tmp_path / "x.db", "import", str(path)), "version 99", "pip install -U")


def test_unreadable_import_file(tmp_path: Path) -> None:
    fails(asm(tmp_path / "x.db", "import", str(tmp_path / "missing.jsonl")), "missing.jsonl")
    fails(asm(tmp_path / "x.db", "import", str(tmp_path)), "Cannot access")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    fails(asm(tmp_path / "x.db", "import", str(empty)), "no records")


# -- reindex ------------------------------------------------------------------------------


def test_reindex_after_an_embedder_change(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(dim=64)) as mgr:
        session = mgr.start_session("switch embedders")
        mgr.record_fact(session.id, "the cache lives in redis")
        mgr.flush()
    fails(asm(db, "search", "redis"), "hash-64", "memlane reindex")
    result = ok(asm(db, "reindex"))
    assert "Re-embedded 2 event(s) with hash-384" in result.stdout
    assert as_json(asm(db, "stats", "--json"))["embedder"] == {"name": "hash-384", "dim": 384}
    assert "redis" in as_json(asm(db, "search", "redis", "--json"))[0]["content"]


# -- delete and prune ---------------------------------------------------------------------


def test_delete_asks_first(store: Store) -> None:
    assert "Nothing deleted." in ok(asm(store.db, "delete", store.other, input="n\n")).stdout
    assert count_rows(store.db, "SELECT count(*) FROM sessions") == 2
    result = ok(asm(store.db, "delete", store.other, input="y\n"))
    assert f"Deleted session {store.other} of agent 'writer' and its 2 event(s)" in result.stdout
    ok(asm(store.db, "delete", store.audit, "--yes"))
    assert count_rows(store.db, "SELECT count(*) FROM events") == 0
    assert count_rows(store.db, "SELECT count(*) FROM vectors") == 0
    fails(asm(store.db, "delete", store.audit, "--yes"), "does not exist", "memlane sessions")


def _age(db: Path, session_id: str, days: int) -> None:
    """Move a session and its events `days` into the past."""
    shift = days * 86_400 * 1_000_000
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE sessions SET updated_us = updated_us - ?, created_us = created_us - ? "
            "WHERE id = ?",
            (shift, shift, session_id),
        )
        conn.execute(
            "UPDATE events SET created_us = created_us - ? WHERE session_id = ?",
            (shift, session_id),
        )


def test_prune_whole_sessions(store: Store) -> None:
    _age(store.db, store.other, 100)
    _age(store.db, store.audit, 100)
    dry = ok(asm(store.db, "prune", "--older-than", "90d", "--status", "completed", "--dry-run"))
    assert "Would delete 1 session(s)" in dry.stdout and store.other in dry.stdout
    assert count_rows(store.db, "SELECT count(*) FROM sessions") == 2
    no = ok(asm(store.db, "prune", "--older-than", "90d", "--status", "completed", input="n\n"))
    assert "Nothing deleted." in no.stdout
    done = ok(asm(store.db, "prune", "--older-than", "90d", "--status", "completed", "--yes"))
    assert "Deleted 1 session(s)" in done.stdout and "2 event(s)" in done.stdout
    assert [r["id"] for r in as_json(asm(store.db, "sessions", "--json"))] == [store.audit]
    none = ok(asm(store.db, "prune", "--older-than", "200d", "--yes"))
    assert "nothing to prune" in none.stdout


def test_prune_one_kind_keeps_sessions(store: Store) -> None:
    _age(store.db, store.audit, 40)
    result = ok(asm(store.db, "prune", "--older-than", "30d", "--kind", "tool_output", "--yes"))
    assert "Deleted 2 event(s) (2 tool_output)" in result.stdout
    assert "from 1 session(s)" in result.stdout
    kinds = [e["kind"] for e in as_json(asm(store.db, "show", store.audit, "--json"))["events"]]
    assert "tool_output" not in kinds and len(kinds) == 7
    fails(asm(store.db, "prune", "--older-than", "1d", "--kind", "goal", "--yes"), "goal")
    fails(asm(store.db, "prune", "--older-than", "soon"), "'90d'", code=2)
    fails(asm(store.db, "prune"), "--older-than", code=2)


# -- conventions --------------------------------------------------------------------------


def test_unknown_session_everywhere(store: Store) -> None:
    for command in ("show", "restore", "delete"):
        fails(
            asm(store.db, command, "01NOPE", *(["--yes"] if command == "delete" else [])), "01NOPE"
        )
    # under --json the error is JSON (issue 29)
    error = json.loads(asm(store.db, "restore", "01NOPE", "--json").stderr)["error"]
    assert error["type"] == "SessionNotFound" and "01NOPE" in error["message"]


def test_database_problems_are_one_line(tmp_path: Path) -> None:
    fails(asm(tmp_path / "nowhere" / "s.db", "import", "-", input=b""), "mkdir -p")
    fails(asm(tmp_path / "nowhere" / "s.db", "sessions"), "does not exist")
    fails(asm(tmp_path / "typo.db", "stats"), "'" + str(tmp_path / "typo.db") + "'", "--db")
    assert not (tmp_path / "typo.db").exists()
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("hello " * 1000, encoding="utf-8")
    fails(asm(not_sqlite, "sessions"), "not a usable session database")


def test_newer_schema_is_refused(store: Store) -> None:
    with sqlite3.connect(store.db) as conn:
        conn.execute("INSERT INTO migrations (name) VALUES ('9999_from_the_future')")
    fails(asm(store.db, "sessions"), "9999_from_the_future", "pip install -U")


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    result = asm(tmp_path / "nowhere" / "s.db", "--debug", "import", "-", input=b"")
    assert result.exit_code == 1
    assert "Traceback" in result.stderr and "Error: " in result.stderr


def test_usage_errors_are_one_line(store: Store) -> None:
    line = fails(asm(store.db, "sessions", "--bogus"), "--bogus", code=2)
    assert "memlane sessions --help" in line
    fails(asm(store.db, "no-such-command"), "no-such-command", code=2)
    fails(asm(store.db, "sessions", "--status", "done"), "done", code=2)


def test_db_from_the_environment(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_DB", str(store.db))
    assert len(as_json(asm(None, "sessions", "--json"))) == 2


def test_bad_embedder_setting(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "gpt")
    fails(asm(store.db, "search", "x"), "MEMLANE_EMBEDDER", "'gpt'", code=2)


def test_demo_runs_with_the_hash_embedder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    result = ok(asm(None, "demo"))
    for text in ("1. Process A", "2. Process B", "3. Process B asks", "memlane --db", "## Goal"):
        assert text in result.stdout, text
    (db,) = tmp_path.glob("memlane-demo-*/sessions.db")
    assert as_json(asm(db, "stats", "--json"))["events"] == 8
