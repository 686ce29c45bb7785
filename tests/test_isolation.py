"""Agents see their own sessions and the pools they subscribed to, nothing else."""

from __future__ import annotations

import pytest

from memlane import EventNotFound, PermissionDenied, SessionNotFound


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
    alice.grant("team", "bob")
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
    alice.grant("team", "bob", "write")
    alice.grant("team", "carol")
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


SECRET = "zqx-alice-only"  # appears in every text of alice's that mallory must never see


@pytest.fixture
def secrets(make_manager):  # type: ignore[no-untyped-def]
    """Alice's private and pooled memory, every kind of event, each carrying SECRET."""
    alice = make_manager("alice")
    ids: list[str] = []
    for pool in (None, "team"):
        session = alice.start_session(f"{SECRET} research on widgets", shared_pool=pool)
        ids.append(session.id)
        alice.record_fact(session.id, f"{SECRET}: the widget code is 42", metadata={"k": SECRET})
        alice.record_decision(session.id, f"{SECRET}: ship widgets in March")
        alice.record_step(session.id, f"{SECRET} step", result={"widgets": SECRET})
        alice.add_message(session.id, "user", f"{SECRET}: what about widgets?")
        # a long answer, SECRET only in a passage deep inside: shown by passages, never leaked
        filler = [f"Widget part {n} is documented in the catalogue. " * 12 for n in range(8)]
        filler[5] += f"Its code name is {SECRET}."
        alice.add_message(session.id, "assistant", "\n\n".join(filler))
        ids.append(alice.add_pending(session.id, f"{SECRET}: order widgets").id)
        ids.append(alice.record_error(session.id, f"{SECRET}: widget API down").id)
        alice.summarize(session.id, max_tokens=200)
    alice.flush()
    return alice, ids


def leaks(value: object) -> bool:
    return SECRET in repr(value)


def test_no_read_of_an_outsider_reveals_anything(make_manager, secrets) -> None:  # type: ignore[no-untyped-def]
    """Behavioural, not a grep of the SQL: every read an outsider can make, with every
    filter, by text and by guessed id, returns nothing of alice's (private or pooled)."""
    alice, ids = secrets
    mallory = make_manager("mallory")
    own = mallory.start_session("widgets research of my own")
    mallory.record_fact(own.id, "widgets are blue")
    reads = [
        lambda: mallory.list_sessions(limit=None),
        lambda: mallory.list_sessions(status="active", include_shared=True),
        lambda: mallory.events(own.id),
        lambda: mallory.restore(own.id, 4000, other_sessions=True),
        lambda: mallory.restore(own.id, 4000, query=f"{SECRET} widget code", other_sessions=True),
        lambda: mallory.summarize(own.id, max_tokens=200),
    ]
    for mode in ("hybrid", "semantic", "keyword"):
        for filters in (
            {},
            {"kinds": ["fact", "decision", "message", "step", "pending", "error", "summary"]},
            {"where": {"k": SECRET}},
            {"where": {"k": {"$exists": True}}},
            {"since": "2000-01-01T00:00:00Z"},
            {"include_shared": True},
        ):
            reads.append(
                lambda mode=mode, filters=filters: mallory.search(
                    f"{SECRET} widget code 42 March", k=100, mode=mode, **filters
                )
            )
    for read in reads:
        assert not leaks(read())
    # positive control: the same reads do reveal it to its owner (the check can fail)
    assert leaks(alice.search(f"{SECRET} widget code 42 March", k=100))
    assert leaks(alice.restore(ids[0], 4000, query=SECRET))
    by_id = [
        (mallory.get_session, ()),
        (mallory.get_event, ()),
        (mallory.events, ()),
        (mallory.restore, (4000,)),
        (mallory.summarize, ()),
        (mallory.complete_pending, ()),
        (mallory.resolve_error, ()),
        (mallory.record_fact, ("mallory was here",)),
    ]
    for guessed in ids:
        with pytest.raises(SessionNotFound) as caught:
            mallory.search("widget", session_id=guessed)
        assert not leaks(str(caught.value))
        for read_one, rest in by_id:
            with pytest.raises((SessionNotFound, EventNotFound)) as caught:
                read_one(guessed, *rest)
            assert not leaks(str(caught.value))


def test_a_subscriber_sees_the_pool_and_nothing_private(make_manager, secrets) -> None:  # type: ignore[no-untyped-def]
    alice, _ = secrets
    alice.grant("team", "bob")
    bob = make_manager("bob", subscribe=["team"])
    pooled = {s.id for s in alice.list_sessions() if s.shared_pool == "team"}
    for mode in ("hybrid", "semantic", "keyword"):
        hits = bob.search(f"{SECRET} widget code 42", k=100, mode=mode)
        assert hits and {hit.event.session_id for hit in hits} <= pooled
    assert {s.id for s in bob.list_sessions()} == pooled
