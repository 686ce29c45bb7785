"""Retention policies (retention.py, privacy/retention_sweep.py) on SQLite: what each form
deletes, what it never deletes, keep, agent scope, dry runs, the background worker's
schedule, `memlane retention`.
(The race with writers runs on every backend: testing/privacy_conformance.py.)"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlane import RetentionPolicy, SessionManager
from memlane.admin import StoreAdmin
from memlane.errors import InvalidInput
from memlane.testing import HashEmbedder

from .test_cli import asm

Factory = Callable[..., SessionManager]
LONG_AGO = datetime.now(timezone.utc) - timedelta(days=400)


def _age(db: Path, session_id: str, days: int = 400) -> None:
    """Make a session's last activity ``days`` old (what time would do)."""
    moment = int((datetime.now(timezone.utc) - timedelta(days=days)).timestamp() * 1e6)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE sessions SET updated_us = ? WHERE id = ?", (moment, session_id))


def _admin(db: Path) -> StoreAdmin:
    return StoreAdmin(db, embedder=HashEmbedder())


def test_old_sessions_go_memory_and_recent_ones_stay(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    old = [mgr.start_session(f"old task {i}") for i in range(4)]
    for session in old[:3]:
        mgr.end_session(session.id, "completed")
    recent = mgr.start_session("recent task")
    mgr.remember("u1", "Likes tea")  # a memory session, as old as the rest below
    mgr.ingest(text="# Guide\n\nRotate keys monthly.", name="guide.md")
    with sqlite3.connect(db_path) as conn:  # every session but the recent one, memory too
        ids = [
            row[0] for row in conn.execute("SELECT id FROM sessions WHERE id != ?", (recent.id,))
        ]
    assert len(ids) == 6
    for session_id in ids:
        _age(db_path, session_id)
    admin = _admin(db_path)
    try:
        policy = RetentionPolicy("90d", statuses=["completed"])
        plan = admin.apply_retention(policy, dry_run=True)
        assert sorted(plan.sessions) == sorted(s.id for s in old[:3]) and plan.dry_run
        done = admin.apply_retention(policy)
        assert done.sessions == plan.sessions and done.events == plan.events
        assert done.events_by_kind == {"goal": 3}
        left = {s.goal for s in mgr.list_sessions(limit=None)}
        assert {"old task 3", "recent task"} <= left  # active, and recent
        assert [f.text for f in mgr.facts("u1")] == ["Likes tea"]
        assert mgr.documents()  # knowledge stays
        everything = admin.apply_retention(RetentionPolicy("90d"))
        assert everything.sessions == [old[3].id]
        assert admin.apply_retention(RetentionPolicy("90d")).sessions == []
    finally:
        admin.close()


def test_keep_spares_each_agents_newest_sessions(make_manager: Factory, db_path: Path) -> None:
    for agent in ("a", "b"):
        mgr = make_manager(agent, background=False)
        for i in range(5):
            session = mgr.start_session(f"{agent} task {i}")
            _age(db_path, session.id, days=400 - i)  # task 4 is the newest
    admin = _admin(db_path)
    try:
        result = admin.apply_retention(RetentionPolicy("30d", keep=2))
        assert len(result.sessions) == 6
        kept = {info.session.goal for info in admin.sessions()}
        assert kept == {"a task 3", "a task 4", "b task 3", "b task 4"}
    finally:
        admin.close()


def test_old_events_go_but_never_goals_todos_or_current_facts(
    make_manager: Factory, db_path: Path
) -> None:
    mgr = make_manager("a", background=False)
    session = mgr.start_session("Long chat")
    for i in range(6):
        mgr.record_tool_output(session.id, f"output {i}", created_at=LONG_AGO + timedelta(hours=i))
    mgr.record_tool_output(session.id, "fresh output")
    mgr.record(session.id, "pending", "still to do", created_at=LONG_AGO)
    mgr.remember("u1", "Lives in Berlin", key="city", valid_from=LONG_AGO)
    mgr.remember("u1", "Lives in Zurich", key="city", valid_from=LONG_AGO + timedelta(days=1))
    # (a user's facts are recorded now; their age for retention is their created_at)
    memory = next(s for s in mgr.list_sessions(limit=None, internal=True) if s.user_id == "u1")
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "UPDATE events SET created_us = ? WHERE session_id = ?",
            (int(LONG_AGO.timestamp() * 1e6), memory.id),
        )
    result = mgr.apply_retention(RetentionPolicy("90d", kinds=["tool_output", "pending", "fact"]))
    assert result.events_by_kind == {"fact": 1, "tool_output": 6}
    contents = [e.content for e in mgr.events(session.id)]
    assert contents == ["still to do", "Long chat", "fresh output"]  # (in time order)
    assert [f.text for f in mgr.facts("u1")] == ["Lives in Zurich"]  # current: kept
    assert mgr.fact_history("u1", key="city")[0].text == "Lives in Zurich"


