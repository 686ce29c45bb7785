"""The end of a process while the embedding worker is mid-batch (issue 28, D7).

Before: ``SessionManager("x", "e.db", batch_size=4096)``, 4,000 messages, ``close()`` 1.5 s
later waited 30 s ("still busy"), then the process aborted (exit code 134: onnxruntime was
torn down under the worker's run, "terminate called without an active exception") in 2 runs
of 3. Now the worker embeds a batch a slice at a time and stops between two slices (the batch
goes back to the queue for the next process), and at interpreter exit the model runs in
progress are cut short and waited for.
"""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlane import SessionManager
from memlane.engine import indexer
from memlane.errors import ModelNotAvailable
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env

# -- with a slow fake embedder: the default suite ------------------------------------------


class _Slow(HashEmbedder):
    """The worker's calls take 0.2 s per 32 texts: a batch of 4,000 texts, 25 s."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[int] = []
        self.embedding = threading.Event()

    def __call__(self, texts: Any) -> Any:
        if threading.current_thread().name.startswith("session-manager-"):
            self.calls.append(len(texts))
            self.embedding.set()
            time.sleep(0.2 * -(-len(texts) // 32))
        return super().__call__(texts)


def _messages(n: int) -> list[dict[str, Any]]:
    return [{"kind": "message", "role": "user", "content": f"message {i}"} for i in range(n)]


def test_close_stops_the_worker_between_two_slices_and_hands_the_batch_back(
    db_path: Path,
) -> None:
    slow = _Slow()
    mgr = SessionManager("x", db_path, embedder=slow, batch_size=4096)
    session = mgr.start_session("a long batch")
    mgr.flush()
    mgr.record_many(session.id, _messages(4_000))
    slow.calls.clear()
    slow.embedding.clear()
    assert slow.embedding.wait(10)  # the worker is inside its batch of 4,000
    worker = mgr._writer.indexer
    started = time.monotonic()
    mgr.close()
    assert time.monotonic() - started < 2.0  # one slice, not 25 s (nor STOP_TIMEOUT)
    assert slow.calls and max(slow.calls) <= indexer.EMBED_SLICE
    assert not worker.running
    # what the batch did not store is the next process's, unclaimed: nothing lost
    with SessionManager("x", db_path, embedder=HashEmbedder(), background=False) as again:
        assert len(again.events(session.id, kinds="message")) == 4_000
        assert again.pending_embeddings() == 4_000
    with sqlite3.connect(db_path) as conn:
        held = conn.execute("SELECT count(*) FROM outbox WHERE claimed_until > ?", (time.time(),))
        assert held.fetchone()[0] == 0


def test_close_says_what_it_waits_for(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(indexer, "SAY_AFTER", 0.05)
    slow = _Slow()
    mgr = SessionManager("x", db_path, embedder=slow, batch_size=4096)
    session = mgr.start_session("a long batch")
    mgr.flush()
    mgr.record_many(session.id, _messages(200))
    slow.embedding.clear()
    assert slow.embedding.wait(10)
    with caplog.at_level(logging.WARNING, logger="memlane.indexer"):
        mgr.close()
    said = [r.getMessage() for r in caplog.records if r.name == "memlane.indexer"]
    assert any(
        "close() is waiting for the embedding worker" in message
        and "embedding texts" in message
        and "of a batch of 200" in message
        for message in said
    ), said


def test_flush_still_embeds_a_whole_batch_at_once(db_path: Path) -> None:
    """Slices are the worker's: a caller (flush, a search catching up) embeds its batch in
    one call, as before."""
    calls: list[int] = []

    def embed(texts: list[str]) -> np.ndarray[Any, Any]:
        calls.append(len(texts))
        return HashEmbedder()(texts)

    with SessionManager("x", db_path, embedder=embed, background=False, batch_size=100) as mgr:
        session = mgr.start_session("flush")
        mgr.record_many(session.id, _messages(99))
        mgr.flush()
        assert calls == [100]


# -- with the real model -------------------------------------------------------------------

_MID_BATCH = """
import sys, time
from memlane import SessionManager
db, batch, ending = sys.argv[1], int(sys.argv[2]), sys.argv[3]
mgr = SessionManager("x", db, batch_size=batch)
session = mgr.start_session("exit mid-batch")
mgr.record_many(session.id, [
    {"kind": "message", "role": "user",
     "content": f"message {i} about the deploy of service {i % 17}, " * 3}
    for i in range(4000)
])
time.sleep(1.5)
if ending == "raise":
    raise RuntimeError("an uncaught exception while the worker embeds")
started = time.monotonic()
mgr.close()
print(f"closed in {time.monotonic() - started:.2f}", flush=True)
"""


def _exit_mid_batch(db: Path, batch: int, ending: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-c", _MID_BATCH, str(db), str(batch), ending],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.real_model
@pytest.mark.slow
@pytest.mark.parametrize(
    ("batch", "ending", "code"),
    [(4096, "close", 0)] * 3 + [(4096, "raise", 1), (64, "raise", 1)],
)
def test_a_process_ending_mid_batch_exits_cleanly(
    tmp_path: Path, batch: int, ending: str, code: int
) -> None:
    db = tmp_path / "e.db"
    result = _exit_mid_batch(db, batch, ending)
    assert result.returncode == code, (result.returncode, result.stderr[-3000:])
    assert "terminate called" not in result.stderr
    assert "still busy" not in result.stderr
    if ending == "close":
        closed_in = float(result.stdout.split()[-1])
        assert closed_in < 15.0, result.stdout  # one slice of MiniLM, on a busy machine
    else:
        assert "an uncaught exception while the worker embeds" in result.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 4_001
        vectors = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
        pending = conn.execute("SELECT count(*) FROM outbox").fetchone()[0]
        assert vectors + pending == 4_001  # each event embedded, or queued for the next
        held = conn.execute("SELECT count(*) FROM outbox WHERE claimed_until > ?", (time.time(),))
        assert held.fetchone()[0] == 0  # handed back, not left to its lease


@pytest.mark.real_model
def test_the_model_runs_in_progress_are_cut_short_at_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memlane.embed import MiniLMEmbedder, minilm

    monkeypatch.setattr(minilm, "_stopping", False)  # (restored after the test)
    embedder = MiniLMEmbedder(batch_size=512)
    embedder(["load the model first"])
    texts = [f"a long text about the deploy number {i} " * 30 for i in range(512)]
    outcome: list[BaseException | None] = []

    def embed() -> None:
        try:
            embedder(texts)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=embed)
    worker.start()
    while not minilm._running:  # inside session.run
        time.sleep(0.01)
    started = time.monotonic()
    assert minilm.stop_model_runs(timeout=30)
    assert time.monotonic() - started < 10  # (the whole batch: a minute on a busy machine)
    worker.join(10)
    assert isinstance(outcome[0], ModelNotAvailable) and "exiting" in str(outcome[0])
    # no other thread starts a run now; the main thread still may (an atexit handler's)
    late: list[BaseException] = []
    thread = threading.Thread(target=lambda: _record(late, embedder))
    thread.start()
    thread.join(30)
    assert isinstance(late[0], ModelNotAvailable)
    assert embedder(["the main thread"]).shape == (1, 384)


def _record(errors: list[BaseException], embedder: Any) -> None:
    try:
        embedder(["a thread after the end began"])
    except BaseException as exc:
        errors.append(exc)
