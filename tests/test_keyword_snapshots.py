"""Snapshots of the in-memory keyword index (ranking/keyword/snapshots.py): a new process's
background build starts from the one an earlier build saved and tokenizes only the events
added since, ranks exactly as a build from the log does, and never uses a stale, damaged or
foreign snapshot."""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.ranking.keyword import cache as keyword_cache
from memlane.store.base import EventFilter
from memlane.store.sqlite import SqliteStore

WORDS = """deploy pipeline staging database login error rate limit search api vector index gpu
    memory payment webhook docker image caroline melanie painting camping beach museum""".split()  # noqa: SIM905
QUERIES = ["staging database error", "caroline painting museum", "gpu memory 2023", "webhook"]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions of a few hundred events count as big: built in the background."""
    monkeypatch.setattr(keyword_cache, "_CHUNK", 32)


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
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    read: list[int] = []
    rows = store.keyword_rows
    store.keyword_rows = lambda *a: read.append(len(found := rows(*a))) or found  # type: ignore[method-assign]
    mgr.search("warm up", k=1, mode="keyword")  # starts the build (FTS5 answers)
    if store._keywords._builder is not None:
        store._keywords._builder.join(20)
    return store, read


def rankings(mgr: SessionManager) -> list[list[tuple[int, float]]]:
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    flt = EventFilter(mgr._writer.searcher.scope)
    partitions = mgr._writer.searcher._partitions(flt)
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
    return sorted(Path(str(db) + ".memlane-cache").glob("keywords-*.asmkw"))


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
    (Path(str(other) + ".memlane-cache") / mine.name).write_bytes(mine.read_bytes())
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


def test_a_snapshot_of_an_earlier_format_is_rebuilt_and_replaced(tmp_path: Path) -> None:
    """A snapshot of format 1 (it saved every stem its process had seen, issue 28) is not
    used: the partition is built from the log and saved anew."""
    from memlane.ranking.keyword.snapshots import FORMAT
    from memlane.ranking.snapshot_files import read_arrays, replace_file

    db = tmp_path / "s.db"
    expected, snapshot = snapshotted(db)
    with snapshot.open("rb") as file:
        meta, arrays = read_arrays(file)
    assert meta is not None and meta["format"] == FORMAT == 2
    replace_file(snapshot, {**meta, "format": 1}, arrays)
    with opened(db) as mgr:
        _, read = built(mgr)
        assert sum(read) >= 300 and rankings(mgr) == expected
    with snapshot.open("rb") as file:
        assert read_arrays(file)[0]["format"] == FORMAT  # type: ignore[index]


def _two_partitions(db: Path) -> None:
    """The researcher's own partition and the pool "team", each with a word of its own."""
    with opened(db) as mgr:
        mgr.create_pool("team")
    with opened(db, subscribe=["team"]) as mgr:
        add_turns(mgr, 200, seed=1)
        pool = mgr.start_session("team chat", shared_pool="team")
        rng = random.Random(2)
        for i in range(200):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
            mgr.add_message(pool.id, "user", f"{words} quokkapool{i % 3}")
        mgr.add_message(mgr.start_session("mine").id, "user", "the wombatmine word")
        built(mgr)
        mgr.search("numbatquery", k=3, mode="keyword")  # a word only a search saw


def test_a_snapshot_holds_only_its_own_partitions_stems(tmp_path: Path) -> None:
    """Issue 28: each file holds the stems of its partition's rows, not every stem its
    process saw (the other partition's, a search's)."""
    db = tmp_path / "s.db"
    _two_partitions(db)
    files = snapshot_files(db)
    assert len(files) == 2
    texts = [path.read_bytes() for path in files]
    assert sorted(b"wombatmin" in text for text in texts) == [False, True]
    assert sorted(b"quokkapool0" in text for text in texts) == [False, True]
    assert not any(b"wombatmin" in text and b"quokkapool0" in text for text in texts)
    assert not any(b"numbatqueri" in text or b"numbatquery" in text for text in texts)


def test_a_process_loads_each_partitions_snapshot_in_its_own_term_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second partition a process loads has term ids of its own: its postings are
    renumbered into the process's (no rebuild), and rank as a build from the log does."""
    from memlane.ranking.keyword.postings import Segment

    db = tmp_path / "s.db"
    _two_partitions(db)
    renumbered: list[int] = []
    original = Segment.renumbered

    def counting(self: Segment, mapping: Any) -> Segment:
        renumbered.append(len(self.terms))
        return original(self, mapping)

    monkeypatch.setattr(Segment, "renumbered", counting)
    queries = [*QUERIES, "quokkapool1 staging", "wombatmine"]
    with opened(db, subscribe=["team"]) as mgr:
        _, read = built(mgr)
        assert sum(read) <= 4  # (the probe of each partition's last event)
        assert renumbered  # (the second one's)
        monkeypatch.setattr(sys.modules[__name__], "QUERIES", queries)
        loaded = rankings(mgr)
    for path in snapshot_files(db):
        path.unlink()
    with opened(db, subscribe=["team"]) as mgr:
        _, read = built(mgr)
        assert sum(read) >= 400
        assert rankings(mgr) == loaded
    assert all(loaded)


