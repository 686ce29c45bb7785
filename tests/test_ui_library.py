"""What the inspector (``memlane ui``) needs of the library, tested on the library itself:
each hit's ranks from the search that made it (``Hit.ranks``), a page of sessions filtered
by text, a page of a session's events, and a ``StoreAdmin`` that cannot write."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.errors import EventNotFound, InvalidInput, StoreReadOnly
from memlane.testing import HashEmbedder


@pytest.fixture
def store(db_path: Path) -> Path:
    with SessionManager("researcher", db_path=db_path, embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("Compare Postgres and SQLite for the queue")
        mgr.record_fact(session.id, "The queue runs on Postgres 16 in production.")
        mgr.record_decision(session.id, "Keep SQLite for the local cache.")
        mgr.add_message(session.id, "user", "What about the billing service?")
        for i in range(4):
            mgr.start_session(f"Other task {i}")
        mgr.search("Postgres", k=3)  # embeds what waits
    return db_path


def test_hybrid_hits_carry_the_ranks_of_both_halves(store: Path) -> None:
    with StoreAdmin(store, embedder=HashEmbedder()) as admin:
        hits = admin.search("Postgres production queue", k=3, mode="hybrid")
        assert hits
        for hit in hits:
            assert hit.ranks is not None
            assert set(hit.ranks) <= {"semantic", "keyword"}
            assert all(rank >= 1 for rank in hit.ranks.values())
        top = hits[0]
        assert top.ranks is not None and top.ranks.get("keyword") == 1
        # the semantic half ranks every event of the scope: each hit has a semantic place
        assert all(hit.ranks is not None and "semantic" in hit.ranks for hit in hits)
        places = sorted(hit.ranks["semantic"] for hit in hits if hit.ranks)
        assert len(set(places)) == len(places)  # a place is one event's


@pytest.mark.parametrize(("mode", "name"), [("keyword", "keyword"), ("semantic", "semantic")])
def test_one_mode_hits_carry_that_mode_s_rank(store: Path, mode: str, name: str) -> None:
    with StoreAdmin(store, embedder=HashEmbedder()) as admin:
        hits = admin.search("Postgres", k=2, mode=mode)
        assert hits
        assert [hit.ranks for hit in hits] == [{name: i} for i in range(1, len(hits) + 1)]


def test_sessions_by_text_and_pages(store: Path) -> None:
    with StoreAdmin(store) as admin:
        found = admin.sessions(text="POSTGRES")
        assert [info.session.goal for info in found] == [
            "Compare Postgres and SQLite for the queue"
        ]
        assert admin.sessions(text="100%_") == []  # LIKE's wildcards are literal
        every = [info.session.id for info in admin.sessions()]
        assert len(every) == 5
        pages = [info.session.id for info in admin.sessions(limit=2, offset=0)]
        pages += [info.session.id for info in admin.sessions(limit=2, offset=2)]
        pages += [info.session.id for info in admin.sessions(limit=2, offset=4)]
        assert pages == every
        with pytest.raises(InvalidInput, match="offset"):
            admin.sessions(offset=-1)


def test_events_page_reads_one_page_in_log_order(store: Path) -> None:
    with StoreAdmin(store) as admin:
        session = admin.sessions(text="queue")[0].session
        whole = admin.events(session.id)
        assert [e.id for e in admin.events_page(session.id, offset=1, limit=2)] == [
            e.id for e in whole[1:3]
        ]
        assert admin.events_page(session.id, offset=50) == []
        with pytest.raises(InvalidInput, match="limit"):
            admin.events_page(session.id, limit=-3)


def test_event_position_says_where_an_event_is(store: Path) -> None:
    with StoreAdmin(store) as admin:
        session = admin.sessions(text="queue")[0].session
        whole = admin.events(session.id)
        for index, event in enumerate(whole):
            position = admin.event_position(session.id, event.id)
            assert position <= index  # (events of one microsecond count from the first)
            assert whole[position].created_at == event.created_at
        with pytest.raises(EventNotFound, match="holds no event"):
            admin.event_position(session.id, "01NOSUCHEVENT0000000000000")
        other = admin.sessions(text="Other task 0")[0].session
        with pytest.raises(EventNotFound):
            admin.event_position(other.id, whole[1].id)  # not this session's


def test_a_read_only_admin_reads_and_never_writes(store: Path) -> None:
    with StoreAdmin(store, embedder=HashEmbedder(), read_only=True) as admin:
        assert admin.read_only
        assert len(admin.sessions()) == 5
        assert admin.search("Postgres", k=1)
        session = admin.sessions(text="queue")[0].session
        with pytest.raises(StoreReadOnly):
            admin.delete_session(session.id)
    with StoreAdmin(store) as admin:
        assert len(admin.sessions()) == 5
