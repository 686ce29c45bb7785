"""Isolation enforced by PostgreSQL itself (issue 14): each agent connects with a role of its
own and row-level security lets it read and write what the library would let it — checked
with the library and with raw SQL by a hostile agent that ignores the library."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from memlane import InvalidInput, SessionManager, StoreMisconfigured
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder

from .servers import postgres_server
from .test_cli import asm

pytestmark = pytest.mark.postgres

SCHEMA = "rls_store"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def _as(url: str, role: str) -> str:
    """``url`` with ``role`` as its user (the test server trusts local connections)."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{role}@{rest.split('@', 1)[1]}"


@pytest.fixture
def store(server: str) -> Iterator[str]:
    """A fresh store owned by the server's superuser; alice, bob and mallory have roles."""
    owner_url = f"{server}?schema={SCHEMA}"
    with StoreAdmin(url=owner_url, embedder=HashEmbedder()) as admin:
        for agent in ("alice", "bob", "mallory"):
            assert admin.create_agent_role(agent) == f"asm_{agent}"
        assert admin.create_agent_role("alice") == "asm_alice"  # (again: idempotent)
    yield server
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")


def _manager(server: str, agent: str, **options: object) -> SessionManager:
    url = f"{_as(server, f'asm_{agent}')}?schema={SCHEMA}"
    return SessionManager(agent, url=url, embedder=HashEmbedder(), background=False, **options)


def _raw(server: str, agent: str) -> psycopg.Connection:
    conn = psycopg.connect(_as(server, f"asm_{agent}"), autocommit=True)
    conn.execute(f"SET search_path TO {SCHEMA}, public")
    return conn


def _alice_world(server: str) -> tuple[SessionManager, str, str]:
    alice = _manager(server, "alice")
    private = alice.start_session("alice's private plans for the zeppelin")
    alice.record_fact(private.id, "the zeppelin hangar code is 4471")
    pooled = alice.start_session("shared plans for the zeppelin", shared_pool="team")
    alice.record_fact(pooled.id, "the zeppelin launches from Friedrichshafen")
    alice.flush()
    return alice, private.id, pooled.id


def test_agents_on_their_own_roles_work_as_usual(store: str) -> None:
    alice, private, pooled = _alice_world(store)
    alice.grant("team", "bob")
    bob = _manager(store, "bob", subscribe=["team"])
    for mode in ("hybrid", "semantic", "keyword"):
        hits = bob.search("zeppelin", k=20, mode=mode)
        assert {h.event.session_id for h in hits} == {pooled}, mode
    assert "Friedrichshafen" in bob.restore(pooled, max_tokens=500).text
    mine = bob.start_session("bob's own notes")
    bob.record_fact(mine.id, "bob keeps his own notes", ttl=0.2)
    alice.record_fact(pooled, "the zeppelin's crew changes at noon", ttl=0.2)
    time.sleep(0.3)
    # the sweep sees alice's expired row too but may delete only bob's: it must neither spin
    # nor count hers
    assert bob._storage.sweep_expired() == {"fact": 1}
    assert alice._storage.sweep_expired() == {"fact": 1}
    alice.revoke("team", "bob")
    for mode in ("hybrid", "semantic", "keyword"):
        assert {h.event.session_id for h in bob.search("zeppelin", k=20, mode=mode)} <= {mine.id}
    assert {s.id for s in alice.list_sessions()} >= {private, pooled}
    for mgr in (alice, bob):
        mgr.close()


def test_a_hostile_agent_with_raw_sql_reads_and_writes_nothing_of_others(store: str) -> None:
    alice, private, pooled = _alice_world(store)
    alice.grant("team", "bob")
    alice.close()
    with _raw(store, "mallory") as conn:
        for table in ("sessions", "events", "vectors", "outbox"):
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # not even readable
            conn.execute("SELECT * FROM agent_roles")
        assert conn.execute("DELETE FROM events").rowcount == 0
        assert conn.execute("UPDATE sessions SET goal = 'pwned'").rowcount == 0
        # it cannot grant itself into the pool, nor take the pool over
        for statement in (
            "INSERT INTO pool_grants VALUES ('team', 'mallory', 'read', 0, 'mallory')",
            "INSERT INTO pool_grants VALUES ('team', 'mallory', 'owner', 0, 'mallory')",
        ):
            with pytest.raises(psycopg.Error):
                conn.execute(statement)
        assert conn.execute("UPDATE pool_grants SET agent_id = 'mallory'").rowcount == 0
        # nor write into alice's session, even naming itself as the author
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                "INSERT INTO events (id, session_id, agent_id, kind, content, importance, "
                "created_us, token_count, partition) VALUES "
                "('x', %s, 'mallory', 'fact', 'forged', 0.5, 0, 1, 'pool:team')",
                (pooled,),
            )
        # nor map its role to alice
        with pytest.raises(psycopg.Error):
            conn.execute("INSERT INTO agent_roles VALUES ('asm_mallory', 'alice')")
    with _raw(store, "bob") as conn:  # granted read: the pool, and nothing private
        sessions = {row[0] for row in conn.execute("SELECT id FROM sessions")}
        assert sessions == {pooled} and private not in sessions
        contents = [row[0] for row in conn.execute("SELECT content FROM events")]
        assert "the zeppelin hangar code is 4471" not in contents
        assert "the zeppelin launches from Friedrichshafen" in contents
    with StoreAdmin(url=f"{store}?schema={SCHEMA}", embedder=HashEmbedder()) as admin:
        admin.revoke("team", "bob")
    with _raw(store, "bob") as conn:  # revoked: at once, for raw SQL too
        assert conn.execute("SELECT count(*) FROM events").fetchone() == (0,)


def test_a_role_opens_only_its_own_agent(store: str) -> None:
    url = f"{_as(store, 'asm_mallory')}?schema={SCHEMA}"
    with pytest.raises(StoreMisconfigured, match="agent 'mallory'"):
        SessionManager("alice", url=url, embedder=HashEmbedder(), background=False)


def test_row_security_is_refused_on_sqlite(tmp_path: object) -> None:
    with (
        StoreAdmin(f"{tmp_path}/s.db", embedder=HashEmbedder()) as admin,
        pytest.raises(InvalidInput, match="PostgreSQL's"),
    ):
        admin.create_agent_role("alice")


def test_asm_agent_role_makes_a_role_with_a_password(store: str) -> None:
    from .test_cli import ok

    result = ok(
        asm(f"{store}?schema={SCHEMA}", "agent-role", "carol", "--password-stdin", input="s3cret\n")
    )
    assert "Role asm_carol is agent carol's" in result.output
    with psycopg.connect(store, autocommit=True) as conn:
        assert conn.execute(
            "SELECT rolcanlogin, rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'asm_carol'"
        ).fetchone() == (True, True)
    carol = _manager(store, "carol")
    carol.record_fact(carol.start_session("carol's work").id, "carol's fact")
    carol.close()
