"""The engine beneath the front ends, and defects the review of issue 9 found in it: recall
counting as a flag, the query cache under threads, token counting outside the write lock,
compare-and-set status changes, health(), and errors that are always ours."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import (
    InvalidFilter,
    InvalidInput,
    SessionManager,
    SessionManagerError,
    SessionNotFound,
)
from memlane.admin import StoreAdmin
from memlane.search import searcher as search_module
from memlane.testing import HashEmbedder


def recall_total(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT coalesce(sum(recall_count), 0) FROM events").fetchone()[0])


def test_count_recalls_false_leaves_recall_counts_alone(make_manager: Any, db_path: Path) -> None:
    agent: SessionManager = make_manager(background=False)
    session = agent.start_session("Audit staging")
    for i in range(30):
        agent.record_fact(session.id, f"staging host {i} runs PostgreSQL {i % 3 + 14}")
    observer: SessionManager = make_manager(background=False, count_recalls=False)
    observer.search("PostgreSQL 15", k=5)
    observer.restore(session.id, 300, query="which hosts run PostgreSQL 16?")
    observer.flush()
    assert recall_total(db_path) == 0
    agent.search("PostgreSQL 15", k=5)  # the agent's own reads still count
    agent.flush()
    assert recall_total(db_path) == 5


def test_query_vector_cache_survives_threads(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four threads on one manager, a tiny cache: every insert evicts (a KeyError from the
    unlocked OrderedDict's move_to_end/popitem before the fix)."""
    monkeypatch.setattr(search_module, "_QUERY_CACHE_SIZE", 2)
    searcher = mgr._writer.searcher
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(400):
                vector = searcher.query_vector(f"query {(i + offset) % 7}")
                assert vector.shape == (HashEmbedder().dim,)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(searcher._query_cache) <= 2


def test_tokens_are_counted_before_the_write_lock(db_path: Path) -> None:
    """A slow user counter must not hold the database's write lock: another writer gets in
    while it counts."""
    lock_free: list[bool] = []

    def counter(text: str) -> int:
        other = sqlite3.connect(db_path, timeout=0.05)
        try:
            other.execute("BEGIN IMMEDIATE")
            other.execute("ROLLBACK")
            lock_free.append(True)
        except sqlite3.OperationalError:
            lock_free.append(False)
        finally:
            other.close()
        return len(text.split())

    with SessionManager(
        "counter", db_path, embedder=HashEmbedder(), model=counter, background=False
    ) as mgr:
        session = mgr.start_session("count words, not bytes")
        mgr.record_fact(session.id, "three words here")
        mgr.record_step(session.id, "a step", result={"ok": True})
        mgr.summarize(session.id, max_tokens=100)
    assert lock_free and all(lock_free), lock_free


def test_resolve_error_reports_a_concurrent_change(mgr: SessionManager) -> None:
    session = mgr.start_session("Fix the deploy")
    error = mgr.record_error(session.id, "deploy failed: HTTP 502")
    store = mgr._writer.log
    real_claim = store.claim_event_status

    def someone_else_first(tx: Any, event_id: str, before: str | None, after: str) -> bool:
        # Another writer flips the status just before our compare-and-set runs.
        tx.execute("UPDATE events SET status = 'resolved' WHERE id = ?", (event_id,))
        return real_claim(tx, event_id, before, after)

    store.claim_event_status = someone_else_first  # type: ignore[method-assign]
    try:
        with pytest.raises(InvalidInput, match="changed meanwhile"):
            mgr.resolve_error(error.id)
    finally:
        del store.claim_event_status


def test_conveniences_take_metadata_none(mgr: SessionManager) -> None:
    session = mgr.start_session("Plan the migration")
    step = mgr.record_step(session.id, "listed tables", tool="psql", metadata=None)
    message = mgr.add_message(session.id, "user", "go on", metadata=None)
    output = mgr.record_tool_output(session.id, {"tables": 12}, metadata=None)
    assert step.metadata == {"tool": "psql"}
    assert message.metadata == {"role": "user"}
    assert output.metadata["derived_content"] is True
    with pytest.raises(InvalidInput, match="metadata must be a dict"):
        mgr.add_message(session.id, "user", "go on", metadata=["not", "a", "dict"])


