"""What hybrid search adds to plain rank fusion: keyword context, time windows, weighted RRF."""

from __future__ import annotations

import doctest
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlane import SessionManager
from memlane.ranking.keyword import terms as keyword
from memlane.search import fusion, when
from memlane.search.fusion import reciprocal_rank_fusion
from memlane.search.when import TimeWindow, time_windows
from memlane.store import sqlite as store_sqlite

UTC = timezone.utc
NOW = datetime(2026, 5, 20, 15, 30, tzinfo=UTC)  # a Wednesday


def us(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1_000_000)  # type: ignore[misc]


def described(text: str, now: datetime = NOW) -> list[str]:
    return [window.describe() for window in time_windows(text, now)]


# -- time windows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "What did Ana say on 3 June, 2025?",
        "what did ana say on 3rd of June 2025",
        "What did Ana say on June 3, 2025?",
        "what did Ana say on Jun 3rd 2025",
        "what did ana say on 2025-06-03",
    ],
)
def test_a_full_date_is_that_day_with_half_a_day_of_slack(text: str) -> None:
    assert described(text) == ["2025-06-02T12:00 .. 2025-06-04T12:00"]


def test_month_and_year_bare_month_and_year() -> None:
    assert described("errors in October 2023") == ["2023-10-01T00:00 .. 2023-11-01T00:00"]
    assert described("the outage of Dec 2024") == ["2024-12-01T00:00 .. 2025-01-01T00:00"]
    assert described("when did we go camping in June?") == ["any June"]
    assert described("what changed during 2024") == ["2024-01-01T00:00 .. 2025-01-01T00:00"]
    assert described("who called on 16 November") == ["any November 16"]


def test_relative_phrases_resolve_against_now() -> None:
    assert described("what broke yesterday") == ["2026-05-19T00:00 .. 2026-05-20T00:00"]
    assert described("what did we do today") == ["2026-05-20T00:00 .. 2026-05-21T00:00"]
    assert described("the plan from last week") == ["2026-05-11T00:00 .. 2026-05-18T00:00"]
    assert described("anything this month") == ["2026-05-01T00:00 .. 2026-06-01T00:00"]
    assert described("what happened last weekend") == ["2026-05-16T00:00 .. 2026-05-18T00:00"]
    assert described("the call last Monday") == ["2026-05-18T00:00 .. 2026-05-19T00:00"]
    assert described("the call last Wednesday") == ["2026-05-13T00:00 .. 2026-05-14T00:00"]
    assert described("three days ago") == ["2026-05-16T00:00 .. 2026-05-19T00:00"]
    january = datetime(2026, 1, 10, tzinfo=UTC)
    assert described("the review last month", january) == ["2025-12-01T00:00 .. 2026-01-01T00:00"]
    assert described("goals from last year", january) == ["2025-01-01T00:00 .. 2026-01-01T00:00"]


def test_a_span_is_read_once_and_nonsense_is_ignored() -> None:
    # "3 June, 2025" is a day: not also "June 2025" and "in 2025"
    assert len(time_windows("on 3 June, 2025", NOW)) == 1
    # no such day: the month is what is left to read
    assert described("on 31 February 2025") == ["2025-02-01T00:00 .. 2025-03-01T00:00"]
    assert time_windows("May I deploy the 5 services?", NOW) == []
    assert time_windows("how do I rotate the deploy key", NOW) == []
    assert time_windows("", NOW) == []
    # two expressions, two windows, in order of specificity
    both = described("between 3 June 2025 and July 2025")
    assert both == ["2025-06-02T12:00 .. 2025-06-04T12:00", "2025-07-01T00:00 .. 2025-08-01T00:00"]


