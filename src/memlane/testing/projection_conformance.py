"""The projections part of the conformance suite: the log and what is derived from it (the
vector index, the keyword index) agree after every kind of delete — a session, an event, a
pop, a clear, a prune, an upsert's replaced events — after a reindex, and for events
recorded with ``index=False``, which stay in the log and out of every index.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its ``make`` and
``backend`` fixtures.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..admin import StoreAdmin
from ..embed import HashEmbedder
from ..errors import EventNotFound, InvalidInput
from ..manager import SessionManager
from .search_conformance import MODES

__all__ = ["ProjectionConformance"]

ManagerFactory = Callable[..., SessionManager]


class ProjectionConformance:
    """The log and its indexes in step on one backend (a mixin of ``BackendConformance``)."""

    def test_deletes_reach_every_projection(self, make: ManagerFactory, backend: Any) -> None:
        mgr = make()
        doomed = mgr.start_session("doomed session about zebras")
        mgr.record_fact(doomed.id, "zebras graze at dawn")
        kept = mgr.start_session("kept session about lions")
        mgr.record_fact(kept.id, "lions sleep at noon")
        old = mgr.record_tool_output(kept.id, "zebra crossing log output", tool="cam")
        mgr.flush()
        assert mgr.delete_session(doomed.id) == 2
        for mode in MODES:
            assert all(h.event.session_id != doomed.id for h in mgr.search("zebras", 10, mode=mode))
        with StoreAdmin(url=backend.url, index=backend.index, embedder=HashEmbedder()) as admin:
            pruned = admin.prune(datetime.now(timezone.utc) + timedelta(days=1), kind="tool_output")
            assert pruned.events == 1
            stats = admin.stats()
            assert stats.events == 2 and stats.vectors == 2 and stats.pending_embeddings == 0
        for mode in MODES:
            assert old.id not in {h.event.id for h in mgr.search("zebra crossing", 10, mode=mode)}
        assert mgr.reindex() == 2
        assert mgr.search("lions sleep at noon", k=1, mode="semantic")[0].event.content == (
            "lions sleep at noon"
        )

    def test_event_deletes_pops_and_clears(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("a chat about birds")
        said = [mgr.add_message(session.id, "user", f"message {i} about herons") for i in range(12)]
        fact = mgr.record_fact(session.id, "herons nest in colonies")
        mgr.flush()
        assert mgr.delete_event(said[0].id).id == said[0].id
        with pytest.raises(EventNotFound):
            mgr.get_event(said[0].id)
        for mode in MODES:  # gone from every index
            hits = mgr.search("message 0 about herons", 20, mode=mode)
            assert said[0].id not in {h.event.id for h in hits}
        newest = mgr.pop_event(session.id)  # the newest of any kind
        assert newest is not None and newest.id == fact.id
        popped: list[str] = []

        def pop() -> None:
            while (event := mgr.pop_event(session.id, kinds="message")) is not None:
                popped.append(event.id)

        threads = [threading.Thread(target=pop) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(popped) == sorted(e.id for e in said[1:])  # each exactly once
        assert [e.kind for e in mgr.events(session.id)] == ["goal"]
        mgr.add_message(session.id, "user", "one more")
        mgr.record_decision(session.id, "watch herons at dawn")
        assert mgr.clear_session(session.id, kinds="message") == 1
        assert [e.kind for e in mgr.events(session.id)] == ["goal", "decision"]
        assert mgr.clear_session(session.id) == 2 and mgr.events(session.id) == []
        assert mgr.get_session(session.id).goal == "a chat about birds"  # the session stays

    def test_unindexed_events_are_kept_but_never_searched(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        mgr = make()
        session = mgr.start_session("a crawl of bird sightings")
        bulky = mgr.record(
            session.id, "tool_output", "raw dump: pelican pelican pelican", index=False
        )
        kept = mgr.record_fact(session.id, "a pelican was seen at the pier")
        mgr.flush()
        assert not bulky.indexed and kept.indexed and mgr.pending_embeddings() == 0
        assert [e.indexed for e in mgr.events(session.id)] == [True, False, True]
        for mode in MODES:
            found = {h.event.id for h in mgr.search("raw dump pelican", 10, mode=mode)}
            assert kept.id in found and bulky.id not in found
        assert "raw dump" in mgr.restore(session.id, max_tokens=400).text  # still in the log
        assert mgr.reindex() == 2  # the goal and the fact: never the unindexed dump
        assert bulky.id not in {h.event.id for h in mgr.search("raw dump", 10, mode="keyword")}
        with backend.admin() as admin:
            exported = [r for r in admin.export() if r.get("id") == bulky.id]
            assert exported[0]["indexed"] is False

    def test_record_with_replace_is_an_upsert(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("keyed items")
        first = mgr.record(session.id, "x:item", "colour blue", metadata={"key": "colour"})
        mgr.record(session.id, "x:item", "size large", metadata={"key": "size"})
        mgr.record(session.id, "fact", "colour is a fact too", metadata={"key": "colour"})
        mgr.flush()
        second = mgr.record(
            session.id,
            "x:item",
            "colour green",
            metadata={"key": "colour"},
            replace={"key": "colour"},
        )
        items = mgr.events(session.id, kinds="x:item")
        assert [e.content for e in items] == ["size large", "colour green"]
        assert len(mgr.events(session.id, kinds="fact")) == 1  # another kind: untouched
        for mode in MODES:  # the replaced event is gone from every index
            found = {h.event.id for h in mgr.search("colour blue", 10, mode=mode)}
            assert first.id not in found
        assert second.id in {h.event.id for h in mgr.search("colour green", 10)}
        with pytest.raises(InvalidInput, match="non-empty"):
            mgr.record(session.id, "x:item", "all gone?", replace={})
        assert len(mgr.events(session.id)) == 4  # the refused upsert wrote nothing
