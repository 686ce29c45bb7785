"""Restore pins what the user asked the agent to keep doing (text/instructions.py):
standing instructions and preferences from the user's messages, whatever the query, within
their share; look-alikes, other roles, other sessions and excluded events are not pinned."""

from __future__ import annotations

from typing import Any

import pytest

from memlane import BudgetShares, SessionManager
from memlane.restore.plan import RULE_WINDOW_CHARS
from memlane.text.instructions import statements
from memlane.text.tokens import tokenizer_for

TOK = tokenizer_for("gpt-4o")
RULE = "From now on, always give me file paths relative to the repository root."
TASTE = "I prefer answers as short numbered steps."
ASIDE = (
    "Now, about the trace you pasted: the importer stopped at the third batch, the one with "
    "the new schema, and the retry did not pick it up either; what does the trace say?"
)
# what the user said before the rule, far enough from it to be outside its window
BEFORE = (
    "The nightly import ran for three hours last night before it gave up, and the on-call "
    "engineer restarted it twice; the second run got further but failed on the same table. "
    "I looked at the disk, the memory and the connection pool, and none of them was full. "
)


@pytest.mark.parametrize(
    "text",
    [
        RULE,
        TASTE,
        "Please never use tabs for indentation.",
        "Always include the exact command you ran.",
        "Keep it short, and never apologise.",
        "You should always run the linter first.",
        "Going forward, keep SQL compatible with PostgreSQL 13.",
        "I'd rather you ask before deleting files.",
        "Make sure to mention the time zone.",
        "Whenever you quote a log line, say which host it came from.",
        "When you show shell commands, add a comment explaining each flag.",
        "I want you to round money to whole euros.",
        "Remember to use metric units.",
        "Please keep code examples under thirty lines; split them if they get longer.",
        "Keep your answers short.",
    ],
)
def test_instructions_and_preferences_are_recognised(text: str) -> None:
    assert statements(f"Thanks, that helps. {text} Now, what did the log say?") == (text,)


@pytest.mark.parametrize(
    "text",
    [
        "We always deploy on Fridays, which is a problem.",
        "Do you always cache the results?",
        "Should I always use async here?",
        "I have never seen this error before.",
        "It was always slow on the old cluster.",
        "My manager said I should always write the tests first.",
        "Never mind, the build passes now.",
        "When you get a chance, check the logs.",  # one thing, once
        "When you wrote that, I laughed.",
        "I really like it.",
        "What did you find in the logs?",
        "I love working with Rust and Go.",  # likes are chat, facts for remember(): not pinned
        "I'll make sure to keep you updated.",
        "We'll keep going and never give up.",
        "Keep the old config for now.",  # what to keep is no answer of the agent's
        "Please keep the logs until Friday.",
    ],
)
def test_look_alikes_set_no_rule(text: str) -> None:
    assert statements(text) == ()


def instructions_section(text: str) -> str:
    """The instructions section of a restored context's text."""
    section = text.split("## The user's instructions and preferences\n", 1)[1]
    return section.split("\n## ", 1)[0]


def long_session(mgr: SessionManager, *, filler: int = 300) -> tuple[str, Any]:
    sid = mgr.start_session("Debug the nightly import job").id
    mgr.add_message(sid, "user", "The nightly import failed again.")
    rule = mgr.add_message(sid, "user", f"{BEFORE}Thanks. {RULE} {ASIDE}")
    mgr.add_message(sid, "assistant", "I will always double-check the config.")  # not a user's
    mgr.add_message(sid, "user", "Should I always restart the worker?")  # a question
    for i in range(filler):
        mgr.record_tool_output(
            sid, f"import batch {i}: 5,000 rows read, 4,990 written, 10 rejected (schema v{i})"
        )
    mgr.add_message(sid, "user", TASTE)
    for i in range(10):
        mgr.add_message(sid, "assistant", f"Batch {i} looks fine: nothing rejected there.")
    return sid, rule


