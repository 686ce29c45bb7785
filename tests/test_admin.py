"""StoreAdmin, the library behind `memlane`: round trips, import rules, prune, reindex."""

from __future__ import annotations

import io
import sqlite3
import tempfile
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import InvalidInput, SessionManager, SessionManagerError, SessionNotFound
from memlane.admin import StoreAdmin, json_line, parse_cutoff
from memlane.testing import HashEmbedder

TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
).filter(lambda t: t.strip() != "")
NAME = TEXT.filter(lambda t: t == t.strip())
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NAME, inner, max_size=4),
    max_leaves=10,
)
EVENT = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["step", "fact", "decision", "tool_output", "custom:plan"]),
        "content": TEXT,
        "payload": st.none() | JSON,
        "importance": st.floats(0, 1),
        "tags": st.lists(NAME, max_size=3),
        "metadata": st.dictionaries(NAME, JSON, max_size=3),
        "created_at": st.datetimes(
            min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)
        ).map(lambda d: d.replace(tzinfo=timezone.utc)),
    }
)


def dump(db: Path) -> str:
    with StoreAdmin(db) as admin:
        return "".join(json_line(record) + "\n" for record in admin.export())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=st.lists(EVENT, min_size=1, max_size=6), pool=st.none() | NAME)
def test_export_import_export_is_identical(events: list[dict[str, Any]], pool: str | None) -> None:
    with tempfile.TemporaryDirectory() as folder:
        source, target = Path(folder) / "a.db", Path(folder) / "b.db"
        with SessionManager("agent", source, embedder=HashEmbedder(), background=False) as mgr:
            session = mgr.start_session("round trip", shared_pool=pool, metadata={"k": 1.5})
            for event in events:
                mgr.record(session.id, **event)
        first = dump(source)
        with StoreAdmin(target) as admin:
            result = admin.import_records(io.StringIO(first))
            assert result.events_inserted == len(events) + 1 and not result.bad
            assert admin.import_records(io.StringIO(first)).inserted == 0
        assert dump(target) == first


def test_import_takes_dicts_and_reports_progress(make_manager: Any, tmp_path: Path) -> None:
    mgr = make_manager()
    session = mgr.start_session("dicts")
    for i in range(3):
        mgr.record_fact(session.id, f"fact {i}")
    with StoreAdmin(mgr.db_path) as admin:
        records = list(admin.export())
    calls: list[tuple[int, int | None]] = []
    with StoreAdmin(tmp_path / "copy.db") as admin:
        result = admin.import_records(records, progress=lambda d, t: calls.append((d, t)))
        assert (result.sessions_inserted, result.events_inserted) == (1, 4)
        assert calls[-1] == (len(records), None)
        assert [e.content for e in admin.events(session.id)][1:] == ["fact 0", "fact 1", "fact 2"]
        assert admin.stats().pending_embeddings == 4  # queued, not embedded, by an import


def test_import_skip_bad_and_dry_run(make_manager: Any, tmp_path: Path) -> None:
    mgr = make_manager()
    session = mgr.start_session("bad lines")
    mgr.record_fact(session.id, "kept")
    with StoreAdmin(mgr.db_path) as admin:
        lines = [json_line(r) for r in admin.export()]
    lines.insert(2, "[1, 2]")
    lines.append("")  # blank lines are ignored
    lines.append('{"type": "mystery"}')
    with StoreAdmin(tmp_path / "copy.db") as admin:
        with pytest.raises(InvalidInput, match="Line 3: a record must be a JSON object"):
            admin.import_records(lines, dry_run=True)
        dry = admin.import_records(lines, dry_run=True, skip_bad=True)
        assert dry.dry_run and dry.events_inserted == 2 and admin.stats().events == 0
        result = admin.import_records(lines, skip_bad=True)
        assert [(b.line, b.message[:20]) for b in result.bad] == [
            (3, "a record must be a J"),
            (7, "unknown record type "),
        ]
        assert result.events_inserted == 2


def test_sessions_and_search_across_agents(make_manager: Any) -> None:
    a, b = make_manager("a"), make_manager("b")
    sa = a.start_session("deploy the api", user_id="u1")
    a.record_fact(sa.id, "the api runs on port 8080")
    sb = b.start_session("write the docs")
    b.record_fact(sb.id, "the docs mention port 8080")
    with StoreAdmin(a.db_path, embedder=HashEmbedder()) as admin:
        assert {info.session.agent_id for info in admin.sessions()} == {"a", "b"}
        assert [info.session.id for info in admin.sessions(user="u1")] == [sa.id]
        assert admin.session(sb.id).events == 2
        hits = admin.search("port 8080", k=4)
        assert {hit.event.agent_id for hit in hits} == {"a", "b"}
        assert {hit.event.agent_id for hit in admin.search("port", agent="b")} == {"b"}
        with pytest.raises(SessionNotFound, match="belongs to 'a'"):
            admin.search("port", agent="b", session=sa.id)
    assert a.search("port 8080", k=4)  # the manager's isolation is untouched
    assert {hit.event.agent_id for hit in a.search("port 8080", k=4)} == {"a"}


