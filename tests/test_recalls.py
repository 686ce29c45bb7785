"""Recall counts are written in batches (search/recalls.py): a search reads; the counts land at
most a second later, at flush() and at close(), exactly."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.search import recalls as recalls_module
from memlane.search.recalls import RecallCounts
from memlane.testing import HashEmbedder


def total(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute("SELECT coalesce(sum(recall_count), 0) FROM events").fetchone()[0])


def test_searches_do_not_write_and_the_counts_land_exactly(db_path: Path) -> None:
    mgr = SessionManager("a", db_path, embedder=HashEmbedder(), background=False)
    session = mgr.start_session("recalls")
    facts = [mgr.record_fact(session.id, f"host {i} runs PostgreSQL {i % 3}") for i in range(9)]
    writes: list[Any] = []
    real = mgr._writer.log.bump_recall
    mgr._writer.log.bump_recall = lambda counts: writes.append(dict(counts)) or real(counts)  # type: ignore[method-assign]
    for _ in range(50):
        mgr.search("PostgreSQL", k=3, mode="keyword")
    assert writes == [] and total(db_path) == 0  # fifty searches, no write yet
    mgr.close()  # close() writes what is pending
    assert len(writes) == 1 and total(db_path) == 150
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as again:
        counts = [again.get_event(fact.id).recall_count for fact in facts]
    assert sum(counts) == 150 and max(counts) == 50


def test_a_batch_is_due_after_a_second_or_many_events(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[dict[int, int]] = []

    class Store:
        def bump_recall(self, counts: Any) -> None:
            written.append(dict(counts))

    now = [0.0]
    recalls = RecallCounts(Store(), clock=lambda: now[0])  # type: ignore[arg-type]
    recalls.add([1, 2, 2])
    now[0] = 0.5
    recalls.add([2])
    assert written == []
    now[0] = 1.0  # a second after the oldest count
    recalls.add([3])
    assert written == [{1: 1, 2: 3, 3: 1}]
    monkeypatch.setattr(recalls_module, "FLUSH_EVENTS", 4)
    recalls.add([10, 11, 12])
    assert len(written) == 1
    recalls.add([13])  # four events wait: written at once
    assert written[-1] == {10: 1, 11: 1, 12: 1, 13: 1}
    assert recalls.flush() == 0 and len(written) == 2


def test_the_background_worker_writes_them_when_idle(db_path: Path) -> None:
    import time

    with SessionManager("a", db_path, embedder=HashEmbedder()) as mgr:
        session = mgr.start_session("recalls")
        mgr.record_fact(session.id, "the staging database is read-only")
        mgr.flush()
        mgr.search("staging database", k=1)
        deadline = time.monotonic() + 10
        while total(db_path) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert total(db_path) == 1  # without flush() or close()


def test_a_full_store_loses_the_counts_not_the_search(db_path: Path) -> None:
    from memlane.errors import StoreFull

    mgr = SessionManager("a", db_path, embedder=HashEmbedder(), background=False)
    session = mgr.start_session("recalls")
    mgr.record_fact(session.id, "the staging database is read-only")

    def full(counts: Any) -> None:
        raise StoreFull("disk full")

    mgr._writer.log.bump_recall = full  # type: ignore[method-assign]
    assert mgr.search("staging", k=1)
    mgr.flush()
    mgr.close()
    assert total(db_path) == 0


def test_a_busy_store_at_close_loses_the_counts_not_the_close(db_path: Path) -> None:
    from memlane.errors import StoreBusy

    mgr = SessionManager("a", db_path, embedder=HashEmbedder(), background=False)
    session = mgr.start_session("recalls")
    mgr.record_fact(session.id, "the staging database is read-only")
    mgr.search("staging", k=1)

    def busy(counts: Any) -> None:
        raise StoreBusy("locked")

    mgr._writer.log.bump_recall = busy  # type: ignore[method-assign]
    mgr.close()  # the store is still closed properly
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as again:
        assert again.search("staging", k=1)