@pytest.mark.parametrize("budget", [300, 1_000, 4_000])
def test_an_early_instruction_is_pinned_whatever_the_query(
    mgr: SessionManager, budget: int
) -> None:
    sid, rule = long_session(mgr)
    mgr.flush()
    context = mgr.restore(sid, budget, query="how many rows did batch 7 reject?")
    assert TOK.count(context.text) <= context.token_count <= budget
    section = instructions_section(context.text)
    # the newest is claimed first (at 300 tokens a tenth holds it alone); near the end of
    # the session it may be a recent turn instead, shown once either way
    assert context.text.count(TASTE) == 1
    if budget < 1_000:
        return
    assert RULE in section
    assert "double-check" not in section and "Should I always" not in section
    item = next(i for i in context.report.items if i.event_id == rule.id)
    assert item.section == "instructions" and item.action in ("included", "summarised")
    # the rule is shown within a window of its message (at least RULE_WINDOW_CHARS of it:
    # the user's words around it), not the whole message: the rest is history like any other
    block = next(line for line in section.splitlines() if RULE in line)
    shown = block.split("user: ", 1)[1].strip("…")
    assert RULE_WINDOW_CHARS <= len(shown) < len(rule.content)
    assert shown.replace("…", "").strip() in rule.content or all(
        part.strip() in rule.content for part in shown.split("…")
    )
    assert "three hours" not in section


SHELL_RULE = "From now on, always add a comment to each flag when you show shell commands."


def test_a_request_shows_the_rules_bearing_on_it_first(mgr: SessionManager) -> None:
    # an old rule and many newer asides: the section holds a few; a request for work gets
    # the rule that bears on it, other queries the newest as before
    sid = mgr.start_session("Keep the server healthy").id
    rule = mgr.add_message(sid, "user", f"Thanks. {SHELL_RULE}")
    for i in range(30):
        mgr.add_message(sid, "user", f"I prefer the blue theme number {i} for the dashboard.")
        mgr.add_message(sid, "assistant", f"Theme {i} noted; the dashboard will use it.")
    for i in range(200):
        mgr.add_message(
            sid, "assistant", f"Disk check {i}: the volume has room to spare, {i} GB free."
        )
    mgr.flush()
    shares = BudgetShares(instructions=0.05)
    request = "Show me shell commands that list big files."
    asked = mgr.restore(sid, 2_000, shares=shares, query=request)
    assert SHELL_RULE in instructions_section(asked.text)
    item = next(i for i in asked.report.items if i.event_id == rule.id)
    assert item.section == "instructions"
    for other in ("How big is the volume?", None):  # no request: the newest first
        section = instructions_section(mgr.restore(sid, 2_000, shares=shares, query=other).text)
        assert SHELL_RULE not in section and "theme number 29" in section


