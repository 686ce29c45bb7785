"""Whether async code that drives the library leaves the event loop free (the async manager
and every adapter are called from async code and must never block the loop).

:func:`watch_loop` runs the work beside a 5 ms ticker on the loop and watches every public
:class:`~memlane.SessionManager` method while it runs. :meth:`LoopReport.assert_free` then
checks, without a tight clock:

- no library call ran on the loop's own thread (the work was handed to threads);
- the loop was free while each library call ran in another thread: every call, before it
  runs, asks the loop to answer (``call_soon_threadsafe``) and waits up to
  :data:`ANSWER_ALLOWANCE` for it. A loop that waits for the call (``future.result()`` on
  its own thread, a lock the call holds) cannot answer until the call is over, so the call
  is recorded as blocking; a free loop answers in milliseconds, even on a loaded machine.
  This replaced counting the ticker's ticks during library calls, which depended on timing:
  calls shorter than the interpreter's 5 ms switch interval hold the GIL to their end, so
  the tick lands just after them — a fresh-clone CI run got 0 ticks in 0.044 s of calls
  with a free loop (2026-11-27);
- no single stall passed :data:`STALL_ALLOWANCE`, a guard against a pathological stall
  rather than a speed target (a free loop's worst stall was ~10 ms on an idle 2-core
  machine, up to 0.9 s with two busy loops beside the tests; bench/speed_targets.py
  measures it against the 0.1 s the tests once asserted).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memlane import SessionManager

__all__ = ["ANSWER_ALLOWANCE", "STALL_ALLOWANCE", "LoopReport", "watch_loop"]

TICK = 0.005
#: the longest single stall of the loop tolerated (a hang or pathological stall, not speed)
STALL_ALLOWANCE = 5.0
#: how long a library call waits for the loop to answer before calling the loop blocked (s);
#: a free loop answers in milliseconds, one waiting for the call never does
ANSWER_ALLOWANCE = 5.0


@dataclass
class LoopReport:
    busy: float  # how long the work took (s)
    gaps: list[float]  # between consecutive ticks, the work's start and end included (s)
    ticks_in_library: int  # ticks while a SessionManager call was in progress
    on_loop: list[str] = field(default_factory=list)  # methods called on the loop's thread
    blocking: list[str] = field(default_factory=list)  # called while the loop waited for them

    @property
    def worst(self) -> float:
        """The loop's longest stall (s): the longest gap between ticks, less the tick."""
        return max(0.0, max(self.gaps) - TICK)

    def assert_free(self) -> None:
        summary = (
            f"{self.busy:.2f} s of work, {len(self.gaps) - 1} ticks, "
            f"{self.ticks_in_library} during library calls, worst stall {self.worst:.3f} s"
        )
        print(f"event loop: {summary}")  # (shown with -s, or beside a failure)
        assert not self.on_loop, f"called on the event loop's thread: {sorted(set(self.on_loop))}"
        assert not self.blocking, (
            f"the loop waited for library calls and could not answer within "
            f"{ANSWER_ALLOWANCE} s: {sorted(set(self.blocking))}; {summary}"
        )
        assert self.worst < STALL_ALLOWANCE, f"the loop stalled: {summary}"


class _Calls:
    """SessionManager calls in progress, those made on the loop's thread, and those the loop
    waited for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, loop_thread: int) -> None:
        self.loop = loop
        self.loop_thread = loop_thread
        self.running = 0
        self.on_loop: list[str] = []
        self.blocking: list[str] = []
        self._lock = threading.Lock()

    def wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def watched(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == self.loop_thread:
                self.on_loop.append(name)
            elif not self._loop_answers():
                self.blocking.append(name)
            with self._lock:
                self.running += 1
            try:
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.running -= 1

        return watched

    def _loop_answers(self) -> bool:
        answered = threading.Event()
        try:
            self.loop.call_soon_threadsafe(answered.set)
        except RuntimeError:  # the loop has closed: it waits for nothing
            return True
        return answered.wait(ANSWER_ALLOWANCE)


@contextlib.contextmanager
def _watching_the_library(loop: asyncio.AbstractEventLoop) -> Iterator[_Calls]:
    calls = _Calls(loop, threading.get_ident())
    own = vars(SessionManager)
    replaced: dict[str, Any] = {}
    for name, method in list(own.items()):
        # its functions, and the methods its parts carry (Delegated: called with the manager)
        if not name.startswith("_") and callable(method) and not isinstance(method, type):
            replaced[name] = own.get(name)
            setattr(SessionManager, name, calls.wrap(name, method))
    try:
        yield calls
    finally:
        for name, original in replaced.items():
            if original is None:
                delattr(SessionManager, name)  # inherited: the base class's shows again
            else:
                setattr(SessionManager, name, original)


async def watch_loop(work: Callable[[], Awaitable[object]]) -> LoopReport:
    """Run ``work()`` on the running loop beside a ticker; see the module."""
    marks: list[tuple[float, bool]] = []  # each tick: when, and whether the library worked
    stop = asyncio.Event()
    with _watching_the_library(asyncio.get_running_loop()) as calls:

        async def ticker() -> None:
            while not stop.is_set():
                marks.append((time.perf_counter(), calls.running > 0))
                await asyncio.sleep(TICK)

        # a full garbage collection of the whole run's objects stops every thread now and
        # then: what is measured is whether the work blocks the loop, not that
        gc.collect()
        gc.disable()
        running = asyncio.create_task(ticker())
        try:
            await asyncio.sleep(0)  # the ticker's first tick
            started = time.perf_counter()
            try:
                await work()
            finally:
                ended = time.perf_counter()
                stop.set()
                await running
        finally:
            gc.enable()
    inside = [(when, working) for when, working in marks if started < when < ended]
    moments = [started, *(when for when, _ in inside), ended]
    gaps = [later - earlier for earlier, later in itertools.pairwise(moments)]
    in_library = sum(working for _, working in inside)
    return LoopReport(ended - started, gaps, in_library, calls.on_loop, calls.blocking)
