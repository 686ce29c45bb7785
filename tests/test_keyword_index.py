"""The in-memory keyword index of a SQLite store (store/_keyword_cache.py): it ranks as FTS5's
BM25 does, sees every committed event at once (this process's and others'), forgets deleted
ones, and keeps its segments few however searches and records interleave."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from session_manager import SessionManager
from session_manager.store import _keyword_cache
from session_manager.store.base import EventFilter
from session_manager.store.sqlite import SqliteStore

UTC = timezone.utc
WORDS = """deploy pipeline staging database login error rate limit search api vector index gpu
    memory payment webhook docker image caroline melanie painting camping beach museum adoption
    agency counselling parade pottery violin dinosaur sunrise hiking""".split()  # noqa: SIM905


def both_rankings(
    mgr: SessionManager, query: str, k: int, *, content_only: bool
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The same query ranked by the in-memory index and by FTS5's own bm25()."""
    searcher = mgr._searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(searcher.scope)
    partitions = searcher._partitions(flt)
    cached = store.keyword_search(query, flt, k, content_only=content_only, partitions=partitions)
    fts = store.fts_search(query, flt, k, content_only=content_only)
    return cached, fts


def conversation(mgr: SessionManager, sessions: int = 4, turns: int = 30, seed: int = 1) -> None:
    """Short turns (under FTS5's 500-character context cut) over several days and sessions."""
    rng = random.Random(seed)
    start = datetime(2023, 5, 1, 9, tzinfo=UTC)
    for s in range(sessions):
        session = mgr.start_session(f"chat {s}")
        for t in range(turns):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
            when = start + timedelta(days=s * 9 + t // 10, minutes=t)
            mgr.add_message(session.id, rng.choice(["user", "assistant"]), text, created_at=when)


def assert_same_ranking(cached: list[tuple[int, float]], fts: list[tuple[int, float]]) -> None:
    """Same events with the same scores; among equal scores FTS5's order is its own."""

    def canonical(ranking: list[tuple[int, float]]) -> list[tuple[float, int]]:
        return sorted((-round(score, 9), seq) for seq, score in ranking)

    assert [seq for _, seq in canonical(cached)] == [seq for _, seq in canonical(fts)]
    assert [s for s, _ in canonical(cached)] == pytest.approx([s for s, _ in canonical(fts)])


QUERIES = [
    "what happened with the staging database?",
    "Caroline painting at the museum",
    "docker image and gpu memory",
    "camping on 3 May 2023",
    "what did Melanie say in May",
    "hiking 2023",
    "webhook",
    "violin violin parade",
    "was it one of the others?",  # "one" stems to "on", "others" to "other": stop words
]


@pytest.mark.parametrize("content_only", [False, True])
def test_the_ranking_is_fts5s_bm25(mgr: SessionManager, content_only: bool) -> None:
    """Same events, same order, same scores as FTS5 (one agent: same N; short turns: the
    context FTS5 stores is the whole neighbour), including date words in the context. FTS5
    adds a new event to its predecessors' context when the worker embeds it: flush first."""
    conversation(mgr)
    mgr.flush()
    for query in QUERIES:
        # k above the number of events: no cut among equal scores
        assert_same_ranking(*both_rankings(mgr, query, 200, content_only=content_only))


def test_a_recorded_event_is_found_at_once_and_extends_its_neighbours_context(
    mgr: SessionManager,
) -> None:
    session = mgr.start_session("support")
    question = mgr.add_message(session.id, "user", "where should we go this weekend?")
    assert [h.event.id for h in mgr.search("weekend", k=5, mode="keyword")] == [question.id]
    answer = mgr.add_message(session.id, "assistant", "the aquarium downtown")
    # no flush, no worker: the search reads the new row itself
    assert [h.event.id for h in mgr.search("aquarium", k=5, mode="keyword")] == [answer.id]
    # hybrid matches the context too: the question now has the answer beside it
    found = {h.event.id for h in mgr.search("aquarium", k=5, mode="hybrid")}
    assert {question.id, answer.id} <= found
    mgr.flush()  # FTS5's context of the question gains the answer when the worker runs
    assert_same_ranking(*both_rankings(mgr, "aquarium weekend", 10, content_only=False))


def test_writes_and_deletes_through_another_store_object_are_seen(db_path: Path) -> None:
    from session_manager.testing import HashEmbedder

    options = {"embedder": HashEmbedder(), "background": False}
    with SessionManager("ops", db_path, **options) as reader:  # type: ignore[arg-type]
        session = reader.start_session("notes")
        reader.record_fact(session.id, "warm the index first")
        assert len(reader.search("index", k=5, mode="keyword")) == 1
        # another store object on the same file: its own connections, as another process
        with SessionManager("ops", db_path, **options) as writer:  # type: ignore[arg-type]
            fact = writer.record_fact(session.id, "the quarterly numbers are final")
            hits = reader.search("quarterly", k=5, mode="keyword")
            assert [h.event.id for h in hits] == [fact.id]
            writer.delete_event(fact.id)
        assert reader.search("quarterly", k=5, mode="keyword") == []
        assert len(reader.search("index", k=5, mode="keyword")) == 1


def test_unindexed_events_are_not_found(mgr: SessionManager) -> None:
    session = mgr.start_session("raw data")
    mgr.record(session.id, "tool_output", "a bulky dump mentioning zebras", index=False)
    kept = mgr.record_fact(session.id, "zebras are striped")
    assert [h.event.id for h in mgr.search("zebras", k=5, mode="keyword")] == [kept.id]


def test_queries_the_index_cannot_rank_exactly_go_to_fts5(mgr: SessionManager) -> None:
    session = mgr.start_session("release")
    fact = mgr.record_fact(session.id, "rolled out deploy_v2 to staging")
    store = mgr._searcher.store
    assert isinstance(store, SqliteStore)
    assert store._keywords.query_stems("deploy_v2") is None  # FTS5 reads it as a phrase
    assert [h.event.id for h in mgr.search("deploy_v2", k=5, mode="keyword")] == [fact.id]


def test_filters_apply(mgr: SessionManager) -> None:
    session = mgr.start_session("filters")
    other = mgr.start_session("elsewhere")
    a = mgr.record_fact(session.id, "otters hold hands", metadata={"source": "zoo"})
    b = mgr.record_decision(session.id, "otters get a new pool")
    c = mgr.record_fact(other.id, "otters sleep a lot")
    ids = lambda **f: {h.event.id for h in mgr.search("otters", k=10, mode="keyword", **f)}  # noqa: E731
    assert ids() == {a.id, b.id, c.id}
    assert ids(session_id=session.id) == {a.id, b.id}
    assert ids(kinds="decision") == {b.id}
    assert ids(where={"source": "zoo"}) == {a.id}


def test_segments_stay_few_when_searches_and_records_interleave(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_keyword_cache, "_MIN_MERGE", 64)
    session = mgr.start_session("chatty")
    rng = random.Random(7)
    for i in range(120):
        text = " ".join(rng.choice(WORDS) for _ in range(6))
        mgr.add_message(session.id, "user", f"{text} turn{i}")
        mgr.search("museum", k=3, mode="keyword")
    store = mgr._searcher.store
    assert isinstance(store, SqliteStore)
    (part,) = store._keywords._partitions.values()
    assert len(part.segments) <= 1 + _keyword_cache._MAX_SEGMENTS
    mgr.flush()
    for query in QUERIES:
        assert_same_ranking(*both_rankings(mgr, query, 200, content_only=False))