def test_a_time_before_the_first_representable_day_names_no_window() -> None:
    # issue 28, D6: "3000 years ago" raised OverflowError out of search() and restore()
    assert described("what did we decide 3000 years ago") == []
    assert described("99999999999 days ago") == []
    assert described("9" * 5000 + " days ago") == []  # (int() refuses 4,300+ digits)
    assert described("2027 years ago") == []  # year 1 was 2,025 years before NOW
    # a time still representable is read; a slack that crosses year 1 is cut there
    assert described("1000 years ago") == ["1026-11-19T00:00 .. 1027-03-20T00:00"]
    days = (NOW - datetime(1, 1, 1, tzinfo=UTC)).days  # "N days ago" is 1 January of year 1
    first = time_windows(f"{days} days ago", NOW)[0]
    assert (first.start_us, first.end_us) == (us(1, 1, 1), us(1, 1, 3))
    assert described(f"{days + 1} days ago") == []


_UNITS = st.sampled_from(["day", "days", "week", "weeks", "month", "months", "year", "years"])
_COUNTS = st.one_of(
    st.integers(min_value=0, max_value=10**30).map(str),
    st.sampled_from(["a", "an", "one", "seven", "0" * 40 + "1", "9" * 5000]),
)


@settings(max_examples=300, deadline=None)
@given(count=_COUNTS, unit=_UNITS, now=st.datetimes(datetime(1, 1, 1), datetime(9998, 1, 1)))
def test_any_number_of_any_unit_ago_reads_or_is_ignored(count: str, unit: str, now: datetime):  # type: ignore[no-untyped-def]
    for window in time_windows(f"what did we decide {count} {unit} ago?", now.replace(tzinfo=UTC)):
        window.describe()
        assert window.start_us is not None and window.end_us is not None
        assert window.start_us < window.end_us


def test_window_contains() -> None:
    day = time_windows("on 3 June 2025", NOW)[0]
    assert day.contains(us(2025, 6, 3, 23, 59))
    assert day.contains(us(2025, 6, 2, 13))  # slack for the asker's time zone
    assert not day.contains(us(2025, 6, 5))
    june = TimeWindow(month=6)
    assert june.contains(us(2019, 6, 30)) and not june.contains(us(2019, 7, 1))
    assert TimeWindow(month=11, day=16).contains(us(2023, 11, 16, 8))
    assert not TimeWindow(month=11, day=16).contains(us(2023, 11, 17, 8))


def test_module_doctests() -> None:
    for module in (when, keyword, fusion):
        assert doctest.testmod(module).failed == 0


# -- fusion ----------------------------------------------------------------------------------


def test_weighted_fusion() -> None:
    # equal weights: the item both lists like wins
    assert [i for i, _ in reciprocal_rank_fusion([[1, 2], [2, 3]], 3)] == [2, 1, 3]
    # a heavier first list and a small constant let its first place win
    fused = reciprocal_rank_fusion([[1, 2], [2, 3]], 3, constant=1, weights=[3.0, 1.0])
    assert [i for i, _ in fused] == [1, 2, 3]
    with pytest.raises(ValueError, match="2 weights for 3 rankings"):
        reciprocal_rank_fusion([[1], [2], [3]], 1, weights=[1.0, 1.0])


# -- keyword context -------------------------------------------------------------------------


def contexts(db_path: Path) -> dict[int, str]:
    with sqlite3.connect(db_path) as conn:
        return dict(conn.execute("SELECT rowid, context FROM events_fts"))


def matching(db_path: Path, query: str) -> set[int]:
    with sqlite3.connect(db_path) as conn:
        return {
            row[0]
            for row in conn.execute(
                "SELECT rowid FROM events_fts WHERE events_fts MATCH ?", (query,)
            )
        }


def flat(texts: list[str]) -> list[list[float]]:
    """An embedder that sees no difference between texts: hybrid ranks by keywords alone."""
    return [[1.0, 0.0] for _ in texts]


