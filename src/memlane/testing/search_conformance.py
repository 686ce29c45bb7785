"""The backend conformance suite's search tests (a part of
:class:`~memlane.testing.BackendConformance`): every mode finds the event, semantic ranking
as exact as declared, ``where`` filters and pages, ``k`` results when ``k`` exist, and the
keyword context as declared.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest

from ..embed import HashEmbedder
from ..errors import InvalidInput
from ..manager import SessionManager
from ..write.reads import SearchMode

__all__ = ["SearchConformance"]

ManagerFactory = Callable[..., SessionManager]
MODES: tuple[SearchMode, ...] = ("hybrid", "semantic", "keyword")


class SearchConformance:
    """Search on every backend, as each declares it."""

    def test_search_modes_find_the_event(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("Audit the staging environment")
        texts = [f"routine check {i} of the backup schedule" for i in range(20)]
        target = "Disabled two-factor authentication for the qa-bot account"
        for text in [*texts[:10], target, *texts[10:]]:
            mgr.record_fact(session.id, text)
        for mode in MODES:
            hits = mgr.search("disabled two-factor authentication qa-bot", k=3, mode=mode)
            assert hits and hits[0].event.content == target, mode
        mgr.flush()  # (recall counts are written in batches)
        assert mgr.get_event(hits[0].event.id).recall_count == 3  # every search counts one

    def test_semantic_ranking_matches_brute_force(self, make: ManagerFactory) -> None:
        """Exact backends rank exactly; approximate ones (declared) find most of the top k."""
        mgr = make()
        session = mgr.start_session("ranking")
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota"]
        words += ["kappa", "lambda", "mu"]
        rng = np.random.default_rng(7)
        texts = [" ".join(rng.choice(words, size=5)) + f" n{i}" for i in range(80)]
        for text in texts:
            mgr.record_fact(session.id, text)
        query = "alpha gamma kappa mu"
        embed = HashEmbedder()
        expected = sorted((embed([*texts, "ranking"]) @ embed([query])[0]).tolist(), reverse=True)
        hits = mgr.search(query, k=10, mode="semantic")
        assert len(hits) == 10
        got = [round(hit.score, 4) for hit in hits]
        if mgr.capabilities.exact_vectors:
            # exact over the vectors as stored: SQLite keeps them in half precision (~1e-4)
            assert got == pytest.approx(expected[:10], abs=1e-3)
        else:  # approximate: most of the true top 10
            assert sum(score >= round(expected[9], 4) for score in got) >= 8

    def test_where_filters(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("filters for a finding about widgets")
        for i in range(12):
            metadata: dict[str, Any] = {"n": i, "tool": ["arxiv", "web", "sql"][i % 3]}
            if i % 4 == 0:
                metadata["reviewed"] = True
            if i == 5:
                metadata["http"] = {"status": 404}
            mgr.record_fact(session.id, f"finding number {i} about widgets", metadata=metadata)
        cases: list[tuple[dict[str, Any], set[int | None]]] = [
            ({"tool": "web"}, {1, 4, 7, 10}),
            ({"n": {"$gte": 9}}, {9, 10, 11}),
            ({"n": {"$gt": 2, "$lt": 5}}, {3, 4}),
            ({"tool": {"$in": ["sql", "web"]}, "n": {"$lte": 4}}, {1, 2, 4}),
            ({"tool": {"$nin": ["sql", "web"]}}, {None, 0, 3, 6, 9}),  # None: the goal
            ({"reviewed": {"$ne": True}, "n": {"$lt": 4}}, {1, 2, 3}),
            ({"reviewed": {"$exists": True}}, {0, 4, 8}),
            ({"http.status": 404}, {5}),
            ({"$or": [{"n": 0}, {"n": 11}]}, {0, 11}),
        ]
        for where, expected in cases:
            for mode in MODES:
                hits = mgr.search("finding about widgets", k=20, mode=mode, where=where)
                assert {hit.event.metadata.get("n") for hit in hits} == expected, (where, mode)

    def test_events_filter_page_and_span_sessions(self, make: ManagerFactory) -> None:
        """events(..., where=, offset=) and events(None, ...) across the agent's sessions,
        scoped like every read."""
        mgr = make()
        first = mgr.start_session("first")
        second = mgr.start_session("second")
        for i in range(6):
            for session in (first, second):
                mgr.record_step(session.id, f"step {i}", tool="pytest" if i % 2 else "ruff")
        make("other").start_session("not ours")  # another agent's: never listed below
        mine = mgr.events(None, kinds="step")
        assert len(mine) == 12 and {e.session_id for e in mine} == {first.id, second.id}
        tests = mgr.events(first.id, where={"tool": "pytest"})
        assert [e.content for e in tests] == ["step 1", "step 3", "step 5"]
        page = mgr.events(None, kinds="step", limit=4, offset=4)
        assert [e.id for e in page] == [e.id for e in mine[4:8]]
        rest = mgr.events(None, kinds="step", offset=10)
        assert [e.id for e in rest] == [e.id for e in mine[10:]]
        with pytest.raises(InvalidInput, match="offset"):
            mgr.events(first.id, offset=-1)

    def test_where_never_matches_across_json_types(self, make: ManagerFactory) -> None:
        """A comparison matches values of its own JSON type only, on every backend: text
        is not "greater" than a number, true is not 1, "2023" is not 2023."""
        mgr = make()
        session = mgr.start_session("typed metadata about widgets")
        values: list[Any] = ["2023", 2023, 2023.5, True, 1, "true", None]
        for i, value in enumerate(values):
            mgr.record_fact(session.id, f"widget finding {i}", metadata={"i": i, "v": value})
        cases: list[tuple[dict[str, Any], set[int]]] = [
            ({"v": {"$gt": 99999}}, set()),
            ({"v": {"$gt": 2000}}, {1, 2}),
            ({"v": {"$lt": "3"}}, {0}),
            ({"v": 2023}, {1}),
            ({"v": "2023"}, {0}),
            ({"v": True}, {3}),
            ({"v": 1}, {4}),
            ({"v": {"$gte": True}}, {3}),
            ({"v": {"$ne": 1}, "i": {"$exists": True}}, {0, 1, 2, 3, 5, 6}),
            ({"v": {"$in": [1, "2023"]}}, {0, 4}),
            ({"v": {"$in": [True]}}, {3}),
            ({"v": {"$nin": [2023, True]}, "i": {"$exists": True}}, {0, 2, 4, 5, 6}),
        ]
        for where, expected in cases:
            for mode in MODES:
                hits = mgr.search("widget finding", k=20, mode=mode, where=where)
                assert {hit.event.metadata["i"] for hit in hits} == expected, (where, mode)

    def test_filtered_search_returns_k_when_k_exist(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("many")
        other = mgr.start_session("other")
        start = datetime(2025, 1, 1, tzinfo=timezone.utc)
        for i in range(200):
            mgr.record(
                session.id if i % 2 else other.id,
                "decision" if i % 10 == 0 else "fact",
                f"note {i} on the payment webhook and retries",
                metadata={"rare": i % 25 == 0},
                created_at=start + timedelta(hours=i),
            )
        query = "payment webhook retries"
        assert len(mgr.search(query, k=10, mode="semantic", where={"rare": True})) == 8
        assert len(mgr.search(query, k=5, mode="semantic", where={"rare": True})) == 5
        hits = mgr.search(query, k=15, mode="semantic", kinds=["decision"])
        assert len(hits) == 15 and {hit.event.kind for hit in hits} == {"decision"}
        hits = mgr.search(query, k=12, mode="semantic", session_id=session.id)
        assert len(hits) == 12 and {hit.event.session_id for hit in hits} == {session.id}
        window = (start + timedelta(hours=50), start + timedelta(hours=70))
        hits = mgr.search(query, k=30, mode="semantic", since=window[0], until=window[1])
        assert len(hits) == 20
        assert all(window[0] <= hit.event.created_at < window[1] for hit in hits)

    def test_keyword_context_as_declared(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("chat")
        mgr.add_message(session.id, "user", "Which city did Caroline move to last spring?")
        answer = mgr.add_message(session.id, "assistant", "She settled in Lisbon in April.")
        mgr.add_message(session.id, "user", "Nice, thanks.")
        mgr.flush()
        keyword = mgr.search("which city did caroline move to", k=5, mode="keyword")
        assert answer.id not in {hit.event.id for hit in keyword}  # own words only
        hybrid = mgr.search("which city did caroline move to", k=5)
        found = answer.id in {hit.event.id for hit in hybrid}
        assert found == mgr.capabilities.keyword_context
