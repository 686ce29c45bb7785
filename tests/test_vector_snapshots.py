"""Snapshots of big vector partitions (ranking/vectors/snapshots.py): a new process's first search
loads the partition's codes from the file and reads only newer vectors from the log; anything
deleted, a file of another database or a damaged file is never used."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.embed import HashEmbedder
from memlane.ranking.vectors import cache as vector_cache
from memlane.store._sqlite_vectors import SqliteVectors

QUERIES = ["topic 3 and item 4", "fact 120", "item 7", "what about topic 30?"]


@pytest.fixture(autouse=True, params=["codes only", "float32 kept"])
def small_threshold(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """300 rows make a big partition: one that keeps only 8-bit codes, or one that also keeps
    its float32 vectors (the snapshot then holds them too)."""
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)
    monkeypatch.setattr(vector_cache, "SNAPSHOT_FROM", 100)
    if request.param == "codes only":
        monkeypatch.setattr(vector_cache, "IN_MEMORY_UNDER", 100)


@pytest.fixture
def rows_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many vector rows each refresh read from the log."""
    counts: list[int] = []
    original = SqliteVectors.vector_rows

    def counting(self: SqliteVectors, *args: Any) -> list[Any]:
        rows = original(self, *args)
        counts.append(len(rows))
        return rows

    monkeypatch.setattr(SqliteVectors, "vector_rows", counting)
    return counts


def opened(db: Path) -> SessionManager:
    return SessionManager("a", db, embedder=HashEmbedder(), background=False)


def results(mgr: SessionManager) -> list[list[tuple[str, float]]]:
    return [[(h.event.id, h.score) for h in mgr.search(q, k=10, mode="semantic")] for q in QUERIES]


def filled(db: Path, n: int = 300, word: str = "fact") -> list[list[tuple[str, float]]]:
    with opened(db) as mgr:
        session = mgr.start_session("many facts")
        for i in range(n):
            mgr.record_fact(session.id, f"{word} {i} about topic {i % 37} and item {i % 11}")
        mgr.flush()
        return results(mgr)  # builds the partition, and writes its snapshot


def snapshots(db: Path) -> list[Path]:
    return sorted(Path(str(db) + ".memlane-cache").glob("vectors-*.asmvec"))


def test_a_new_process_loads_the_snapshot_and_reads_only_newer_vectors(
    tmp_path: Path, rows_read: list[int]
) -> None:
    db = tmp_path / "s.db"
    first = filled(db)
    assert len(snapshots(db)) == 1
    rows_read.clear()
    with opened(db) as mgr:
        assert results(mgr) == first
        assert sum(rows_read) <= 1  # the check of the snapshot's last vector, nothing else
        newer = mgr.record_fact(mgr.list_sessions()[0].id, "fact 120 about topic 3 and item 4")
        mgr.flush()
        assert newer.id in [h.event.id for h in mgr.search("fact 120", k=3, mode="semantic")]


def test_a_partition_below_the_snapshot_size_is_read_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: list[int]
) -> None:
    """A snapshot costs ~1.2 KB an event of disk; below SNAPSHOT_FROM rows reading the log is
    cheap enough (20k rows: 159 ms against 81 for a fresh process's first search), so none
    is written and the next process reads the rows, with the same results."""
    monkeypatch.setattr(vector_cache, "SNAPSHOT_FROM", 302)
    db = tmp_path / "s.db"
    first = filled(db)  # 300 facts and the goal: 301 rows
    assert snapshots(db) == []
    rows_read.clear()
    with opened(db) as mgr:
        assert results(mgr) == first
        assert sum(rows_read) == 301
    monkeypatch.setattr(vector_cache, "SNAPSHOT_FROM", 301)
    with opened(db) as mgr:
        assert results(mgr) == first
    assert len(snapshots(db)) == 1


