"""Leases on claimed outbox rows: renewed while their worker embeds, released if it fails.

A worker claims outbox rows for a short lease, so a worker that dies (SIGKILL, a lost host)
leaves nothing stranded for long; while the model runs, a :class:`LeaseKeeper` renews the
lease every third of it, so a live worker's claim never runs out however slow the batch.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from ..errors import StoreError

__all__ = ["LeaseKeeper", "Leased", "held"]

log = logging.getLogger("memlane.store")


class LeaseKeeper:
    """Calls ``renew()`` every ``lease / 3`` seconds until :meth:`stop`."""

    def __init__(self, renew: Callable[[], None], lease: float) -> None:
        self._renew = renew
        self._interval = lease / 3
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._renew_until_stopped, name="asm-outbox-lease", daemon=True
        )
        self._thread.start()

    def _renew_until_stopped(self) -> None:
        while not self._stopped.wait(self._interval):
            try:
                self._renew()
            except Exception as exc:  # a missed renewal only lets the lease run out
                log.debug("could not renew an outbox lease: %s", exc)

    def stop(self) -> None:
        # Not joined: a renewal in flight changes nothing once the batch is stored or
        # released (it only touches rows still claimed by that batch).
        self._stopped.set()


class Leased(Protocol):
    """A claimed batch: its rows, whether its vectors were stored, and its lease's verbs."""

    @property
    def rows(self) -> Sequence[object]: ...
    @property
    def finished(self) -> bool: ...
    def renew(self) -> None: ...
    def release(self) -> None: ...


@contextlib.contextmanager
def held(batch: Leased, lease: float) -> Iterator[None]:
    """Keep ``batch``'s lease while the block runs; if the block did not store its vectors
    (the model failed, an index was down), hand the rows back at once — and if even that
    fails, the lease runs out by itself."""
    if not batch.rows:
        yield
        return
    keeper = LeaseKeeper(batch.renew, lease)
    try:
        yield
    finally:
        keeper.stop()
        if not batch.finished:
            with contextlib.suppress(StoreError):
                batch.release()
