"""Background computation at the scheduler's idle priority (Linux ``SCHED_IDLE``).

The embedding worker's model runs on every core it is given (onnxruntime's intra-op pool),
so an application thread that wants a core while a batch is being embedded waits for a time
slice: ``record()`` p99 4.3 ms against 0.2 ms at the median (4,000 ``record_fact`` calls with
MiniLM embedding beside them, docs/decisions/2026-11-23-worker-at-idle-priority.md). A thread in
``SCHED_IDLE`` runs only on a core no other thread wants: the caller never waits for it, and a
machine with a free core embeds as fast as before (measured: p99 0.82 to 0.94 ms; ingest 193 to 202
against 199 to 203 texts/s).

Only the computation moves there, to a thread of its own that stays in ``SCHED_IDLE``: the
worker's transactions stay in the worker's thread at normal priority, so no lock is held by a
thread that may wait long for a core. The GIL is such a lock: a pure-Python embedder at idle
priority holds it while it waits for a core, and every thread of the process waits with it
(``record()`` p99 4.9 to 36.5 ms with the hash embedder beside two busy loops; one caller's
worst wait for the GIL 392 ms, 21 ms once the embedder ran at normal priority). So only an
embedder that declares ``releases_gil`` (a native model: MiniLM's tokenizer and onnxruntime)
is computed here, with the checks of its vectors as before.
On a machine kept busy by other work the idle thread gets almost no time at all, so
``close()`` would wait for a slice that cannot finish (30 s, then the store closed behind
it): stopping the worker :meth:`IdleRunner.hurry` puts the thread
back at normal priority for the call it is in (where the system allows it: a privileged
process, or one whose ``RLIMIT_NICE`` permits; otherwise the wait stays as it was).
A model's own threads take the priority of the thread that starts them, so the worker
embeds its first batch itself (:class:`~memlane.engine.indexer.Indexer`): a model it loads
keeps normal-priority threads for the searches that share it. Where ``SCHED_IDLE`` does not
exist or is refused, the calls run in the caller's thread.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["IdleRunner"]

log = logging.getLogger("memlane.worker")

T = TypeVar("T")

_STOP = object()


class IdleRunner:
    """Runs calls, one at a time, in a daemon thread at idle priority (see the module)."""

    def __init__(self, name: str = "session-manager-idle") -> None:
        self._name = name
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._native_id: int | None = None  # the serving thread's, for hurry()
        self._lock = threading.Lock()
        #: False once the idle priority was refused here: calls then run in the caller
        self.supported = hasattr(os, "sched_setscheduler") and hasattr(os, "SCHED_IDLE")

    def run(self, call: Callable[..., T], *args: Any) -> T:
        """``call(*args)``, computed at idle priority; its exception is raised here."""
        if not self.supported:
            return call(*args)
        with self._lock:
            if self._thread is None:
                started: Future[bool] = Future()
                # each thread its own queue: a closing thread's stop is never taken by the next
                self._calls = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._serve,
                    args=(started, self._calls),
                    name=self._name,
                    daemon=True,
                )
                self._thread.start()
                if not started.result():
                    self._thread = None
                    return call(*args)
            calls = self._calls
        done: Future[T] = Future()
        calls.put((call, args, done))
        return done.result()

    def hurry(self) -> bool:
        """Put the serving thread back at normal priority, so that the call it is running
        finishes now rather than when the machine has a core to spare (the worker is
        stopping). Returns whether the system allowed it."""
        native = self._native_id
        if native is None or not self.supported:
            return False
        try:
            os.sched_setscheduler(native, os.SCHED_OTHER, os.sched_param(0))
        except OSError as exc:  # unprivileged, RLIMIT_NICE 0: the call ends when it can
            log.info("the embedding slice stays at idle priority (%s)", exc)
            return False
        return True

    def close(self) -> None:
        """End the thread after the call it is running (a later run() starts a new one)."""
        with self._lock:
            thread, self._thread = self._thread, None
            calls = self._calls
        if thread is not None:
            calls.put(_STOP)

    def _serve(self, started: Future[bool], calls: queue.SimpleQueue[Any]) -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError as exc:  # (a container's seccomp policy, say)
            log.info("embedding at normal priority: SCHED_IDLE refused (%s)", exc)
            self.supported = False
            started.set_result(False)
            return
        self._native_id = threading.get_native_id()
        started.set_result(True)
        while True:
            item = calls.get()
            if item is _STOP:
                return
            call, args, done = item
            try:
                done.set_result(call(*args))
            except BaseException as exc:  # handed to the caller, whatever it is
                done.set_exception(exc)