def test_renumbering_a_segment_moves_each_terms_run_whole() -> None:
    from memlane.ranking.keyword.postings import Segment

    rows = np.array([0, 2, 5, 1, 3, 4], np.int32)
    segment = Segment.build(
        np.array([0, 0, 0, 1, 1, 2], np.int32)[np.argsort(rows, kind="stable")],
        np.sort(rows),
        np.array([1, 2, 3, 4, 5, 6], np.uint16),
    )

    def postings(seg: Segment) -> dict[int, list[tuple[int, int]]]:
        found: dict[int, list[tuple[int, int]]] = {}
        for term in seg.terms.tolist():
            hit = seg.postings(term)
            assert hit is not None
            found[term] = list(zip(hit[0].tolist(), hit[1].tolist(), strict=True))
        return found

    before = postings(segment)
    moved = segment.renumbered(np.array([7, 2, 4], np.int32))
    assert moved.terms.tolist() == [2, 4, 7]
    assert postings(moved) == {7: before[0], 2: before[1], 4: before[2]}
    kept = segment.renumbered(np.array([3, 5, 9], np.int32))  # (the same order: no move)
    assert postings(kept) == {3: before[0], 5: before[1], 9: before[2]}
    merged = segment.renumbered(np.array([1, 0, 1], np.int32))  # (two stems of one hash)
    assert postings(merged) == {0: before[1], 1: sorted(before[0] + before[2])}


def test_own_counts_are_16_bit_and_saturate() -> None:
    from memlane.ranking.keyword.postings import count_pairs

    terms = np.array([7] * 70_000 + [3, 3], np.int32)
    rows = np.array([0] * 70_000 + [1, 1], np.int32)
    found_terms, found_rows, counts = count_pairs(terms, rows)
    assert counts.dtype == np.uint16
    assert list(zip(found_terms, found_rows, counts, strict=True)) == [(7, 0, 65_535), (3, 1, 2)]


def _first_keyword_search_by(mgr: SessionManager) -> str:
    """Which ranking answered a new process's first keyword search: "memory" or "fts5"."""
    store = mgr._writer.searcher.store
    assert isinstance(store, SqliteStore)
    answered: list[str] = []
    fts = store.fts_search
    store.fts_search = lambda *a, **k: answered.append("fts5") or fts(*a, **k)  # type: ignore[method-assign]
    hits = mgr.search("staging database error", k=5, mode="keyword")
    assert hits
    return answered[0] if answered else "memory"


def test_a_first_search_waits_for_a_snapshot_load_not_for_a_build_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a snapshot is reading a file (at 1M events ~0.5 s, where FTS5's ranking took
    1.0-1.7 s after the page cache was emptied): a new process's first search waits for it,
    up to SNAPSHOT_WAIT. A build from the log is not waited for: FTS5 answers meanwhile."""
    db = tmp_path / "s.db"
    with opened(db) as mgr:
        add_turns(mgr, 300, seed=1)
        built(mgr)
    assert len(snapshot_files(db)) == 1
    with opened(db) as mgr:
        assert _first_keyword_search_by(mgr) == "memory"
    # a load that takes longer than the wait
    monkeypatch.setattr(keyword_cache, "SNAPSHOT_WAIT", 0.05)
    load = keyword_cache.KeywordCache._load

    def slow(self: keyword_cache.KeywordCache, name: str) -> bool:
        time.sleep(1.0)
        return load(self, name)

    monkeypatch.setattr(keyword_cache.KeywordCache, "_load", slow)
    with opened(db) as mgr:
        assert _first_keyword_search_by(mgr) == "fts5"
        store = mgr._writer.searcher.store
        assert isinstance(store, SqliteStore)
        builder = store._keywords._builder
        assert builder is not None
        builder.join()  # (done before the files go: it may write a snapshot)
    monkeypatch.setattr(keyword_cache.KeywordCache, "_load", load)
    monkeypatch.setattr(keyword_cache, "SNAPSHOT_WAIT", 30.0)
    for file in snapshot_files(db):
        file.unlink()
    with opened(db) as mgr:
        assert _first_keyword_search_by(mgr) == "fts5"  # (from the log: not waited for)


@pytest.mark.parametrize("whole_bytes", [1 << 20, 64])
def test_snapshot_arrays_round_trip_read_whole_or_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_bytes: int
) -> None:
    """A small snapshot file is read in one call, a big one an array at a time (the limit
    moved to read this one both ways): the same arrays, each its own writable copy (a view
    into the whole file would keep all of it alive after the others were replaced); a file
    cut short is refused either way."""
    from memlane.ranking import snapshot_files
    from memlane.ranking.snapshot_files import read_arrays, write_arrays

    monkeypatch.setattr(snapshot_files, "_READ_WHOLE_BYTES", whole_bytes)
    arrays = {
        "codes": np.arange(12, dtype=np.uint8).reshape(3, 4),
        "hashes": np.array([2**63 + 5, 7], np.uint64),
        "empty": np.zeros(0, np.float32),
        "seqs": np.arange(37, dtype=np.int64),  # (296 bytes, then 24 of padding)
    }
    path = tmp_path / "file"
    with path.open("wb") as file:
        write_arrays(file, {"format": 1}, arrays)
    with path.open("rb") as file:
        meta, found = read_arrays(file)
    assert meta == {"format": 1} and found.keys() == arrays.keys()
    for name, array in arrays.items():
        assert found[name].dtype == array.dtype and np.array_equal(found[name], array)
        owner = found[name]
        while owner.base is not None:  # (a reshape's view of its own copy)
            owner = owner.base
        assert isinstance(owner, np.ndarray) and owner.nbytes == array.nbytes
        assert found[name].flags.writeable
    path.write_bytes(path.read_bytes()[:-40])  # (the last array's bytes cut)
    with path.open("rb") as file, pytest.raises(ValueError, match="truncated"):
        read_arrays(file)
