"""Giving memory the worker freed back to the system (glibc's ``malloc_trim``).

glibc gives each thread that allocates its own malloc arena and keeps what is freed in an
arena for that arena's next allocation; it is not returned to the system, nor lent to other
threads. Every embedding worker thread (one per manager, and a ``flush()`` in the caller's)
therefore held on to the high-water mark of its batches' buffers (tokenisation, padded
inputs, vectors, rows) even while idle: five managers on one store in one process peaked
about 1.4 times as high as one manager recording the same, and kept it at rest. Trimming after
the worker's batches and after a ``flush()`` that embedded brings five managers to about 1.2
times one manager's peak (``bench/managers_rss.py``;
docs/decisions/2026-11-27-worker-gives-back-freed-memory.md). ``MALLOC_ARENA_MAX=1`` gave
the same peak but is a process-wide setting the application owns, not a library's.

A trim costs ~1 ms when it has memory to return and ~0.01 ms when not; :class:`HeapTrimmer`
does it at most once per :data:`TRIM_EVERY` seconds while the worker works, and once more
when it has caught up. Elsewhere than glibc (musl, macOS)
there is no ``malloc_trim`` and nothing is done.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

__all__ = ["TRIM_EVERY", "HeapTrimmer", "malloc_trim"]

#: the shortest time between two trims (s): an embedding batch of MiniLM takes ~0.3 s
TRIM_EVERY = 1.0


def _find_malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


#: glibc's ``malloc_trim(pad)``, or None where the C library has none
malloc_trim = _find_malloc_trim()


class HeapTrimmer:
    """Returns freed heap memory to the system, at most once per ``every`` seconds."""

    def __init__(
        self,
        every: float = TRIM_EVERY,
        trim: Callable[[int], int] | None = malloc_trim,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.every = every
        self._trim = trim
        self._clock = clock
        self._last = -every
        self.trims = 0  # how many were made (for tests and health)

    def __call__(self, *, force: bool = False) -> bool:
        """Trim if the last trim is ``every`` seconds old (or ``force``); whether it did."""
        if self._trim is None:
            return False
        now = self._clock()
        if not force and now - self._last < self.every:
            return False
        self._last = now
        self._trim(0)
        self.trims += 1
        return True
