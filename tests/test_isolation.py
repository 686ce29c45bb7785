"""Agents see their own sessions and the pools they subscribed to, nothing else."""

from __future__ import annotations

import pytest

from session_manager import EventNotFound, PermissionDenied, SessionNotFound


@pytest.fixture
def world(make_manager):  # type: ignore[no-untyped-def]
    alice = make_manager("alice")
    private = alice.start_session("alice private research on quantum widgets")
    alice.record_fact(private.id, "the quantum widget secret is 42")
    pooled = alice.start_session("alice shared research on quantum widgets", shared_pool="team")
    alice.record_fact(pooled.id, "quantum widgets ship in March")
    other_pool = alice.start_session("alice other pool on quantum widgets", shared_pool="board")
    alice.record_fact(other_pool.id, "quantum widget budget is confidential")
    return alice, private, pooled, other_pool


def test_unsubscribed_agent_sees_nothing(make_manager, world) -> None:  # type: ignore[no-untyped-def]
    alice, private, pooled, other_pool = world
    bob = make_manager("bob")
    assert bob.list_sessions() == []
    for mode in ("hybrid", "semantic", "keyword"):
        assert bob.search("quantum widget", k=20, mode=mode) == []
    for session in (private, pooled, other_pool):
        with pytest.raises(SessionNotFound):
            bob.get_session(session.id)
        with pytest.raises(SessionNotFound):
            bob.events(session.id)
        with pytest.raises(SessionNotFound):
            bob.restore(session.id, max_tokens=1000)
        with pytest.raises(SessionNotFound):
            bob.record_fact(session.id, "bob was here")
        with pytest.raises(SessionNotFound):
            bob.search("quantum", session_id=session.id)
    secret = alice.events(private.id, kinds=["fact"])[0]
    with pytest.raises(EventNotFound):
        bob.get_event(secret.id)
    pending = alice.add_pending(private.id, "alice's todo")
    with pytest.raises(EventNotFound):
        bob.complete_pending(pending.id)
    with pytest.raises(SessionNotFound):
        bob.delete_session(private.id)
    with pytest.raises(SessionNotFound):
        bob.end_session(private.id)


def test_subscriber_reads_only_that_pool_and_never_writes(make_manager, world) -> None:  # type: ignore[no-untyped-def]
    alice, _, pooled, other_pool = world
    bob = make_manager("bob", subscribe=["team"])
    assert [s.id for s in bob.list_sessions()] == [pooled.id]
    assert bob.list_sessions(include_shared=False) == []
    for mode in ("hybrid", "semantic", "keyword"):
        hits = bob.search("quantum widget", k=20, mode=mode)
        assert {hit.event.session_id for hit in hits} == {pooled.id}, mode
    assert bob.search("quantum widget", k=20, include_shared=False) == []
    assert len(bob.events(pooled.id)) == 2
    assert "ship in March" in bob.restore(pooled.id, max_tokens=1000).text
    with pytest.raises(PermissionDenied, match="never write"):
        bob.record_fact(pooled.id, "bob writes into alice's pool session")
    with pytest.raises(PermissionDenied):
        bob.end_session(pooled.id)
    with pytest.raises(PermissionDenied):
        bob.delete_session(pooled.id)
    with pytest.raises(SessionNotFound):
        bob.get_session(other_pool.id)
    assert len(alice.events(pooled.id)) == 2  # nothing was written


def test_pool_members_search_one_another(make_manager, world) -> None:  # type: ignore[no-untyped-def]
    alice, _, pooled, _ = world
    bob = make_manager("bob", subscribe=["team"])
    mine = bob.start_session("bob's pooled notes", shared_pool="team")
    bob.record_fact(mine.id, "quantum widgets need helium")
    # Alice never subscribed to "team" as a reader, so she sees only her own sessions in it.
    alice_hits = alice.search("quantum widgets helium", k=20, mode="semantic")
    assert mine.id not in {hit.event.session_id for hit in alice_hits}
    carol = make_manager("carol", subscribe=["team"])
    carol_sessions = {hit.event.session_id for hit in carol.search("quantum widgets", k=20)}
    assert carol_sessions == {pooled.id, mine.id}


def test_own_pool_sessions_stay_visible_to_the_owner(world) -> None:  # type: ignore[no-untyped-def]
    alice, private, pooled, other_pool = world
    sessions = {
        hit.event.session_id for hit in alice.search("quantum widget", k=50, mode="semantic")
    }
    assert sessions == {private.id, pooled.id, other_pool.id}


def test_scoping_clause_is_built_in_one_place() -> None:
    """No module but _scope.py writes the agent restriction by hand."""
    import pathlib
    import re

    import session_manager

    root = pathlib.Path(session_manager.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if path.name != "_scope.py" and re.search(r"agent_id\s*=\s*\?\s+OR", path.read_text())
    ]
    assert offenders == []
