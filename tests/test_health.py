"""health() and `memlane health`: a backlog nobody drains is called stalled (a worker's batches and
its start are the heartbeat, shared through the store), the store's size, WAL and schema."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.core.clock import now_us
from memlane.engine.engine import STALLED_AFTER
from memlane.engine.indexer import LAST_EMBEDDED
from memlane.store._migrations import MIGRATIONS
from memlane.testing import HashEmbedder

from .test_cli import asm

LATEST = MIGRATIONS[-1][0]  # the schema version a fresh store reports

Factory = Callable[..., SessionManager]


def _beat(db: Path, seconds_ago: float) -> None:
    moment = now_us() - int(seconds_ago * 1_000_000)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (LAST_EMBEDDED, str(moment)),
        )


def test_a_backlog_nobody_drains_is_stalled(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    session = mgr.start_session("work")
    mgr.record_fact(session.id, "waits for its vector")
    report = mgr.health()
    assert report.backlog == 2 and report.last_embedded_at is None
    assert report.stalled and not report.ok  # no worker has ever run on this store
    _beat(db_path, seconds_ago=5)
    assert not mgr.health().stalled  # a worker started or stored a batch just now
    _beat(db_path, seconds_ago=STALLED_AFTER + 60)
    assert mgr.health().stalled
    mgr.flush()
    assert mgr.health().backlog == 0 and not mgr.health().stalled  # nothing waits
    report = mgr.health()
    assert report.schema == LATEST and report.wal_bytes is not None
    assert report.store_bytes and report.store_bytes > 0
    assert json.loads(json.dumps(report.to_dict()))["ok"] is True


def test_a_running_worker_beats(make_manager: Factory) -> None:
    mgr = make_manager("a")  # background worker on
    session = mgr.start_session("work")
    for i in range(10):
        mgr.record_fact(session.id, f"fact {i}")
    deadline = time.monotonic() + 15
    while mgr.health().backlog:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    report = mgr.health()
    assert report.worker_running and report.last_embedded_at is not None and report.ok


def test_asm_health_exits_1_when_not_healthy(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    mgr.record_fact(mgr.start_session("work").id, "waits")
    mgr.close()
    sick = asm(db_path, "health")
    assert sick.exit_code == 1 and "NOT HEALTHY" in sick.output and "stalled" in sick.output
    assert "the oldest waiting event was recorded" in sick.output  # the lag, with no worker
    as_json = json.loads(asm(db_path, "health", "--json").output)
    assert as_json["stalled"] is True and as_json["backlog"] == 2
    admin = StoreAdmin(db_path, embedder=HashEmbedder())
    try:
        admin.embed_pending()
    finally:
        admin.close()
    well = asm(db_path, "health")
    assert well.exit_code == 0 and "healthy" in well.output and LATEST in well.output


def test_a_successful_flush_ends_the_workers_failure(
    make_manager: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk fails the worker's batch (StoreFull in health().last_error); space is
    freed and flush() stores everything: health() is ok at once, not at the worker's next
    batch (issue 28, D9: ~20 s in the trial; here the worker is told to wait an hour)."""
    from memlane import StoreFull

    mgr = make_manager("a", background=True)
    indexer = mgr._writer.indexer
    indexer.poll_seconds = 3600  # (read at each wait: after its failure it sleeps that long)
    session = mgr.start_session("work")

    def full(*args: object, **kwargs: object) -> None:
        raise StoreFull("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(mgr._writer.storage, "store_batch", full)
        mgr.record_fact(session.id, "waits for its vector")  # wakes the worker
        deadline = time.monotonic() + 60
        while indexer.last_error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        health = mgr.health()
        assert health.last_error is not None and "StoreFull" in health.last_error
        assert not health.ok
    mgr.flush()  # the disk has room again
    health = mgr.health()
    assert health.last_error is None and health.backlog == 0 and health.ok


def test_any_process_sees_the_worker_lag_and_the_last_worker_error(
    make_manager: Factory, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a process without a worker of its own (memlane health, the inspector) can tell:
    how long the oldest waiting event has waited, and the last failure a worker recorded."""
    from memlane import StoreFull

    writer = make_manager("a", background=False)
    session = writer.start_session("work")
    first = writer.events(session.id)[0]  # the goal: first in the queue
    time.sleep(0.3)
    writer.record_fact(session.id, "recorded later")
    with StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True) as admin:
        report = admin.health()
        assert report.backlog == 2 and report.worker_error is None
        assert report.oldest_pending_at == first.created_at
        assert report.backlog_seconds is not None and report.backlog_seconds >= 0.3
        assert report.to_dict()["backlog_seconds"] >= 0.3
    worker = make_manager("b", background=True)
    worker._writer.indexer.poll_seconds = 3600  # (after its failure it waits that long)

    def full(*args: object, **kwargs: object) -> None:
        raise StoreFull("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(worker._writer.storage, "store_batch", full)
        worker.record_fact(worker.start_session("more").id, "wakes the worker")
        deadline = time.monotonic() + 60
        while worker._writer.indexer.last_error is None and time.monotonic() < deadline:
            time.sleep(0.02)
        with StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True) as admin:
            report = admin.health()
    assert report.last_error is None  # (this process has no worker)
    assert report.worker_error == "StoreFull: disk full"
    assert report.worker_error_at is not None
    assert abs((datetime.now(timezone.utc) - report.worker_error_at).total_seconds()) < 60
    assert report.to_dict()["worker_error"] == "StoreFull: disk full"
    worker.flush()
    with StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True) as admin:
        report = admin.health()
    assert report.backlog == 0 and report.oldest_pending_at is None
    assert report.backlog_seconds is None
    assert report.worker_error == "StoreFull: disk full"  # kept: when it last failed
    assert "Last fail StoreFull: disk full" in asm(db_path, "health").output


def test_the_docs_state_the_space_the_wal_may_take() -> None:
    """The WAL may reach the floor before it is truncated (an 8 MB volume filled after ~109
    events in issue 28, D9): the operator's docs say how much, with the code's figure."""
    from memlane.store._sqlite_wal import WAL_FLOOR_BYTES

    docs = Path(__file__).resolve().parent.parent / "docs"
    bound = f"max({WAL_FLOOR_BYTES // 2**20} MB, the database's size)"
    assert bound in (docs / "operations.md").read_text()
    assert "operations.md#disk-space" in (docs / "backends.md").read_text()
