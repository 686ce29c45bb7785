"""The in-memory keyword index of a SQLite store (ranking/keyword/cache.py): it ranks as FTS5's
BM25 does, sees every committed event at once (this process's and others'), forgets deleted
ones, and keeps its segments few however searches and records interleave."""

from __future__ import annotations

import json
import random
import shutil
import threading
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import SessionManager
from memlane.ranking.keyword import cache as keyword_cache
from memlane.ranking.keyword import counts as keyword_counts
from memlane.ranking.keyword import postings as keyword_postings
from memlane.ranking.keyword import scoring as keyword_scoring
from memlane.ranking.keyword import terms as keyword_terms
from memlane.ranking.keyword.terms import Words, tokens
from memlane.search.passage_terms import porter_stem
from memlane.store.base import EventFilter
from memlane.store.sqlite import SqliteStore

UTC = timezone.utc

# These tests are about the in-memory index itself: it builds in the search that needs it.
pytestmark = pytest.mark.usefixtures("keyword_index_in_foreground")
WORDS = """deploy pipeline staging database login error rate limit search api vector index gpu
    memory payment webhook docker image caroline melanie painting camping beach museum adoption
    agency counselling parade pottery violin dinosaur sunrise hiking""".split()  # noqa: SIM905


def both_rankings(
    mgr: SessionManager, query: str, k: int, *, content_only: bool
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The same query ranked by the in-memory index and by FTS5's own bm25()."""
    searcher = mgr._writer.searcher
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


def long_conversation(mgr: SessionManager, seed: int = 2) -> None:
    """Turns of every length around FTS5's context cuts (500 and 1,000 characters, words cut
    in the middle), a message over the inline digest size, and JSON outputs whose flattened
    text is longer than the content they keep."""
    rng = random.Random(seed)
    session = mgr.start_session("long turns")
    for t in range(40):
        size = rng.choice([30, 480, 520, 990, 1_010, 3_000, 40_000])
        text = ""
        while len(text) < size:
            text += rng.choice(WORDS) + " "
        mgr.add_message(session.id, "user", text[:size])
        if t % 9 == 4:
            rows = [{"host": rng.choice(WORDS), "n": i} for i in range(rng.choice([50, 900]))]
            mgr.record_tool_output(session.id, {"rows": rows}, tool="sql")


@pytest.mark.parametrize("content_only", [False, True])
def test_long_events_rank_as_fts5_ranks_them(mgr: SessionManager, content_only: bool) -> None:
    """A neighbour counts in an event's context with the heads FTS5 stores (the first 1,000
    / 500 characters), and a flattened output with its whole payload, once digested."""
    long_conversation(mgr)
    mgr.flush()
    for query in [*QUERIES, "dinosaur sunrise", "host museum", "hos"]:
        assert_same_ranking(*both_rankings(mgr, query, 200, content_only=content_only))


@pytest.mark.parametrize("content_only", [False, True])
def test_an_event_scored_as_its_one_passage_scores_as_the_event(
    mgr: SessionManager, content_only: bool
) -> None:
    """A passage is scored as a row of its own holding the passage's words and its event's
    context (``scoring.best_passages``): given the event's whole text as its one passage, it
    is the event's own score, context, dates and long neighbours' heads included."""
    long_conversation(mgr)
    mgr.flush()
    searcher = mgr._writer.searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(searcher.scope)
    partitions = searcher._partitions(flt)
    asked: list[int] = []
    compared = 0
    for query in [*QUERIES, "dinosaur sunrise", "host museum"]:
        ranked = dict(
            store.keyword_search(query, flt, 200, content_only=content_only, partitions=partitions)
        )
        events = store.events_by_seq(list(ranked))
        # (a flattened output is ranked by its payload, not its content: left out)
        plain = {seq: tokens(e.content) for seq, e in events.items() if e.kind == "message"}

        def whole(seqs: list[int], plain: dict[int, list[str]] = plain) -> dict[int, Any]:
            asked.extend(seqs)
            return {
                seq: [(Counter(porter_stem(t) for t in plain[seq]), len(plain[seq]))]
                for seq in seqs
                if seq in plain
            }

        stems = store._keywords.query_stems(query)
        assert stems is not None
        scores = store._keywords.passage_scores(
            stems, partitions, list(ranked), whole, content_only=content_only
        )
        long = {seq for seq, found in plain.items() if len(found) >= keyword_cache.LONG_TOKENS}
        assert set(scores) == long, query
        compared += len(long)
        for seq in long:
            assert scores[seq] == (pytest.approx(ranked[seq], rel=1e-12), 0), (query, seq)
    assert compared > 50
    # only events of LONG_TOKENS tokens or more are asked for their passages
    assert asked and all(
        len(tokens(e.content)) >= keyword_cache.LONG_TOKENS
        for e in store.events_by_seq(asked).values()
        if e.kind == "message"
    )


def test_a_value_deep_in_a_big_output_is_found_before_and_after_the_worker(
    make_manager: Any,
) -> None:
    """The issue's reproduction: one row of a 3,000-row output holds the answer. The
    in-memory ranking finds it at once (no worker ran: the event is still deferred); FTS5
    holds it once the event is digested."""
    mgr = make_manager(background=False)  # the digest waits for flush()
    session = mgr.start_session("ops")
    rows = [{"id": i, "status": "ok", "host": f"db-{i % 7}"} for i in range(3_000)]
    rows[2500]["status"] = "CRITICAL disk full on /var/lib/postgres"
    output = mgr.record_tool_output(session.id, {"rows": rows}, tool="df")
    assert "CRITICAL" not in output.content  # the content is the flattening's head
    for mode in ("keyword", "hybrid"):
        assert mgr.search("disk full postgres", k=3, mode=mode)[0].event.id == output.id
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(mgr._writer.searcher.scope)
    assert store.fts_search("critical", flt, 3, content_only=True) == []  # FTS5: the head
    mgr.flush()
    found = store.fts_search("critical", flt, 3, content_only=True)
    assert [seq for seq, _ in found] == [output.seq]


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
    from memlane.testing import HashEmbedder

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


def test_a_word_of_several_tokens_is_ranked_in_memory_as_fts5_ranks_it(
    mgr: SessionManager,
) -> None:
    """``deploy_v2`` is two tokens to FTS5: the query gives each as a term (quoted whole, FTS5
    would read a phrase the in-memory index cannot rank, and every such search went to
    FTS5), and the two rankings agree."""
    session = mgr.start_session("release")
    fact = mgr.record_fact(session.id, "rolled out deploy_v2 to staging")
    mgr.record_fact(session.id, "the deploy of v1 failed")
    mgr.record_fact(session.id, "nothing to see")
    mgr.flush()
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    assert store._keywords.query_stems("deploy_v2") == ["deploi", "v2"]
    hits = mgr.search("deploy_v2", k=5, mode="keyword")
    assert hits[0].event.id == fact.id and len(hits) == 2
    for query in ("deploy_v2", "SESSION_EXPIRY_HOURS of the deploy", "v1_deploy_v2"):
        for content_only in (True, False):
            assert_same_ranking(*both_rankings(mgr, query, 5, content_only=content_only))


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


def scoped_and_walked(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch, query: str, **filters: Any
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """The same filtered query ranked from the scope's rows (_keyword_scoped.py) and by
    walking whole postings."""
    searcher = mgr._writer.searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(searcher.scope, **filters)
    partitions = searcher._partitions(flt)
    rankings = []
    for share in (0, 10**9):  # 0: every filtered search is scoped; 10**9: none is
        monkeypatch.setattr(keyword_scoring, "SCOPE_SHARE", share)
        for content_only in (False, True):
            rankings.append(
                store.keyword_search(
                    query, flt, 200, content_only=content_only, partitions=partitions
                )
            )
    return rankings[:2], rankings[2:]


@pytest.mark.parametrize("builder", [conversation, long_conversation])
def test_a_small_scope_ranks_from_its_rows_as_the_postings_walk_does(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    """Found from the scope's side, a filtered search has the same events and the same scores
    (BM25's n and N stay the partition's), with context and long neighbours."""
    builder(mgr)
    other = mgr.start_session("beach day")  # a session of its own, interleaved below
    mgr.add_message(other.id, "user", "caroline went to the beach museum in May 2023")
    builder(mgr, seed=5)
    mgr.flush()
    sessions = [s.id for s in mgr.list_sessions(limit=20)]
    mid = datetime(2023, 5, 12, tzinfo=UTC)
    for query in [*QUERIES, "dinosaur sunrise", "host museum"]:
        for filters in (
            *({"session_id": sid} for sid in sessions),
            {"kinds": ("message",)},
            {"since_us": int(mid.timestamp() * 1e6)},
        ):
            scoped, walked = scoped_and_walked(mgr, monkeypatch, query, **filters)
            for a, b in zip(scoped, walked, strict=True):
                assert_same_ranking(a, b)
    assert any(ranking for ranking in scoped)  # (the queries do match something)


#: the knobs of each way of walking: 0 and 10**9 force one branch or the other
_KNOBS = (
    "DENSE_SHARE",
    "PRUNE",
    "LOOKUP_WALK_SHARE",
    "ALL_ROWS_SHARE",
    "MATCHES_SORTED_SHARE",
    "LOOKUP_SCOPED_SHARE",
    "PRESCORE_SHARE",
    "PRESCORE_WEIGHT",
)
WAYS_OF_WALKING = [
    (0, False, 2, 2, 16, 8, 16, 1.0),
    (10**9, False, 2, 2, 16, 8, 16, 1.0),
    (0, True, 2, 2, 16, 8, 10**9, 1.0),
    (10**9, True, 2, 2, 16, 8, 10**9, 1.0),
    (0, True, 0, 0, 0, 0, 0, 0),
    (10**9, True, 10**9, 10**9, 10**9, 10**9, 0, 0),
    (0, True, 10**9, 0, 0, 10**9, 10**9, 1.0),
    (10**9, True, 0, 10**9, 10**9, 0, 0, 0),
    (0, False, 2, 2, 0, 0, 0, 0),
    (10**9, True, 2, 2, 16, 8, 0, 0),
    (0, True, 0, 2, 16, 10**9, 0, 0),
    (10**9, True, 0, 0, 0, 10**9, 10**9, 1.0),
]


@pytest.mark.parametrize("builder", [conversation, long_conversation])
def test_every_way_of_walking_gives_the_same_scores_to_the_bit(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch, builder: Any
) -> None:
    """Walked with row-sized arithmetic or over each term's matches, stopped early once the
    other terms cannot change the best k (max-score) or not, the other terms looked up row
    by row, from the rows' side or walked, their contributions added over all rows or their
    matches, a term's matches sorted out or found by a pass, a search returns the same
    events with the same scores, bit for bit, whatever the filters, the columns and k (ties
    at the cut go to the earliest events)."""
    builder(mgr)
    builder(mgr, seed=5)
    mgr.flush()
    searcher = mgr._writer.searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    session = mgr.list_sessions(limit=1)[0].id
    monkeypatch.setattr(keyword_scoring, "SCOPE_SHARE", 10**9)  # never from the rows' side
    walks = count_walks(monkeypatch)
    pruned = 0
    for query in [*QUERIES, "dinosaur sunrise", "host museum", "caroline melanie painting"]:
        for filters in ({}, {"session_id": session}, {"kinds": ("message",)}):
            flt = EventFilter(searcher.scope, **filters)
            partitions = searcher._partitions(flt)
            for content_only in (False, True):
                for k in (1, 3, 200):
                    rankings = []
                    for way in WAYS_OF_WALKING:
                        for knob, value in zip(_KNOBS, way, strict=True):
                            monkeypatch.setattr(keyword_scoring, knob, value)
                        prune = way[1]
                        rankings.append(
                            store.keyword_search(
                                query, flt, k, content_only=content_only, partitions=partitions
                            )
                        )
                        pruned += prune and walks() < len(store._keywords.query_stems(query))
                    for other in rankings[1:]:
                        assert other == rankings[0], (query, filters, content_only, k)
                    assert len(rankings[0]) <= k
    assert pruned > 10  # (the pruning does skip walks here)


def test_stopping_early_never_changes_the_best_k(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Max-score on a corpus made to trap it: word frequencies from rare to everywhere, some
    events repeating common words many times (so that common words together can outscore a
    rare one), several sessions interleaved; the best k, pruned or not, are the same."""
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(40)]
    sessions = [mgr.start_session(f"s{i}") for i in range(4)]
    for _ in range(400):
        words = [vocabulary[min(int(rng.paretovariate(0.6)) - 1, 39)] for _ in range(6)]
        if rng.random() < 0.15:  # common words said over and over, little else
            words = words[:1] + rng.sample(vocabulary[:6], rng.randint(1, 3)) * rng.randint(3, 30)
        mgr.add_message(rng.choice(sessions).id, "user", " ".join(words))
    searcher = mgr._writer.searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(searcher.scope)
    partitions = searcher._partitions(flt)
    for _ in range(150):
        query = " ".join(rng.sample(vocabulary[:6], 3) + rng.sample(vocabulary, 2))
        for content_only in (False, True):
            for k in (1, 2, 5):
                rankings = []
                for prune in (False, True):
                    monkeypatch.setattr(keyword_scoring, "PRUNE", prune)
                    rankings.append(
                        store.keyword_search(
                            query, flt, k, content_only=content_only, partitions=partitions
                        )
                    )
                assert rankings[0] == rankings[1], (query, content_only, k)


def pareto_chat(
    mgr: SessionManager, rng: random.Random, words: int, events: int, length: int, alpha: float
) -> tuple[SqliteStore, EventFilter, Any, list[str]]:
    """``events`` messages over three sessions, each ``length`` words of ``w0 .. w{words-1}``
    drawn with Pareto(``alpha``) frequencies (``w0`` the commonest); the store, the agent's
    filter, its partitions and the vocabulary."""
    vocabulary = [f"w{i}" for i in range(words)]
    sessions = [mgr.start_session(f"s{i}") for i in range(3)]
    for _ in range(events):
        drawn = [
            vocabulary[min(int(rng.paretovariate(alpha)) - 1, words - 1)] for _ in range(length)
        ]
        mgr.add_message(rng.choice(sessions).id, "user", " ".join(drawn))
    searcher = mgr._writer.searcher
    store = searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(searcher.scope)
    return store, flt, searcher._partitions(flt), vocabulary


def test_a_query_word_no_event_holds_changes_neither_the_ranking_nor_the_walk(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo or a name never seen has the highest idf and no rows: it is left out of the
    walk, so the pruning still starts from the strongest word that matches (it used to walk
    every other word whole)."""
    rng = random.Random(5)
    store, flt, partitions, vocabulary = pareto_chat(mgr, rng, 30, 400, 6, 0.7)
    walks = count_walks(monkeypatch)
    compared = 0
    for _ in range(40):
        query = " ".join(rng.sample(vocabulary[:8], 4))
        for content_only in (False, True):
            found = []
            for text in (query, f"{query} zzqqxx"):
                found.append(
                    (
                        store.keyword_search(
                            text, flt, 5, content_only=content_only, partitions=partitions
                        ),
                        walks(),
                    )
                )
            assert found[0] == found[1], (query, content_only)
            compared += 1
    assert compared == 80


def test_a_rare_terms_rows_scored_in_full_can_answer_without_walking_the_others(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The strongest word's rows, scored with every other query word looked up there, often
    beat what the other words could add together: they are the best k, and no other word's
    postings are walked. A query of many words whose pool cannot decide stops looking up
    there early. Either way the same best k as without, score for score. Tried only when
    the strongest word weighs as much as the others together."""
    rng = random.Random(3)
    store, flt, partitions, vocabulary = pareto_chat(mgr, rng, 60, 500, 7, 0.5)
    walked: list[int] = []
    real_add_walked = keyword_scoring._add_walked
    monkeypatch.setattr(
        keyword_scoring,
        "_add_walked",
        lambda *a, **kw: walked.append(a[2]) or real_add_walked(*a, **kw),
    )
    short_of_all: list[int] = []  # per pre-scoring: terms it did not look up
    real_scored, real_looked_up = keyword_scoring._scored, keyword_scoring._looked_up

    def scored(part: Any, query: Any, weights: Any, *args: Any) -> Any:
        calls: list[int] = []
        monkeypatch.setattr(
            keyword_scoring,
            "_looked_up",
            lambda *a, **kw: calls.append(1) or real_looked_up(*a, **kw),
        )
        try:
            return real_scored(part, query, weights, *args)
        finally:
            monkeypatch.setattr(keyword_scoring, "_looked_up", real_looked_up)
            short_of_all.append(len(weights) - len(calls))

    monkeypatch.setattr(keyword_scoring, "_scored", scored)
    ranked: list[tuple[Any, Any]] = []
    real_rank_walking = keyword_scoring._rank_walking
    monkeypatch.setattr(
        keyword_scoring,
        "_rank_walking",
        lambda part, query, mask, matching: (
            ranked.append((query, matching)) or real_rank_walking(part, query, mask, matching)
        ),
    )
    answered = stopped = outweighed = 0
    for i in range(120):
        rare = rng.sample(vocabulary[12:], 1)
        query = " ".join(rare + rng.sample(vocabulary[:12], 3 if i % 2 else 12))
        for content_only in (False, True):
            rankings = []
            for share in (1, 10**9):  # pre-scored whenever the pool is not all rows, or never
                monkeypatch.setattr(keyword_scoring, "PRESCORE_SHARE", share)
                monkeypatch.setattr(keyword_scoring, "PRESCORE_WEIGHT", 0)
                walked.clear()
                short_of_all.clear()
                rankings.append(
                    store.keyword_search(
                        query, flt, 3, content_only=content_only, partitions=partitions
                    )
                )
                if share == 1 and short_of_all:
                    answered += short_of_all == [0] and len(walked) == 1
                    stopped += short_of_all[0] > 0
            assert rankings[0] == rankings[1], (query, content_only)
            # by default tried only when the strongest word weighs as much as the others
            monkeypatch.setattr(keyword_scoring, "PRESCORE_SHARE", 1)
            monkeypatch.setattr(keyword_scoring, "PRESCORE_WEIGHT", 1.0)
            short_of_all.clear()
            ranked.clear()
            store.keyword_search(query, flt, 3, content_only=content_only, partitions=partitions)
            ((query_terms, matching),) = ranked
            strongest, *others = [
                weight
                for (_, _, weight), n in zip(query_terms.weights(), matching, strict=True)
                if n
            ]
            assert not short_of_all or strongest >= sum(others), query
            outweighed += strongest < sum(others)
    assert answered > 10 and stopped > 10 and outweighed > 10, (answered, stopped, outweighed)


def count_walks(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A function telling how many postings the last search walked to rank (its document
    frequencies, counted before, left out)."""
    calls = []
    real_walk, real_matches = keyword_scoring.walk, keyword_scoring.matches
    monkeypatch.setattr(
        keyword_scoring, "walk", lambda *a, **kw: calls.append(1) or real_walk(*a, **kw)
    )
    monkeypatch.setattr(
        keyword_scoring, "matches", lambda *a, **kw: calls.append(1) or real_matches(*a, **kw)
    )
    real_rank = keyword_scoring.rank

    def rank(*args: Any, **kwargs: Any) -> Any:
        calls.clear()  # (the document frequencies are counted before, by matches())
        return real_rank(*args, **kwargs)

    monkeypatch.setattr(keyword_cache, "rank", rank)
    return lambda: len(calls)


def test_a_first_count_of_matching_rows_equals_the_walks(mgr: SessionManager) -> None:
    """BM25's n of a term is first counted by marking its rows, their neighbours and the
    rows whose date spells it (a walk for terms that long rows hold beyond their heads): the
    same count as walking it, for every word, month, day and year, with short turns only and
    with long ones too."""
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(mgr._writer.searcher.scope)
    partitions = mgr._writer.searcher._partitions(flt)
    marked = walked = 0
    for build in (conversation, long_conversation):
        build(mgr)
        mgr.flush()
        store.keyword_search("warm", flt, 5, content_only=False, partitions=partitions)
        (part,) = store._keywords._partitions.values()
        dates = [Words().stem(month) for month in ("may", "june", "november")] + ["3", "2023"]
        for stem in {*store._keywords.query_stems(" ".join(WORDS)), *dates}:
            term = store._keywords._words.term(stem)
            beyond = any(len(postings.get(term)[0]) for postings in (part.near, part.far))
            marked, walked = marked + (not beyond), walked + beyond
            fresh = keyword_scoring.matches(part, term, stem, content_only=False)
            assert keyword_counts.count_matching(part, term, stem) == len(fresh.rows), stem
    assert marked > 10 and walked > 10, (marked, walked)  # (both ways taken)


def test_document_frequencies_stay_exact_as_records_arrive(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scoped search keeps each term's partition-wide n and brings it up to date from the
    rows that arrived since: after every record it equals a fresh count, and the ranking
    equals the walk's, including words that reach a neighbour's context and dates."""
    monkeypatch.setattr(keyword_scoring, "SCOPE_SHARE", 0)
    rng = random.Random(3)
    sessions = [mgr.start_session(f"s{i}") for i in range(3)]
    start = datetime(2023, 5, 1, tzinfo=UTC)
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    for i in range(60):
        session = rng.choice(sessions)
        size = rng.choice([20, 60, 600, 1_200])
        text = ""
        while len(text) < size:
            text += rng.choice(WORDS) + " "
        when = start + timedelta(days=i // 6)
        mgr.add_message(session.id, "user", text[:size], created_at=when)
        query = " ".join(rng.sample(WORDS, 3)) + rng.choice(["", " May", " 3"])
        flt = EventFilter(mgr._writer.searcher.scope, session_id=session.id)
        partitions = mgr._writer.searcher._partitions(flt)
        store.keyword_search(query, flt, 50, content_only=False, partitions=partitions)
        (part,) = store._keywords._partitions.values()
        for stem in store._keywords.query_stems(query) or []:
            term = store._keywords._words.term(stem)
            fresh = keyword_scoring.matches(part, term, stem, content_only=False)
            assert part.frequencies._counted[term] == (len(fresh.rows), part.size), (i, stem)
        if i % 10 == 9:  # (a walk counts afresh: in between, counts grow by increments)
            scoped, walked = scoped_and_walked(mgr, monkeypatch, query, session_id=session.id)
            monkeypatch.setattr(keyword_scoring, "SCOPE_SHARE", 0)
            assert_same_ranking(scoped[0], walked[0])


def record_and_search(mgr: SessionManager, turns: int) -> Any:
    """A search after each of ``turns`` records (each adds a tiny segment); the partition."""
    session = mgr.start_session("chatty")
    rng = random.Random(7)
    for i in range(turns):
        text = " ".join(rng.choice(WORDS) for _ in range(6))
        mgr.add_message(session.id, "user", f"{text} turn{i}")
        mgr.search("museum", k=3, mode="keyword")
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    (part,) = store._keywords._partitions.values()
    return part


def test_segments_stay_few_when_searches_and_records_interleave(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword_postings, "MIN_MERGE", 64)
    part = record_and_search(mgr, 120)
    assert len(part.own.segments) <= 1 + keyword_postings.MAX_SEGMENTS
    mgr.flush()
    for query in QUERIES:
        assert_same_ranking(*both_rankings(mgr, query, 200, content_only=False))


def test_numbers_are_their_own_terms_and_stay_out_of_the_token_map() -> None:
    words = Words()
    first = words.ids(["order", "4711", "orders", "0042", "4711"]).tolist()
    assert first[0] == first[2] and first[1] == first[4] == words.term("4711")
    assert words.ids(["4711", "0042", "٣"]).tolist()[:2] == [first[1], first[3]]
    assert "4711" not in words._by_token and "orders" in words._by_token
    assert "٣" in words._by_token  # (a non-ASCII digit goes through the stemmer)


def test_a_search_that_fails_halfway_leaves_no_sums_behind(mgr: SessionManager) -> None:
    """A query's row sums live in a buffer reused by the next query: one that fails midway
    (here between two contributions) must not leave its sums to the next."""
    conversation(mgr)
    mgr.flush()
    expected = both_rankings(mgr, "caroline painting museum", 200, content_only=False)[1]
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    (part,) = store._keywords._partitions.values()

    def broken(stem: str) -> None:
        raise RuntimeError("midway")

    part.date_rows = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        both_rankings(mgr, "caroline painting museum", 200, content_only=False)
    del part.date_rows
    cached, _ = both_rankings(mgr, "caroline painting museum", 200, content_only=False)
    assert_same_ranking(cached, expected)


def _blob(*stems: str) -> bytes:
    return "\0".join(stems).encode()


def test_words_adopt_a_snapshots_term_ids_as_they_are_or_renumbered() -> None:
    """A snapshot's ids are taken as they are where they agree with the process's (None);
    otherwise its stems get the process's ids, new ones registered (the mapping by the
    snapshot's id)."""
    fresh = Words()
    assert fresh.adopt(_blob("run", "dog", "cat")) is None and fresh.term("dog") == 1
    assert fresh.adopt(_blob("run", "dog")) is None
    assert fresh.adopt(_blob("run", "dog", "cat", "owl")) is None
    assert fresh.vocabulary()[0] == _blob("run", "dog", "cat", "owl")
    assert fresh.term("owl") == 3 and fresh.term("emu") == 4
    assert list(fresh.adopt(_blob("run", "dog", "cow"))) == [0, 1, 5]  # type: ignore[arg-type]
    assert list(fresh.adopt(_blob("ru"))) == [6]  # type: ignore[arg-type]
    other = Words()
    other.term("cat")
    assert list(other.adopt(_blob("run", "dog", "cat"))) == [1, 2, 0]  # type: ignore[arg-type]
    assert other.vocabulary()[0] == _blob("cat", "run", "dog")
    # a subset of the ids: the stems of those alone, with their hashes
    blob, hashes = other.vocabulary(np.array([0, 2], np.int32))
    assert blob == _blob("cat", "dog")
    assert hashes.tolist() == [keyword_terms.stem_hash("cat"), keyword_terms.stem_hash("dog")]


def test_words_keep_many_stems_compactly_with_the_same_ids(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past FREEZE_FROM new stems the dict's stems move into the compact table: every stem
    keeps its id, new ones continue the count, a snapshot's vocabulary is the same, and the
    token cache stays bounded."""
    monkeypatch.setattr(keyword_terms, "FREEZE_FROM", 100)
    monkeypatch.setattr(keyword_terms, "TOKEN_CACHE", 50)
    words = Words()
    stems = [
        f"stem{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}" for i in range(1000)
    ]
    ids = [words.term(stem) for stem in stems]
    assert ids == list(range(1000))
    assert len(words._by_stem) < 250 and words._frozen.count > 750  # (frozen more than once)
    assert [words.term(stem) for stem in stems] == ids and words.term("zebra") == 1000
    some = np.array([999, 0, 1000, 517, 998, 1], np.int32)  # frozen and in the dict, any order
    expected = [stems[999], stems[0], "zebra", stems[517], stems[998], stems[1]]
    assert words.stems_of(some) == expected
    monkeypatch.setattr(keyword_terms, "_SCAN_BYTES", 7)  # stems across the chunks' edges
    assert words.stems_of(some) == expected
    assert words.stems_of(np.arange(1001)) == [*stems, "zebra"]
    # a snapshot's part of it: stems and hashes of ids frozen and in the dict
    picked = np.sort(some)
    named = [[*stems, "zebra"][i] for i in picked]
    part_blob, part_hashes = words.vocabulary(picked)
    assert part_blob == _blob(*named)
    assert part_hashes.tolist() == [keyword_terms.stem_hash(stem) for stem in named]
    blob, hashes = words.vocabulary()
    assert blob == _blob(*stems, "zebra")
    assert hashes.tolist() == [keyword_terms.stem_hash(stem) for stem in (*stems, "zebra")]
    copy = Words()
    assert copy.adopt(blob, hashes) is None
    assert copy.term(stems[500]) == 500 and copy.term("new") == 1001
    assert Words().adopt(blob) is None and len(words) == 1001  # (hashes computed if not given)
    for start in range(0, 1000, 100):
        words.ids([f"token{i}" for i in range(start, start + 100)])
    assert len(words._by_token) <= 150
    # the dict's hashes are kept between calls: a stem registered since is hashed at the next
    yak = words.term("yak")
    _, hashes = words.vocabulary(np.array([0, yak]))
    assert hashes.tolist() == [keyword_terms.stem_hash(stems[0]), keyword_terms.stem_hash("yak")]
    assert words.vocabulary()[1][-1] == keyword_terms.stem_hash("yak")


def test_sealed_segments_bound_every_merge(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past SEALED_FROM postings a segment is never merged again: a growing partition's
    merges stay small (a bulk load, then a search after each record), segments stay few per
    sealed size, and the ranking is still FTS5's."""
    monkeypatch.setattr(keyword_postings, "MIN_MERGE", 64)
    monkeypatch.setattr(keyword_postings, "SEALED_FROM", 400)
    monkeypatch.setattr(keyword_cache, "_CHUNK", 64)
    monkeypatch.setattr(keyword_cache, "_CHUNKS_PER_SEGMENT", 2)
    merged: list[int] = []
    merge = keyword_postings.merge
    monkeypatch.setattr(
        keyword_postings,
        "merge",
        lambda segments: merged.append(sum(s.size for s in segments)) or merge(segments),
    )
    conversation(mgr, sessions=6, turns=60)  # a bulk load at the first search: 360 rows
    mgr.search("museum", k=3, mode="keyword")
    part = record_and_search(mgr, 150)
    sizes = [segment.size for segment in part.own.segments]
    assert merged and max(merged) < 2 * 400 + 2 * 64 * 12  # (a sealed size and a bulk one)
    assert sum(size >= 400 for size in sizes) >= 4
    assert len(sizes) <= sum(sizes) // 400 + 2 + keyword_postings.MAX_SEGMENTS
    mgr.flush()
    for query in QUERIES:
        assert_same_ranking(*both_rankings(mgr, query, 1_000, content_only=False))


def test_a_bulk_build_needs_little_memory_beyond_the_index(
    make_manager: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Building a partition's postings in sealed segments keeps the build's transient memory
    (traced: numpy's arrays and Python's objects) a fraction of what merging all postings
    into one segment took."""
    import tracemalloc

    mgr = make_manager(background=False)
    rng = random.Random(11)
    session = mgr.start_session("bulk")
    mgr.record_many(
        session.id,
        [
            {"kind": "fact", "content": " ".join(rng.choice(WORDS) for _ in range(30)) + f" n{i}"}
            for i in range(6_000)
        ],
    )
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    monkeypatch.setattr(keyword_cache, "_CHUNK", 256)
    monkeypatch.setattr(keyword_cache, "_CHUNKS_PER_SEGMENT", 2)

    def transient(sealed_from: int) -> float:
        monkeypatch.setattr(keyword_postings, "SEALED_FROM", sealed_from)
        store._keywords.invalidate()
        tracemalloc.start()
        store._keywords._refresh(next(iter(store._keywords._partitions), "agent:researcher"))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return peak - store._keywords.memory_bytes()

    one_segment = transient(10**12)
    sealed = transient(20_000)
    assert sealed < 0.5 * one_segment, (sealed, one_segment)


def test_a_flattened_output_recorded_before_the_digests_migration_is_indexed_whole(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An output an earlier version wrote (its FTS5 row: the flattening's 4,000-character
    head) is queued by 0007_deferred_digests; once digested, FTS5 finds a value deep in it."""
    import sqlite3

    from memlane.core.searchable import flatten_json
    from memlane.embed import HashEmbedder
    from memlane.store import sqlite as store_sqlite

    names = [name for name, _ in store_sqlite.MIGRATIONS]
    before = store_sqlite.MIGRATIONS[: names.index("0007_deferred_digests")]  # 0006's store
    with monkeypatch.context() as patch:
        patch.setattr(store_sqlite, "MIGRATIONS", tuple(before))
        SessionManager("old", db_path, embedder=HashEmbedder(), background=False).close()
    rows = [{"status": "ok"}] * 900 + [{"status": "CRITICAL disk full"}]
    payload = json.dumps({"rows": rows}, separators=(",", ":"))
    with sqlite3.connect(db_path) as conn:  # the rows as 0006's code wrote them
        conn.execute(
            "INSERT INTO sessions (id, agent_id, goal, status, metadata, created_us, "
            "updated_us) VALUES ('01S', 'old', 'ops', 'active', '{}', 1, 1)"
        )
        conn.execute(
            "INSERT INTO events (id, session_id, agent_id, kind, content, payload, importance, "
            "tags, metadata, status, created_us, token_count, recall_count, partition) "
            "VALUES ('01EOLD', '01S', 'old', 'tool_output', ?, ?, 0.3, '[]', "
            '\'{"derived_content":true,"tool":"df"}\', NULL, 1, 5000, 0, \'agent:old\')',
            (flatten_json({"rows": rows}), payload),
        )
    with SessionManager("old", db_path, embedder=HashEmbedder(), background=False) as new:
        store = new._writer.searcher.store
        assert isinstance(store, SqliteStore)
        flt = EventFilter(new._writer.searcher.scope)
        assert store.fts_search("critical disk", flt, 3, content_only=True) == []
        assert new.search("critical disk", k=3, mode="keyword")[0].event.id == "01EOLD"
        new.flush()
        assert len(store.fts_search("critical disk", flt, 3, content_only=True)) == 1


def test_a_first_search_answers_from_fts5_while_a_big_partition_builds_in_the_background(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process's first keyword search does not wait for a big partition to be tokenized:
    FTS5 answers (the same ranking here: one agent), the index builds in a thread, and the
    next searches rank in memory. A small partition is built by the search itself."""
    from memlane.embed import HashEmbedder

    with SessionManager("researcher", db_path, embedder=HashEmbedder(), background=False) as mgr:
        conversation(mgr)  # 124 events
        mgr.flush()
    monkeypatch.undo()  # this test wants the default: the module's fixture made builds synchronous

    def first_two_searches(chunk: int) -> tuple[list[str], list[Any], list[Any]]:
        monkeypatch.setattr(keyword_cache, "_CHUNK", chunk)
        # built from the log: a snapshot an earlier build left would be loaded, and a first
        # search waits for that (test_keyword_snapshots.py)
        shutil.rmtree(Path(str(db_path) + ".memlane-cache"), ignore_errors=True)
        with SessionManager(
            "researcher", db_path, embedder=HashEmbedder(), background=False
        ) as mgr:
            store = mgr._writer.searcher.store
            assert isinstance(store, SqliteStore) and store._keywords.background
            calls: list[str] = []
            fts = store.fts_search
            monkeypatch.setattr(
                store, "fts_search", lambda *a, **k: calls.append("fts") or fts(*a, **k)
            )
            refresh = store._keywords._refresh

            def tokenizing(name: str, chunks: int | None = None) -> Any:
                calls.append(threading.current_thread().name)
                return refresh(name, chunks)

            monkeypatch.setattr(store._keywords, "_refresh", tokenizing)
            first = mgr.search("caroline painting", k=5, mode="keyword")
            if store._keywords._builder is not None:
                store._keywords._builder.join(10)
            second = mgr.search("caroline painting", k=5, mode="keyword")
            ranked = [[(h.event.id, round(h.score, 9)) for h in hits] for hits in (first, second)]
            return calls, ranked[0], ranked[1]

    # over 2 chunks: the search tokenizes nothing (a probe tells), a thread builds it all
    calls, first, second = first_two_searches(chunk=16)
    assert calls[:2] == ["asm-keyword-index", "fts"] or calls[:2] == ["fts", "asm-keyword-index"]
    assert "MainThread" not in calls[:2] and first == second
    calls, first, second = first_two_searches(chunk=8192)  # small: the search builds it
    assert calls[0] == "MainThread" and "fts" not in calls and first == second


def test_a_background_build_counts_the_common_terms_document_frequencies(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a big partition is built in the background, the same thread counts BM25's n of
    its common terms (stop words left out), a few per hold of the lock: the first search
    with such a word finds it counted, exactly as a walk counts it."""
    from memlane.embed import HashEmbedder

    with SessionManager("researcher", db_path, embedder=HashEmbedder(), background=False) as mgr:
        conversation(mgr)
        more = mgr.start_session("more").id
        for _ in range(20):
            mgr.add_message(more, "user", "the the the of and caroline")
        mgr.flush()
    monkeypatch.undo()  # the default: builds in a thread
    monkeypatch.setattr(keyword_cache, "_CHUNK", 16)  # big: built by the thread
    monkeypatch.setattr(keyword_cache, "_COUNTED_TOGETHER", 3)
    monkeypatch.setattr(keyword_counts, "COMMON_SHARE", 8)
    with SessionManager("researcher", db_path, embedder=HashEmbedder(), background=False) as mgr:
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        mgr.search("caroline", k=5, mode="keyword")
        assert store._keywords._builder is not None
        store._keywords._builder.join(10)
        (part,) = store._keywords._partitions.values()
        common = keyword_counts.common_terms(part)
        stems = store._keywords._words.stems_of(common)
        assert len(common) > 3 and "the" in stems and "carolin" in stems
        counted = part.frequencies._counted
        stop = {Words().stem(word) for word in keyword_terms.STOP_WORDS}
        for term, stem in zip(common.tolist(), stems, strict=True):
            if stem in stop:
                assert term not in counted  # (a stop word: no query asks for it)
                continue
            fresh = keyword_scoring.matches(part, term, stem, content_only=False)
            assert counted[term] == (len(fresh.rows), part.size), stem
            assert part.own.count(term) >= part.size // keyword_counts.COMMON_SHARE


def _fts_rows(db_path: Path) -> set[int]:
    import sqlite3

    with sqlite3.connect(db_path) as conn:
        return {int(row[0]) for row in conn.execute("SELECT rowid FROM events_fts")}


def test_the_worker_writes_keyword_rows_not_record(db_path: Path) -> None:
    """record() writes no FTS5 row (0015_keyword_rows_by_worker: it was a third of the call
    and its merges the tail); the batch that embeds the event writes it, with the context it
    has by then (the event after it too); an index=False event never gets one."""
    from memlane.embed import HashEmbedder

    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("ops").id
        first = mgr.record_fact(sid, "the backup job writes to the eu-west bucket")
        mgr.add_message(sid, "user", "and the retention is thirty days")
        kept = mgr.record_fact(sid, "not indexed: scratch", index=False)
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        assert _fts_rows(db_path) == set()  # nothing yet: record() wrote none
        mgr.flush()
        seqs = {e.id: e.seq for e in mgr.events(sid)}
        assert _fts_rows(db_path) == {s for i, s in seqs.items() if i != kept.id}
        flt = EventFilter(mgr._writer.searcher.scope)
        # the first fact's context holds the message recorded after it
        found = store.fts_search("retention thirty", flt, 5, content_only=False)
        assert seqs[first.id] in [seq for seq, _ in found]


def test_a_search_by_fts5_writes_the_newest_pending_rows_first(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.embed import HashEmbedder
    from memlane.store import _sqlite_keywords

    monkeypatch.setattr(_sqlite_keywords, "PENDING_ROWS", 2)
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("ops").id
        old = mgr.record_fact(sid, "zebra crossing near the office")
        for i in range(3):
            mgr.record_fact(sid, f"filler note {i}")
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        flt = EventFilter(mgr._writer.searcher.scope)
        assert store.fts_search("filler note", flt, 5, content_only=True)  # the newest two
        assert store.fts_search("zebra", flt, 5, content_only=True) == []  # the worker's
        assert len(_fts_rows(db_path)) == 2
        mgr.flush()
        ((seq, _),) = store.fts_search("zebra", flt, 5, content_only=True)
        assert seq == next(e.seq for e in mgr.events(sid) if e.id == old.id)


@pytest.mark.parametrize("adopt_freeze_from", [1, 1024])
def test_words_adopt_a_renumbered_snapshot_by_its_stored_hashes(
    monkeypatch: pytest.MonkeyPatch, adopt_freeze_from: int
) -> None:
    """A snapshot stores its stems' hashes: renumbering it into a process that holds other
    stems uses them (hashing each stem again was most of a dropped partition's reload), gives
    the ids hashing would, and keeps the new stems' hashes for the next save — with the
    process's newer stems frozen first (1) or still in its dict (1024)."""
    monkeypatch.setattr(keyword_terms, "FREEZE_FROM", 4)
    monkeypatch.setattr(keyword_terms, "ADOPT_FREEZE_FROM", adopt_freeze_from)
    stems = ["run", "dog", "cat", "owl", "emu", "yak", "cow", "bee"]
    hashes = np.array([keyword_terms.stem_hash(stem) for stem in stems], np.uint64)
    expected_words = Words()
    for stem in ["owl", "ant", "cat", "fox", "gnu"]:  # four frozen, one in the dict
        expected_words.term(stem)
    expected = expected_words.adopt(_blob(*stems))
    words = Words()
    for stem in ["owl", "ant", "cat", "fox", "gnu"]:
        words.term(stem)
    words.vocabulary()  # (the dict's hashes in step before the adoption)

    def no_hashing(stem: str) -> int:
        raise AssertionError(f"hashed {stem!r} again")

    monkeypatch.setattr(keyword_terms, "stem_hash", no_hashing)
    renumbered = words.adopt(_blob(*stems), hashes)
    assert renumbered is not None and expected is not None
    assert renumbered.tolist() == expected.tolist()
    # the new stems' hashes were kept: a save of all of them hashes nothing
    blob, saved = words.vocabulary(np.sort(renumbered))
    assert sorted(blob.split(b"\0")) == sorted(stem.encode() for stem in stems)
    by_stem = dict(zip(stems, hashes.tolist(), strict=True))
    assert saved.tolist() == [by_stem[stem.decode()] for stem in blob.split(b"\0")]
