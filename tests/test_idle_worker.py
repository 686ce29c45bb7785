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

from memlane import HashEmbedder, MiniLMEmbedder, SessionManager
from memlane.core.idle import IdleRunner
from memlane.embed import load_embedder

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
    """The hash embedder, noting the scheduling policy and thread of every call; it says it
    computes outside the GIL, as a native model does (``releases_gil``), unless told not."""

    def __init__(self, releases_gil: bool = True) -> None:
        super().__init__()
        self.releases_gil = releases_gil
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


def test_an_embedder_that_holds_the_gil_is_never_computed_at_idle_priority(
    db_path: Path,
) -> None:
    """A pure-Python embedder at idle priority would hold the GIL while it waits for a core,
    and every thread of the process would wait with it: the worker computes it itself."""
    embedder = PolicyRecorder(releases_gil=False)
    with SessionManager("researcher", db_path, embedder=embedder, batch_size=8) as mgr:
        worker = _worker_calls(mgr, embedder)
        assert len(worker) >= 3
        assert all(call == (os.SCHED_OTHER, "session-manager-indexer") for call in worker)
    assert not load_embedder(HashEmbedder()).releases_gil
    assert load_embedder(MiniLMEmbedder()).releases_gil  # (nothing loaded: an attribute)


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


def test_hurry_puts_a_running_call_back_at_normal_priority() -> None:
    runner = IdleRunner()
    assert not runner.hurry()  # no thread yet: nothing to hurry
    inside, go_on = threading.Event(), threading.Event()

    def call() -> tuple[int, int]:
        before = os.sched_getscheduler(0)
        inside.set()
        go_on.wait(10)
        return before, os.sched_getscheduler(0)

    result: list[tuple[int, int]] = []
    caller = threading.Thread(target=lambda: result.append(runner.run(call)))
    caller.start()
    assert inside.wait(10)
    hurried = runner.hurry()
    go_on.set()
    caller.join(10)
    if not hurried:  # an unprivileged process whose RLIMIT_NICE is 0 may not switch back
        pytest.skip("this process may not leave SCHED_IDLE")
    assert result == [(os.SCHED_IDLE, os.SCHED_OTHER)]
    runner.close()
    assert runner.run(os.sched_getscheduler, 0) == os.SCHED_IDLE  # a new thread: idle again


def _burn(seconds_of_cpu: float) -> None:
    """CPU work that releases the GIL (sha256 of large buffers), about ``seconds_of_cpu``."""
    import hashlib

    block = b"x" * 4_000_000
    started = time.process_time()
    while time.process_time() - started < seconds_of_cpu:
        hashlib.sha256(block).digest()


class SlowEmbedder(HashEmbedder):
    """Half a second of CPU outside the GIL a call, then the hash embedder."""

    releases_gil = True

    def __call__(self, texts: Sequence[str], /) -> np.ndarray[Any, np.dtype[np.float32]]:
        _burn(0.5)
        return super().__call__(texts)


@pytest.mark.slow
def test_close_does_not_wait_for_an_idle_slice_on_a_busy_machine(db_path: Path) -> None:
    """Every core kept busy at normal priority: an idle-priority slice gets almost no time,
    and close() waited 30 s for it (the CI's failure under a CPU hog). Stopping hurries it."""
    import subprocess
    import sys

    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        mgr = SessionManager("busy", db_path, embedder=SlowEmbedder(), batch_size=4)
        session = mgr.start_session("busy machine")
        for i in range(40):
            mgr.record_fact(session.id, f"fact {i}")
        time.sleep(2.0)  # the worker's first batch (its own thread), then idle slices
        started = time.monotonic()
        mgr.close()
        took = time.monotonic() - started
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    if not IdleRunner().supported:
        pytest.skip("no SCHED_IDLE here")
    # one slice is 0.5 s of CPU; at idle priority beside the hogs it took over 30 s
    assert took < 15, took
