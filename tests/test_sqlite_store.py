"""The SQLite store's own guarantees, on real files in tmp_path.

Transactions cannot be left half-open (a failed COMMIT is rolled back, nested blocks are
savepoints); a thread's connection ends with its thread; ``":memory:"`` is one database for
every thread; an export reads its own snapshot while the same thread writes; driver errors
reach callers as the library's own errors, with the fix in the message; long ``IN`` lists are
sent in batches.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from session_manager import HashEmbedder, SessionManager
from session_manager.admin import StoreAdmin
from session_manager.store.sqlite import SqliteStore

# -- transactions ----------------------------------------------------------------------------


def test_a_commit_that_fails_is_rolled_back(mgr: SessionManager, db_path: Path) -> None:
    """A COMMIT refused by SQLite leaves its transaction open; the store must roll it back,
    or this thread's next write fails and every other connection waits on the lock."""
    session = mgr.start_session("Keep the log writable")
    store = mgr._store
    assert isinstance(store, SqliteStore)
    with pytest.raises(Exception) as caught, store.atomic() as tx:
        # A deferred foreign key is checked at COMMIT: the honest way to make COMMIT fail.
        tx.execute("PRAGMA defer_foreign_keys = ON")
        tx.execute("INSERT INTO outbox (seq, partition) VALUES (?, ?)", (10**9, "nowhere"))
    assert "FOREIGN KEY" in str(caught.value) + str(caught.value.__cause__)
    assert not store.connection().in_transaction
    mgr.record_fact(session.id, "written after the failed commit")  # this thread writes again
    other = sqlite3.connect(db_path, timeout=0.1)  # and so does another connection, at once
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        assert other.execute("SELECT count(*) FROM outbox WHERE seq = ?", (10**9,)).fetchone() == (
            0,
        )
    finally:
        other.close()


def test_the_error_inside_a_transaction_is_the_one_raised(mgr: SessionManager) -> None:
    """SQLite may roll a transaction back by itself when the disk is full; the store's own
    ROLLBACK then has nothing to undo and must not replace the real error with "cannot
    rollback - no transaction is active"."""
    store = mgr._store
    conn = store.connection()  # type: ignore[attr-defined]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from here on
    with pytest.raises(Exception) as caught, store.atomic() as tx:
        store.set_meta(tx, "large", "x" * 200_000)
    assert "full" in str(caught.value)
    assert not conn.in_transaction


def test_a_nested_atomic_is_a_savepoint(mgr: SessionManager) -> None:
    store = mgr._store
    ran: list[str] = []
    with store.atomic() as outer:
        store.set_meta(outer, "outer", "kept")
        with pytest.raises(ValueError), store.atomic() as undone:
            store.set_meta(undone, "undone", "dropped")
            undone.on_commit(lambda: ran.append("undone"))
            raise ValueError("undo the inner block only")
        with store.atomic() as released:
            store.set_meta(released, "released", "kept")
            released.on_commit(lambda: ran.append("released"))
            with pytest.raises(KeyError), store.atomic() as innermost:
                innermost.on_commit(lambda: ran.append("innermost"))
                raise KeyError("the innermost block rolls back alone")
        assert ran == []  # hooks wait for the outermost commit
    assert ran == ["released"]
    assert [store.get_meta(key) for key in ("outer", "undone", "released")] == [
        "kept",
        None,
        "kept",
    ]


# -- connections ------------------------------------------------------------------------------


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_thread_s_connection_closes_when_the_thread_ends(mgr: SessionManager) -> None:
    session = mgr.start_session("Answer from many short threads")
    mgr.record_fact(session.id, "threads come and go")

    def read() -> None:
        assert mgr.get_session(session.id).goal == "Answer from many short threads"

    read()  # this thread's own connection is open before counting
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(200):
        thread = threading.Thread(target=read)
        thread.start()
        thread.join()
    assert len(os.listdir("/proc/self/fd")) - before < 10


def test_memory_is_one_database_for_every_thread() -> None:
    with SessionManager("agent", ":memory:", embedder=HashEmbedder(), background=True) as mgr:
        session = mgr.start_session("Plan the launch")
        mgr.record_fact(session.id, "the launch is on Tuesday")
        mgr.flush()  # the background worker embeds it, from its own thread
        found: list[str] = []

        def search() -> None:
            found.extend(h.event.content for h in mgr.search("launch day", mode="semantic"))

        thread = threading.Thread(target=search)
        thread.start()
        thread.join()
        assert "the launch is on Tuesday" in found
        assert mgr.health().last_error is None and mgr.pending_embeddings() == 0
        folder = mgr._store.path.parent  # type: ignore[attr-defined]
        assert folder.is_dir()
    assert not folder.exists()  # nothing of it is left on close


# -- snapshots --------------------------------------------------------------------------------


def test_an_export_reads_its_snapshot_while_this_thread_deletes(
    mgr: SessionManager, db_path: Path
) -> None:
    first, second = mgr.start_session("first"), mgr.start_session("second")
    for n in range(3):
        mgr.record_fact(first.id, f"first fact {n}")
        mgr.record_fact(second.id, f"second fact {n}")
    with StoreAdmin(db_path, embedder=HashEmbedder()) as admin:
        records = admin.export()
        head = [next(records), next(records)]  # the header and the first session
        assert head[1]["id"] == first.id
        assert admin.delete_session(second.id) == 4  # same thread, same store, mid-export
        exported = head + list(records)
        assert [r["id"] for r in exported if r["type"] == "session"] == [first.id, second.id]
        assert sum(r["type"] == "event" for r in exported) == 8  # as it was when it began
        assert [info.session.id for info in admin.sessions()] == [first.id]


# -- batches ----------------------------------------------------------------------------------


def test_recall_counts_are_bumped_in_batches(mgr: SessionManager) -> None:
    """SQLite builds before 3.32 allow 999 variables in a statement; lower the limit to that
    on this thread's connection and bump more seqs than it."""
    session = mgr.start_session("Recall a lot")
    event = mgr.record_fact(session.id, "recalled once")
    store = mgr._store
    conn = store.connection()  # type: ignore[attr-defined]
    conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
    store.bump_recall([event.seq, *range(10**6, 10**6 + 2_000)])
    assert mgr.get_event(event.id).recall_count == 1
