"""The background worker embeds at the scheduler's idle priority (core/idle.py): its computation
never takes a core an application thread wants. Linux only (SCHED_IDLE)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.core.idle import IdleRunner

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")


def test_calls_run_in_an_idle_thread_and_hand_back_results_and_errors() -> None:
    runner = IdleRunner()
    assert runner.run(os.sched_getscheduler, 0) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) != os.SCHED_IDLE  # the caller's own is untouched
    with pytest.raises(ZeroDivisionError):
        runner.run(lambda: 1 / 0)
    assert runner.run(lambda a, b: a + b, 2, 3) == 5
    runner.close()
    assert runner.run(threading.current_thread) is not threading.current_thread()


def test_a_refused_idle_priority_runs_calls_in_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(*_: Any) -> None:
        raise PermissionError("not here")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    runner = IdleRunner()
    assert runner.run(threading.current_thread) is threading.current_thread()
    assert not runner.supported


class PolicyRecorder(HashEmbedder):
    """The hash embedder, noting the scheduling policy and thread of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, str]] = []

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        self.calls.append((os.sched_getscheduler(0), threading.current_thread().name))
        return super().__call__(texts)


def _worker_calls(mgr: SessionManager, embedder: PolicyRecorder) -> list[tuple[int, str]]:
    """Record 40 facts, wait for the worker to embed them; its embedder calls."""
    session = mgr.start_session("many small batches")
    for i in range(40):
        mgr.record_fact(session.id, f"fact number {i} about otters")
    deadline = time.monotonic() + 20
    while mgr._writer.indexer.store.pending_count() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not mgr._writer.indexer.store.pending_count()
    return [call for call in embedder.calls if call[1] != "MainThread"]


def test_the_worker_embeds_its_first_batch_itself_and_the_rest_at_idle_priority(
    db_path: Path,
) -> None:
    embedder = PolicyRecorder()
    with SessionManager("researcher", db_path, embedder=embedder, batch_size=8) as mgr:
        worker = _worker_calls(mgr, embedder)
        assert worker[0] == (os.SCHED_OTHER, "session-manager-indexer")  # loads a model
        assert len(worker) >= 3
        assert all(call == (os.SCHED_IDLE, "session-manager-idle") for call in worker[1:])
        # a search's own embedding stays in the caller's thread, at its priority
        assert mgr.search("otters", k=3)
        assert embedder.calls[-1] == (os.sched_getscheduler(0), "MainThread")


def test_worker_priority_normal_embeds_in_the_workers_own_thread(db_path: Path) -> None:
    """SessionManager(worker_priority="normal"): every batch is embedded by the worker's
    thread at normal priority (a busy machine keeps the backlog moving)."""
    embedder = PolicyRecorder()
    with SessionManager(
        "researcher", db_path, embedder=embedder, batch_size=8, worker_priority="normal"
    ) as mgr:
        worker = _worker_calls(mgr, embedder)
        assert len(worker) >= 3
        assert all(call == (os.SCHED_OTHER, "session-manager-indexer") for call in worker)


def test_worker_priority_is_checked(db_path: Path) -> None:
    from memlane import InvalidInput

    with pytest.raises(InvalidInput, match="worker_priority must be 'idle' or 'normal'"):
        SessionManager("a", db_path, embedder=HashEmbedder(), worker_priority="low")  # type: ignore[arg-type]