def test_a_delete_retires_the_snapshot(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    first = filled(db)
    gone = first[1][0][0]  # the best hit of "fact 120"
    with opened(db) as mgr:
        mgr.delete_event(gone)
    with opened(db) as mgr:
        after = results(mgr)
        assert gone not in {event for ranking in after for event, _ in ranking}
    assert len(snapshots(db)) == 1  # written again, for the new generation


def test_a_damaged_snapshot_or_another_databases_is_not_used(
    tmp_path: Path, rows_read: list[int]
) -> None:
    db, other = tmp_path / "s.db", tmp_path / "other.db"
    first = filled(db)
    (snapshot,) = snapshots(db)
    snapshot.write_bytes(snapshot.read_bytes()[:1000])
    rows_read.clear()
    with opened(db) as mgr:
        assert results(mgr) == first
    assert sum(rows_read) >= 300  # read from the log again

    filled(other, n=400, word="note")  # same agent, partition, vids and seqs; other vectors
    (mine,) = snapshots(db)
    theirs = Path(str(other) + ".memlane-cache")
    shutil.copy(mine, theirs / mine.name)  # a file copied beside the wrong database
    rows_read.clear()
    with opened(other) as mgr:
        hits = results(mgr)
        assert all(len(ranking) == 10 for ranking in hits)
        assert {event for ranking in hits for event, _ in ranking}.isdisjoint(
            event for ranking in first for event, _ in ranking
        )
    assert sum(rows_read) >= 400


def test_a_read_only_store_uses_snapshots_and_writes_none(
    tmp_path: Path, rows_read: list[int]
) -> None:
    db = tmp_path / "s.db"
    first = filled(db)
    folder = Path(str(db) + ".memlane-cache")
    shutil.rmtree(folder)
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as viewer:
        assert results(viewer) == first
    assert not folder.exists()
    again = filled(db, n=0)  # a writer's search writes it again (one more session's goal)
    (snapshot,) = snapshots(db)
    rows_read.clear()
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as viewer:
        assert results(viewer) == again
    assert sum(rows_read) <= 1  # from the snapshot
    assert snapshots(db) == [snapshot]


def test_deletes_are_followed_without_reading_the_partition_again(
    tmp_path: Path, rows_read: list[int]
) -> None:
    """Upserts delete (record(replace=...)): the cache marks the replaced rows dead from the
    store's deletion log instead of reading every vector again, in this process and in
    another one that loads the snapshot written before the deletes."""
    db = tmp_path / "s.db"
    filled(db)
    with opened(db) as mgr, opened(db) as other:
        session = mgr.list_sessions()[0].id
        results(other)  # loads the snapshot
        kept = []
        for i in range(3):
            kept.append(
                mgr.record(
                    session,
                    "fact",
                    f"fact 120 setting {i}",
                    replace={"key": "k"},
                    metadata={"key": "k"},
                )
            )
            mgr.flush()
            rows_read.clear()
            for manager in (mgr, other):
                found = {
                    h.event.id for h in manager.search("fact 120 setting", k=20, mode="semantic")
                }
                assert kept[-1].id in found and not found & {e.id for e in kept[:-1]}
            assert sum(rows_read) <= 4  # the new vector, per manager
            for manager in (mgr, other):
                (part,) = manager._writer.storage.vectors._cache._partitions.values()  # type: ignore[attr-defined]
                assert part.dead == i  # the replaced ones, marked from the deletion log
    with opened(db) as fresh:  # the snapshot predates the deletes: they are applied to it
        found = {h.event.id for h in fresh.search("fact 120 setting", k=20, mode="semantic")}
        assert kept[-1].id in found and not found & {e.id for e in kept[:-1]}


def test_a_process_rewrites_a_snapshot_at_most_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reindex drops every vector, so the next search reads the partition anew: its
    snapshot is rewritten at most once per REWRITE_SECONDS by a process (hundreds of MB at
    scale)."""
    from memlane.ranking.vectors import snapshots as vector_snapshots

    db = tmp_path / "s.db"
    filled(db)
    with opened(db) as mgr:
        writes: list[str] = []
        original = vector_snapshots.VectorSnapshots.save

        def stamp(path: Path) -> int | None:
            return path.stat().st_mtime_ns if path.exists() else None

        def counting(self: Any, partition: str, *args: Any) -> None:
            before = stamp(self.path(partition))
            original(self, partition, *args)
            after = stamp(self.path(partition))
            writes.append("written" if after is not None and after != before else "")

        monkeypatch.setattr(vector_snapshots.VectorSnapshots, "save", counting)
        for _ in range(2):
            mgr.reindex()
            results(mgr)
        assert writes.count("written") == 1
        monkeypatch.setattr(vector_snapshots, "REWRITE_SECONDS", 0.0)
        mgr.reindex()
        results(mgr)
        assert writes.count("written") == 2


def test_a_cache_behind_a_pruned_deletion_log_reads_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_read: list[int]
) -> None:
    from memlane.store import _sqlite_vectors

    for module in (vector_cache, _sqlite_vectors):
        monkeypatch.setattr(module, "DELETION_LOG_KEEP", 10)
    db = tmp_path / "s.db"
    filled(db)
    with opened(db) as mgr, opened(db) as other:
        results(other)
        doomed = [e.id for e in mgr.events(None, kinds="fact", limit=40)]
        for event_id in doomed:
            mgr.delete_event(event_id)
        mgr._writer.log.maintenance()  # the worker's: keeps the log's newest 10 rows
        rows_read.clear()
        after = results(other)
        assert sum(rows_read) >= 260  # read anew: it had not seen the pruned deletions
        assert not {event for ranking in after for event, _ in ranking} & set(doomed)


def test_a_partition_an_erasure_touched_is_never_saved_with_the_erased_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28: a process that had the partition in memory when a user was erased (by
    another store) keeps the erased vectors as dead rows; it must not save them again,
    however much the partition grows. A process that reads it after the erasure does."""
    from memlane.admin import StoreAdmin
    from memlane.ranking.vectors import snapshots as vector_snapshots

    monkeypatch.setattr(vector_snapshots, "REWRITE_SECONDS", 0.0)
    db = tmp_path / "s.db"
    with opened(db) as mgr:
        gone = mgr.start_session("orders", user_id="u-gone")
        for i in range(60):
            mgr.record_fact(gone.id, f"order {i} of the erased user")
        mgr.flush()
    filled(db)
    marker = gone.id.encode("utf-32-le")  # (the session column names them, as numpy str)
    assert marker in snapshots(db)[0].read_bytes()
    with opened(db) as live:
        results(live)  # the partition in memory, from the snapshot
        admin = StoreAdmin(db, embedder=HashEmbedder())
        try:
            assert admin.erase_user("u-gone").sessions == 1
        finally:
            admin.close()
        assert snapshots(db) == []
        session = live.list_sessions()[0].id
        for i in range(200):  # grown by more than a quarter: it would be written again
            live.record_fact(session, f"later fact {i} about topic {i % 37}")
        live.flush()
        results(live)
        (part,) = live._writer.storage.vectors._cache._partitions.values()  # type: ignore[attr-defined]
        assert part.dead == 61 and part.erased  # (the goal and the 60 facts)
    assert snapshots(db) == []
    with opened(db) as fresh:
        results(fresh)  # read from the log: saved, without the erased rows
    (snapshot,) = snapshots(db)
    assert marker not in snapshot.read_bytes()
