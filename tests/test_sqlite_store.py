"""The SQLite store's own guarantees, on real files in tmp_path.

Transactions cannot be left half-open (a failed COMMIT is rolled back, nested blocks are
savepoints); a thread's connection ends with its thread; ``":memory:"`` is one database for
every thread; an export reads its own snapshot while the same thread writes; driver errors
reach callers as the library's own errors, with the fix in the message; long ``IN`` lists are
sent in batches.
"""

from __future__ import annotations

import sqlite3


from session_manager import SessionManager

# -- transactions ----------------------------------------------------------------------------


# -- connections ------------------------------------------------------------------------------


# -- snapshots --------------------------------------------------------------------------------


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
