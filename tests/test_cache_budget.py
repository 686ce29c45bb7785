"""The process's byte limit over its in-memory indexes (ranking/budget.py): least recently
used partitions go, recently used ones stay, dropped ones are read again with the same
results, and the limit is set by a call or the environment with clear errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memlane
from memlane import HashEmbedder, InvalidInput, SessionManager
from memlane.ranking import budget as budget_module
from memlane.ranking.budget import CacheBudget


class Owner:
    """Something that charges the budget (a cache, in the library)."""


def test_least_recently_used_partitions_go_first() -> None:
    budget = CacheBudget(100, keep=1)
    vectors, keywords = Owner(), Owner()
    budget.charge(vectors, "a", 40)
    budget.charge(keywords, "a", 40)
    budget.charge(vectors, "b", 10)
    budget.charge(vectors, "a", 40)  # used again: now the newest
    assert budget.take_dropped(vectors) == set() and budget.usage().used == 90
    budget.charge(keywords, "b", 30)  # 120 > 100: the keyword cache's "a" is the oldest
    assert budget.take_dropped(keywords) == {"a"}
    assert budget.take_dropped(keywords) == set()  # (asked once)
    assert budget.usage() == memlane.CacheUsage(100, 80, 3, 1)
    budget.charge(keywords, "c", 95)  # drops everything else, never the partition in use
    assert budget.take_dropped(vectors) == {"a", "b"}
    assert budget.take_dropped(keywords) == {"b"}
    assert budget.usage().used == 95 and budget.usage().partitions == 1


def test_the_partitions_used_last_stay_over_the_limit() -> None:
    """The partitions of the searches running now would push each other out at every
    search: the ``keep`` used last are never dropped."""
    budget = CacheBudget(100, keep=2)
    owner = Owner()
    budget.charge(owner, "private", 80)
    budget.charge(owner, "pool", 80)
    assert budget.take_dropped(owner) == set() and budget.usage().used == 160
    budget.charge(owner, "another", 10)
    assert budget.take_dropped(owner) == {"private"} and budget.usage().used == 90


def test_a_cache_that_goes_away_leaves_the_count() -> None:
    budget = CacheBudget(None)
    owner = Owner()
    budget.charge(owner, "a", 10)
    budget.charge(owner, "b", 20)
    budget.forget(owner, "a")
    assert budget.usage().used == 20
    del owner  # (collected: its entries go)
    assert budget.usage() == memlane.CacheUsage(None, 0, 0, 0)


@pytest.fixture
def tight(monkeypatch: pytest.MonkeyPatch) -> Iterator[CacheBudget]:
    """The process budget keeping only the partition in use; its limit put back after."""
    process = budget_module.process_budget()
    limit = process.limit
    monkeypatch.setattr(process, "keep", 1)
    yield process
    memlane.set_cache_limit(limit)


def _agents(db_path: Path, count: int) -> list[SessionManager]:
    embedder = HashEmbedder()
    managers = [SessionManager(f"agent-{i}", db_path, embedder=embedder) for i in range(count)]
    for i, mgr in enumerate(managers):
        session = mgr.start_session(f"agent {i}")
        for j in range(40):
            mgr.record_fact(session.id, f"agent {i} note {j} about topic {j % 7} and {i % 3}")
        mgr.flush()
    return managers


def test_many_agents_stay_within_the_limit_with_the_same_results(
    db_path: Path, tight: CacheBudget
) -> None:
    managers = _agents(db_path, 12)
    queries = ["note about topic 3", "topic 5 and 1", "agent note 17"]
    memlane.set_cache_limit(None)
    unlimited = [[[h.event.id for h in m.search(q, k=5)] for q in queries] for m in managers]
    # Every partition dropped once (and so saved) and read back from its file: sized to its
    # rows then, not to the capacity a build from the log reserves ahead (256 rows at least)
    memlane.set_cache_limit(1)
    for mgr in managers:
        mgr.search(queries[0], k=5)
    memlane.set_cache_limit(None)
    for mgr in managers:
        mgr.search(queries[0], k=5)
    one_agent = memlane.cache_usage().used // 12  # both caches of one agent's partition
    memlane.set_cache_limit(one_agent * 3)
    dropped = memlane.cache_usage().dropped
    for _ in range(2):
        limited = [[[h.event.id for h in m.search(q, k=5)] for q in queries] for m in managers]
        assert limited == unlimited
    usage = memlane.cache_usage()
    assert usage.dropped - dropped >= 12  # every agent's partitions were read again
    assert usage.used <= one_agent * 3 + one_agent  # (the partition in use may exceed)
    engine = managers[0]._engine
    held = len(engine.storage.vectors._cache._partitions)
    assert held <= 4, held
    for mgr in managers:
        mgr.close()


def test_a_dropped_partition_is_read_again_with_later_changes(
    db_path: Path, tight: CacheBudget
) -> None:
    """Deleted and added while its partition was dropped: the search sees both."""
    first, second = _agents(db_path, 2)
    first.search("note about topic 3", k=5)
    memlane.set_cache_limit(1)  # the next search of the second agent drops the first's
    second.search("note about topic 3", k=5)
    hits = first.search("agent 0 note 3 about topic 3", k=1, kinds="fact")
    first.delete_event(hits[0].event.id)
    session = first.start_session("later")
    first.record_fact(session.id, "a zebra crossing was painted")
    first.flush()
    second.search("anything at all", k=5)
    found = [h.event.content for h in first.search("zebra crossing painted", k=3, kinds="fact")]
    assert found[0] == "a zebra crossing was painted"
    again = first.search("agent 0 note 3 about topic 3", k=3, kinds="fact")
    assert hits[0].event.id not in {h.event.id for h in again}
    first.close()
    second.close()


@pytest.mark.parametrize(
    ("setting", "limit"),
    [("512MB", 512 << 20), ("2gb", 2 << 30), ("1000", 1000), ("none", None), (None, 1 << 30)],
)
def test_the_environment_sets_the_limit(
    monkeypatch: pytest.MonkeyPatch, setting: str | None, limit: int | None
) -> None:
    monkeypatch.setattr(budget_module, "_PROCESS", None)
    if setting is None:
        monkeypatch.delenv("MEMLANE_CACHE_LIMIT", raising=False)
    else:
        monkeypatch.setenv("MEMLANE_CACHE_LIMIT", setting)
    assert memlane.cache_usage().limit == limit


@pytest.mark.parametrize("bad", ["lots", "-5MB", "0", "12 parsecs"])
def test_a_bad_limit_says_how_to_write_one(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setattr(budget_module, "_PROCESS", None)
    monkeypatch.setenv("MEMLANE_CACHE_LIMIT", bad)
    with pytest.raises(InvalidInput, match=r"MEMLANE_CACHE_LIMIT.*512MB"):
        memlane.cache_usage()
    monkeypatch.delenv("MEMLANE_CACHE_LIMIT")
    for wrong in (bad, 0, -1, 2.5, True):
        with pytest.raises(InvalidInput, match="512MB"):
            memlane.set_cache_limit(wrong)  # type: ignore[arg-type]


def test_a_search_does_not_wait_for_a_build_to_ask_whether_it_is_ready(
    db_path: Path,
) -> None:
    """While a background build holds the keyword cache's lock (seconds at 100k events),
    ready() answers at once, so that the search ranks with FTS5 meanwhile."""
    import threading

    (mgr,) = _agents(db_path, 1)
    mgr.search("note about topic 3", k=5)  # (its partition is built)
    cache = mgr._engine.store._keywords
    partitions = [name for name, _ in mgr._writer.searcher._partitions(_flt(mgr))]
    held, release = threading.Event(), threading.Event()

    def build() -> None:
        with cache._lock:
            held.set()
            release.wait(10)

    builder = threading.Thread(target=build)
    builder.start()
    held.wait(10)
    answered = threading.Event()
    threading.Thread(target=lambda: (cache.ready(partitions), answered.set())).start()
    try:
        assert answered.wait(5)  # (it would wait for the release, 10 s, if it took the lock)
    finally:
        release.set()
        builder.join()
    mgr.close()


def _flt(mgr: SessionManager) -> object:
    from memlane.store.base import EventFilter

    return EventFilter(mgr.scope)


def _keyword_cache(mgr: SessionManager) -> Any:
    return mgr._engine.storage.log._keywords


def test_a_dropped_keyword_partition_is_read_again_from_a_snapshot(
    db_path: Path, tight: CacheBudget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition the limit drops is saved (of any size: snapshots were for big partitions
    only), and read back from that file instead of tokenizing its events again — with the
    same results, and the events recorded since read from the log."""
    first, second = _agents(db_path, 2)
    query = "agent 0 note 3 about topic 3"
    before = [(h.event.id, h.score) for h in first.search(query, k=5)]
    memlane.set_cache_limit(1)  # the next search of the second agent drops the first's
    second.search("note about topic 3", k=5)
    cache = _keyword_cache(first)
    session = first.start_session("later")
    first.record_fact(session.id, "a zebra crossing was painted")
    first.flush()
    read: list[int] = []
    rows_of = cache._source.keyword_rows
    monkeypatch.setattr(
        cache._source,
        "keyword_rows",
        lambda *args: read.append(len(found := rows_of(*args))) or found,
    )
    vectors = first._engine.storage.vectors._cache._store
    vector_rows = vectors.vector_rows
    read_vectors: list[int] = []
    monkeypatch.setattr(
        vectors,
        "vector_rows",
        lambda *args: read_vectors.append(len(found := vector_rows(*args))) or found,
    )
    assert [(h.event.id, h.score) for h in first.search(query, k=5)] == before
    # each read: the snapshot's last row (checked) or the two events since (the new session's
    # goal and the fact), never the agent's 40 facts again (under a 1-byte limit a search
    # may drop and read back its own partitions more than once: from the files each time)
    assert read and max(read) <= 2, read
    assert read_vectors and max(read_vectors) <= 2, read_vectors
    # (a cache lets go of what the limit dropped at its next search, saving it then: by now,
    # with the first agent's search, whatever order the two halves charged in)
    for kind in ("keywords", "vectors"):
        assert list(cache._snapshots.folder.glob(f"{kind}-*")), kind
    zebra = first.search("zebra crossing painted", k=1, kinds="fact")
    assert zebra[0].event.content == "a zebra crossing was painted"
    first.close()
    second.close()


