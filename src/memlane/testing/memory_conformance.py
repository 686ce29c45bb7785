"""The user-memory part of the conformance suite (``remember``, ``facts``, ...): every
backend keeps a user's facts with the same rules (:mod:`memlane.memory`), and eight
processes remembering one key at once leave exactly one current value.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any

import pytest

from ..errors import FactNotFound, InvalidInput, PermissionDenied
from ..manager import SessionManager
from ..memory import Resolution

__all__ = ["UserMemoryConformance"]

ManagerFactory = Callable[..., SessionManager]

_CHILD_REMEMBERS = """
    import sys, time
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    url, index, n, start = sys.argv[1], sys.argv[2] or None, int(sys.argv[3]), float(sys.argv[4])
    mgr = SessionManager("agent", url=url, index=index, embedder=HashEmbedder(), background=False)
    while time.time() < start:  # every process at once
        time.sleep(0.001)
    for i in range(3):
        mgr.remember("u-race", f"lives in city {n}-{i}", key="city")
    print(mgr.remember("u-race", "Enjoys long walks").status)
    mgr.close()
"""


class UserMemoryConformance:
    """Long-term user memory on one backend (a mixin of ``BackendConformance``)."""

    def test_a_keyed_fact_supersedes_and_history_stays(self, make: ManagerFactory) -> None:
        mgr = make()
        first = mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2023-01-01")
        assert first.status == "added" and first.fact is not None
        second = mgr.remember("u1", "Lives in Zurich", key="city", valid_from="2025-03-01")
        assert second.status == "superseded" and second.fact is not None
        assert [f.id for f in second.superseded] == [first.fact.id]
        old = second.superseded[0]
        assert old.status == "superseded" and old.superseded_by == second.fact.id
        assert old.valid_until == second.fact.valid_from
        assert [f.text for f in mgr.facts("u1")] == ["Lives in Zurich"]
        assert [f.text for f in mgr.facts("u1", as_of="2024-06-01")] == ["Lives in Berlin"]
        assert mgr.facts("u1", as_of="2022-01-01") == []
        assert [f.text for f in mgr.facts("u1", key="city", include_superseded=True)] == [
            "Lives in Berlin",
            "Lives in Zurich",
        ]
        # older than the current value: history, not a new current value
        past = mgr.remember("u1", "Lives in Paris", key="city", valid_from="2020-05-01")
        assert past.status == "added" and past.fact is not None
        assert past.fact.status == "superseded" and past.fact.valid_until == first.fact.valid_from
        assert past.note and "history" in past.note
        assert [f.text for f in mgr.facts("u1")] == ["Lives in Zurich"]
        assert [f.text for f in mgr.facts("u1", as_of="2021-01-01")] == ["Lives in Paris"]
        assert len(mgr.fact_history("u1")) == 3  # nothing deleted, nothing overwritten

    def test_search_finds_current_facts_unless_asked_for_the_history(
        self, make: ManagerFactory
    ) -> None:
        """A superseded or retracted fact is history: search() and restore() leave it out,
        ``current_only=False`` finds it with its status."""
        mgr = make()
        mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2023-01-01")
        mgr.remember("u1", "Lives in Zurich", key="city")
        joke = mgr.remember("u1", "Lives on the Moon", key="planet")
        assert joke.fact is not None
        mgr.retract_fact(joke.fact.id, "the user was joking")
        mgr.flush()
        question = "where does the user live?"
        for mode in ("hybrid", "keyword", "semantic"):
            found = mgr.search(question, k=10, kinds=["fact"], mode=mode)
            assert [h.event.content for h in found] == ["Lives in Zurich"], mode
            assert found[0].event.status == "current"
        history = mgr.search(question, k=10, kinds=["fact"], current_only=False)
        assert {(h.event.content, h.event.status) for h in history} == {
            ("Lives in Berlin", "superseded"),
            ("Lives in Zurich", "current"),
            ("Lives on the Moon", "retracted"),
        }
        session = mgr.start_session("plan a trip", user_id="u1")
        text = mgr.restore(session.id, 2_000, query=question, other_sessions=True).text
        assert "Lives in Zurich" in text
        assert "Berlin" not in text and "Moon" not in text

    def test_an_identical_fact_is_unchanged_and_counted(self, make: ManagerFactory) -> None:
        mgr = make()
        added = mgr.remember("u1", "Is vegetarian", kind="preference")
        again = mgr.remember("u1", "  is   VEGETARIAN ", kind="preference")
        assert again.status == "unchanged" and again.fact is not None
        assert added.fact is not None and again.fact.id == added.fact.id
        assert again.fact.seen == 2
        assert mgr.remember("u1", "ｉｓ vegetarian").status == "unchanged"  # NFKC
        (fact,) = mgr.facts("u1")
        assert fact.seen == 3 and fact.kind == "preference" and fact.text == "Is vegetarian"
        other = mgr.remember("u1", "Is vegetarian", key="diet")  # keyed: another fact
        assert other.status == "added"

    def test_similar_facts_are_reported_not_acted_on(self, make: ManagerFactory) -> None:
        mgr = make()
        mgr.remember("u1", "likes dark roast coffee")
        result = mgr.remember("u1", "likes dark roast coffee every morning")
        assert result.status == "added"
        assert [f.text for f in result.similar] == ["likes dark roast coffee"]
        assert len(mgr.facts("u1")) == 2

    def test_a_resolver_decides_within_bounds(self, make: ManagerFactory) -> None:
        answers: list[Any] = []
        shown: list[list[str]] = []

        def resolver(text: str, candidates: list[Any]) -> Any:
            shown.append([c.text for c in candidates])
            return answers.pop(0)

        mgr = make(fact_resolver=resolver)
        base = mgr.remember("u1", "likes dark roast coffee")
        assert base.fact is not None and shown == []  # nothing similar: not asked
        answers.append(Resolution("supersede", (base.fact.id,)))
        replaced = mgr.remember("u1", "likes dark roast coffee with oat milk")
        assert shown == [["likes dark roast coffee"]]
        assert replaced.status == "superseded" and replaced.fact is not None
        assert [f.id for f in replaced.superseded] == [base.fact.id]
        assert any(f.id == base.fact.id for f in mgr.fact_history("u1"))  # never deleted
        answers.append({"action": "skip"})
        assert mgr.remember("u1", "likes dark roast coffee with milk").status == "skipped"
        bad_answers = (
            {"action": "delete", "ids": [replaced.fact.id]},
            {"action": "supersede", "ids": ["not-a-candidate"]},
            {"action": "supersede", "ids": []},
            "supersede everything",
        )
        for bad, word in zip(bad_answers, ("daily", "hot", "iced", "black"), strict=True):
            answers.append(bad)
            result = mgr.remember("u1", f"likes dark roast coffee with oat milk {word}")
            assert answers == [], "the resolver was asked"
            assert result.status == "added" and result.note, bad
            assert "resolver" in result.note
        assert replaced.fact.id in {f.id for f in mgr.facts("u1")}

    def test_retracting_a_fact(self, make: ManagerFactory) -> None:
        mgr = make()
        city = mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2023-01-01")
        moved = mgr.remember("u1", "Lives in Oslo", key="city", valid_from="2024-01-01")
        assert moved.fact is not None and city.fact is not None
        retracted = mgr.retract_fact(moved.fact.id, "the user was joking")
        assert retracted.status == "retracted"
        assert retracted.retracted_reason == "the user was joking"
        assert mgr.facts("u1") == []  # the superseded value does not come back
        assert mgr.facts("u1", as_of="2024-06-01") == []
        assert [f.text for f in mgr.facts("u1", as_of="2023-06-01")] == ["Lives in Berlin"]
        history = {f.id: f for f in mgr.fact_history("u1")}
        assert history[moved.fact.id].status == "retracted"
        assert mgr.retract_fact(moved.fact.id, "again").retracted_reason == "the user was joking"
        with pytest.raises(FactNotFound) as error:
            mgr.retract_fact("no-such-fact", "x")
        assert isinstance(error.value, KeyError)
        session = mgr.start_session("an ordinary session")
        plain = mgr.record_fact(session.id, "not a user fact")
        with pytest.raises(FactNotFound):
            mgr.retract_fact(plain.id, "x")

    def test_user_memory_is_the_agents_and_shared_only_through_a_pool(
        self, make: ManagerFactory
    ) -> None:
        owner = make("owner")
        owner.create_pool("team")
        owner.grant("team", "reader")
        reader, stranger = make("reader", subscribe=["team"]), make("x")
        owner.remember("u1", "Prefers email", kind="preference", pool="team")
        owner.remember("u1", "Private note about u1")
        assert [f.text for f in reader.facts("u1")] == ["Prefers email"]
        assert stranger.facts("u1") == []
        assert len(owner.facts("u1")) == 2
        shared = reader.facts("u1")[0]
        with pytest.raises(PermissionDenied):
            reader.retract_fact(shared.id, "not mine to retract")
        with pytest.raises(FactNotFound):
            stranger.retract_fact(shared.id, "cannot even see it")

    def test_bad_input_writes_nothing(self, make: ManagerFactory) -> None:
        mgr = make()
        cases: list[tuple[dict[str, Any], str]] = [
            ({"user_id": "", "text": "x"}, "user_id"),
            ({"user_id": 7, "text": "x"}, "user_id"),
            ({"user_id": "u1", "text": "  "}, "text"),
            ({"user_id": "u1", "text": None}, "text"),
            ({"user_id": "u1", "text": "x", "kind": "opinion"}, "fact, preference"),
            ({"user_id": "u1", "text": "x", "key": ""}, "key"),
            (
                {
                    "user_id": "u1",
                    "text": "x",
                    "valid_from": "2025-01-02",
                    "valid_until": "2025-01-01",
                },
                "valid_until",
            ),
            ({"user_id": "u1", "text": "x", "metadata": {"fact_key": "k"}}, "fact_key"),
            ({"user_id": "u1", "text": "x", "metadata": ["a"]}, "metadata"),
            ({"user_id": "u1", "text": "x", "importance": 2}, "importance"),
            ({"user_id": "u1", "text": "x", "valid_from": "yesterday"}, "valid_from"),
        ]
        for arguments, named in cases:
            with pytest.raises(InvalidInput) as error:
                mgr.remember(**arguments)
            assert named in str(error.value), (arguments, str(error.value))
        with pytest.raises(InvalidInput):
            mgr.retract_fact("x", "")
        assert mgr.fact_history("u1") == [] and mgr.list_sessions(internal=True) == []

    def test_processes_remembering_one_key_leave_one_current_value(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        mgr = make()
        if not mgr.capabilities.multi_process:
            pytest.skip("a single-process backend")
        start = time.time() + 4.0  # every child imports, then all remember at once
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(_CHILD_REMEMBERS),
                    backend.url,
                    backend.index or "",
                    str(n),
                    str(start),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(8)
        ]
        statuses = []
        for child in children:
            out, err = child.communicate(timeout=180)
            assert child.returncode == 0, err
            statuses.append(out.strip())
        assert sorted(statuses) == ["added"] + ["unchanged"] * 7
        current = mgr.facts("u-race", key="city")
        assert len(current) == 1
        history = mgr.fact_history("u-race", key="city")
        assert len(history) == 24  # every value kept
        assert sum(f.status == "current" for f in history) == 1
        (walks,) = [f for f in mgr.facts("u-race") if f.key is None]
        assert walks.seen == 8
        sessions = [s for s in mgr.list_sessions(internal=True) if s.user_id == "u-race"]
        assert len(sessions) == 1  # one memory session, however many raced to create it