def test_resolve_finds_a_session_as_session_does_without_its_size(make_manager: Any) -> None:
    a, b = make_manager("a"), make_manager("b")
    first = a.start_session("deploy the api", key="nightly")
    a.record_fact(first.id, "the api runs on port 8080")
    same_key = b.start_session("write the docs", key="nightly")
    with StoreAdmin(a.db_path, embedder=HashEmbedder(), read_only=True) as admin:
        assert admin.resolve(first.id) == admin.session(first.id).session
        assert admin.resolve(first.id[:12]).id == first.id  # a unique prefix of the id
        assert admin.resolve("nightly", agent="b").id == same_key.id
        with pytest.raises(InvalidInput, match="names sessions of several agents"):
            admin.resolve("nightly")  # a key is unique per agent only
        with pytest.raises(SessionNotFound, match="Did you mean 'nightly'"):
            admin.resolve("nightyl")


def test_a_text_filter_can_be_bounded_to_the_most_recently_active_sessions(
    make_manager: Any,
) -> None:
    mgr = make_manager()
    oldest = mgr.start_session("Rotate the TLS certificates")
    for n in range(4):
        mgr.start_session(f"routine task {n}")
    mgr.start_session("Renew the 100% uptime_report")  # LIKE's wildcards, as text
    with StoreAdmin(mgr.db_path, embedder=HashEmbedder(), read_only=True) as admin:
        goals = [info.session.goal for info in admin.sessions(text="tls CERT")]
        assert goals == [oldest.goal]  # case ignored, every session read
        assert admin.sessions(text="tls cert", scan=5) == []  # the 5 most recent only
        assert [i.session.id for i in admin.sessions(text="tls cert", scan=6)] == [oldest.id]
        assert len(admin.sessions(text="ROUTINE", scan=3)) == 2  # (the newest is not one)
        assert [i.session.goal for i in admin.sessions(text="100% uptime_", scan=1)] == [
            "Renew the 100% uptime_report"
        ]
        assert admin.sessions(text="100%_uptime") == []
        assert admin.sessions(scan=1) and len(admin.sessions(scan=1)) == 6  # (no text: no bound)
        with pytest.raises(InvalidInput, match="scan must be a positive integer"):
            admin.sessions(text="tls", scan=0)


def test_prune_and_delete(make_manager: Any) -> None:
    mgr = make_manager()
    old = mgr.start_session("old work")
    mgr.record_tool_output(old.id, {"rows": list(range(50))}, tool="sql")
    mgr.end_session(old.id)
    new = mgr.start_session("new work")
    mgr.record_tool_output(new.id, "fresh output")
    year_ago = 365 * 86_400 * 1_000_000
    with sqlite3.connect(mgr.db_path) as conn:
        conn.execute(
            "UPDATE sessions SET updated_us = updated_us - ? WHERE id = ?", (year_ago, old.id)
        )
        conn.execute(
            "UPDATE events SET created_us = created_us - ? WHERE session_id = ?",
            (year_ago, old.id),
        )
    mgr.search("work", k=5)  # vector caches loaded: prune must invalidate them
    with StoreAdmin(mgr.db_path) as admin:
        plan = admin.prune("90d", kind="tool_output", dry_run=True)
        assert (plan.events, plan.sessions_touched, plan.dry_run) == (1, 1, True)
        assert admin.prune(timedelta(days=90), kind="tool_output").events == 1
        gone = admin.prune("90d", status="completed")
        assert [info.session.id for info in gone.sessions] == [old.id] and gone.events == 1
        assert [info.session.id for info in admin.sessions()] == [new.id]
        with pytest.raises(InvalidInput, match="Unknown session status"):
            admin.prune("90d", status="closed")
        assert admin.delete_session(new.id) == 2
        with pytest.raises(SessionNotFound):
            admin.delete_session(new.id)
    assert mgr.search("work", k=5) == []


