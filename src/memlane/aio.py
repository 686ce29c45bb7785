"""The asyncio twin of :class:`~memlane.SessionManager`.

:class:`AsyncSessionManager` has the same methods with the same names and signatures, each
awaitable; properties and attributes read the same. It is **off-loading, not a native async
driver**: every call runs the synchronous engine (validation, filters, fusion, packing, the
store's driver) on a bounded pool of worker threads (``max_threads``, default 4), so the event
loop never waits on SQLite, PostgreSQL or the embedding model. The thread pool bounds how many
calls run at once; more wait their turn without blocking the loop.

>>> from memlane import AsyncSessionManager
>>> async def main() -> None:  # doctest: +SKIP
...     async with AsyncSessionManager("researcher", "sessions.db") as mgr:
...         session = await mgr.start_session("Survey sparse attention")
...         await mgr.record_fact(session.id, "RWKV is attention-free")
...         context = await mgr.restore(session.id, max_tokens=2000)

Cancelling an awaiting task does not stop its call: the thread finishes it, and a write that
finishes is durable (as with any database driver that off-loads). Constructing the manager
opens the store in the calling thread (a file open, or a PostgreSQL connect bounded by its
connect timeout); the embedding model loads on first use, in a worker thread.

Its methods are derived from :class:`SessionManager`'s, not written again: every public
method of the manager (but ``close``, which waits for the pool) becomes an awaitable one here
with the same signature and docstring. ``aio.pyi`` declares them for type checkers and IDEs;
it is generated (``python scripts/gen_aio_stub.py``) and a test fails when it is stale.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from .errors import InvalidInput
from .manager import SessionManager

__all__ = ["AsyncSessionManager", "derived_methods"]

T = TypeVar("T")


class AsyncSessionManager:
    """Durable memory for one agent, for asyncio code: :class:`SessionManager`, awaitable.

    Takes :class:`SessionManager`'s parameters, plus ``max_threads``: how many calls may run
    at once in worker threads (each holds at most one database connection).

    >>> mgr = AsyncSessionManager("researcher", url="postgresql://app@db/agents")  # doctest: +SKIP
    >>> hits = await mgr.search("did we turn off 2FA anywhere?")  # doctest: +SKIP
    """

    def __init__(self, *args: Any, max_threads: int = 4, **kwargs: Any) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise InvalidInput(f"max_threads must be a positive int (e.g. 4), not {max_threads!r}.")
        self._sync = SessionManager(*args, **kwargs)
        self._pool = ThreadPoolExecutor(max_threads, thread_name_prefix="memlane-async")
        self._closed = False
        # The manager's public attributes read the same here (agent_id, scope, url, ...).
        for name, value in vars(self._sync).items():
            if not name.startswith("_"):
                setattr(self, name, value)

    async def _run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            # as a closed file does: ValueError (InvalidInput), not the pool's RuntimeError
            raise InvalidInput(f"{self!r} is closed; open a new AsyncSessionManager.")
        # An iterator argument (a generator of events) is drained here, on the caller's
        # thread: it may read state that only that thread should touch.
        args = tuple(list(a) if isinstance(a, Iterator) else a for a in args)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(call, *args, **kwargs))

    async def close(self) -> None:
        """Stop the background worker and close the database (pending embeddings stay queued).

        Calls already submitted finish first; the waiting happens off the event loop.
        Closing twice is allowed."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, self._shutdown)

    def _shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        self._sync.close()

    async def __aenter__(self) -> AsyncSessionManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSessionManager(agent_id={self._sync.agent_id!r}, url={self._sync.url!r})"

    @property
    def sync(self) -> SessionManager:
        """The synchronous manager underneath (same store, same worker), for code that
        runs in a thread of its own."""
        return self._sync


def derived_methods(cls: type = SessionManager) -> dict[str, Any]:
    """The public methods of ``cls`` the twin awaits (by name), in definition order."""
    found: dict[str, Any] = {}
    for name, value in vars(cls).items():
        if name.startswith("_") or name == "close" or isinstance(value, property):
            continue
        if callable(value):
            found[name] = value
    return found


def _awaitable(name: str, method: Any) -> Callable[..., Any]:
    async def call(self: AsyncSessionManager, *args: Any, **kwargs: Any) -> Any:
        return await self._run(getattr(self._sync, name), *args, **kwargs)

    functools.update_wrapper(call, method)
    call.__qualname__ = f"AsyncSessionManager.{name}"
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]
    return call


def _read_through(name: str, prop: property) -> property:
    def read(self: AsyncSessionManager) -> Any:
        return getattr(self._sync, name)

    read.__doc__ = prop.__doc__
    return property(read)


for _name, _method in derived_methods().items():
    setattr(AsyncSessionManager, _name, _awaitable(_name, _method))
for _name, _value in vars(SessionManager).items():
    if isinstance(_value, property) and not _name.startswith("_"):
        setattr(AsyncSessionManager, _name, _read_through(_name, _value))
_init = inspect.signature(SessionManager.__init__)
AsyncSessionManager.__init__.__signature__ = _init.replace(  # type: ignore[attr-defined]
    parameters=[
        *_init.parameters.values(),
        inspect.Parameter(
            "max_threads", inspect.Parameter.KEYWORD_ONLY, default=4, annotation="int"
        ),
    ]
)
