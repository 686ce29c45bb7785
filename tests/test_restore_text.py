"""The restored text as an LLM reads it: every token earns its place (issue 8, item 5), the
chat-shaped view, and large payloads read as their stored previews."""

from __future__ import annotations

import itertools
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import SessionManager
from memlane.events import Session
from memlane.restore import MESSAGE_OVERHEAD, RestoreCandidates, pack
from memlane.restore.text import collapse_repeats
from memlane.store.base import EventFilter
from memlane.text.tokens import tokenizer_for

T0 = datetime(2026, 11, 23, 1, 16, tzinfo=timezone.utc)
COUNT = tokenizer_for("gpt-4o").count


def test_time_is_said_when_it_changes(mgr: SessionManager) -> None:
    session = mgr.start_session("Fix the flaky login test")
    for n in range(40):
        mgr.record_step(session.id, f"ran check {n}", result={"ok": n % 3 != 0}, created_at=T0)
    ctx = mgr.restore(session.id, 600)
    stamps = re.findall(r"\[\d{4}-\d\d-\d\d \d\d:\d\d\]", ctx.text)
    assert len(stamps) <= len(ctx.report.sections)  # one per section at most: same minute
    assert not re.search(r"- \[\d\d:\d\d\]", ctx.text)
    later = mgr.record_fact(
        session.id, "the test uses a real clock", created_at=T0.replace(minute=20)
    )
    ctx = mgr.restore(session.id, 600)
    assert f"- [01:20] fact: {later.content}" in ctx.text


def test_repeated_lines_collapse(mgr: SessionManager) -> None:
    session = mgr.start_session("Fix the crash")
    trace = "Traceback (most recent call last):\n" + '  File "app.py", line 3\n' * 40
    mgr.record_error(session.id, trace + "ValueError: bad")
    ctx = mgr.restore(session.id, 600)
    assert '  File "app.py", line 3 (×40)' in ctx.text
    assert "ValueError: bad" in ctx.text
    block = next(line for line in ctx.text.split("\n\n") if "Traceback" in line)
    assert COUNT(block) < 60


def test_json_summary_keeps_what_is_unusual(mgr: SessionManager) -> None:
    session = mgr.start_session("Triage the nightly test run")
    rows = [{"test": f"suite/test_{i}", "status": "passed"} for i in range(1_500)]
    failed = list(range(100, 1_500, 87))[:16]
    for i in failed:
        rows[i]["status"] = "failed"
    mgr.record_tool_output(session.id, {"results": rows}, tool="pytest")
    ctx = mgr.restore(session.id, 1_000)
    assert all(f'"status":"failed","test":"suite/test_{i}"' in ctx.text for i in failed)
    assert "most have status: passed" in ctx.text


def test_hidden_pending_steps_are_counted(mgr: SessionManager) -> None:
    session = mgr.start_session("Ship the release")
    for n in range(30):
        mgr.add_pending(session.id, f"release checklist item number {n}: verify and sign off")
    ctx = mgr.restore(session.id, 300)
    shown = len(ctx.report.included_ids("pending"))
    assert 0 < shown < 30
    assert f"(+{30 - shown} more pending steps)" in ctx.text
    assert ctx.token_count <= 300


def test_short_content_is_whole_or_absent(mgr: SessionManager) -> None:
    session = mgr.start_session("Collect benchmark tables")
    step = mgr.record_step(
        session.id, "downloaded the results table", result={"rows": ["r" * 40] * 2_000}
    )
    ctx = mgr.restore(session.id, 300)
    item = next(i for i in ctx.report.items if i.event_id == step.id)
    if item.action == "summarised":
        assert "downloaded the results table" in ctx.text  # the content kept whole
    assert "chars omitted]…" not in ctx.text.split("step")[-1].split("\n")[0]
    for n in range(30):
        mgr.record_fact(session.id, f"fact {n}: the table has a column of latencies in ms")
    ctx = mgr.restore(session.id, 120)
    assert not any(i.action == "summarised" and i.kind == "fact" for i in ctx.report.items), (
        "short facts are kept whole or dropped"
    )


def test_completed_pending_appears_once_without_ids(mgr: SessionManager) -> None:
    session = mgr.start_session("Deploy")
    pending = mgr.add_pending(session.id, "run the smoke tests")
    mgr.complete_pending(pending.id, result="12 passed")
    cancelled = mgr.add_pending(session.id, "page the on-call")
    mgr.cancel_pending(cancelled.id, reason="fixed before paging")
    ctx = mgr.restore(session.id, 2_000)
    assert ctx.text.count("run the smoke tests") == 1
    assert pending.id not in ctx.text and "pending_id" not in ctx.text
    assert "pending (cancelled: fixed before paging): page the on-call" in ctx.text


