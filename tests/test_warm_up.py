"""Warming up (``SessionManager.warm_up``, ``memlane ui``'s start): what a first search or
restore would wait for is loaded beforehand, and nothing is recorded or counted."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memlane import HashEmbedder, InvalidInput, SessionManager
from memlane.admin import StoreAdmin
from memlane.ranking.keyword import cache as keyword_cache
from memlane.store.base import EventFilter
from memlane.store.sqlite import SqliteStore
from memlane.ui import Source

WORDS = [
    "deploy",
    "pipeline",
    "staging",
    "database",
    "login",
    "error",
    "rate",
    "limit",
    "webhook",
    "docker",
]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of a few hundred events count as big: built in the background."""
    monkeypatch.setattr(keyword_cache, "_CHUNK", 32)


def fill(db: Path, agent: str, turns: int = 300) -> str:
    rng = random.Random(agent)
    with SessionManager(agent, db, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session(f"{agent}'s chat").id
        mgr.record_many(
            sid,
            [
                {"kind": "message", "role": "user", "content": " ".join(rng.choices(WORDS, k=8))}
                for _ in range(turns)
            ],
        )
        mgr.flush()
        return sid


def partitions(mgr: SessionManager) -> list[str]:
    """The partitions the manager's searches read (its agent's: "agent:<id>")."""
    searcher = mgr._writer.searcher
    return [name for name, _ in searcher._partitions(EventFilter(searcher.scope))]


def test_warm_up_loads_the_indexes_and_counts_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sid = fill(db, "ops")
    with SessionManager("ops", db, embedder=HashEmbedder(), background=False) as mgr:
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        names = partitions(mgr)
        assert names and not store.keyword_index_ready(names)  # (starts its build)
        assert mgr._engine.storage.vectors._cache is None  # type: ignore[attr-defined]
        assert mgr.warm_up(wait=60) is True
        assert store.keyword_index_ready(names)  # the search that follows ranks in memory
        assert mgr._engine.storage.vectors._cache is not None  # type: ignore[attr-defined]
        mgr.flush()  # (recall counts would be written now)
        assert {e.recall_count for e in mgr.events(sid)} == {0}
        assert len(mgr.events(sid, limit=1000)) == 301  # nothing recorded
        with pytest.raises(InvalidInput, match="wait must be a number of seconds"):
            mgr.warm_up(wait=-1)
        with pytest.raises(InvalidInput, match="wait must be a number of seconds"):
            mgr.warm_up(wait="10")  # type: ignore[arg-type]


def test_warm_up_without_waiting_returns_at_once_and_the_build_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    fill(db, "ops", turns=600)
    with SessionManager("ops", db, embedder=HashEmbedder(), background=False) as mgr:
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        mgr.warm_up()  # ready or not, it does not wait
        assert store.keyword_index_ready(partitions(mgr), wait=60)


def test_the_inspector_warms_the_agents_it_will_most_likely_show(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    for agent in ("a1", "a2", "a3", "a4"):
        fill(db, agent, turns=40)
    admin = StoreAdmin(db, embedder=HashEmbedder(), read_only=True)
    source = Source(admin)
    try:
        assert source.warm_up(wait=60) == ["a4", "a3", "a2"]  # the most recent, at most 3
        assert sorted(agent for agent, _ in source._managers) == ["a2", "a3", "a4"]
        # the operator's search (every agent) reads through the admin's own caches: warmed
        built = admin.store._keywords._built  # type: ignore[attr-defined]
        assert sorted(built) == ["agent:a2", "agent:a3", "agent:a4"]  # (a1: not asked for)
    finally:
        source.close()
    scoped = Source(StoreAdmin(db, embedder=HashEmbedder(), read_only=True), agent="a1")
    try:
        assert scoped.warm_up() == ["a1"]
        assert scoped.admin.store._keywords._built == {}  # type: ignore[attr-defined]
    finally:
        scoped.close()


def test_an_operator_warms_up_every_agent_or_those_named(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    sids = {agent: fill(db, agent, turns=400) for agent in ("a1", "a2")}
    with StoreAdmin(db, embedder=HashEmbedder(), read_only=True) as admin:
        store = admin.store
        assert isinstance(store, SqliteStore)
        assert admin.warm_up(["a2"], wait=60) is True
        assert store.keyword_index_ready(["agent:a2"])
        assert admin.warm_up(wait=60) is True  # every agent
        assert store.keyword_index_ready(["agent:a1", "agent:a2"])
        with pytest.raises(InvalidInput, match="wait must be a number of seconds"):
            admin.warm_up(wait=-0.5)
        with pytest.raises(InvalidInput, match="agent"):
            admin.warm_up([""])
        assert admin.warm_up(["nobody"]) is True  # an agent with no events: nothing to load
    with SessionManager("a1", db, embedder=HashEmbedder(), background=False) as mgr:
        assert {e.recall_count for e in mgr.events(sids["a1"], limit=1000)} == {0}
        assert len(mgr.events(sids["a1"], limit=1000)) == 401  # nothing recorded