def test_bad_arguments_raise_our_errors(mgr: SessionManager) -> None:
    session = mgr.start_session("Plan the migration")
    mgr.record_fact(session.id, "the warehouse holds 12 tables", metadata={"year": 2023})
    with pytest.raises(InvalidFilter, match="metadata keys are strings"):
        mgr.search("tables", where={1: "x"})  # type: ignore[dict-item]
    with pytest.raises(InvalidInput, match="limit must be an integer"):
        mgr.list_sessions(limit="ten")  # type: ignore[arg-type]
    assert len(mgr.list_sessions(limit=1)) == 1


def test_one_wording_of_session_not_found(mgr: SessionManager, db_path: Path) -> None:
    with pytest.raises(SessionNotFound) as agent_view:
        mgr.get_session("nope")
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        with pytest.raises(SessionNotFound) as operator_view:
            admin.session("nope")
        with pytest.raises(SessionNotFound) as operator_delete:
            admin.delete_session("nope")
    assert "for agent 'researcher'" in str(agent_view.value)
    assert str(operator_view.value) == str(operator_delete.value)
    assert "`memlane sessions`" in str(operator_view.value)


def test_admin_expands_home_like_the_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with SessionManager("a", "~/agents.db", embedder=HashEmbedder(), background=False) as mgr:
        mgr.start_session("where does ~ go?")
    with StoreAdmin("~/agents.db") as admin:
        assert admin.db_path == str(tmp_path / "agents.db")
        assert len(admin.sessions()) == 1


class FlakyEmbedder:
    """The hash embedder, failing while ``broken`` is set (a model server down, say)."""

    name = "flaky-hash"

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.dim = self.inner.dim
        self.broken = True

    def __call__(self, texts: list[str]) -> np.ndarray[Any, Any]:
        if self.broken:
            raise RuntimeError("embedding service unavailable")
        return self.inner(texts)


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_health_reports_backlog_lag_and_the_workers_error(db_path: Path) -> None:
    embedder = FlakyEmbedder()
    with SessionManager("agent", db_path, embedder=embedder) as mgr:
        session = mgr.start_session("Keep embedding")
        mgr.record_fact(session.id, "the index must catch up")
        wait_for(lambda: mgr.health().last_error is not None)
        health = mgr.health()
        assert health.worker_running and not health.ok
        assert "embedding service unavailable" in (health.last_error or "")
        assert health.backlog >= 2  # the goal and the fact wait
        assert health.lag_seconds is not None and health.lag_seconds > 0
        embedder.broken = False
        mgr.flush()  # takes the failed batch's rows whatever their claim
        mgr._writer.indexer.notify()
        wait_for(lambda: mgr.health().backlog == 0 and mgr.health().ok)
        assert mgr.health().lag_seconds == 0.0
    with SessionManager("agent", db_path, embedder=embedder, background=False) as quiet:
        assert quiet.health().worker_running is False
        assert quiet.health().lag_seconds is None


def test_every_error_is_ours(mgr: SessionManager) -> None:
    """The type every documented failure shares: one except clause catches them all."""
    session = mgr.start_session("Errors")
    for call in (
        lambda: mgr.search("x", where={1: "x"}),  # type: ignore[dict-item]
        lambda: mgr.list_sessions(limit="ten"),  # type: ignore[arg-type]
        lambda: mgr.record_step(session.id, "s", metadata=42),
        lambda: mgr.get_session("missing"),
    ):
        with pytest.raises(SessionManagerError):
            call()


class RetrainedHash:
    """Same name and dimension as the hash embedder, other weights: only the fingerprint
    tells them apart (a fine-tuned model saved under the same name, say)."""

    def __init__(self) -> None:
        self.inner = HashEmbedder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.fingerprint = "retrained-0001"

    def __call__(self, texts: list[str]) -> np.ndarray[Any, Any]:
        return self.inner(texts)[:, ::-1].copy()


def test_a_changed_fingerprint_is_caught_at_open_and_reindex_fixes_it(db_path: Path) -> None:
    """One identity rule at open and at write: before, the open succeeded (even with
    reindex=True, nothing was rebuilt) and every later search raised EmbedderMismatch naming
    identical values on both sides."""
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("orchids need indirect light")
        mgr.flush()
    from memlane import EmbedderMismatch

    with pytest.raises(EmbedderMismatch) as caught:
        SessionManager("a", db_path, embedder=RetrainedHash(), background=False)
    assert "fingerprint" in str(caught.value) and "retrained-0001" in str(caught.value)
    with SessionManager(
        "a", db_path, embedder=RetrainedHash(), background=False, reindex=True
    ) as rebuilt:
        hits = rebuilt.search("orchids light", k=1, mode="semantic")
        assert hits[0].event.session_id == session.id
    with StoreAdmin(db_path) as admin:
        assert admin.stats().embedder_name == HashEmbedder().name
        assert admin._store.get_meta("embedder_fingerprint") == "retrained-0001"


