"""Pool grants on SQLite beyond the conformance suite: the migration of pools that existed
before grants did, grants through export and import, the operator's `memlane pool`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane import InvalidInput, PoolAccessDenied, SessionManager
from memlane.admin import StoreAdmin, json_line
from memlane.testing import HashEmbedder

from .test_cli import asm, fails, ok

Factory = Callable[..., SessionManager]


def _shared_before_grants(make: Factory) -> None:
    """alice starts pool "team", bob writes into it later, carol alone uses "solo"."""
    alice, bob, carol = make("alice"), make("bob"), make("carol")
    alice.record_fact(alice.start_session("first in team", shared_pool="team").id, "a team fact")
    alice.grant("team", "bob", "write")
    bob.record_fact(bob.start_session("bob in team", shared_pool="team").id, "bob's team fact")
    carol.start_session("carol alone", shared_pool="solo")
    for mgr in (alice, bob, carol):
        mgr.close()


def test_pools_from_before_grants_keep_their_writers(make_manager: Factory, db_path: Path) -> None:
    """Migration 0010: the agent of a pool's first session owns it, every other agent with a
    session in it may write; an agent that only subscribed must now be granted."""
    _shared_before_grants(make_manager)
    with sqlite3.connect(db_path) as conn:  # as the previous version left it
        conn.execute("DROP TABLE pool_grants")
        conn.execute("DELETE FROM migrations WHERE name = '0010_pool_grants'")
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        grants = [(g.pool, g.agent_id, g.access, g.granted_by) for g in admin.pools()]
    assert grants == [
        ("solo", "carol", "owner", "migration"),
        ("team", "alice", "owner", "migration"),
        ("team", "bob", "write", "migration"),
    ]
    bob = make_manager("bob", subscribe=["team"])
    bob.start_session("still writes", shared_pool="team")
    assert {h.event.content for h in bob.search("team fact", k=10)} >= {"a team fact"}
    with pytest.raises(PoolAccessDenied, match="owner, agent 'alice'"):
        make_manager("dave", subscribe=["team"])


@pytest.mark.postgres
def test_postgres_pools_from_before_grants_keep_their_writers(postgres_url: str) -> None:
    url = f"{postgres_url}{'&' if '?' in postgres_url else '?'}schema=pools_migration"

    def make(agent: str, **options: object) -> SessionManager:
        return SessionManager(agent, url=url, embedder=HashEmbedder(), background=False, **options)

    _shared_before_grants(make)
    import psycopg

    base, _, _ = postgres_url.partition("?")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("DROP TABLE pools_migration.pool_grants")
        conn.execute("DELETE FROM pools_migration.migrations WHERE name = '0009_pool_grants'")
    with StoreAdmin(url=url, embedder=HashEmbedder()) as admin:
        grants = [(g.pool, g.agent_id, g.access) for g in admin.pools()]
    assert grants == [
        ("solo", "carol", "owner"),
        ("team", "alice", "owner"),
        ("team", "bob", "write"),
    ]


def test_export_and_import_carry_the_grants(
    make_manager: Factory, db_path: Path, tmp_path: Path
) -> None:
    alice = make_manager("alice")
    alice.start_session("team work", shared_pool="team")
    alice.grant("team", "bob")
    alice.grant("team", "carol", "write")
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        records = list(admin.export())
    assert [r["type"] for r in records[:4]] == ["header", "grant", "grant", "grant"]
    fresh = tmp_path / "fresh.db"
    with StoreAdmin(fresh, embedder=HashEmbedder()) as target:
        result = target.import_records(json_line(r) for r in records)
        assert (result.grants_inserted, result.grants_skipped) == (3, 0)
        assert [json_line(r) for r in target.export()] == [json_line(r) for r in records]
        again = target.import_records((json_line(r) for r in records), dry_run=True)
        assert (again.grants_inserted, again.grants_skipped) == (0, 3)
        again = target.import_records(json_line(r) for r in records)
        assert (again.grants_inserted, again.grants_skipped) == (0, 3)
    bob = SessionManager("bob", fresh, embedder=HashEmbedder(), subscribe=["team"])
    bob.close()


def test_an_import_without_grants_keeps_each_writers_access(
    make_manager: Factory, db_path: Path, tmp_path: Path
) -> None:
    """An export written before grants existed (no grant records): whoever wrote into a
    pool keeps writing into it after the import, as the migration would have it."""
    _shared_before_grants(make_manager)
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        records = [r for r in admin.export() if r["type"] != "grant"]
    fresh = tmp_path / "old-export.db"
    with StoreAdmin(fresh, embedder=HashEmbedder()) as target:
        target.import_records(records)
        grants = [(g.pool, g.agent_id, g.access, g.granted_by) for g in target.pools()]
    assert grants == [
        ("solo", "carol", "owner", "import"),
        ("team", "alice", "owner", "import"),
        ("team", "bob", "write", "import"),
    ]


def test_a_bad_grant_record_is_refused_with_its_line(db_path: Path) -> None:
    header = {"type": "header", "format": "agent-session-manager/export", "version": 1}
    bad = {"type": "grant", "pool": "team", "agent_id": "bob", "access": "admin"}
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        with pytest.raises(InvalidInput, match=r"Line 2: .*access"):
            admin.import_records([json_line(header), json_line(bad)])
        assert admin.pools() == []


def test_asm_pool_lists_grants_and_revokes(make_manager: Factory, db_path: Path) -> None:
    alice = make_manager("alice")
    alice.start_session("team work", shared_pool="team")
    alice.close()
    granted = ok(asm(db_path, "pool", "grant", "team", "bob", "--access", "write"))
    assert "bob has write access to pool team" in granted.output
    rows = json.loads(ok(asm(db_path, "pool", "list", "--json")).output)
    assert [(r["agent_id"], r["access"], r["granted_by"]) for r in rows] == [
        ("alice", "owner", "alice"),
        ("bob", "write", "operator"),
    ]
    table = ok(asm(db_path, "pool", "list", "--pool", "team")).output
    assert "owner" in table and "operator" in table
    assert "Revoked" in ok(asm(db_path, "pool", "revoke", "team", "bob")).output
    assert "had no grant" in ok(asm(db_path, "pool", "revoke", "team", "bob")).output
    fails(asm(db_path, "pool", "revoke", "team", "alice"), "owns pool 'team'")
    ok(asm(db_path, "pool", "grant", "team", "carol", "--access", "owner"))
    logged = json.loads(ok(asm(db_path, "pool", "log", "team", "--json")).output)
    assert [(e["payload"]["agent"], e["payload"]["access"]) for e in logged] == [
        ("bob", "write"),  # alice's log
        ("bob", None),
        ("alice", "write"),  # carol's, from the hand-over on
        ("carol", "owner"),
    ]
    assert all(e["payload"]["by"] == "operator" for e in logged)
    assert "revoked" in ok(asm(db_path, "pool", "log", "team")).output
    fails(asm(db_path, "pool", "grant", "nowhere", "bob"), "does not exist")
    fails(asm(db_path, "pool", "grant", "team", "bob", "--access", "admin"), "admin", code=2)
