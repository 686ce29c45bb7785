"""The pool-sharing part of the conformance suite: on every backend (and vector index), a
pool is read only by the agents its owner granted, a revocation holds at the next read of a
manager that is already open — in this process or another — in every search mode and every
read, and every change is in the owner's pool log.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ..errors import (
    EventNotFound,
    InvalidInput,
    PermissionDenied,
    PoolAccessDenied,
    SessionNotFound,
)
from ..manager import SessionManager
from ..write.reads import SearchMode

__all__ = ["PoolConformance"]

ManagerFactory = Callable[..., SessionManager]
_MODES: tuple[SearchMode, ...] = ("hybrid", "semantic", "keyword")
_REVOKE_ELSEWHERE = """
    import sys
    from memlane.admin import StoreAdmin
    from memlane.testing import HashEmbedder

    url, index, pool, agent = sys.argv[1:5]
    with StoreAdmin(url=url, index=index or None, embedder=HashEmbedder()) as admin:
        print(admin.revoke(pool, agent))
"""


def _pool_world(make: ManagerFactory) -> tuple[Any, Any, Any]:
    """alice owns pool "team" (one fact in it) and keeps a private session."""
    alice = make("alice")
    private = alice.start_session("alice private plans for the zeppelin")
    alice.record_fact(private.id, "the zeppelin hangar code is 4471")
    pooled = alice.start_session("alice shared plans for the zeppelin", shared_pool="team")
    alice.record_fact(pooled.id, "the zeppelin launches from Friedrichshafen")
    return alice, private, pooled


class PoolConformance:
    """Who may read and write a pool (a mixin of ``BackendConformance``)."""

    def test_a_pool_is_read_only_by_the_agents_granted(self, make: ManagerFactory) -> None:
        alice, private, pooled = _pool_world(make)
        assert [g.access for g in alice.pools()] == ["owner"]
        with pytest.raises(PoolAccessDenied, match=r"alice.*grant\('team', 'bob', 'read'\)"):
            make("bob", subscribe=["team"])
        with pytest.raises(PoolAccessDenied, match="does not exist"):
            make("bob", subscribe=["nowhere"])
        granted = alice.grant("team", "bob")
        assert (granted.pool, granted.agent_id, granted.access, granted.granted_by) == (
            "team",
            "bob",
            "read",
            "alice",
        )
        bob = make("bob", subscribe=["team"])
        for mode in _MODES:
            hits = bob.search("zeppelin", k=20, mode=mode)
            assert {h.event.session_id for h in hits} == {pooled.id}, mode
        assert [s.id for s in bob.list_sessions()] == [pooled.id]
        with pytest.raises(SessionNotFound):
            bob.get_session(private.id)
        # read is not write: no session of its own in the pool, none of alice's sessions
        with pytest.raises(PoolAccessDenied, match="'write'"):
            bob.start_session("bob joins in", shared_pool="team")
        with pytest.raises(PermissionDenied):
            bob.record_fact(pooled.id, "bob writes into alice's session")
        assert len(alice.events(pooled.id)) == 2  # nothing written by the refusals

    def test_a_revocation_holds_at_the_next_read_of_an_open_manager(
        self, make: ManagerFactory
    ) -> None:
        alice, _, pooled = _pool_world(make)
        alice.grant("team", "bob")
        bob = make("bob", subscribe=["team"])  # opened before the revocation, kept open
        fact = alice.events(pooled.id, kinds=["fact"])[0]
        assert bob.get_event(fact.id).id == fact.id
        assert alice.revoke("team", "bob") is True
        assert alice.revoke("team", "bob") is False  # (nothing left to revoke)
        for mode in _MODES:
            assert bob.search("zeppelin", k=20, mode=mode) == [], mode
        assert bob.list_sessions() == []
        for read in (bob.get_session, bob.events, lambda s: bob.restore(s, max_tokens=500)):
            with pytest.raises(SessionNotFound):
                read(pooled.id)
        with pytest.raises(SessionNotFound):
            bob.search("zeppelin", session_id=pooled.id)
        with pytest.raises(EventNotFound):
            bob.get_event(fact.id)
        alice.grant("team", "bob")  # granted again: the same open manager reads it again
        assert {h.event.session_id for h in bob.search("zeppelin", k=20)} == {pooled.id}

    def test_a_revocation_in_another_process_holds_here_at_once(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        alice, _, pooled = _pool_world(make)
        if not alice.capabilities.multi_process:
            pytest.skip("a single-process backend")
        alice.grant("team", "bob")
        bob = make("bob", subscribe=["team"])
        assert bob.search("zeppelin", k=20, mode="semantic")
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(_REVOKE_ELSEWHERE),
                backend.url,
                backend.index or "",
                "team",
                "bob",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ),
        )
        assert child.returncode == 0 and child.stdout.strip() == "True", child.stderr
        for mode in _MODES:
            assert bob.search("zeppelin", k=20, mode=mode) == [], mode
        with pytest.raises(SessionNotFound):
            bob.events(pooled.id)

    def test_a_writer_revoked_keeps_its_sessions_but_adds_nothing(
        self, make: ManagerFactory
    ) -> None:
        alice, _, pooled = _pool_world(make)
        alice.grant("team", "bob", "write")
        bob = make("bob", subscribe=["team"])
        mine = bob.start_session("bob's notes on the zeppelin", shared_pool="team")
        bob.record_fact(mine.id, "the zeppelin needs helium")
        alice.revoke("team", "bob")
        with pytest.raises(PoolAccessDenied):
            bob.record_fact(mine.id, "written after the revocation")
        with pytest.raises(PoolAccessDenied):
            bob.start_session("another", shared_pool="team")
        # its own session stays its own: readable, closable, deletable
        assert [e.content for e in bob.events(mine.id, kinds=["fact"])] == [
            "the zeppelin needs helium"
        ]
        assert {h.event.session_id for h in bob.search("zeppelin", k=20)} == {mine.id}
        bob.end_session(mine.id)
        assert bob.delete_session(mine.id) == 2
        assert {h.event.session_id for h in alice.search("zeppelin", k=20)} >= {pooled.id}

    def test_only_the_owner_grants_and_every_change_is_logged(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        alice, _, _ = _pool_world(make)
        alice.grant("team", "bob", "write")
        bob = make("bob")
        for attempt in (
            lambda: bob.grant("team", "carol"),
            lambda: bob.revoke("team", "alice"),
            lambda: bob.pool_grants("team"),
            lambda: bob.pool_log("team"),
        ):
            with pytest.raises(PoolAccessDenied, match="Only the owner"):
                attempt()
        with pytest.raises(PoolAccessDenied, match="belongs to agent 'alice'"):
            bob.create_pool("team")
        with pytest.raises(InvalidInput, match="owns pool"):
            alice.revoke("team", "alice")
        with pytest.raises(InvalidInput, match="'read' or 'write'"):
            alice.grant("team", "bob", "owner")
        with pytest.raises(PoolAccessDenied, match="does not exist"):
            alice.grant("nowhere", "bob")
        alice.grant("team", "carol")
        alice.revoke("team", "bob")
        assert [(g.agent_id, g.access) for g in alice.pool_grants("team")] == [
            ("alice", "owner"),
            ("carol", "read"),
        ]
        log = alice.pool_log("team")
        assert [(e.payload["agent"], e.payload["access"], e.payload["by"]) for e in log] == [
            ("bob", "write", "alice"),
            ("carol", "read", "alice"),
            ("bob", None, "alice"),
        ]
        assert all(e.kind == "asm:grant" for e in log)
        # the log is kept, not searched: the owner's searches never surface it
        assert not [
            h for h in alice.search("granted read pool", k=50) if h.event.kind == "asm:grant"
        ]
        # the operator hands the pool over; the old owner keeps write
        with backend.admin() as admin:
            handed = admin.grant("team", "carol", "owner")
            assert handed.granted_by == "operator"
            assert [(g.agent_id, g.access) for g in admin.pools("team")] == [
                ("carol", "owner"),
                ("alice", "write"),
            ]
        carol = make("carol")
        carol.grant("team", "bob")
        assert [e.payload["access"] for e in carol.pool_log("team")] == ["write", "owner", "read"]

    def test_two_agents_creating_one_pool_at_once_get_one_owner(self, make: ManagerFactory) -> None:
        agents = [make(f"agent-{i}") for i in range(4)]
        outcomes: list[str] = []
        barrier = threading.Barrier(len(agents))

        def create(mgr: Any) -> None:
            barrier.wait()
            try:
                mgr.start_session("claims the pool", shared_pool="contested")
                outcomes.append("owner")
            except PoolAccessDenied:
                outcomes.append("refused")

        threads = [threading.Thread(target=create, args=(mgr,)) for mgr in agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["owner", "refused", "refused", "refused"]
        owners = [g for mgr in agents for g in mgr.pools() if g.access == "owner"]
        assert len(owners) == 1 and owners[0].pool == "contested"

    def test_isolation_between_agents_and_pools(self, make: ManagerFactory) -> None:
        alice = make("alice")
        private = alice.start_session("alice private quantum widgets")
        alice.record_fact(private.id, "the quantum widget secret is 42")
        pooled = alice.start_session("alice shared quantum widgets", shared_pool="team")
        alice.record_fact(pooled.id, "quantum widgets ship in March")
        board = alice.start_session("alice board quantum widgets", shared_pool="board")
        alice.record_fact(board.id, "quantum widget budget is confidential")
        bob = make("bob")
        alice.grant("team", "carol")
        carol = make("carol", subscribe=["team"])
        for mode in _MODES:
            assert bob.search("quantum widget", k=20, mode=mode) == []
            hits = carol.search("quantum widget", k=20, mode=mode)
            assert {hit.event.session_id for hit in hits} == {pooled.id}, mode
            mine = alice.search("quantum widget", k=20, mode=mode)
            assert {hit.event.session_id for hit in mine} == {private.id, pooled.id, board.id}
        assert bob.list_sessions() == []
        assert [s.id for s in carol.list_sessions()] == [pooled.id]
        for session in (private, pooled, board):
            with pytest.raises(SessionNotFound):
                bob.events(session.id)
            with pytest.raises(SessionNotFound):
                bob.record_fact(session.id, "bob was here")
        with pytest.raises(PermissionDenied):
            carol.record_fact(pooled.id, "carol was here")
        with pytest.raises(SessionNotFound):
            carol.restore(private.id, max_tokens=500)
        assert len(carol.events(pooled.id)) == 2
        assert carol.restore(pooled.id, max_tokens=500).token_count <= 500