def test_an_answer_is_found_by_the_question_before_it(make_manager) -> None:  # type: ignore[no-untyped-def]
    mgr = make_manager(embedder=flat)
    session = mgr.start_session("chat")
    for other in range(8):
        mgr.record_fact(session.id, f"unrelated note {other} about invoices")
    mgr.add_message(session.id, "user", "Which city would you recommend for a spring trip?")
    answer = mgr.add_message(session.id, "assistant", "Barcelona, for the architecture.")
    for other in range(8):
        mgr.record_fact(session.id, f"another note {other} about budgets")
    query = "which city was recommended for the trip"
    # no word of the query is in the answer itself: keyword mode (its own text) misses it...
    keyword = [hit.event.content for hit in mgr.search(query, k=10, mode="keyword")]
    assert keyword == ["Which city would you recommend for a spring trip?"]
    # ...hybrid finds it through its context, right after the question
    hybrid = [hit.event.content for hit in mgr.search(query, k=3)]
    assert hybrid[0].startswith("Which city")
    assert answer.content in hybrid


def test_context_holds_neighbours_and_date(mgr: SessionManager, db_path: Path) -> None:
    session = mgr.start_session("ctx")
    when_ = datetime(2025, 6, 3, 9, tzinfo=UTC)
    first = mgr.record(session.id, "fact", "alpha first", created_at=when_)
    second = mgr.record(session.id, "fact", "beta second", created_at=when_)
    third = mgr.record(session.id, "fact", "gamma third", created_at=when_)
    # the outbox worker writes the keyword rows (0015_keyword_rows_by_worker): an event's
    # context holds the two before it, its date and the two after it recorded by then
    mgr.flush()
    assert contexts(db_path)[third.seq] == "alpha first\nbeta second\n3 June 2025\n\n"
    assert contexts(db_path)[first.seq] == "\nctx\n3 June 2025\nbeta second\ngamma third"
    assert contexts(db_path)[second.seq] == "ctx\nalpha first\n3 June 2025\ngamma third\n"
    # the date is matched by keyword: "june" finds all three through their context
    assert matching(db_path, "context : june") == {first.seq, second.seq, third.seq}


def test_a_deleted_event_leaves_no_trace_in_its_neighbours(
    mgr: SessionManager, db_path: Path
) -> None:
    session = mgr.start_session("privacy")
    before = mgr.record_fact(session.id, "before the secret")
    secret = mgr.record_fact(session.id, "the password is hunter2")
    after = mgr.record_fact(session.id, "after the secret")
    mgr.record_fact(session.id, "long after the secret")
    mgr.record_fact(session.id, "unrelated")
    mgr.flush()
    # itself, and the goal, "before", "after" and "long after" through their context
    assert len(matching(db_path, "hunter2")) == 5
    with sqlite3.connect(db_path) as conn:  # as `memlane prune` would, in the middle of a session
        conn.execute("DELETE FROM events WHERE id = ?", (secret.id,))
    assert matching(db_path, "hunter2") == set()
    assert mgr.search("hunter2", k=10, mode="keyword") == []
    texts = contexts(db_path)
    assert not any("hunter2" in text for text in texts.values())
    assert "\nafter the secret\nlong after" in texts[before.seq]  # the neighbours now touch
    assert "privacy\nbefore the secret\n" in texts[after.seq]


def test_reindex_rebuilds_the_context(mgr: SessionManager, db_path: Path) -> None:
    session = mgr.start_session("rebuild")
    for i in range(5):
        mgr.record_fact(session.id, f"fact number {i}")
    mgr.flush()
    before = contexts(db_path)
    with sqlite3.connect(db_path) as conn:
        conn.execute("DELETE FROM events_fts")
    assert matching(db_path, "number") == set()
    mgr.reindex()
    assert contexts(db_path) == before
    assert len(matching(db_path, "number")) == 6  # the goal's context holds the first fact
    assert len(mgr.search("number", k=5, mode="keyword")) == 5


