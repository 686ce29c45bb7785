"""Managers of one store in a process share one engine (engine/shared.py): one worker, one
connection, one set of caches; each still sees only its own agent's memory, a closed one
refuses every call, and the last to close stops the worker and closes the store."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memlane import HashEmbedder, InvalidInput, PoolAccessDenied, RetentionPolicy, SessionManager
from memlane.engine import shared


def workers() -> int:
    return sum(t.name == "session-manager-indexer" for t in threading.enumerate())


def test_five_agents_share_one_worker_and_see_only_their_own(db_path: Path) -> None:
    embedder = HashEmbedder()
    before = workers()
    managers = [SessionManager(f"agent-{i}", db_path, embedder=embedder) for i in range(5)]
    assert len({id(m._engine) for m in managers}) == 1
    engine = managers[0]._engine
    assert engine.holders == 5
    assert workers() == before + 1
    for i, mgr in enumerate(managers):
        session = mgr.start_session(f"agent {i}'s work")
        mgr.record_fact(session.id, f"the secret word of agent {i} is word{i}")
    for i, mgr in enumerate(managers):
        mgr.flush()
        found = {hit.event.content for hit in mgr.search("secret word", k=10, kinds="fact")}
        assert found == {f"the secret word of agent {i} is word{i}"}
    for mgr in managers[:4]:
        mgr.close()
        assert workers() == before + 1  # the fifth manager's worker goes on
    managers[4].close()
    assert engine.holders == 0 and workers() == before


def test_a_closed_manager_refuses_while_the_others_go_on(db_path: Path) -> None:
    embedder = HashEmbedder()
    first = SessionManager("a", db_path, embedder=embedder)
    second = SessionManager("b", db_path, embedder=embedder)
    engine = second._engine
    session = first.start_session("goal")
    first.close()
    first.close()  # again: nothing
    for call in (
        lambda: first.record(session.id, "message", "hello"),
        lambda: first.search("hello"),
        first.flush,
        first.health,
    ):
        with pytest.raises(InvalidInput, match="closed"):
            call()
    assert first.capabilities.name == "sqlite" and first.embedder_name == embedder.name
    assert engine.holders == 1
    other = second.start_session("still working")
    second.record_fact(other.id, "the engine stayed open for b")
    second.flush()
    assert [h.event.content for h in second.search("engine open", k=3, kinds="fact")] == [
        "the engine stayed open for b"
    ]
    second.close()
    assert engine.holders == 0
    with pytest.raises(InvalidInput, match="closed"):
        engine.store.pending_count()
    # the next manager opens a new engine: nothing of the closed one is handed out
    with SessionManager("a", db_path, embedder=embedder) as again:
        assert again._engine is not engine
        assert len(again.events(session.id)) >= 1


def test_different_settings_open_engines_of_their_own(db_path: Path, tmp_path: Path) -> None:
    embedder = HashEmbedder()
    base = SessionManager("a", db_path, embedder=embedder)
    others = [
        SessionManager("a", db_path, embedder=HashEmbedder()),  # another embedder object
        SessionManager("a", db_path, embedder=embedder, background=False),
        SessionManager("a", db_path, embedder=embedder, worker_priority="normal"),
        SessionManager("a", db_path, embedder=embedder, model="gpt-4"),
        SessionManager("a", tmp_path / "other.db", embedder=embedder),
        SessionManager("a", ":memory:", embedder=embedder),
        SessionManager("a", ":memory:", embedder=embedder),
    ]
    same = SessionManager("z", str(db_path.parent / "." / db_path.name), embedder=embedder)
    assert same._engine is base._engine  # one file, spelt differently
    assert len({id(m._engine) for m in [base, *others]}) == len(others) + 1
    for mgr in [base, same, *others]:
        mgr.close()


def test_managers_opened_at_once_from_threads_get_one_engine(db_path: Path) -> None:
    embedder = HashEmbedder()
    opened: list[SessionManager] = []
    start = threading.Barrier(6)
    before = shared.shared_engines()

    def open_one(i: int) -> None:
        start.wait()
        opened.append(SessionManager(f"agent-{i}", db_path, embedder=embedder))

    threads = [threading.Thread(target=open_one, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(m._engine) for m in opened}) == 1 and opened[0]._engine.holders == 6
    assert shared.shared_engines() == before + 1
    for mgr in opened:
        mgr.close()
    assert shared.shared_engines() == before


def test_a_closed_managers_idle_work_leaves_the_shared_worker(db_path: Path) -> None:
    """Retention and auto-summaries run on the worker when it is idle: a manager that
    closes takes its own back; the other manager's stay."""
    embedder = HashEmbedder()
    keeper = SessionManager("keeper", db_path, embedder=embedder, auto_summary=1000)
    leaving = SessionManager(
        "leaving", db_path, embedder=embedder, retention=RetentionPolicy(max_age="30d")
    )
    hooks = keeper._engine.indexer.idle_hooks
    mine, theirs = list(keeper._idle_hooks), list(leaving._idle_hooks)
    assert all(hook in hooks for hook in mine + theirs)
    leaving.close()
    assert all(hook in hooks for hook in mine)
    assert not any(hook in hooks for hook in theirs)
    keeper.close()


def test_a_manager_that_fails_to_open_lets_go_of_the_engine(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails after the engine is held (a pool it may not read, any part that
    cannot be built) releases that hold once: the engine closes with its last manager."""
    embedder = HashEmbedder()
    first = SessionManager("a", db_path, embedder=embedder)
    for _ in range(3):
        with pytest.raises(PoolAccessDenied):
            SessionManager("b", db_path, embedder=embedder, subscribe=["team"])
    from memlane import manager as manager_module

    def broken(**_: object) -> None:
        raise RuntimeError("a part that cannot be built")

    monkeypatch.setattr(manager_module, "Writer", broken)
    with pytest.raises(RuntimeError):
        SessionManager("c", db_path, embedder=embedder)
    monkeypatch.undo()
    assert first._engine.holders == 1
    engine = first._engine
    first.close()
    assert engine.holders == 0  # (closed: a failed open had not kept it)
