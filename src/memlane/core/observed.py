"""The manager's operations observed: their latency in its :class:`~memlane.metrics.
Metrics` and a span from its :class:`~memlane.tracing.Tracing`, when it has them.

Not part of the public API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from functools import wraps
from typing import Any, TypeVar, cast

from ..metrics import Metrics
from ..tracing import Tracing

__all__ = ["Observer", "observed"]

F = TypeVar("F", bound=Callable[..., Any])

#: calls whose first argument is a session id (or key); the rest name it ``session_id=``
_SESSION_FIRST = frozenset({"record", "record_many", "restore", "clear_session", "delete_session"})


@dataclass(frozen=True)
class Observer:
    """Who watches one manager's operations: its metrics and tracing (either may be None),
    and the labels they carry."""

    agent_id: str
    backend: str
    metrics: Metrics | None = None
    tracing: Tracing | None = None


def observed(call: str) -> Callable[[F], F]:
    """A method observed as ``call`` through its object's ``_observer`` (an
    :class:`Observer`); free when that has neither metrics nor tracing."""

    def wrap(method: F) -> F:
        @wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            observer: Observer = self._observer
            metrics, tracing = observer.metrics, observer.tracing
            if metrics is None and tracing is None:
                return method(self, *args, **kwargs)
            started = time.perf_counter()
            ok = False
            try:
                with _span(tracing, call, observer, args, kwargs) as span:
                    result = method(self, *args, **kwargs)
                    if span is not None and call in ("search", "restore"):
                        Tracing.results(span, result)
                ok = True
                return result
            finally:
                if metrics is not None:
                    metrics.observe(call, observer.backend, time.perf_counter() - started, ok)

        return cast(F, run)

    return wrap


def _span(
    tracing: Tracing | None,
    call: str,
    observer: Observer,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    if tracing is None:
        return nullcontext()
    session = args[0] if call in _SESSION_FIRST and args else kwargs.get("session_id")
    query = args[0] if call == "search" and args else kwargs.get("query")
    return tracing.span(
        call,
        backend=observer.backend,
        agent_id=observer.agent_id,
        session_id=session if isinstance(session, str) else None,
        query=query if isinstance(query, str) else None,
    )