def test_a_store_from_before_the_context_migration_is_upgraded(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.testing import HashEmbedder

    first_only = store_sqlite.MIGRATIONS[:1]
    with monkeypatch.context() as patch:
        patch.setattr(store_sqlite, "MIGRATIONS", first_only)
        SessionManager("old", db_path, embedder=HashEmbedder(), background=False).close()
    # rows as the first version wrote them (its insert statement, its columns)
    with sqlite3.connect(db_path) as conn:
        conn.execute(
            "INSERT INTO sessions (id, agent_id, user_id, goal, status, shared_pool, metadata, "
            "created_us, updated_us) VALUES ('01S', 'old', NULL, 'legacy', 'active', NULL, "
            "'{}', 1, 1)"
        )
        for seq, text in ((1, "which database do we use?"), (2, "Postgres, version 16.")):
            conn.execute(
                "INSERT INTO events (seq, id, session_id, agent_id, kind, content, payload, "
                "importance, tags, metadata, status, created_us, token_count, recall_count, "
                "partition) VALUES (?, ?, '01S', 'old', 'message', ?, NULL, 0.3, '[]', "
                "'{\"role\":\"user\"}', NULL, ?, 5, 0, 'agent:old')",
                (seq, f"01E{seq}", text, seq),
            )
            conn.execute("INSERT INTO outbox (seq, partition) VALUES (?, 'agent:old')", (seq,))
    answer = type("Answer", (), {"seq": 2})

    with SessionManager("old", db_path, embedder=HashEmbedder(), background=False) as new:
        hits = new.search("which database", k=3, mode="keyword")
        assert [hit.event.content for hit in hits] == ["which database do we use?"]
        new.flush()
    # the answer is indexed with the question as its context
    assert answer.seq in matching(db_path, "context : database")
    with sqlite3.connect(db_path) as conn:
        names = [row[0] for row in conn.execute("SELECT name FROM migrations ORDER BY name")]
        assert names == [name for name, _ in store_sqlite.MIGRATIONS]
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT count(*) FROM events_fts").fetchone()[0]
        assert rows == conn.execute("SELECT count(*) FROM events").fetchone()[0]


# -- time windows in hybrid search -------------------------------------------------------------


def test_hybrid_search_prefers_events_inside_the_named_time(mgr: SessionManager) -> None:
    session = mgr.start_session("releases")
    start = datetime(2025, 5, 1, 12, tzinfo=UTC)
    events = {}
    for day in range(0, 60, 3):
        moment = start + timedelta(days=day)
        events[moment.date()] = mgr.record(
            session.id, "fact", "we shipped a release of the app", created_at=moment
        )
    wanted = events[datetime(2025, 6, 3).date()]
    hits = mgr.search("what did we ship on June 3, 2025?", k=3)
    assert hits[0].event.id == wanted.id
    in_june = mgr.search("what did we ship in June", k=5)
    assert all(hit.event.created_at.month == 6 for hit in in_june)
    # no time named: the ranking is the plain fusion
    plain = mgr.search("what did we ship", k=5)
    assert len(plain) == 5


# (one manager for every example: the examples only read)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    count=st.one_of(st.integers(min_value=0, max_value=10**30).map(str), st.just("9" * 5000)),
    unit=st.sampled_from(["day", "weeks", "month", "years"]),
)
def test_search_and_restore_take_a_time_phrase_of_any_size(
    mgr: SessionManager, count: str, unit: str
) -> None:
    # issue 28, D6: a distant time in the query raised OverflowError (MCP: "unexpected
    # exception"); a time no event can have must filter and lift nothing
    session = mgr.session_for("d6", goal="decide the release plan")
    if not mgr.events(session.id, kinds="decision"):
        mgr.record(session.id, "decision", "we decided to ship on Fridays")
    query = f"what did we decide {count} {unit} ago"
    for mode in ("hybrid", "keyword", "semantic"):
        assert mgr.search(query, k=3, mode=mode)
    assert "ship on Fridays" in mgr.restore(session.id, 500, query=query).text
