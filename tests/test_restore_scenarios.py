"""restore() carries what the agent needs: the two scenarios of bench/restore_quality.py on a
small fixture, through a real store (SQLite file, the hash embedder)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from memlane import BudgetShares, SessionManager
from memlane.text.tokens import tokenizer_for

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
TOPICS = [
    "the weather was grey and windy all morning",
    "we watched a film about sailing across the Atlantic",
    "the bakery on the corner sells sourdough on Fridays",
    "my knee hurts after the long walk yesterday",
    "the train was late again because of signal problems",
    "I am reading a novel about a lighthouse keeper",
    "the garden needs water before the heat arrives",
    "our team lost the quiz by a single point",
]
NEEDLE = "Ana: My sister adopted a ginger cat and named it Pickles."
QUESTION = "What is the name of the cat Ana's sister adopted?"


def filler(n: int) -> str:
    speaker = ("Ana", "Ben")[n % 2]
    return f"{speaker}: ({n}) {TOPICS[n % len(TOPICS)]}, {TOPICS[(n * 3 + 1) % len(TOPICS)]}"


def turns(count: int, needle_at: int) -> list[str]:
    return [NEEDLE if n == needle_at else filler(n) for n in range(count)]


def test_long_session_evidence_300_turns_back_comes_back_at_2k(mgr: SessionManager) -> None:
    session = mgr.start_session("Conversation between Ana and Ben")
    lines = turns(400, needle_at=99)
    for n, line in enumerate(lines):
        when = T0 + timedelta(days=n // 40, minutes=n)
        mgr.add_message(session.id, ("user", "assistant")[n % 2], line, created_at=when)
    ctx = mgr.restore(session.id, 2_000, query=QUESTION)
    assert NEEDLE in ctx.text
    assert tokenizer_for("gpt-4o").count(ctx.text) == ctx.token_count <= 2_000
    # The last turns keep their floor: the conversation's flow is not lost to relevance.
    assert lines[-1] in ctx.text and lines[-2] in ctx.text
    assert ctx.turns[-1]["content"] == lines[-1]
    relevant = next(share for share in ctx.report.shares if share.section == "relevant")
    assert relevant.used > 0 and "query" in relevant.why
    # Each event once, in the first section that claimed it.
    ids = ctx.report.included_ids()
    assert len(ids) == len(set(ids))
    # A plain buffer of the newest turns in the same budget does not reach the needle.
    assert "Pickles" not in "\n".join(lines[-60:])


def test_relevance_share_is_what_carries_history(mgr: SessionManager) -> None:
    """Without its share, relevant history only gets the crumbs recent history leaves."""
    session = mgr.start_session("Conversation between Ana and Ben")
    for n, line in enumerate(turns(400, needle_at=99)):
        mgr.add_message(session.id, "user", line, created_at=T0 + timedelta(minutes=n))
    starved = BudgetShares(relevant_query=0.0, relevant_default=0.0)
    few = mgr.restore(session.id, 2_000, query=QUESTION, shares=starved)
    many = mgr.restore(session.id, 2_000, query=QUESTION)
    assert len(few.report.included_ids("relevant")) <= 2
    assert len(many.report.included_ids("relevant")) > 20
    assert NEEDLE in many.text


def test_cross_session_evidence_from_an_ended_session(mgr: SessionManager) -> None:
    lines = turns(300, needle_at=40)
    for part in range(10):
        session = mgr.start_session(f"Conversation between Ana and Ben, part {part + 1}")
        for n in range(part * 30, part * 30 + 30):
            when = T0 + timedelta(days=part, minutes=n)
            mgr.add_message(session.id, "user", lines[n], created_at=when)
        mgr.end_session(session.id)
    fresh = mgr.start_session("Continue the conversation between Ana and Ben")
    ctx = mgr.restore(fresh.id, 2_000, query=QUESTION, other_sessions=True)
    assert NEEDLE in ctx.text
    assert "with its earlier sessions" in ctx.text.splitlines()[0]
    assert ctx.token_count <= 2_000


def test_candidates_grow_with_the_budget(mgr: SessionManager) -> None:
    """No fixed 20: a bigger budget carries more relevant history."""
    session = mgr.start_session("Conversation between Ana and Ben")
    for n in range(600):
        text = f"Ana: cat fact number {n}: cats sleep a lot, {TOPICS[n % len(TOPICS)]}"
        mgr.add_message(session.id, "user", text, created_at=T0 + timedelta(minutes=n))
    small = mgr.restore(session.id, 2_000, query="cat fact")
    large = mgr.restore(session.id, 8_000, query="cat fact")
    assert len(large.report.included_ids("relevant")) > len(small.report.included_ids("relevant"))
    assert len(large.report.included_ids("relevant")) > 20


@pytest.mark.parametrize("budget", [300, 1_000, 4_000])
def test_default_query_still_serves_the_goal(mgr: SessionManager, budget: int) -> None:
    session = mgr.start_session("Find out what Ana's sister named her cat")
    for n, line in enumerate(turns(300, needle_at=20)):
        mgr.add_message(session.id, "user", line, created_at=T0 + timedelta(minutes=n))
    ctx = mgr.restore(session.id, budget)
    assert ctx.token_count <= budget
    if budget >= 1_000:
        assert NEEDLE in ctx.text