def test_an_erasure_after_a_drop_leaves_the_erased_words_unfound(
    db_path: Path, tight: CacheBudget
) -> None:
    """The snapshot of a dropped partition holds an erased user's words: it must not bring
    them back (the erasure moves the store's generation; the file is not used)."""
    first, second = _agents(db_path, 2)
    session = first.start_session("private", user_id="u-erased")
    first.add_message(session.id, "user", "my locker code is quetzalcoatl")
    first.flush()
    assert first.search("quetzalcoatl", k=3, mode="keyword")
    assert "quetzalcoatl" in first.search("my locker code is quetzalcoatl", k=1)[0].event.content
    memlane.set_cache_limit(1)
    second.search("note about topic 3", k=5)  # drops the first agent's partitions
    # (let go of, and saved, at each cache's next search: see the test above)
    second.search("note about topic 3", k=5)
    folder = _keyword_cache(first)._snapshots.folder
    assert list(folder.glob("keywords-*")) and list(folder.glob("vectors-*"))
    assert any(b"quetzalcoatl" in path.read_bytes() for path in folder.iterdir())
    first.erase_user("u-erased")
    # the erasure removed the files of the partitions it touched (the word's stem was saved)
    assert not any(b"quetzalcoatl" in path.read_bytes() for path in folder.iterdir())
    assert not first.search("quetzalcoatl", k=3, mode="keyword")
    for mode in ("hybrid", "semantic"):
        hits = first.search("my locker code is quetzalcoatl", k=50, mode=mode)
        assert all("quetzalcoatl" not in h.event.content for h in hits)
    first.close()
    second.close()
