"""Snapshots of the in-memory keyword index (store/_keyword_snapshots.py): a new process's
background build starts from the one an earlier build saved and tokenizes only the events
added since, ranks exactly as a build from the log does, and never uses a stale, damaged or
foreign snapshot."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.store import _keyword_cache
from memlane.store.base import EventFilter
from memlane.store.sqlite import SqliteStore

WORDS = """deploy pipeline staging database login error rate limit search api vector index gpu
    memory payment webhook docker image caroline melanie painting camping beach museum""".split()  # noqa: SIM905
QUERIES = ["staging database error", "caroline painting museum", "gpu memory 2023", "webhook"]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of a few hundred events count as big: built in the background."""
    monkeypatch.setattr(_keyword_cache, "_CHUNK", 32)


def add_turns(mgr: SessionManager, count: int, seed: int) -> None:
    rng = random.Random(seed)
    sessions = [mgr.start_session(f"chat {seed}-{i}") for i in range(3)]
    for _ in range(count):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        mgr.add_message(rng.choice(sessions).id, rng.choice(["user", "assistant"]), text)


@contextmanager
def opened(db: Path, **options: Any) -> Iterator[SessionManager]:
    with SessionManager(
        "researcher", db, embedder=HashEmbedder(), background=False, **options
    ) as mgr:
        yield mgr


def built(mgr: SessionManager) -> tuple[SqliteStore, list[int]]:
    """Wait for the background build; return the store and the rows it read from the log."""
    store = mgr._searcher.store
    assert isinstance(store, SqliteStore)
    read: list[int] = []
    rows = store.keyword_rows
    store.keyword_rows = lambda *a: read.append(len(found := rows(*a))) or found  # type: ignore[method-assign]
    mgr.search("warm up", k=1, mode="keyword")  # starts the build (FTS5 answers)
    if store._keywords._builder is not None:
        store._keywords._builder.join(20)
    return store, read


def rankings(mgr: SessionManager) -> list[list[tuple[int, float]]]:
    store = mgr._searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(mgr._searcher.scope)
    partitions = mgr._searcher._partitions(flt)
    assert store._keywords.ready([name for name, _ in partitions])
    return [
        [
            (seq, round(score, 9))
            for seq, score in store.keyword_search(
                query, flt, 500, content_only=False, partitions=partitions
            )
        ]
        for query in QUERIES
    ]


def snapshot_files(db: Path) -> list[Path]:
    return sorted(Path(str(db) + ".asm-cache").glob("keywords-*.asmkw"))


