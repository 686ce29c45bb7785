"""core/heap.py: the worker gives the memory its batches freed back to the system."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memlane import HashEmbedder, SessionManager
from memlane.core.heap import HeapTrimmer, malloc_trim


class Calls:
    def __init__(self) -> None:
        self.pads: list[int] = []

    def __call__(self, pad: int) -> int:
        self.pads.append(pad)
        return 1


def test_trims_at_most_once_per_interval_unless_forced() -> None:
    now = [100.0]
    calls = Calls()
    trim = HeapTrimmer(every=1.0, trim=calls, clock=lambda: now[0])
    assert trim() and not trim()  # the second within the interval
    now[0] += 0.5
    assert not trim() and trim(force=True)
    now[0] += 1.0
    assert trim()
    assert calls.pads == [0, 0, 0] and trim.trims == 3


def test_nothing_to_call_where_the_c_library_has_no_malloc_trim() -> None:
    trim = HeapTrimmer(trim=None)
    assert not trim() and not trim(force=True) and trim.trims == 0


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(malloc_trim is None, reason="glibc's malloc_trim only")
def test_a_trim_returns_what_a_finished_thread_freed() -> None:
    """What a thread allocated and freed stays in its malloc arena (RSS) until a trim."""
    kept: list[np.ndarray] = []

    def batch() -> None:  # ~128 MB in 64 KB pieces, each in the thread's own arena
        pieces = [np.ones(8_000) for _ in range(2_000)]
        kept.extend(pieces[::50])

    worker = threading.Thread(target=batch)
    worker.start()
    worker.join()
    before = _rss_mb()
    assert HeapTrimmer()(force=True)
    assert before - _rss_mb() > 50  # (measured: 144 -> 27 MB)


def test_the_worker_and_flush_trim_after_embedding(db_path: Path) -> None:
    calls = Calls()
    with SessionManager("a", db_path, embedder=HashEmbedder(), batch_size=8) as mgr:
        indexer = mgr._writer.indexer
        indexer.trim_heap = HeapTrimmer(trim=calls)
        session = mgr.start_session("trim")
        for i in range(40):
            mgr.record_fact(session.id, f"fact {i} about otters")
        deadline = time.monotonic() + 20
        while indexer.store.pending_count() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not indexer.store.pending_count()
        deadline = time.monotonic() + 20  # (it trims once more on catching up)
        while not calls.pads and time.monotonic() < deadline:
            time.sleep(0.02)
        assert calls.pads
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as mgr:
        mgr._writer.indexer.trim_heap = trim = HeapTrimmer(trim=Calls())
        mgr.flush()  # nothing pending: nothing to give back
        assert trim.trims == 0
        mgr.record_fact(mgr.start_session("more").id, "one more fact")
        mgr.flush()
        assert trim.trims == 1