def test_opening_line_says_what_the_block_is(mgr: SessionManager) -> None:
    session = mgr.start_session("Plan the trip", user_id="u-42", metadata={"locale": "fr-FR"})
    mgr.record_fact(session.id, "prefers trains")
    mgr.end_session(session.id)
    first = mgr.restore(session.id, 2_000).text.split("\n")
    assert first[0].startswith("Memory of agent researcher, user u-42 (session completed since")
    assert first[1] == 'Session metadata: {"locale":"fr-FR"}'


def test_earlier_sessions_important_decision_survives_a_busy_session(
    mgr: SessionManager,
) -> None:
    old = mgr.start_session("Choose a database")
    decision = mgr.record_decision(old.id, "Use PostgreSQL for the billing service")
    mgr.end_session(old.id)
    current = mgr.start_session("Build the billing database schema")
    for n in range(300):
        mgr.add_message(current.id, "user", f"schema question {n}: columns for invoices table")
    ctx = mgr.restore(current.id, 1_200, other_sessions=True)
    assert decision.id in ctx.report.included_ids()


# -- chat shape ------------------------------------------------------------------------------


def call(n: int) -> dict[str, Any]:
    return {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": "search", "arguments": "{}"},
    }


@st.composite
def conversations(draw: st.DrawFn) -> list[tuple[str, str, dict[str, Any]]]:
    turns: list[tuple[str, str, dict[str, Any]]] = []
    for n in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["user", "assistant", "tool_pair", "system", "orphan"]))
        text = draw(st.sampled_from(["ok", "look at the logs", "word " * 80, "第二 " * 30]))
        if kind == "tool_pair":
            turns.append(("assistant", "", {"tool_calls": [call(n)]}))
            turns.append(("tool", f"result {n}: {text}", {"tool_call_id": f"call_{n}"}))
        elif kind == "orphan":
            turns.append(("tool", f"late result {n}: {text}", {"tool_call_id": f"gone_{n}"}))
        else:
            turns.append((kind, f"{kind} {n} says {text}", {}))
    return turns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=conversations(), budget=st.integers(60, 3_000))
def test_turns_keep_roles_order_and_tool_pairs(
    turns: list[tuple[str, str, dict[str, Any]]], budget: int
) -> None:
    from memlane.events import Event

    session = Session("01S", "a", "Answer questions about the logs", "active", T0, T0)
    events = [
        Event(
            f"01E{n:08d}",
            "01S",
            "a",
            "message",
            content or f"(calls tool {n})",
            T0 + timedelta(seconds=n),
            importance=0.3,
            metadata={"role": role, **meta},
        )
        for n, (role, content, meta) in enumerate(turns)
    ]
    goal = Event("01G", "01S", "a", "goal", session.goal, T0, importance=1.0)
    ctx = pack(RestoreCandidates(session, [goal], [], events, []), budget, tokenizer_for("gpt-4o"))
    assert ctx.token_count <= budget and ctx.report.message_tokens <= budget
    assert ctx.messages == [{"role": "system", "content": ctx.system}, *ctx.turns]
    total = COUNT(ctx.system)
    for turn in ctx.turns:
        extra = {k: v for k, v in turn.items() if k not in ("role", "content")}
        total += COUNT(turn["content"]) + MESSAGE_OVERHEAD
        total += COUNT(json.dumps(extra, separators=(",", ":"))) if extra else 0
    assert total == ctx.report.message_tokens
    order = {e.id: i for i, e in enumerate(events)}
    by_content = {e.content: e for e in events}
    positions = [
        order[by_content[t["content"].removeprefix("[summarised] ")].id]
        if t["content"] in by_content
        else -1
        for t in ctx.turns
    ]
    known = [p for p in positions if p >= 0]
    assert known == sorted(known)  # in order
    answered: set[str] = set()
    for i, turn in enumerate(ctx.turns):
        assert turn["role"] in ("user", "assistant", "tool")
        if turn["role"] == "tool":
            assert turn["tool_call_id"] in answered, "a result never comes without its call"
        for c in turn.get("tool_calls", []):
            answered.add(c["id"])
            later = [t.get("tool_call_id") for t in ctx.turns[i + 1 :]]
            assert c["id"] in later, "a call never comes without its result"