def test_a_new_process_starts_from_the_snapshot_and_reads_only_newer_events(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    with opened(db) as mgr:
        add_turns(mgr, 300, seed=1)
        _, read = built(mgr)
        assert sum(read) >= 300 and len(snapshot_files(db)) == 1
    with opened(db) as mgr:
        add_turns(mgr, 40, seed=2)  # after the snapshot: read from the log
        _, read = built(mgr)
        assert sum(read) <= 40 + 2 + 6  # (the probe of its last event; 3 session starts)
        from_snapshot = rankings(mgr)
    snapshot_files(db)[0].unlink()
    with opened(db) as mgr:
        built(mgr)
        assert rankings(mgr) == from_snapshot  # a build from the log ranks the same
    assert any(from_snapshot)


def test_a_loaded_snapshot_is_written_again_once_it_grew_by_a_quarter(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with opened(db) as mgr:
        add_turns(mgr, 300, seed=1)
        built(mgr)
    (snapshot,) = snapshot_files(db)
    first = snapshot.stat().st_mtime_ns
    with opened(db) as mgr:
        add_turns(mgr, 30, seed=2)  # a tenth: not rewritten
        built(mgr)
    assert snapshot.stat().st_mtime_ns == first
    with opened(db) as mgr:
        add_turns(mgr, 90, seed=3)  # now 120 past it: rewritten
        built(mgr)
        expected = rankings(mgr)
    assert snapshot.stat().st_mtime_ns != first
    with opened(db) as mgr:
        _, read = built(mgr)
        assert sum(read) <= 2 and rankings(mgr) == expected  # (only the probe)


def test_a_stale_damaged_or_foreign_snapshot_is_not_used(tmp_path: Path) -> None:
    db, other = tmp_path / "s.db", tmp_path / "other.db"
    with opened(db) as mgr:
        add_turns(mgr, 300, seed=1)
        built(mgr)
        expected = rankings(mgr)
    with opened(other) as mgr:
        add_turns(mgr, 300, seed=1)  # same shape (seqs, kinds, generation), other sessions
        built(mgr)
        theirs = rankings(mgr)
    (mine,) = snapshot_files(db)
    (Path(str(other) + ".asm-cache") / mine.name).write_bytes(mine.read_bytes())
    with opened(other) as mgr:
        _, read = built(mgr)
        assert sum(read) >= 300 and rankings(mgr) == theirs
    mine.write_bytes(mine.read_bytes()[:2_000])  # damaged
    with opened(db) as mgr:
        _, read = built(mgr)
        assert sum(read) >= 300 and rankings(mgr) == expected
    with opened(db) as mgr:  # (that build wrote a fresh snapshot)
        newest = mgr.events(None, newest_first=True, limit=1)[0]
        victim = next(s for s in mgr.list_sessions(limit=10) if s.id != newest.session_id)
        mgr.clear_session(victim.id)  # a delete moves the generation: stale
    with opened(db) as mgr:
        _, read = built(mgr)
        assert sum(read) >= 150  # (what is left, read again)


def snapshotted(db: Path) -> tuple[list[list[tuple[int, float]]], Path]:
    """A store of 300 turns whose keyword index was built and saved: its rankings, the file."""
    with opened(db) as mgr:
        add_turns(mgr, 300, seed=1)
        built(mgr)
        expected = rankings(mgr)
    (snapshot,) = snapshot_files(db)
    return expected, snapshot


def test_a_read_only_store_uses_the_snapshot_and_writes_none(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    expected, snapshot = snapshotted(db)
    written = snapshot.stat().st_mtime_ns
    with opened(db, read_only=True) as mgr:
        _, read = built(mgr)
        assert sum(read) <= 2 and rankings(mgr) == expected
    assert snapshot_files(db) == [snapshot] and snapshot.stat().st_mtime_ns == written


def test_an_older_snapshot_loads_converted_and_ranks_the_same(tmp_path: Path) -> None:
    """Snapshots written before own counts were uint16, and before the stems' hashes were
    saved, are converted as they load (no rebuild), and rank as a build from the log does."""
    from memlane.store._snapshot_files import read_arrays, replace_file

    db = tmp_path / "s.db"
    expected, snapshot = snapshotted(db)
    with snapshot.open("rb") as file:
        meta, arrays = read_arrays(file)
    own = [name for name in arrays if name.startswith("own") and name.endswith("_counts")]
    assert own and all(arrays[name].dtype == np.uint16 for name in own)
    for name in own:  # as the previous version wrote them
        arrays[name] = arrays[name].astype(np.float32)
    del arrays["stem_hashes"]
    replace_file(snapshot, meta, arrays)
    with opened(db) as mgr:
        store, read = built(mgr)
        assert sum(read) <= 2  # (loaded, not rebuilt: only the probe)
        part = store._keywords._partitions["agent:researcher"]
        assert all(segment.counts.dtype == np.uint16 for segment in part.own.segments)
        assert rankings(mgr) == expected


def test_own_counts_are_16_bit_and_saturate() -> None:
    from memlane.store._keyword_postings import count_pairs

    terms = np.array([7] * 70_000 + [3, 3], np.int32)
    rows = np.array([0] * 70_000 + [1, 1], np.int32)
    found_terms, found_rows, counts = count_pairs(terms, rows)
    assert counts.dtype == np.uint16
    assert list(zip(found_terms, found_rows, counts, strict=True)) == [(7, 0, 65_535), (3, 1, 2)]
