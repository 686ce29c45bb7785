"""Issue 10's paper cuts that are fixed: each as a new user met it."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from memlane import InvalidInput, SessionClosed, SessionManager
from memlane.testing import HashEmbedder


def test_a_single_kind_may_be_a_string(mgr: SessionManager) -> None:
    session = mgr.start_session("Collect facts")
    fact = mgr.record_fact(session.id, "the API limit is 60 requests a minute")
    mgr.record_decision(session.id, "batch the requests")
    assert [e.id for e in mgr.events(session.id, kinds="fact")] == [fact.id]
    assert [h.event.id for h in mgr.search("API limit", kinds="fact")] == [fact.id]
    with pytest.raises(InvalidInput, match="Unknown event kind 'fakt'"):
        mgr.events(session.id, kinds="fakt")


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda m, s: m.search(""), "query is empty; give the words or question"),
        (lambda m, s: m.start_session("  "), "goal is empty; give the session's goal"),
        (lambda m, s: m.record_fact(s, ""), "content is empty; give the text to store"),
    ],
)
def test_empty_text_messages_name_their_argument(
    mgr: SessionManager, call: object, named: str
) -> None:
    session = mgr.start_session("Say what was empty")
    with pytest.raises(InvalidInput, match=named):
        call(mgr, session.id)  # type: ignore[operator]


def test_empty_agent_id_is_named(db_path: Path) -> None:
    with pytest.raises(InvalidInput, match="agent_id is empty; give the agent's name"):
        SessionManager("", db_path, embedder=HashEmbedder())


def test_ending_twice(mgr: SessionManager) -> None:
    session = mgr.start_session("Finish the report")
    pending = mgr.add_pending(session.id, "proof-read the summary")
    first = mgr.end_session(session.id)
    assert mgr.end_session(session.id).updated_at == first.updated_at  # same status: a no-op
    with pytest.raises(SessionClosed, match="already ended as completed"):
        mgr.end_session(session.id, "failed")
    # open pending steps stay open, and restore still lists them as work left undone
    assert mgr.get_event(pending.id).status == "open"
    assert "proof-read the summary" in mgr.restore(session.id, 500).text


def test_newest_events_first(mgr: SessionManager) -> None:
    session = mgr.start_session("Count")
    for n in range(5):
        mgr.record_fact(session.id, f"fact {n}")
    newest = mgr.events(session.id, kinds="fact", limit=2, newest_first=True)
    assert [e.content for e in newest] == ["fact 4", "fact 3"]
    assert [e.content for e in mgr.events(session.id, kinds="fact", limit=2)] == [
        "fact 0",
        "fact 1",
    ]


def test_home_folder_in_db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with SessionManager("a", "~/agents.db", embedder=HashEmbedder(), background=False) as mgr:
        mgr.start_session("where does it live?")
    assert (tmp_path / "agents.db").is_file()


def test_tool_output_none_is_refused(mgr: SessionManager) -> None:
    session = mgr.start_session("Call tools")
    with pytest.raises(InvalidInput, match="output=None"):
        mgr.record_tool_output(session.id, None, tool="search")
    assert mgr.events(session.id, kinds="tool_output") == []


def test_resolved_errors_leave_the_important_section(mgr: SessionManager) -> None:
    session = mgr.start_session("Deploy")
    error = mgr.record_error(session.id, "the deploy key expired")
    for n in range(40):
        mgr.add_message(session.id, "user", f"status update {n}: still deploying the service")
    assert error.id in mgr.restore(session.id, 400).report.included_ids("important")
    mgr.resolve_error(error.id)
    assert error.id not in mgr.restore(session.id, 400).report.included_ids("important")


def test_a_misspelt_model_family_warns_with_a_suggestion(db_path: Path) -> None:
    """Issue 10, item 6: "gpt4o" silently fell back to an estimate."""
    from memlane.text.tokens import UnknownModelWarning

    with pytest.warns(UnknownModelWarning, match="Did you mean 'gpt-4o'"):
        SessionManager("a", db_path, embedder=HashEmbedder(), model="gpt4o").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # known families, exact or estimated: no warning
        for model in ("gpt-4o-mini", "claude-3-opus", "meta-llama/Llama-3.1-8B", "qwen2.5-7b"):
            SessionManager("a", db_path, embedder=HashEmbedder(), model=model).close()


def test_read_only_mode_reads_everything_and_writes_nothing(tmp_path: Path) -> None:
    """Issue 10, item 1: a read-only store — search and restore work, writes raise a clear
    StoreReadOnly, nothing is counted or embedded on the side."""
    import sqlite3

    from memlane import StoreReadOnly

    db = tmp_path / "archive.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as writer:
        session = writer.start_session("Archive the Q3 incident")
        fact = writer.record_fact(session.id, "the incident began with a bad certificate")
        writer.flush()
        late = writer.record_fact(session.id, "the certificate expired on a Sunday")
    before = db.read_bytes()
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
        hits = reader.search("certificate", k=5)
        assert {fact.id, late.id} <= {hit.event.id for hit in hits}  # late: by keyword
        assert "bad certificate" in reader.restore(session.id, 400, query="certificate").text
        assert len(reader.events(session.id)) == 3
        assert reader.health().worker_running is False
        writes = [
            lambda: reader.record_fact(session.id, "x"),
            lambda: reader.start_session("new"),
            lambda: reader.end_session(session.id),
            lambda: reader.delete_session(session.id),
            lambda: reader.summarize(session.id),
            lambda: reader.reindex(),
        ]
        for write in writes:
            with pytest.raises(StoreReadOnly, match="read_only=True"):
                write()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT sum(recall_count) FROM events").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM outbox").fetchone()[0] == 1  # not embedded
    assert db.read_bytes() == before
    with pytest.raises(InvalidInput, match="no database"):
        SessionManager("a", tmp_path / "missing.db", embedder=HashEmbedder(), read_only=True)