def test_orphan_tool_result_stays_in_the_system_block(mgr: SessionManager) -> None:
    session = mgr.start_session("Answer from the logs")
    mgr.add_message(session.id, "user", "what failed last night?")
    mgr.add_message(session.id, "assistant", "(calls a tool)", metadata={"tool_calls": [call(1)]})
    mgr.add_message(session.id, "tool", "3 jobs failed", metadata={"tool_call_id": "call_1"})
    mgr.add_message(session.id, "tool", "an orphan", metadata={"tool_call_id": "call_9"})
    mgr.add_message(session.id, "assistant", "Three jobs failed.")
    ctx = mgr.restore(session.id, 2_000)
    assert [t["role"] for t in ctx.turns] == ["user", "assistant", "tool", "assistant"]
    assert ctx.turns[1]["tool_calls"] == [call(1)] and ctx.turns[2]["tool_call_id"] == "call_1"
    assert "an orphan" in ctx.system and "an orphan" not in json.dumps(ctx.turns)


# -- large payloads ---------------------------------------------------------------------------


def test_large_payloads_are_read_as_their_preview(mgr: SessionManager) -> None:
    session = mgr.start_session("Analyse the nightly logs")
    rows = [{"test": f"t{i}", "status": "passed", "log": "x" * 150} for i in range(6_000)]
    rows[4_321]["status"] = "failed"
    event = mgr.record_tool_output(session.id, {"rows": rows}, tool="pytest")
    assert mgr.get_event(event.id).payload == {"rows": rows}  # reads give the payload whole
    flt = EventFilter(mgr.scope, session_id=session.id, kinds=("tool_output",))
    # The preview is the worker's (a deferred digest): until then restore reads the payload.
    (heavy,) = mgr._writer.log.events(flt, previews=True)
    assert not heavy.preview and heavy.payload == {"rows": rows}
    assert '"status":"failed","test":"t4321"' in mgr.restore(session.id, 1_500).text
    mgr.flush()
    (light,) = mgr._writer.log.events(flt, previews=True)
    assert light.preview and light.payload_chars == len(
        json.dumps({"rows": rows}, separators=(",", ":"))
    )
    assert len(json.dumps(light.payload)) < 10_000
    ctx = mgr.restore(session.id, 1_500)
    assert '"status":"failed","test":"t4321"' in ctx.text
    item = next(i for i in ctx.report.items if i.event_id == event.id)
    assert item.action == "summarised" and "chars of payload" in item.reason


def test_large_payloads_live_apart_and_go_with_their_event(
    mgr: SessionManager, db_path: Any
) -> None:
    import sqlite3

    from memlane.admin import StoreAdmin, json_line

    session = mgr.start_session("Keep the big report")
    big = {"rows": [{"n": i, "text": "y" * 100} for i in range(2_000)]}
    event = mgr.record_tool_output(session.id, big, tool="report")
    small = mgr.record_step(session.id, "noted", result={"ok": True})
    with sqlite3.connect(db_path) as conn:
        row = conn.execute("SELECT payload FROM events WHERE id = ?", (event.id,)).fetchone()
        assert row == (None,)  # not in the events row: reads of its columns stay cheap
        assert conn.execute("SELECT count(*) FROM large_payloads").fetchone() == (1,)
        inline = conn.execute("SELECT payload FROM events WHERE id = ?", (small.id,)).fetchone()
        assert inline == ('{"result":{"ok":true}}',)
    assert mgr.get_event(event.id).payload == big
    assert [e.payload for e in mgr.events(session.id, kinds=["tool_output"])] == [big]
    with StoreAdmin(db_path) as admin:
        exported = [json_line(r) for r in admin.export()]
    assert any('"n":1999' in line for line in exported)
    mgr.delete_session(session.id)
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM large_payloads").fetchone() == (0,)


def test_pending_steps_that_do_not_fit_are_still_counted(mgr: SessionManager) -> None:
    session = mgr.start_session("Ship")
    for n in range(5):
        mgr.add_pending(session.id, f"a long checklist item {n}: " + "verify every detail " * 30)
    goal_only = mgr.restore(session.id, 30).token_count
    ctx = mgr.restore(session.id, goal_only + 20)
    assert "## Pending steps\n(+5 pending steps)" in ctx.text
    assert ctx.token_count <= goal_only + 20


@given(st.lists(st.sampled_from(["a", "b", "", "  ", "a "]), max_size=12))
def test_collapse_repeats_is_the_plain_rule(lines: list[str]) -> None:
    """Runs of _REPEAT_MIN or more equal non-blank lines become one line with a count; all
    else is kept (the no-repeat fast path included)."""
    expected: list[str] = []
    for line, group in itertools.groupby(lines):
        run = len(list(group))
        if run >= 3 and line.strip():
            expected.append(f"{line} (×{run})")
        else:
            expected += [line] * run
    assert collapse_repeats(lines) == expected
    assert collapse_repeats(tuple(lines)) == expected
