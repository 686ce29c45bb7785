"""``read_only=True`` on a store this process cannot write (issue 28, D5): a cleanly closed
SQLite store on a read-only filesystem opens, searches (keyword, semantic, hybrid, with its
search-cache snapshots in a folder that cannot be written either) and restores; one a crash
left with its -wal and -shm reads them; a writable open says that ``read_only=True`` exists;
and a read-only open in a writable folder leaves no -wal or -shm behind.

The read-only filesystem is a real one: a tmpfs mounted and remounted read-only (this needs
root; the tests skip, saying so, where mounting is impossible). Root ignores file modes, so
the chmod variant runs only as another user."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.errors import StoreReadOnly
from memlane.ranking.keyword import cache as keyword_cache
from memlane.ranking.vectors import cache as vector_cache
from memlane.testing import HashEmbedder

QUERIES = ["staging database error", "what did Ana say about the beach trip", "login 42"]


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A fresh filesystem at ``tmp_path / "disk"``, and a function that makes it read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only filesystem needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")

    def freeze() -> None:
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        with pytest.raises(OSError):
            (mount / "probe").write_text("x")  # (really read-only, for root too)

    try:
        yield mount, freeze
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(autouse=True)
def small_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few hundred events make big partitions: their snapshots are saved beside the file."""
    monkeypatch.setattr(keyword_cache, "_CHUNK", 32)
    monkeypatch.setattr(vector_cache, "APPROXIMATE_FROM", 100)
    monkeypatch.setattr(vector_cache, "SNAPSHOT_FROM", 100)


def _fill(db: Path) -> str:
    """A store with a few hundred events, its search caches' snapshots saved; closed cleanly.
    Returns the session's id."""
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        session = mgr.start_session("trip planning", user_id="u1")
        for i in range(300):
            mgr.add_message(
                session.id,
                "user" if i % 2 else "assistant",
                f"turn {i}: the staging database error {i % 7}, login {i}, "
                f"and Ana said the beach trip is on day {i % 30}",
            )
        mgr.flush()
        _answers(mgr, session.id)  # builds the caches and saves their snapshots
        keywords = mgr._writer.searcher.store._keywords  # type: ignore[attr-defined]
        if keywords._builder is not None:
            keywords._builder.join(60)
        return session.id


def _answers(mgr: SessionManager, session_id: str) -> list[Any]:
    found: list[Any] = []
    for mode in ("keyword", "semantic", "hybrid"):
        for query in QUERIES:
            found.append([hit.event.id for hit in mgr.search(query, k=5, mode=mode)])  # type: ignore[arg-type]
    found.append(mgr.restore(session_id, 400, query="the beach trip").text)
    found.append(len(mgr.events(session_id, limit=1000)))
    return found


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_cleanly_closed_store_on_a_read_only_disk_opens_read_only(
    disk: tuple[Path, Callable[[], None]],
) -> None:
    mount, freeze = disk
    db = mount / "s.db"
    session = _fill(db)
    cache = mount / "s.db.memlane-cache"
    assert _files(mount) == ["s.db", "s.db.memlane-cache"]  # (closed cleanly: no -wal)
    assert len(_files(cache)) == 2  # a keyword and a vector snapshot
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        expected = _answers(mgr, session)
    freeze()
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
        assert _answers(reader, session) == expected
        keywords = reader._writer.searcher.store._keywords  # type: ignore[attr-defined]
        if keywords._builder is not None:
            keywords._builder.join(60)  # (from the snapshot, read-only)
        assert _answers(reader, session) == expected
    assert _files(mount) == ["s.db", "s.db.memlane-cache"]
    # a writable open says what to do
    with pytest.raises(StoreReadOnly, match=r"read_only=True"):
        SessionManager("a", db, embedder=HashEmbedder(), background=False)


def test_a_store_a_crash_left_with_its_wal_reads_it_on_a_read_only_disk(
    disk: tuple[Path, Callable[[], None]], tmp_path: Path
) -> None:
    """The -wal holds committed events and the -shm is there (a process killed with the store
    open): read through them. Without the -shm, and no way to create it, the error says how
    to read it."""
    mount, freeze = disk
    work = tmp_path / "work"
    work.mkdir()
    session = _fill(work / "s.db")
    with SessionManager("a", work / "s.db", embedder=HashEmbedder(), background=False) as mgr:
        store = mgr._writer.searcher.store  # type: ignore[attr-defined]
        store.connection().execute("PRAGMA wal_autocheckpoint = 0")
        late = mgr.add_message(session, "user", "a late turn about the zeppelin")
        # copied while open: what a kill leaves (the late event only in the -wal)
        for name in ("s.db", "s.db-wal", "s.db-shm"):
            shutil.copy(work / name, mount / name)
        (mount / "bare").mkdir()
        for name in ("s.db", "s.db-wal"):
            shutil.copy(work / name, mount / "bare" / name)
    assert (mount / "s.db-wal").stat().st_size > 0
    freeze()
    with SessionManager("a", mount / "s.db", embedder=HashEmbedder(), read_only=True) as reader:
        assert [e.id for e in reader.events(session, limit=1000)][-1] == late.id
        # the late event never reached the worker: no vector, no FTS5 row (nor can a reader
        # write them); the in-memory keyword index reads the log, once built
        assert reader.warm_up(wait=60)
        assert [h.event.id for h in reader.search("zeppelin", k=1, mode="keyword")] == [late.id]
    with pytest.raises(StoreReadOnly, match=r"-wal") as raised:
        SessionManager("a", mount / "bare" / "s.db", embedder=HashEmbedder(), read_only=True)
    assert "copy" in str(raised.value).lower()


def test_a_read_only_open_in_a_writable_folder_leaves_no_wal_behind(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    session = _fill(db)
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
        expected = _answers(reader, session)
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()
    # while a writer has the store open, a reader sees its writes (and leaves its files)
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as writer:
        with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
            assert _answers(reader, session) == expected
            late = writer.add_message(session, "user", "a late turn about the zeppelin")
            assert [h.event.id for h in reader.search("zeppelin", k=1, mode="keyword")] == [late.id]
        assert Path(f"{db}-wal").exists()  # (the writer's)
    assert not Path(f"{db}-wal").exists() and not Path(f"{db}-shm").exists()


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file modes: the read-only filesystem tests cover this as root",
)
def test_a_store_in_a_folder_this_user_cannot_write_opens_read_only(tmp_path: Path) -> None:
    folder = tmp_path / "frozen"
    folder.mkdir()
    db = folder / "s.db"
    session = _fill(db)
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        expected = _answers(mgr, session)
    caches = list(folder.glob("s.db.*-cache"))
    frozen = [db, *(p for cache in caches for p in cache.iterdir())]
    for path in frozen:
        path.chmod(0o444)
    for path in (*caches, folder):
        path.chmod(0o555)
    try:
        with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
            assert _answers(reader, session) == expected
        assert not [name for name in _files(folder) if name.endswith(("-wal", "-shm"))]
        with pytest.raises(StoreReadOnly, match=r"read_only=True"):
            SessionManager("a", db, embedder=HashEmbedder(), background=False)
    finally:
        for path in (folder, *caches):
            path.chmod(0o755)


def test_the_read_only_connection_is_sqlite_read_only(tmp_path: Path) -> None:
    """(Whatever way it opens, SQLite itself refuses a write on it.)"""
    db = tmp_path / "s.db"
    _fill(db)
    with SessionManager("a", db, embedder=HashEmbedder(), read_only=True) as reader:
        conn = reader._writer.searcher.store.connection()  # type: ignore[attr-defined]
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM events")
