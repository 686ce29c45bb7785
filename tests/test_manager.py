"""SessionManager behaviour on real SQLite files, with the fast deterministic embedder."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlane import (
    EmbedderMismatch,
    EventNotFound,
    InvalidFilter,
    InvalidInput,
    InvalidPayload,
    SchemaTooNew,
    SessionClosed,
    SessionManager,
    SessionNotFound,
)
from memlane.testing import HashEmbedder


def count_rows(db_path: Path, table: str) -> int:
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def test_product_page_snippet(mgr: SessionManager) -> None:
    session = mgr.start_session(goal="Survey 2026 sparse attention methods")
    mgr.record_step(session.id, step="queried arxiv", result={"papers": 12})
    mgr.record_decision(session.id, text="prioritise papers with code releases")
    context = mgr.restore(session.id, max_tokens=4000)
    assert "Survey 2026 sparse attention methods" in context.text
    assert "prioritise papers with code releases" in context.text
    assert '{"papers":12}' in context.text.replace(" ", "")
    assert context.token_count <= 4000


def test_session_lifecycle(mgr: SessionManager) -> None:
    session = mgr.start_session("goal one", user_id="u1", metadata={"team": "a"})
    assert session.status == "active" and session.user_id == "u1"
    assert session.metadata == {"team": "a"}
    assert [s.id for s in mgr.list_sessions()] == [session.id]
    ended = mgr.end_session(session.id, status="failed")
    assert ended.status == "failed"
    assert mgr.list_sessions(status="active") == []
    assert [s.id for s in mgr.list_sessions(status="failed")] == [session.id]
    with pytest.raises(SessionClosed, match="failed"):
        mgr.record_fact(session.id, "too late")
    assert len(mgr.events(session.id)) == 1  # only the goal: nothing was lost or added


def test_events_in_order_with_filters(mgr: SessionManager) -> None:
    session = mgr.start_session("order")
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    mgr.record_fact(session.id, "third", created_at=base + timedelta(days=3))
    mgr.record_fact(session.id, "first", created_at=base + timedelta(days=1))
    mgr.record_decision(session.id, "second", created_at=(base + timedelta(days=2)).isoformat())
    facts = [e.content for e in mgr.events(session.id, kinds=["fact", "decision"])]
    assert facts == ["first", "second", "third"]
    window = mgr.events(session.id, since=base + timedelta(days=2), until=base + timedelta(days=3))
    assert [e.content for e in window] == ["second"]
    assert [e.content for e in mgr.events(session.id, kinds=["fact"], limit=1)] == ["first"]


def test_ids_sort_in_recording_order(mgr: SessionManager) -> None:
    session = mgr.start_session("ids")
    ids = [mgr.add_message(session.id, "user", f"m{i}").id for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50


def test_pending_lifecycle(mgr: SessionManager) -> None:
    session = mgr.start_session("pending work")
    todo = mgr.add_pending(session.id, "download the PDFs")
    other = mgr.add_pending(session.id, "email the author")
    assert todo.status == "open"
    step = mgr.complete_pending(todo.id, result={"files": 3})
    assert step.kind == "step" and step.payload == {"pending_id": todo.id, "result": {"files": 3}}
    done = mgr.get_event(todo.id)
    assert done.status == "done" and done.metadata["completed_by"] == step.id
    cancelled = mgr.cancel_pending(other.id, reason="not needed")
    assert cancelled.status == "cancelled"
    with pytest.raises(InvalidInput, match="already done"):
        mgr.complete_pending(todo.id)
    text = mgr.restore(session.id, max_tokens=2000).text
    assert "download the PDFs" in text  # as the completed step


def test_errors_resolve(mgr: SessionManager) -> None:
    session = mgr.start_session("errors")
    err = mgr.record_error(session.id, "rate limited by the API")
    assert err.status == "unresolved"
    assert mgr.resolve_error(err.id).status == "resolved"
    assert mgr.record_error(session.id, "fixed at once", resolved=True).status == "resolved"


def test_tool_output_text_and_json(mgr: SessionManager) -> None:
    session = mgr.start_session("tools")
    text = mgr.record_tool_output(session.id, "200 OK", tool="http")
    assert text.content == "200 OK" and text.payload is None and text.metadata["tool"] == "http"
    data = mgr.record_tool_output(
        session.id, {"account": "test", "two_factor": "disabled"}, tool="admin"
    )
    assert data.payload == {"account": "test", "two_factor": "disabled"}
    assert "two_factor: disabled" in data.content  # flattened so search reaches inside


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m, s: m.record(s, "fact", "   "), InvalidInput, "empty"),
        (lambda m, s: m.record(s, "decison", "x"), InvalidInput, "Unknown event kind"),
        (
            lambda m, s: m.record(s, "fact", "x", payload={"a": [1, float("nan")]}),
            InvalidPayload,
            r"\$\.a\[1\]",
        ),
        (
            lambda m, s: m.record(s, "fact", "x", payload={"a": float("inf")}),
            InvalidPayload,
            "Infinity",
        ),
        (
            lambda m, s: m.record(s, "fact", "x", payload={"when": datetime.now()}),
            InvalidPayload,
            r"datetime at \$\.when",
        ),
        (lambda m, s: m.record(s, "fact", "bad \ud800 text"), InvalidInput, "surrogate"),
        (lambda m, s: m.record(s, "fact", "x", payload={"k": "\udfff"}), InvalidInput, "surrogate"),
        (lambda m, s: m.record(s, "fact", "x", importance=1.5), InvalidInput, "importance"),
        (lambda m, s: m.record(s, "fact", "x", tags="solo"), InvalidInput, "tags"),
        (lambda m, s: m.record(s, "fact", "x", created_at="yesterday"), InvalidInput, "ISO-8601"),
        (lambda m, s: m.add_message(s, "robot", "hi"), InvalidInput, "role"),
        (lambda m, s: m.record("no-such-session", "fact", "x"), SessionNotFound, "does not exist"),
        (lambda m, s: m.get_event("nope"), EventNotFound, "nope"),
        (lambda m, s: m.search("x", where={"a": {"$regex": "b"}}), InvalidFilter, r"\$regex"),
        (lambda m, s: m.search("x", where={"$not": {"a": 1}}), InvalidFilter, r"\$not"),
        (lambda m, s: m.search("x", mode="fuzzy"), InvalidInput, "mode"),
        (lambda m, s: m.restore(s, max_tokens=0), InvalidInput, "max_tokens"),
    ],
)
def test_bad_input_is_refused_and_loses_nothing(mgr, call, error, message) -> None:  # type: ignore[no-untyped-def]
    session = mgr.start_session("robust")
    mgr.record_fact(session.id, "kept")
    before = [e.id for e in mgr.events(session.id)]
    with pytest.raises(error, match=message):
        call(mgr, session.id)
    assert [e.id for e in mgr.events(session.id)] == before


def test_budget_too_small_names_the_minimum(mgr: SessionManager) -> None:
    from memlane import BudgetTooSmall

    session = mgr.start_session("a goal " * 200)
    with pytest.raises(BudgetTooSmall) as info:
        mgr.restore(session.id, max_tokens=3)
    assert any(ch.isdigit() for ch in str(info.value))


def test_megabyte_content_is_stored_whole_and_summarised(mgr: SessionManager) -> None:
    session = mgr.start_session("big outputs")
    big = "log line with details\n" * 60_000  # ~1.3 MB
    event = mgr.record_tool_output(session.id, big, tool="tail")
    assert mgr.get_event(event.id).content == big
    mgr.flush()
    assert mgr.pending_embeddings() == 0
    context = mgr.restore(session.id, max_tokens=500)
    assert context.token_count <= 500
    assert "log line with details" in context.text


def test_search_modes_and_recall_counts(mgr: SessionManager) -> None:
    session = mgr.start_session("search")
    target = mgr.record_fact(session.id, "The deploy key rotates every ninety days")
    mgr.record_fact(session.id, "Lunch is at noon")
    for mode in ("hybrid", "semantic", "keyword"):
        hits = mgr.search("deploy key rotation", k=1, mode=mode)  # type: ignore[arg-type]
        assert hits[0].event.id == target.id, mode
    assert mgr.get_event(target.id).recall_count == 0  # counted in memory: a search reads
    mgr.flush()  # (or a second later, or at close)
    assert mgr.get_event(target.id).recall_count == 3
    assert mgr.search("zzzz qqqq", mode="keyword") == []


def test_search_sees_events_recorded_just_before(mgr: SessionManager) -> None:
    session = mgr.start_session("read your writes")
    for i in range(200):
        mgr.add_message(session.id, "user", f"filler message number {i}")
    needle = mgr.record_fact(session.id, "the staging password lives in vault path kv/staging")
    hits = mgr.semantic_search("where is the staging password kept?", k=3)
    assert needle.id in [hit.event.id for hit in hits]


def test_where_filters(mgr: SessionManager) -> None:
    session = mgr.start_session("filters")
    mgr.record_fact(
        session.id, "paper one on sparse attention", metadata={"year": 2024, "src": "arxiv"}
    )
    mgr.record_fact(
        session.id, "paper two on sparse attention", metadata={"year": 2026, "src": "acl"}
    )
    mgr.record_fact(session.id, "paper three on sparse attention", metadata={"year": 2026})

    def contents(where: dict) -> set[str]:  # type: ignore[type-arg]
        return {
            hit.event.content.split()[1]
            for hit in mgr.search("sparse attention", k=10, kinds=["fact"], where=where)
        }

    assert contents({"year": 2026}) == {"two", "three"}
    assert contents({"year": {"$gte": 2025, "$lt": 2027}}) == {"two", "three"}
    assert contents({"src": {"$in": ["arxiv", "acl"]}}) == {"one", "two"}
    assert contents({"src": {"$nin": ["arxiv"]}}) == {"two", "three"}
    assert contents({"src": {"$ne": "acl"}}) == {"one", "three"}
    assert contents({"src": {"$exists": False}}) == {"three"}
    assert contents({"$or": [{"src": "acl"}, {"year": 2024}]}) == {"one", "two"}
    for mode in ("semantic", "keyword"):
        hits = mgr.search("sparse attention", k=10, mode=mode, where={"year": 2024})  # type: ignore[arg-type]
        assert [h.event.content for h in hits] == ["paper one on sparse attention"]


def test_where_values_cannot_inject_sql(mgr: SessionManager, db_path: Path) -> None:
    session = mgr.start_session("inject")
    mgr.record_fact(session.id, "row")
    hits = mgr.search("row", where={"x": "1'); DROP TABLE events; --"})
    assert hits == []
    assert count_rows(db_path, "events") == 2


def test_delete_session_reaches_every_index(mgr: SessionManager, db_path: Path) -> None:
    keep = mgr.start_session("keep")
    gone = mgr.start_session("gone")
    mgr.record_fact(keep.id, "kept fact about llamas")
    mgr.record_fact(gone.id, "deleted fact about llamas")
    mgr.flush()
    assert len(mgr.search("llamas", k=10, mode="semantic")) == 4  # two goals + two facts
    assert mgr.delete_session(gone.id) == 2
    with pytest.raises(SessionNotFound):
        mgr.get_session(gone.id)
    for mode in ("semantic", "keyword", "hybrid"):
        contents = [h.event.content for h in mgr.search("llamas", k=10, mode=mode)]  # type: ignore[arg-type]
        assert "deleted fact about llamas" not in contents, mode
    with sqlite3.connect(db_path) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM events_fts WHERE events_fts MATCH 'deleted'"
            ).fetchone()[0]
            == 0
        )
        assert conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 2
        assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 0


def test_a_second_manager_sees_the_first_ones_writes(make_manager) -> None:  # type: ignore[no-untyped-def]
    first = make_manager()
    second = make_manager()
    session = first.start_session("shared file")
    assert second.search("shared file", k=1, mode="semantic")[0].event.session_id == session.id
    fact = first.record_fact(session.id, "orchids need indirect light")
    assert second.search("orchids light", k=1, mode="semantic")[0].event.id == fact.id


def test_embedder_mismatch_points_at_reindex(make_manager, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    first = make_manager(embedder=HashEmbedder(dim=64))
    session = first.start_session("embedded with 64 dims")
    first.flush()
    first.close()
    with pytest.raises(EmbedderMismatch, match="reindex"):
        make_manager(embedder=HashEmbedder(dim=32))
    rebuilt = make_manager(embedder=HashEmbedder(dim=32), reindex=True)
    hits = rebuilt.semantic_search("embedded with 64 dims", k=1)
    assert hits[0].event.session_id == session.id


def test_newer_schema_is_refused(make_manager, db_path: Path) -> None:  # type: ignore[no-untyped-def]
    make_manager().close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO migrations (name) VALUES ('9999_from_the_future')")
    with pytest.raises(SchemaTooNew, match="9999_from_the_future"):
        make_manager()


def test_missing_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        SessionManager("a", tmp_path / "nope" / "s.db", embedder=HashEmbedder())


def test_storage_pragmas_and_canonical_json(mgr: SessionManager, db_path: Path) -> None:
    session = mgr.start_session("pragmas")
    mgr.record_fact(session.id, "x", payload={"b": 1, "a": "é"})
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        stored = conn.execute("SELECT payload FROM events WHERE kind = 'fact'").fetchone()[0]
    assert stored == '{"a":"é","b":1}'
    assert json.loads(stored) == {"a": "é", "b": 1}


def test_context_manager_closes(db_path: Path) -> None:
    with SessionManager("a", db_path, embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("ctx")
    with pytest.raises(InvalidInput, match="closed"):
        mgr.get_session(session.id)


def test_many_decisions_do_not_crowd_out_recent_turns(mgr: SessionManager) -> None:
    session = mgr.start_session("long session with many decisions")
    for i in range(300):
        mgr.record_decision(session.id, f"decision {i}: prefer option {i % 7} for component {i}")
    last = mgr.add_message(session.id, "user", "the very latest user turn")
    context = mgr.restore(session.id, max_tokens=1500)
    assert "the very latest user turn" in context.text
    assert context.report.sections["important"] <= 1500 * 0.55
    item = next(i for i in context.report.items if i.event_id == last.id)
    assert item.section == "recent" and item.action == "included"


def test_restore_can_pull_relevant_history_from_other_sessions(mgr: SessionManager) -> None:
    old = mgr.start_session("earlier work on the billing service")
    lesson = mgr.record_fact(old.id, "billing service deploys need the VAT feature flag on")
    new = mgr.start_session("deploy the billing service")
    assert lesson.id not in mgr.restore(new.id, max_tokens=1000).report.included_ids()
    context = mgr.restore(new.id, max_tokens=1000, other_sessions=True)
    assert lesson.id in context.report.included_ids("relevant")
    assert "VAT feature flag" in context.text
    mgr.flush()
    assert mgr.get_event(lesson.id).recall_count == 1
