"""Hybrid search's two lists for questions about several events or a rule said long before
(issue 31, item 5): the standing rules of a request for work (search/rules.py), and the
messages of the speaker a query names (search/speaker.py). Each test also asks the same
thing without the list's cue, or with the list off, to show the list is what moved the hit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.search import searcher as searcher_module
from memlane.search.rules import is_task_request
from memlane.search.speaker import speaker_named
from memlane.testing import HashEmbedder

RULE = "Please always give version numbers when you recommend a library."
REQUEST = "Which library should I use to generate PDF reports?"
PDF_TALK = (
    "For PDF reports, a report library renders the layout from a template; generate the "
    "PDF reports in a background job, since a long report blocks the request. Library "
    "choice matters less than keeping the report template in one place. ({n})"
)


@pytest.fixture
def mgr(tmp_path: Path) -> Iterator[SessionManager]:
    with SessionManager("agent", tmp_path / "s.db", embedder=HashEmbedder()) as manager:
        yield manager


def rule_session(mgr: SessionManager, *, rule_role: str = "user") -> tuple[str, str]:
    """A session where the user set a rule in passing early on, then many answers talk about
    the request's subject: the rule message's words barely match the request."""
    session = mgr.start_session(goal="Build the expense tracker")
    mgr.add_message(session.id, "user", "Let's start with the login form.")
    rule = mgr.add_message(
        session.id, rule_role, f"The login form works now. {RULE} Next, the dark mode toggle."
    )
    for n in range(12):
        mgr.add_message(session.id, "user", f"What about PDF reports, part {n}?")
        mgr.add_message(session.id, "assistant", PDF_TALK.format(n=n))
    mgr.flush()
    return session.id, rule.id


def test_a_request_for_work_ranks_the_rule_the_user_set(mgr: SessionManager) -> None:
    session_id, rule_id = rule_session(mgr)
    hits = mgr.search(REQUEST, k=5, session_id=session_id)
    found = {hit.event.id: hit for hit in hits}
    assert rule_id in found
    ranks = found[rule_id].ranks
    assert ranks is not None and ranks["rule"] == 1


def test_a_rule_the_other_rankings_leave_out_still_reaches_the_first_ten(
    mgr: SessionManager,
) -> None:
    """In a long session the rule is in neither the semantic nor the keyword top 50 of the
    request: its first place in the rules list alone must rank it among the first ten (at
    the other lists' weight it came ~15th)."""
    session = mgr.start_session(goal="Build the expense tracker")
    rule_id = mgr.add_message(session.id, "user", f"The login form works now. {RULE}").id
    for n in range(60):  # both rankings agree on these: each is high in both
        mgr.add_message(session.id, "user", f"{REQUEST} Attempt {n}.")
    mgr.flush()
    hits = mgr.search(REQUEST, k=10, session_id=session.id)
    found = {hit.event.id: hit for hit in hits}
    assert rule_id in found
    ranks = found[rule_id].ranks
    assert ranks is not None and ranks["rule"] == 1
    assert "semantic" not in ranks and "keyword" not in ranks


def test_without_the_rules_list_the_rule_is_not_found(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The test above fails without the list: the rule's words barely match the request."""
    session_id, rule_id = rule_session(mgr)
    monkeypatch.setattr(searcher_module, "_RULE_WEIGHT", 0.0)
    hits = mgr.search(REQUEST, k=5, session_id=session_id)
    assert rule_id not in {hit.event.id for hit in hits}


@pytest.mark.parametrize(
    "query",
    [
        "What did we say about PDF reports?",  # a question about the past, not work
        "Can you summarise what we discussed about PDF reports?",
    ],
)
def test_a_question_about_the_past_ranks_no_rules(mgr: SessionManager, query: str) -> None:
    session_id, rule_id = rule_session(mgr)
    hits = mgr.search(query, k=5, session_id=session_id)
    assert all(hit.ranks is None or "rule" not in hit.ranks for hit in hits)
    assert rule_id not in {hit.event.id for hit in hits}


def test_a_rule_in_an_assistant_message_is_no_rule(mgr: SessionManager) -> None:
    session_id, rule_id = rule_session(mgr, rule_role="assistant")
    hits = mgr.search(REQUEST, k=5, session_id=session_id)
    assert rule_id not in {hit.event.id for hit in hits}


def test_rules_stay_in_the_searched_scope(mgr: SessionManager) -> None:
    """A rule of another session is not ranked in a search of this one, nor when the
    search's kinds leave messages out."""
    _, other_rule = rule_session(mgr)
    session_id, rule_id = rule_session(mgr)
    hits = mgr.search(REQUEST, k=5, session_id=session_id)
    ids = {hit.event.id for hit in hits}
    assert rule_id in ids and other_rule not in ids
    hits = mgr.search(REQUEST, k=5, session_id=session_id, kinds=["fact", "decision"])
    assert rule_id not in {hit.event.id for hit in hits}


def test_a_rule_said_twice_is_ranked_where_it_was_said_last(mgr: SessionManager) -> None:
    session_id, first = rule_session(mgr)
    again = mgr.add_message(session_id, "user", f"One more time. {RULE}")
    mgr.flush()
    hits = mgr.search(REQUEST, k=5, session_id=session_id)
    ranked = {hit.event.id: hit.ranks for hit in hits}
    assert again.id in ranked and (ranked[again.id] or {}).get("rule") == 1
    assert first not in ranked or "rule" not in (ranked[first] or {})


def speaker_session(mgr: SessionManager) -> tuple[str, str]:
    """The user raised a topic once; the assistant's answers repeat its words many times."""
    session = mgr.start_session(goal="Build the expense tracker")
    raised = mgr.add_message(
        session.id, "user", "Can we look at rate limiting the login? Login rate limits, please."
    )
    for n in range(4):
        mgr.add_message(
            session.id,
            "assistant",
            f"Rate limiting the login: limit login attempts per account; rate limiting by "
            f"address too; the login rate limit resets after a window. ({n})",
        )
        mgr.add_message(session.id, "user", f"Thanks, next question {n}.")
    mgr.flush()
    return session.id, raised.id


def test_a_query_about_what_the_user_said_ranks_the_users_messages_first(
    mgr: SessionManager,
) -> None:
    session_id, raised = speaker_session(mgr)
    asked = mgr.search("When did I bring up rate limiting the login?", k=3, session_id=session_id)
    assert asked[0].event.id == raised
    # the same words without naming a speaker: the assistant's answers come first
    plain = mgr.search("When was rate limiting the login raised?", k=3, session_id=session_id)
    assert plain[0].event.id != raised


def test_the_speaker_list_applies_with_recency_too(mgr: SessionManager) -> None:
    session_id, raised = speaker_session(mgr)
    asked = mgr.search(
        "When did I bring up rate limiting the login?",
        k=3,
        session_id=session_id,
        recency="default",
    )
    assert raised in {hit.event.id for hit in asked}


@pytest.mark.parametrize(
    ("query", "role"),
    [
        ("In what order did I bring up the security topics?", "user"),
        ("Which questions I asked were about caching?", "user"),
        ("What did you recommend for the cache?", "assistant"),
        ("What library have you suggested before?", "assistant"),
        ("What did we decide about the cache?", None),
        ("Can you show me how to cache it?", None),  # a request, not what someone said
        ("What did Caroline say about the trip?", None),
    ],
)
def test_speakers_named(query: str, role: str | None) -> None:
    assert speaker_named(query) == role


@pytest.mark.parametrize(
    ("query", "asks_for_work"),
    [
        ("Which library should I use to generate PDF reports?", True),
        ("How do I ship the new release to the server?", True),
        ("Write the HTML for a card that shows one expense.", True),
        ("The totals are off by one cent sometimes, how do I fix it?", True),
        ("What's a good way to find duplicate entries?", True),
        ("Write the code for the weekly summary email.", True),
        ("What features should I include in the settings page?", True),
        ("I need help with the login page.", True),
        ("What would Caroline's political leaning likely be?", False),
        ("How many workers do I run?", False),
        ("What's the current cache expiry?", False),
        ("Can you summarise how the security work developed over our conversations?", False),
        ("In what order did I bring up the testing topics?", False),
        ("How did Melanie celebrate her daughter's birthday?", False),
    ],
)
def test_requests_for_work(query: str, asks_for_work: bool) -> None:
    assert is_task_request(query) is asks_for_work


def test_rules_respect_the_searchs_metadata_filter(mgr: SessionManager) -> None:
    """The caller's ``where`` holds for the rules as for every hit (it is combined with the
    rules' own user-messages filter, not replaced by it)."""
    session_id, rule_id = rule_session(mgr)
    users = mgr.search(REQUEST, k=5, session_id=session_id, where={"role": "user"})
    assert rule_id in {hit.event.id for hit in users}
    assert all(hit.event.metadata.get("role") == "user" for hit in users)
    others = mgr.search(REQUEST, k=5, session_id=session_id, where={"role": "assistant"})
    assert rule_id not in {hit.event.id for hit in others}


def transcript(mgr: SessionManager) -> tuple[str, str]:
    """Two people; the other one talks about the topic more, the named one said it once."""
    session = mgr.start_session(goal="A chat between Caroline and Melanie")

    def say(speaker: str, text: str) -> str:
        event = mgr.record(
            session.id, "message", f"{speaker}: {text}", metadata={"speaker": speaker}
        )
        return event.id

    said = say("Caroline", "I researched adoption agencies last week.")
    for n in range(6):
        say("Melanie", f"Adoption agencies research sounds great, Caroline! Agencies part {n}.")
        say("Caroline", f"Thanks, see you at the lake {n}.")
    mgr.flush()
    return session.id, said


def test_a_query_naming_a_person_ranks_their_messages_first(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, said = transcript(mgr)
    query = "What did Caroline research about adoption agencies?"
    hits = mgr.search(query, k=3, session_id=session_id)
    assert hits[0].event.id == said
    monkeypatch.setattr(searcher_module, "_NAMED_WEIGHT", 0.0)
    plain = mgr.search(query, k=3, session_id=session_id)
    assert plain[0].event.id != said


def test_a_query_naming_both_people_names_no_one(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id, _ = transcript(mgr)
    query = "What did Caroline and Melanie say about adoption agencies?"
    both = [hit.event.id for hit in mgr.search(query, k=5, session_id=session_id)]
    monkeypatch.setattr(searcher_module, "_NAMED_WEIGHT", 0.0)
    assert both == [hit.event.id for hit in mgr.search(query, k=5, session_id=session_id)]
