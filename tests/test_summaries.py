"""Rolling summary memory: summarize() writes a summary event and changes nothing else."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlane import InvalidInput, SessionManager
from memlane.admin import (
    StoreAdmin,
    json_line,
)
from memlane.testing import HashEmbedder
from memlane.text.tokens import tokenizer_for

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
COUNT = tokenizer_for("gpt-4o").count


def busy_session(mgr: SessionManager, turns: int = 120) -> tuple[str, list[Any]]:
    session = mgr.start_session("Migrate the billing service to PostgreSQL 16")
    events = []
    for n in range(turns):
        when = T0 + timedelta(hours=n)
        if n == 10:
            decision = mgr.record_decision(session.id, "Use logical replication", created_at=when)
            events.append(decision)
        elif n == 20:
            events.append(mgr.record_error(session.id, "pg_dump timed out", created_at=when))
        elif n == 30:
            events.append(mgr.record_fact(session.id, "Billing DB is 340 GB", created_at=when))
        elif n % 7 == 0:
            step = mgr.record_step(session.id, f"copy {n}", result={"rows": n}, created_at=when)
            events.append(step)
        else:
            role = ("user", "assistant")[n % 2]
            text = f"turn {n}: checking replication lag and table {n} sizes again"
            events.append(mgr.add_message(session.id, role, text, created_at=when))
    return session.id, events


def export(db: Path) -> list[str]:
    with StoreAdmin(db) as admin:
        return [json_line(record) for record in admin.export()]


def test_export_differs_only_by_the_new_event(mgr: SessionManager, db_path: Path) -> None:
    session_id, _ = busy_session(mgr)
    before = export(db_path)
    summary = mgr.summarize(session_id, max_tokens=300)
    after = export(db_path)
    added = [line for line in after if line not in before]
    assert [line for line in after if line not in added] == before
    assert len(added) == 1 and summary.id in added[0] and '"kind":"summary"' in added[0]


def test_covered_range_is_exact_and_rolls(mgr: SessionManager) -> None:
    session_id, events = busy_session(mgr)
    first = mgr.summarize(session_id, upto=events[59].id, max_tokens=300)
    assert first.kind == "summary" and COUNT(first.content) <= 300
    assert first.payload["covers"] == {
        "from": events[0].id,
        "from_us": int(events[0].created_at.timestamp() * 1_000_000),
        "to": events[59].id,
        "to_us": int(events[59].created_at.timestamp() * 1_000_000),
        "events": 60,
    }
    assert first.payload["method"] == "extractive" and first.payload["supersedes"] is None
    # decisions and unresolved errors first, dated
    assert "- [2026-03-02] decision: Use logical replication" in first.content
    assert "error (unresolved): pg_dump timed out" in first.content
    second = mgr.summarize(session_id, max_tokens=300)
    assert second.payload["covers"]["from"] == events[0].id
    assert second.payload["covers"]["to"] == events[-1].id
    assert second.payload["covers"]["events"] == len(events)
    assert second.payload["supersedes"] == first.id
    # the superseded summary is kept, not shown
    assert mgr.get_event(first.id).content == first.content
    ctx = mgr.restore(session_id, 400)
    assert ctx.report.included_ids("earlier") == [second.id]
    assert first.id not in ctx.report.included_ids()
    # nothing new: the current summary stands, nothing is written
    assert mgr.summarize(session_id).id == second.id
    assert len(mgr.events(session_id, kinds=["summary"])) == 2
    # upto as a time
    third = mgr.summarize(session_id, upto=events[59].created_at)
    assert third.id == second.id  # already covered


def test_tiny_budget_gets_the_summary_instead_of_nothing(mgr: SessionManager) -> None:
    session = mgr.start_session("Index the legal archive")
    for n in range(40):
        blob = {"page": n, "text": "clause " * 2_000}
        mgr.record_tool_output(session.id, blob, tool="ocr", created_at=T0 + timedelta(minutes=n))
    mgr.record_decision(session.id, "Skip scanned pages with no text layer", created_at=T0)
    mgr.summarize(session.id, max_tokens=200)
    goal_only = mgr.restore(session.id, 40).token_count
    ctx = mgr.restore(session.id, goal_only + 110)
    assert "## Earlier (summarised)" in ctx.text
    assert ctx.token_count <= goal_only + 110


def test_summary_left_out_when_everything_it_covers_is_shown(mgr: SessionManager) -> None:
    session_id, _ = busy_session(mgr, turns=8)
    mgr.summarize(session_id)
    ctx = mgr.restore(session_id, 4_000)
    assert "## Earlier (summarised)" not in ctx.text
    assert ctx.report.included_ids("earlier") == []


def test_user_summariser_and_its_fallbacks(mgr: SessionManager) -> None:
    session_id, _ = busy_session(mgr)
    seen: list[tuple[str, int]] = []

    def good(text: str, max_tokens: int) -> str:
        seen.append((text, max_tokens))
        return "Billing migration: replication chosen, pg_dump timed out."

    summary = mgr.summarize(session_id, upto=None, max_tokens=100, summarizer=good)
    assert summary.payload["method"] == "summarizer"
    assert summary.content.startswith("Billing migration")
    assert seen[0][1] == 100 and "Use logical replication" in seen[0][0]
    assert COUNT(seen[0][0]) > 100  # it was given more material than it may return

    cases = {
        "too long": (lambda text, n: "word " * 5_000, "over 100 tokens"),
        "empty": (lambda text, n: "   ", "returned nothing"),
        "not a string": (lambda text, n: {"summary": "x"}, "returned dict"),
    }
    for name, (summariser, why) in cases.items():
        mgr.record_fact(session_id, f"new fact for the {name} case")
        out = mgr.summarize(session_id, max_tokens=100, summarizer=summariser)
        assert out.payload["method"].startswith("extractive (fallback:"), name
        assert why in out.payload["method"], name
        assert COUNT(out.content) <= 100

    def broken(text: str, max_tokens: int) -> str:
        raise TimeoutError("LLM timed out")

    mgr.record_fact(session_id, "one more fact")
    before = len(mgr.events(session_id))
    with pytest.raises(TimeoutError):
        mgr.summarize(session_id, summarizer=broken)
    assert len(mgr.events(session_id)) == before  # nothing half-written


def test_bad_arguments(mgr: SessionManager) -> None:
    session = mgr.start_session("nothing yet")
    with pytest.raises(InvalidInput, match="nothing to summarise"):
        mgr.summarize(session.id)
    mgr.record_fact(session.id, "a fact")
    with pytest.raises(InvalidInput, match="at least 32"):
        mgr.summarize(session.id, max_tokens=5)
    other = mgr.start_session("another")
    event = mgr.record_fact(other.id, "elsewhere")
    with pytest.raises(InvalidInput, match="upto must be an event of the session"):
        mgr.summarize(session.id, upto=event.id)
    with pytest.raises(InvalidInput, match="ISO-8601"):
        mgr.summarize(session.id, upto="yesterday-ish")


def test_ended_sessions_can_be_summarised(mgr: SessionManager) -> None:
    session_id, _ = busy_session(mgr, turns=30)
    mgr.end_session(session_id)
    updated = mgr.get_session(session_id).updated_at
    summary = mgr.summarize(session_id)
    assert summary.payload["covers"]["events"] == 30
    assert mgr.get_session(session_id).updated_at == updated


def test_two_summarisers_at_once_leave_one_current_summary(db_path: Path) -> None:
    with SessionManager("ops", db_path, embedder=HashEmbedder(), background=False) as mgr:
        session_id, _ = busy_session(mgr)
    results: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run() -> None:
        try:
            with SessionManager("ops", db_path, embedder=HashEmbedder(), background=False) as m:
                barrier.wait()
                results.append(m.summarize(session_id))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    with SessionManager("ops", db_path, embedder=HashEmbedder(), background=False) as mgr:
        summaries = mgr.events(session_id, kinds=["summary"])
        # every summary but the first supersedes the one before it: one current summary
        for older, newer in itertools.pairwise(summaries):
            assert newer.payload["supersedes"] == older.id
        assert len({r.id for r in results}) <= len(summaries)
        ctx = mgr.restore(session_id, 300)
        assert ctx.report.included_ids("earlier") == [summaries[-1].id]


def test_auto_summary_is_written_by_the_worker_not_by_record(db_path: Path) -> None:
    with SessionManager(
        "ops", db_path, embedder=HashEmbedder(), background=False, auto_summary=300
    ) as mgr:
        session_id, _ = busy_session(mgr, turns=60)  # ~900 tokens
        assert mgr.events(session_id, kinds=["summary"]) == []  # record() never summarises
    with SessionManager("ops", db_path, embedder=HashEmbedder(), auto_summary=300) as mgr:
        deadline = time.monotonic() + 20
        while not mgr.events(session_id, kinds=["summary"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        (summary,) = mgr.events(session_id, kinds=["summary"])
        assert summary.payload["covers"]["events"] == 60
        # no growth since: no second summary, however often the worker looks. Counted in
        # the worker's passes (its idle hooks, the auto-summary's among them), not slept
        # (issue 29: a 1.5 s sleep, which a starved worker could spend without one pass)
        passes = [0]
        mgr._writer.indexer.idle_hooks.append(lambda: passes.__setitem__(0, passes[0] + 1))
        deadline = time.monotonic() + 60
        while passes[0] < 3:  # (the first may end the pass that wrote the summary)
            assert time.monotonic() < deadline, "the worker stopped making passes"
            time.sleep(0.05)
        assert len(mgr.events(session_id, kinds=["summary"])) == 1
        for n in range(40):
            mgr.add_message(session_id, "user", f"more replication notes {n} " * 3)
        deadline = time.monotonic() + 20
        while len(mgr.events(session_id, kinds=["summary"])) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        newest = mgr.events(session_id, kinds=["summary"])[-1]
        assert newest.payload["supersedes"] == summary.id
    with pytest.raises(InvalidInput, match="at least 100"):
        SessionManager("ops", db_path, embedder=HashEmbedder(), auto_summary=5)