def test_keep_spares_each_sessions_newest_events(make_manager: Factory) -> None:
    mgr = make_manager("a", background=False)
    sessions = [mgr.start_session(f"chat {n}") for n in range(2)]
    for session in sessions:
        for i in range(5):
            mgr.add_message(session.id, "user", f"m{i}", created_at=LONG_AGO + timedelta(hours=i))
    result = mgr.apply_retention(RetentionPolicy("30d", kinds=["message"], keep=2))
    assert result.events == 6 and result.sessions_touched == 2
    for session in sessions:
        assert [e.content for e in mgr.events(session.id, kinds=["message"])] == ["m3", "m4"]
    short = mgr.start_session("short")
    mgr.add_message(short.id, "user", "only", created_at=LONG_AGO)
    again = mgr.apply_retention(RetentionPolicy("30d", kinds=["message"], keep=2))
    assert again.events == 0  # each session holds no more than it keeps


def test_an_agent_applies_retention_to_its_own_sessions_only(
    make_manager: Factory, db_path: Path
) -> None:
    a, b = make_manager("a", background=False), make_manager("b", background=False)
    for mgr in (a, b):
        session = mgr.start_session("task")
        mgr.add_message(session.id, "user", "old", created_at=LONG_AGO)
    assert a.apply_retention(RetentionPolicy("30d", kinds=["message"])).events == 1
    assert [e.content for e in b.events(None, kinds=["message"])] == ["old"]


def test_the_background_worker_applies_the_policy(make_manager: Factory) -> None:
    policy = RetentionPolicy("30d", kinds=["message"])
    writer = make_manager("a", background=False)
    session = writer.start_session("chat")
    writer.add_message(session.id, "user", "old", created_at=LONG_AGO)
    writer.add_message(session.id, "user", "new")
    worker = make_manager("a", retention=policy)
    deadline = time.monotonic() + 15
    while [e.content for e in writer.events(session.id, kinds=["message"])] != ["new"]:
        assert time.monotonic() < deadline, "the worker never applied the policy"
        time.sleep(0.1)
    worker.close()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_age": "soon"}, "not an age"),
        ({"max_age": timedelta(0)}, "positive"),
        ({"max_age": "30d", "kinds": ["goal"]}, "needs its goal"),
        ({"max_age": "30d", "kinds": ["knowledge"]}, "delete_document"),
        ({"max_age": "30d", "kinds": ["nonsense"]}, "kind"),
        ({"max_age": "30d", "kinds": []}, "empty"),
        ({"max_age": "30d", "statuses": ["closed"]}, "Unknown session status"),
        ({"max_age": "30d", "keep": -1}, "keep"),
    ],
)
def test_bad_policies_are_refused(options: dict[str, object], says: str) -> None:
    with pytest.raises(InvalidInput, match=says):
        RetentionPolicy(**options)  # type: ignore[arg-type]


def test_retention_needs_the_worker(make_manager: Factory) -> None:
    with pytest.raises(InvalidInput, match="background"):
        make_manager("a", background=False, retention=RetentionPolicy("30d"))


def test_asm_retention(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    session = mgr.start_session("chat")
    for i in range(3):
        mgr.add_message(session.id, "user", f"m{i}", created_at=LONG_AGO)
    mgr.close()
    dry = asm(db_path, "retention", "--max-age", "30d", "--kind", "message", "--dry-run")
    assert dry.exit_code == 0 and "Would delete 3 event(s) (3 message)" in dry.output
    done = asm(db_path, "retention", "--max-age", "30d", "--kind", "message", "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert '"events": 3' in done.output
    bad = asm(db_path, "retention", "--max-age", "30d", "--kind", "goal", "--yes")
    assert bad.exit_code != 0 and "needs its goal" in bad.output
