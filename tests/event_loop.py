"""Whether async code that drives the library leaves the event loop free (the async manager
and every adapter are called from async code and must never block the loop).

:func:`watch_loop` runs the work beside a 5 ms ticker on the loop and watches every public
:class:`~memlane.SessionManager` method while it runs. :meth:`LoopReport.assert_free` then
checks, without a tight clock:

- no library call ran on the loop's own thread (the work was handed to threads);
- the loop kept running while the library worked: ticks landed while a library call was
  in progress (in another thread, necessarily: a call on the loop's thread leaves the ticker
  no chance). Work that blocks the loop for the whole operation gets none (measured with
  the off-loading made inline on purpose: 0 ticks during library calls, where a free loop
  got dozens even beside two busy loops). One tick is proof enough, and is asked for only
  when the library's calls lasted :data:`MIN_LIBRARY_TIME` in all: a run whose calls took
  ~0.06 s got 2 ticks and failed the former demand of 3 (a fresh-clone CI, 2026-11-27); a
  call made on the loop's thread is caught by the first check whatever its length;
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

__all__ = ["STALL_ALLOWANCE", "LoopReport", "watch_loop"]

TICK = 0.005
#: the longest single stall of the loop tolerated (a hang or pathological stall, not speed)
STALL_ALLOWANCE = 5.0
#: ticks that must land while the library works: blocked work gets none
MIN_TICKS_IN_LIBRARY = 1
#: the library's calls must have lasted this long in all (s) for a tick to be owed
MIN_LIBRARY_TIME = 8 * TICK


@dataclass
class LoopReport:
    busy: float  # how long the work took (s)
    gaps: list[float]  # between consecutive ticks, the work's start and end included (s)
    ticks_in_library: int  # ticks while a SessionManager call was in progress
    on_loop: list[str] = field(default_factory=list)  # methods called on the loop's thread
    library_time: float = 0.0  # how long at least one SessionManager call was in progress (s)

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
        if self.library_time >= MIN_LIBRARY_TIME:
            assert self.ticks_in_library >= MIN_TICKS_IN_LIBRARY, (
                f"the loop did not run while the library worked "
                f"({self.library_time:.3f} s in library calls): {summary}"
            )
        assert self.worst < STALL_ALLOWANCE, f"the loop stalled: {summary}"


class _Calls:
    """SessionManager calls in progress, and those made on the loop's thread."""

    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.running = 0
        self.on_loop: list[str] = []
        self.busy = 0.0  # how long at least one call was in progress (s)
        self._since = 0.0
        self._lock = threading.Lock()

    def wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def watched(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == self.loop_thread:
                self.on_loop.append(name)
            with self._lock:
                if not self.running:
                    self._since = time.perf_counter()
                self.running += 1
            try:
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.running -= 1
                    if not self.running:
                        self.busy += time.perf_counter() - self._since

        return watched


@contextlib.contextmanager
def _watching_the_library(loop_thread: int) -> Iterator[_Calls]:
    calls = _Calls(loop_thread)
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
    with _watching_the_library(threading.get_ident()) as calls:

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
    return LoopReport(ended - started, gaps, in_library, calls.on_loop, calls.busy)
