"""SQLite's keyword index holds no text of its own (0016_keyword_text_from_the_log): FTS5 reads
an event's text and context from the view ``events_keyword_text`` whenever it needs them —
to delete a row it must remove exactly the tokens it added. Every test here ends with FTS5's
own check of the index against the view (``integrity-check`` with rank 1: "malformed" when a
row's tokens are not what the view gives now), after each kind of write the library does:
the worker's rows, deletes of one event, of a session, expiry, erasure, replacement, large
outputs digested later, reindex, and a store migrated from 0015."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.core.scope import Scope
from memlane.store._sqlite_keywords import SqliteKeywordIndex
from memlane.store.base import EventFilter
from memlane.store.sqlite import SqliteStore
from memlane.testing import HashEmbedder


def check(db: Path) -> set[int]:
    """FTS5's integrity check of the index against the view (raises if they differ); the
    events that have a row, which must be those marked ``keyword_row``."""
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 1)")
        indexed = {int(r[0]) for r in conn.execute("SELECT id FROM events_fts_docsize")}
        marked = {int(r[0]) for r in conn.execute("SELECT seq FROM events WHERE keyword_row")}
    assert indexed == marked
    return indexed


def fts(mgr: SessionManager, words: str, k: int = 20) -> list[int]:
    """The seqs FTS5 itself finds (not the in-memory ranking), over content and context."""
    store = mgr._engine.store
    assert isinstance(store, SqliteStore)
    found = store.fts_search(words, EventFilter(Scope(mgr.agent_id)), k, content_only=False)
    return [seq for seq, _ in found]


def context_of(db: Path, seq: int) -> str:
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT context FROM events_fts WHERE rowid = ?", (seq,)).fetchone()
    return "" if row is None else str(row[0])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "k.db"


def manager(db: Path) -> SessionManager:
    return SessionManager("a", db, embedder=HashEmbedder(), background=False)


def test_the_worker_s_rows_and_their_neighbours_contexts(db: Path) -> None:
    with manager(db) as mgr:
        sid = mgr.start_session("keyword rows").id
        first = mgr.add_message(sid, "user", "alpha quartz")
        hidden = mgr.record(sid, "step", "beta zircon", index=False)
        second = mgr.add_message(sid, "assistant", "gamma basalt")
        assert check(db) == set()  # record() writes no row: the worker does
        mgr.flush()
        goal = first.seq - 1  # (start_session recorded the goal)
        assert check(db) == {goal, first.seq, second.seq}
        # the first event's context holds the next indexed one, not the unindexed step
        assert "gamma basalt" in context_of(db, first.seq)
        assert "zircon" not in context_of(db, first.seq)
        third = mgr.add_message(sid, "user", "delta marble")
        assert "delta" not in context_of(db, second.seq)  # until the worker indexes it
        mgr.flush()
        assert "delta marble" in context_of(db, second.seq)
        assert "delta marble" in context_of(db, first.seq)  # (its second next one)
        assert set(fts(mgr, "marble")) == {first.seq, second.seq, third.seq}
        assert fts(mgr, "zircon") == [] and hidden.seq not in check(db)


def test_deleting_events_leaves_no_text_behind(db: Path) -> None:
    with manager(db) as mgr:
        sid = mgr.start_session("deletes").id
        events = [mgr.add_message(sid, "user", f"word{i} common") for i in range(8)]
        mgr.flush()
        mgr.delete_event(events[3].id)
        assert fts(mgr, "word3") == []  # neither its own row nor a neighbour's context
        assert events[2].seq in fts(mgr, "word4")  # the neighbours' contexts closed the gap
        check(db)
        pending = mgr.add_message(sid, "user", "word99 never indexed")
        mgr.delete_event(pending.id)  # no row yet: nothing to take out
        check(db)
        mgr.delete_event(events[0].id)  # the first of its session
        mgr.delete_event(events[7].id)  # and the last
        left = {e.seq for e in events} - {events[i].seq for i in (0, 3, 7)}
        assert check(db) == left | {events[0].seq - 1}  # (and the session's goal)


def test_a_session_deleted_whole_and_one_beside_it(db: Path) -> None:
    with manager(db) as mgr:
        gone = mgr.start_session("gone").id
        kept = mgr.start_session("kept").id
        for i in range(6):
            mgr.add_message(gone, "user", f"gone{i} shared")
            mgr.add_message(kept, "user", f"kept{i} shared")
        mgr.flush()
        mgr.delete_session(gone)
        # the six messages left, and the goal whose context holds the first two of them
        assert fts(mgr, "gone2") == [] and len(fts(mgr, "shared")) == 7
        check(db)


def test_expired_erased_and_replaced_events(db: Path) -> None:
    with manager(db) as mgr:
        sid = mgr.start_session("kinds of delete", user_id="u-1").id
        for i in range(4):
            mgr.add_message(sid, "user", f"before{i}")
        soon = [
            mgr.record(sid, "fact", f"fleeting{i}", ttl=timedelta(milliseconds=1)) for i in range(3)
        ]
        mgr.record(sid, "fact", "the plan is v1", metadata={"key": "plan"}, replace={"key": "plan"})
        mgr.flush()
        check(db)
        mgr.record(sid, "fact", "the plan is v2", metadata={"key": "plan"}, replace={"key": "plan"})
        mgr.flush()
        assert fts(mgr, "v1") == []
        swept = mgr._engine.storage.sweep_expired()  # (several in one DELETE statement)
        assert swept.get("fact", 0) == len(soon)
        assert fts(mgr, "fleeting1") == []
        check(db)
    with StoreAdmin(db, embedder=HashEmbedder()) as admin:
        admin.erase_user("u-1")
    check(db)


def test_a_large_output_is_found_by_its_whole_text_once_digested(db: Path) -> None:
    rows = [{"host": f"h{i}", "note": f"ordinary row {i}"} for i in range(900)]
    rows[850]["note"] = "the needle is obsidian"
    with manager(db) as mgr:
        sid = mgr.start_session("big output").id
        mgr.add_message(sid, "user", "list the hosts")
        out = mgr.record_tool_output(sid, {"hosts": rows})
        mgr.add_message(sid, "assistant", "done")
        mgr.flush()  # (embeds, digests: the whole text replaces the head)
        assert out.seq in fts(mgr, "obsidian")
        with sqlite3.connect(db) as conn:
            kept = conn.execute("SELECT text FROM keyword_text WHERE seq = ?", (out.seq,))
            assert "obsidian" in kept.fetchone()[0]
        check(db)
        mgr.delete_event(out.id)
        check(db)
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT count(*) FROM keyword_text").fetchone()[0] == 0


def test_reindex_rebuilds_the_rows_from_the_log(db: Path) -> None:
    with manager(db) as mgr:
        sid = mgr.start_session("reindex").id
        for i in range(10):
            mgr.add_message(sid, "user", f"again{i}")
        mgr.record(sid, "step", "never searched", index=False)
        mgr.flush()
        before = check(db)
        mgr.reindex()
        assert check(db) == before
        assert len(fts(mgr, "again5")) == 5  # itself, and the two on either side (context)


def test_an_event_never_moves_to_another_session(db: Path) -> None:
    with manager(db) as mgr:
        one, two = mgr.start_session("one").id, mgr.start_session("two").id
        event = mgr.add_message(one, "user", "stay")
        mgr.flush()
    with sqlite3.connect(db) as conn, pytest.raises(sqlite3.IntegrityError, match="never moves"):
        conn.execute("UPDATE events SET session_id = ? WHERE seq = ?", (two, event.seq))
    check(db)


def test_the_index_keeps_no_copy_of_the_text(db: Path) -> None:
    with manager(db) as mgr:
        sid = mgr.start_session("disk").id
        mgr.add_message(sid, "user", "text")
        mgr.flush()
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema")}
    assert "events_fts_content" not in tables and "events_fts_data" in tables


def test_a_store_from_0015_keeps_its_rows_and_whole_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlane.store import sqlite as store_sqlite

    db = tmp_path / "old.db"
    names = [name for name, _ in store_sqlite.MIGRATIONS]
    before = store_sqlite.MIGRATIONS[: names.index("0016_keyword_text_from_the_log")]
    with monkeypatch.context() as patch:
        patch.setattr(store_sqlite, "MIGRATIONS", before)
        with SessionManager("a", db, embedder=HashEmbedder(), background=False) as old:
            sid = old.start_session("legacy").id
            events = [old.add_message(sid, "user", f"legacy{i} words") for i in range(5)]
    # the rows as 0015's worker wrote them (from the old view), one with a whole text that is
    # not its content (a flattened output's), one event without a row yet
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO events_fts (rowid, content, context) SELECT seq, content, context "
            "FROM events_search_text WHERE seq != ?",
            (events[4].seq,),
        )
        conn.execute(
            "UPDATE events_fts SET content = 'legacy2 words and a whole text of basalt' "
            "WHERE rowid = ?",
            (events[2].seq,),
        )
    goal = events[0].seq - 1
    with manager(db) as mgr:
        assert check(db) == {goal} | {e.seq for e in events[:4]}
        assert fts(mgr, "basalt") == [events[2].seq]
        mgr.flush()  # the worker writes the missing row
        assert check(db) == {goal} | {e.seq for e in events}
        mgr.delete_event(events[1].id)
        check(db)


def test_one_statement_deleting_neighbours_together(db: Path) -> None:
    """SQLite runs a row's BEFORE and AFTER triggers around that row's delete, row by row, so
    neighbours deleted by one statement never have their row taken out twice."""
    with manager(db) as mgr:
        sid = mgr.start_session("together").id
        events = [mgr.add_message(sid, "user", f"near{i}") for i in range(9)]
        mgr.flush()
    doomed = [events[i].seq for i in (2, 3, 4, 6)]
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"DELETE FROM events WHERE seq IN ({', '.join('?' * len(doomed))})", doomed)
    assert check(db) == {events[0].seq - 1} | {e.seq for e in events} - set(doomed)
    assert "near5" in context_of(db, events[1].seq)  # the gap closed over the deleted ones


def _indexing_work(db: Path, events: int) -> int:
    """SQLite's virtual-machine steps (in thousands) to write the keyword rows of one session
    of ``events`` facts recorded before any was indexed (a bulk import, a starved worker):
    a count that does not depend on the machine's speed."""
    with manager(db) as mgr:
        session = mgr.start_session("bulk")
        mgr.record_many(session.id, [{"kind": "fact", "content": f"f {i}"} for i in range(events)])
        with sqlite3.connect(db) as conn:  # the worker marks them embedded, rows not yet
            conn.execute("UPDATE events SET indexed = 1")
            seqs = [int(r[0]) for r in conn.execute("SELECT seq FROM events")]
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    with sqlite3.connect(db) as conn:
        conn.set_progress_handler(step, 1000)
        for start in range(0, len(seqs), 64):  # in the worker's batches, oldest first
            SqliteKeywordIndex.index_new_events(conn, seqs[start : start + 64])
    assert len(check(db)) == events + 1  # (and the goal)
    return steps[0]


def test_indexing_a_backlog_grows_with_it_not_with_its_square(tmp_path: Path) -> None:
    """Each event's neighbours with a row are found by a seek in ``events_keyword_rows``
    (0017); before, by walking the session's later events that had none yet, so a backlog
    of 4x the events cost ~16x the work (64,000 facts of one session flushed in 256 s,
    2.4 s after)."""
    small = _indexing_work(tmp_path / "small.db", 500)
    large = _indexing_work(tmp_path / "large.db", 2_000)
    assert large < 6 * small, (small, large)


def test_the_neighbour_lookups_use_the_partial_index(db: Path) -> None:
    with manager(db) as mgr:
        mgr.start_session("plans")
    with sqlite3.connect(db) as conn:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM events_keyword_text WHERE seq = 1"
        ).fetchall()
    lookups = [row[3] for row in plan if "SEARCH p " in row[3]]
    assert len(lookups) == 4 and all("events_keyword_rows" in s for s in lookups), plan
