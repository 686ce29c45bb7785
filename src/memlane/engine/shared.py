"""One engine per store in a process, shared by the managers opened on it.

A process that serves many agents opens one :class:`~memlane.SessionManager` per agent.
Each used to open its own engine: its own connection, its own background worker (a thread
each) and its own keyword and vector caches — five managers on one file held five copies of
what the caches of one would hold (docs/decisions/2026-11-28-one-engine-per-store.md). The
engine is already scope-agnostic (a searcher per scope), so managers on the same store with
the same engine settings now share one: :func:`open_engine` hands out the open one and
counts its holders; the last :meth:`Engine.close` closes it.

Shared only where sharing cannot change what a manager sees or writes: the same store
(a SQLite file by its resolved path; a PostgreSQL URL spelt the same, so its role is the
same), the same index, the same embedder object (or the default one), batch size, worker
mode and priority, read-only flag, and the same token counting model. Anything else opens
an engine of its own, as before. Per process: a forked child opens its own.

Not part of the public API.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Hashable
from typing import Any

from ..embed import LoadedEmbedder
from ..protocols import Embedder
from ..store import sqlite_path, store_identity
from .engine import Engine

__all__ = ["open_engine", "shared_engines"]

_LOCK = threading.Lock()
_OPEN: dict[tuple[Hashable, ...], Engine] = {}


def open_engine(
    target: str,
    index: str | None,
    *,
    embedder: Embedder | LoadedEmbedder | None,
    batch_size: int,
    autocheckpoint: bool,
    reindex: bool,
    worker_priority: str,
    read_only: bool,
    model: Any,
) -> Engine:
    """The open engine of this store and these settings in this process, held once more, or
    a new one (registered for the next manager). ``model`` is the manager's token counting
    model: the worker counts deferred events' tokens with it."""
    key = _key(target, index, embedder, batch_size, autocheckpoint, worker_priority, read_only)
    options: dict[str, Any] = dict(
        embedder=embedder,
        batch_size=batch_size,
        autocheckpoint=autocheckpoint,
        reindex=reindex,
        worker_priority=worker_priority,
        read_only=read_only,
    )
    if key is None:
        return Engine(target, index, **options)
    key = (*key, model if isinstance(model, str) else id(model))
    # Opening under the lock: two managers of one store opened at once get one engine. A
    # slow open (a PostgreSQL server that does not answer) holds up only other opens.
    with _LOCK:
        found = _OPEN.get(key)
        if found is not None and found.hold():
            return found
        engine = Engine(target, index, **options)
        engine.on_close.append(lambda: _forget(key, engine))
        _OPEN[key] = engine
        return engine


def shared_engines() -> int:
    """How many shared engines this process has open (tests and benchmarks)."""
    with _LOCK:
        return sum(1 for key in _OPEN if key[0] == os.getpid())


def _forget(key: tuple[Hashable, ...], engine: Engine) -> None:
    with _LOCK:
        if _OPEN.get(key) is engine:
            del _OPEN[key]


def _key(
    target: str,
    index: str | None,
    embedder: Embedder | LoadedEmbedder | None,
    batch_size: int,
    autocheckpoint: bool,
    worker_priority: str,
    read_only: bool,
) -> tuple[Hashable, ...] | None:
    """What two managers must agree on to share an engine; None: never shared (a store
    that is never the same twice, ``:memory:``, or one this cannot tell)."""
    identity = store_identity(target)
    if identity is None:
        return None
    # A SQLite file by its resolved path; a server's URL as written (two passwords or
    # options for one role and database are not merged: they may mean different access).
    store = identity if sqlite_path(target) is not None else target
    # The engine keeps a reference to the embedder object, so its id is not reused while
    # the engine is registered.
    chosen = None if embedder is None else id(embedder)
    return (
        os.getpid(),
        store,
        index,
        chosen,
        batch_size,
        autocheckpoint,
        worker_priority,
        read_only,
    )