def test_a_restore_for_a_request_reads_the_rule_candidates_once(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Restore's instructions and its search's rules list are the same candidates: one
    keyword query and one read of them, not one each."""
    sid, _ = long_session(mgr)
    mgr.flush()
    searcher = mgr._writer.searcher  # type: ignore[attr-defined]
    calls: list[object] = []
    read = type(searcher)._rule_candidates

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(type(searcher), "_rule_candidates", counted)
    context = mgr.restore(sid, 1_000, query="Show me the rows batch 7 rejected.")
    assert len(calls) == 1
    assert RULE in context.text  # (and the rule is still pinned)


def test_a_rule_message_the_query_found_also_shows_what_it_asks_about(
    mgr: SessionManager,
) -> None:
    """A message that sets a rule and says something else the query asks about is shown
    once, in the instructions section: with the sentence the query needs, not the rule's
    window alone (which hid it)."""
    answer = "The database passwords rotate every ninety days, on the first Monday."
    sid, _ = long_session(mgr)
    message = mgr.add_message(sid, "user", f"{RULE} {BEFORE}{ASIDE} {answer}")
    for i in range(300):
        mgr.record_tool_output(sid, f"import batch {i + 300}: 5,000 rows read, 4,990 written")
    mgr.flush()
    question = "How often do the database passwords rotate?"
    context = mgr.restore(sid, 1_000, query=question)
    item = next(i for i in context.report.items if i.event_id == message.id)
    assert item.section == "instructions"
    assert answer in context.text
    assert context.text.count("rotate every ninety days") == 1
    plain = mgr.restore(sid, 1_000, query="how many rows did batch 7 reject?")
    assert answer not in plain.text  # the rule's window alone, for a query about else


def test_the_share_bounds_the_section(mgr: SessionManager) -> None:
    sid = mgr.start_session("Write the migration").id
    for i in range(40):
        mgr.add_message(sid, "user", f"From now on, always prefix table {i} with the schema s{i}.")
    for i in range(200):
        mgr.add_message(
            sid, "assistant", f"Table {i} migrated: 1,000 rows copied, indexes rebuilt."
        )
    mgr.flush()
    shares = BudgetShares(instructions=0.05)
    context = mgr.restore(sid, 2_000, shares=shares, query="which schema?")
    share = next(s for s in context.report.shares if s.section == "instructions")
    assert 0 < share.used <= share.offered
    assert context.report.sections["instructions"] <= 0.05 * 2_000 + 20  # (+ the title)
    assert "table 39" in context.text  # the newest first
    none = mgr.restore(sid, 2_000, shares=BudgetShares(instructions=0), query="which schema?")
    assert "instructions" not in none.report.sections


def test_other_sessions_and_excluded_events_are_not_pinned(mgr: SessionManager) -> None:
    other = mgr.start_session("Another task").id
    mgr.add_message(other, "user", "Always answer in French.")
    sid, rule = long_session(mgr, filler=5)
    mgr.flush()
    context = mgr.restore(sid, 2_000, query="batch 3?")
    assert "French" not in context.text
    left_out = mgr.restore(sid, 2_000, query="batch 3?", exclude=[rule.id])
    assert RULE not in left_out.text


def test_a_recent_instruction_stays_a_chat_turn(mgr: SessionManager) -> None:
    sid = mgr.start_session("Tidy the repository").id
    mgr.add_message(sid, "user", "Hello.")
    mgr.add_message(sid, "assistant", "Hi, what shall we do?")
    rule = mgr.add_message(sid, "user", RULE)
    mgr.flush()
    context = mgr.restore(sid, 2_000)
    assert context.turns[-1] == {"role": "user", "content": RULE}
    item = next(i for i in context.report.items if i.event_id == rule.id)
    assert item.section == "recent"
    assert context.text.count(RULE) == 1


def test_an_assistant_full_of_instruction_words_does_not_hide_the_users_rule(
    mgr: SessionManager,
) -> None:
    """The candidates are the user's messages: an assistant that says "make sure", "prefer"
    and "please" in every answer (as real ones do) took the places of the user's rule, which
    went unpinned (found on long technical chats)."""
    sid = mgr.start_session("Build the expense tracker").id
    mgr.add_message(sid, "user", f"The login works now. {TASTE} Next, the dark mode.")
    for i in range(150):  # past a 2,000-token restore's recent turns
        mgr.add_message(
            sid,
            "assistant",
            f"Step {i}: make sure the form is valid now; if in doubt, prefer the boring option, "
            "and please make sure you want the change before you ship it.",
        )
        mgr.add_message(sid, "user", f"Okay, step {i} done.")
    mgr.flush()
    context = mgr.restore(sid, 2_000, query="how should I style the settings page?")
    section = context.text.split("## The user's instructions and preferences\n", 1)[1]
    assert TASTE in section.split("\n## ", 1)[0]
    hits = mgr.search("How should I style the settings page?", k=5, session_id=sid)
    assert any(TASTE in hit.event.content for hit in hits)


@pytest.mark.parametrize("assistant_words", [False, True])
def test_rule_candidates_are_the_users_best_matches_either_way(
    mgr: SessionManager, assistant_words: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidates are read from both roles' best matches first and asked again with the
    role as a filter only when the other side crowds them out: either way they are exactly
    the user's messages a role-filtered query ranks first, in its order."""
    from memlane.text.instructions import INSTRUCTION_CANDIDATES, INSTRUCTION_WORDS

    sid = mgr.start_session("Build the expense tracker").id
    for i in range(INSTRUCTION_CANDIDATES * 2 + 10):  # the users' would fill a wide read
        mgr.add_message(sid, "user", f"Step {i}: please make sure the form is valid now {i % 7}.")
        reply = "make sure, please, now, prefer" if assistant_words else "done"
        mgr.add_message(sid, "assistant", f"Step {i} {reply} ({i}).")
    mgr.flush()
    searcher = mgr._writer.searcher  # type: ignore[attr-defined]
    queries: list[Any] = []
    keyword = type(searcher)._keyword

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        queries.append(args[2].where)
        return keyword(self, *args, **kwargs)

    monkeypatch.setattr(type(searcher), "_keyword", counted)
    found = searcher.rule_messages(sid)
    # asked again with the role as a filter only when the assistant crowds the words
    assert queries == ([None, {"role": "user"}] if assistant_words else [None])
    monkeypatch.undo()
    expected = mgr.search(
        INSTRUCTION_WORDS,
        k=INSTRUCTION_CANDIDATES,
        mode="keyword",
        session_id=sid,
        kinds=["message"],
        where={"role": "user"},
    )
    assert [e.id for e in found] == [hit.event.id for hit in expected]
    assert len(found) == INSTRUCTION_CANDIDATES