def test_reads_answer_when_the_store_cannot_take_writes(
    mgr: SessionManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk or a read-only file fails the two side writes of a read (recall counts,
    the catch-up of pending embeddings); search and restore answer anyway."""
    from memlane import StoreFull, StoreReadOnly

    session = mgr.start_session("Plan the widget launch")
    mgr.record_fact(session.id, "widgets launch in March")
    mgr.flush()
    late = mgr.record_fact(session.id, "the widget price is 12 euros")  # not embedded yet
    store = mgr._writer.log
    for error in (StoreFull("disk full"), StoreReadOnly("read-only file")):

        def refuse(*args: Any, error: Exception = error, **kwargs: Any) -> Any:
            raise error

        monkeypatch.setattr(store, "bump_recall", refuse)
        monkeypatch.setattr(mgr._writer.indexer, "catch_up", refuse)
        hits = mgr.search("widget price", k=3)
        assert late.id in {hit.event.id for hit in hits}  # the keyword half finds it
        assert mgr.search("launch month", k=1, mode="semantic")[0].event.session_id == session.id
        context = mgr.restore(session.id, 500, query="widget price")
        assert "12 euros" in context.text


def test_close_leaves_the_store_to_a_worker_still_embedding(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close() waits for the worker only so long; if its batch is still running, the store
    is closed when the batch ends, not under its feet (its vectors then land, not an error)."""
    from memlane.engine import indexer as indexer_module

    monkeypatch.setattr(indexer_module, "STOP_TIMEOUT", 0.2)
    entered, release = threading.Event(), threading.Event()

    class SlowEmbedder:
        name, dim = "slow-hash", HashEmbedder().dim

        def __call__(self, texts: list[str]) -> np.ndarray[Any, Any]:
            entered.set()
            release.wait(10)
            return HashEmbedder()(texts)

    mgr = SessionManager("a", db_path, embedder=SlowEmbedder())
    session = mgr.start_session("embedding takes a while")
    assert entered.wait(10)
    indexer = mgr._writer.indexer
    mgr.close()  # returns after 0.2 s, the batch still running
    assert indexer._exited is False
    release.set()
    wait_for(lambda: indexer._exited)
    assert indexer.last_error is None  # the batch stored its vectors on an open store
    with SessionManager("a", db_path, embedder=SlowEmbedder(), background=False) as again:
        assert again.pending_embeddings() == 0
        assert again.get_session(session.id).goal == "embedding takes a while"


def test_a_search_embeds_its_own_writes_not_everyone_s_backlog(tmp_path: Path) -> None:
    """Issue 12: with the worker running, a search embeds this process's newest writes
    (read-your-writes), not the backlog other writers left: 300 events another manager
    recorded stay the worker's, and the search still finds its own three at once."""
    searching: list[str] = []

    class Slow(HashEmbedder):  # the worker is busy for the whole test
        def __call__(self, texts: list[str]) -> Any:
            if threading.current_thread().name == "session-manager-indexer":
                time.sleep(0.5)
            else:
                searching.extend(texts)
            return super().__call__(texts)

    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as other:
        backlog = other.start_session("someone else's import")
        other.record_many(
            backlog.id, [{"kind": "fact", "content": f"imported {i}"} for i in range(300)]
        )
    with SessionManager("a", db, embedder=Slow()) as mgr:
        session = mgr.start_session("my own work")
        mine = [mgr.record_fact(session.id, f"my fact number {i}") for i in range(3)]
        hits = mgr.search("my fact number 1", k=3, mode="semantic")
        assert hits[0].event.id == mine[1].id
        assert len(searching) <= 5 and not any(t.startswith("imported") for t in searching)
        assert mgr.pending_embeddings() > 200  # the worker's, at its own pace


def test_without_a_worker_a_search_embeds_its_whole_scope(tmp_path: Path) -> None:
    """background=False: nobody else embeds, so a search catches everything up."""
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("import")
        mgr.record_many(session.id, [{"kind": "fact", "content": f"f {i}"} for i in range(300)])
        mgr.search("f 7", k=3, mode="semantic")
        assert mgr.pending_embeddings() == 0
