"""Short-term memory on SQLite beyond the conformance suite: the worker's sweep, what a sweep
removes from the file, what summaries and Markdown files leave out, `memlane prune --expired`.
(Every backend's reads are held to the same rules by testing/expiry_conformance.py.)"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.engine.storage import SWEEP_BATCH
from memlane.errors import InvalidInput
from memlane.records.validate import expiry_us
from memlane.testing import HashEmbedder

from .test_cli import asm

Factory = Callable[..., SessionManager]


def _wait_past(moment: datetime | None) -> None:
    assert moment is not None
    time.sleep(max(0.0, (moment - datetime.now(timezone.utc)).total_seconds()) + 0.05)


def _rows(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_the_background_worker_sweeps_expired_events(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager(background=True)
    session = mgr.start_session("Chat")
    brief = mgr.add_message(session.id, "user", "my one-time code is 734 219", ttl=0.5)
    mgr.add_message(session.id, "assistant", "noted")
    _wait_past(brief.expires_at)
    deadline = time.monotonic() + 15
    while _rows(db_path, "SELECT count(*) FROM events WHERE expires_us IS NOT NULL"):
        assert time.monotonic() < deadline, "the worker never swept the expired event"
        time.sleep(0.1)
    # gone with its projections: keyword rows (FTS5), vector, outbox
    assert _rows(db_path, "SELECT count(*) FROM events_fts WHERE events_fts MATCH '734'") == 0
    assert _rows(db_path, f"SELECT count(*) FROM vectors WHERE seq = {brief.seq}") == 0
    assert _rows(db_path, f"SELECT count(*) FROM outbox WHERE seq = {brief.seq}") == 0
    assert [e.content for e in mgr.events(session.id, kinds=["message"])] == ["noted"]


def test_the_sweep_goes_in_batches_and_leaves_live_events(
    make_manager: Factory, db_path: Path
) -> None:
    mgr = make_manager(background=False)
    session = mgr.start_session("Bulk")
    count = SWEEP_BATCH * 2 + 7
    # a TTL, not one expires_at for all: recording 1,000 events took 0.8 s on a loaded machine,
    # and an expires_at 1.5 s ahead that passes before the last one is validated is refused
    recorded = mgr.record_many(
        session.id,
        [{"kind": "message", "content": f"note {i}", "ttl": 1.5} for i in range(count)]
        + [{"kind": "fact", "content": "stays", "ttl": 3600}],
    )
    _wait_past(max(e.expires_at for e in recorded if e.kind == "message" and e.expires_at))
    swept = mgr._writer.storage.sweep_expired()
    assert swept == {"message": count}
    assert [e.content for e in mgr.events(session.id) if e.kind == "fact"] == ["stays"]
    assert _rows(db_path, "SELECT count(*) FROM events WHERE expires_us IS NOT NULL") == 1


def test_summaries_and_markdown_files_leave_short_term_memory_out(
    make_manager: Factory, tmp_path: Path
) -> None:
    mgr = make_manager(background=False)
    session = mgr.start_session("Deploy the app")
    mgr.record_decision(session.id, "Deploy on Fridays only")
    mgr.record_decision(session.id, "The staging password is hunter2", ttl=3600)
    mgr.record_step(session.id, "ran the smoke tests")
    summary = mgr.summarize(session.id)
    assert "Fridays" in summary.content and "hunter2" not in summary.content
    mgr.export_markdown(tmp_path / "md")
    written = "".join(p.read_text() for p in (tmp_path / "md").rglob("*.md"))
    assert "Fridays" in written and "hunter2" not in written


def test_an_old_store_gains_the_column_and_reads_on(tmp_path: Path) -> None:
    """Migration 0009: a store written before expiry existed opens, keeps every event
    (never expiring) and takes expiring ones."""
    db = tmp_path / "old.db"
    mgr = SessionManager("a", db_path=db, embedder=HashEmbedder(), background=False)
    session = mgr.start_session("Old work")
    mgr.record_fact(session.id, "kept from before")
    mgr.close()
    with sqlite3.connect(db) as conn:  # as the previous version left it
        conn.execute("DROP INDEX events_expiring")
        conn.execute("ALTER TABLE events DROP COLUMN expires_us")
        conn.execute("DELETE FROM migrations WHERE name = '0009_expiry'")
    mgr = SessionManager("a", db_path=db, embedder=HashEmbedder(), background=False)
    try:
        assert [e.content for e in mgr.events(session.id, kinds=["fact"])] == ["kept from before"]
        assert mgr.record_fact(session.id, "for an hour", ttl=3600).expires_at is not None
    finally:
        mgr.close()


def test_asm_prune_expired(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager(background=False)
    session = mgr.start_session("Chat")
    brief = mgr.add_message(session.id, "user", "call me at 5", ttl=0.3)
    mgr.add_message(session.id, "user", "thanks")
    mgr.close()
    _wait_past(brief.expires_at)
    dry = asm(db_path, "prune", "--expired", "--dry-run")
    assert dry.exit_code == 0 and "Would delete 1 expired event(s) (1 message)" in dry.output
    done = asm(db_path, "prune", "--expired", "--yes")
    assert done.exit_code == 0 and "Deleted 1 expired event(s)" in done.output
    assert "nothing to prune" in asm(db_path, "prune", "--expired", "--yes").output
    mixed = asm(db_path, "prune", "--expired", "--older-than", "1d")
    assert mixed.exit_code != 0 and "takes no --older-than" in mixed.output
    neither = asm(db_path, "prune")
    assert neither.exit_code != 0 and "--older-than AGE, or --expired" in neither.output
    admin = StoreAdmin(db_path=db_path, embedder=HashEmbedder())
    try:
        assert admin.stats().events == 2  # the goal and "thanks"
    finally:
        admin.close()


def test_expiry_rules() -> None:
    now = 1_000_000_000_000
    assert expiry_us("message", timedelta(minutes=1), None, now) == now + 60_000_000
    assert expiry_us("fact", 1.5, None, now) == now + 1_500_000
    with pytest.raises(InvalidInput, match="cannot expire"):
        expiry_us("goal", None, "2999-01-01T00:00:00Z", now)
    assert expiry_us("goal", None, None, now) is None


def test_the_expired_events_are_found_through_the_partial_index(
    make_manager: Factory, db_path: Path
) -> None:
    """Every search asks for them: walking a partition's index instead cost 17 ms a search
    at 100k events (bench/perf.py caught it)."""
    from memlane.store._sql_rows import EXPIRED_ROWS

    mgr = make_manager(background=False)
    session = mgr.start_session("Chat")
    mgr.record_many(session.id, [{"kind": "fact", "content": f"f{i}"} for i in range(200)])
    with sqlite3.connect(db_path) as conn:  # (no ANALYZE: stores are not analysed)
        plan = " ".join(
            str(row) for row in conn.execute("EXPLAIN QUERY PLAN " + EXPIRED_ROWS, (1,))
        )
    assert "events_expiring" in plan


def test_a_session_count_leaves_out_its_expired_events_not_yet_swept(
    make_manager: Factory,
) -> None:
    # count_events counts the live ones as all minus the expired (one statement, each part
    # from an index): restore's report and every count must still leave out what expired
    mgr = make_manager(background=False)
    session = mgr.start_session("Chat")
    brief = mgr.add_message(session.id, "user", "my one-time code is 734 219", ttl=0.3)
    mgr.add_message(session.id, "user", "and my backup code is 112 358", ttl=0.3)
    mgr.add_message(session.id, "assistant", "noted", ttl=3600)
    mgr.add_message(session.id, "user", "thanks")
    assert mgr.restore(session.id, 2000).report.total_events == 5  # the goal and 4 messages
    _wait_past(brief.expires_at)
    report = mgr.restore(session.id, 2000).report
    assert report.total_events == 3  # none swept yet: no worker runs
    assert "734" not in mgr.restore(session.id, 2000).text
    assert _rows(mgr.db_path, "SELECT count(*) FROM events WHERE expires_us IS NOT NULL") == 3