def test_reindex_reports_progress(make_manager: Any) -> None:
    mgr = make_manager()
    session = mgr.start_session("reindex me")
    for i in range(130):
        mgr.add_message(session.id, "user", f"message {i}")
    mgr.close()  # its background worker would embed part of the queue itself
    seen: list[tuple[int, int | None]] = []
    with StoreAdmin(mgr.db_path, embedder=HashEmbedder(dim=32), batch_size=50) as admin:
        assert admin.reindex(progress=lambda d, t: seen.append((d, t))) == 131
        assert seen == [(0, 131), (50, 131), (100, 131), (131, 131)]
        stats = admin.stats()
        assert (stats.embedder_name, stats.embedder_dim, stats.vectors) == ("hash-32", 32, 131)


def test_parse_cutoff() -> None:
    now = datetime.now(timezone.utc)
    for text, delta in (
        ("90d", timedelta(days=90)),
        ("12h", timedelta(hours=12)),
        ("30min", timedelta(minutes=30)),
        ("2w", timedelta(weeks=2)),
    ):
        got = datetime.fromtimestamp(parse_cutoff(text) / 1e6, timezone.utc)
        assert abs((now - delta - got).total_seconds()) < 5, text
    assert parse_cutoff("2026-01-01T00:00:00Z") == parse_cutoff(datetime(2026, 1, 1))
    with pytest.raises(InvalidInput, match="neither an age nor a timestamp"):
        parse_cutoff("soon")


def test_copy_to_refuses_the_same_store_however_spelt(tmp_path: Path) -> None:
    """Two admins on one file (a relative path, an absolute one, a sqlite:/// URL) are one
    store: copying it into itself copied 0 records and said nothing."""
    db = tmp_path / "one.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        mgr.start_session("kept once")
    with (
        StoreAdmin(db) as first,
        StoreAdmin(url=f"sqlite:///{db}") as second,
        pytest.raises(InvalidInput, match="same store"),
    ):
        first.copy_to(second)


def test_prune_decides_and_deletes_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An acknowledged write is never pruned away (issue 9, item 6). Before, prune chose
    its sessions outside the deleting transaction: an agent that recorded into a chosen
    session in between got its event acknowledged, then deleted with the session."""
    db = tmp_path / "prune.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        old = mgr.start_session("old and idle")
        mgr.record_fact(old.id, "stale fact")
        busy = mgr.start_session("old but about to be used")
    with sqlite3.connect(db) as conn:  # both sessions idle for a year
        conn.execute("UPDATE sessions SET updated_us = updated_us - 365 * 86400 * 1000000")
    outcome: dict[str, Any] = {}

    def agent_records() -> None:
        with SessionManager("a", db, embedder=HashEmbedder(), background=False) as agent:
            try:
                outcome["event"] = agent.record_fact(busy.id, "recorded while prune ran")
            except SessionManagerError as exc:
                outcome["error"] = exc

    with StoreAdmin(db) as admin:
        real_sessions = admin._store.sessions

        def then_the_agent_writes(*args: Any, **kwargs: Any) -> Any:
            chosen = real_sessions(*args, **kwargs)
            writer = threading.Thread(target=agent_records)
            writer.start()
            writer.join(1.0)  # finishes at once unless prune holds the write lock
            outcome["writer"] = writer
            return chosen

        monkeypatch.setattr(admin._store, "sessions", then_the_agent_writes)
        result = admin.prune("30d")
        outcome["writer"].join(30)
    assert {info.session.id for info in result.sessions} == {old.id, busy.id}
    assert result.events == 3 and result.events_by_kind == {"fact": 1, "goal": 2}
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as check:
        if "event" in outcome:  # acknowledged: it must still be there
            assert check.get_event(outcome["event"].id)
        else:  # refused: the session was gone by the time the agent could write
            assert isinstance(outcome["error"], SessionNotFound)
        assert check.list_sessions() == []


def test_session_keys_travel_through_export_and_import(tmp_path: Path) -> None:
    """A key is part of the session's record; importing it next to another session that
    holds the key for that agent is refused for that record, never silently doubled."""
    source, target = tmp_path / "source.db", tmp_path / "target.db"
    with SessionManager("a", source, embedder=HashEmbedder()) as mgr:
        mgr.start_session("chat", key="thread-42")
    with StoreAdmin(source) as admin:
        records = list(admin.export())
    assert records[1]["type"] == "session" and records[1]["key"] == "thread-42"
    with StoreAdmin(target) as admin:
        assert admin.import_records(records).sessions_inserted == 1
    with SessionManager("a", target, embedder=HashEmbedder()) as mgr:
        assert mgr.session_for("thread-42").goal == "chat"
    other = tmp_path / "other.db"
    with SessionManager("a", other, embedder=HashEmbedder()) as mgr:
        mgr.start_session("a different chat", key="thread-42")
    with StoreAdmin(other) as admin:
        result = admin.import_records(records, skip_bad=True)
        assert result.sessions_inserted == 0 and "key 'thread-42'" in result.bad[0].message
