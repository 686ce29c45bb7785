"""The manager's operations observed: their latency in its :class:`~memlane.metrics.
Metrics` and a span from its :class:`~memlane.tracing.Tracing`, when it has them.

Not part of the public API.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from functools import wraps
from typing import Any, TypeVar, cast

from ..metrics import Metrics
from ..tracing import Tracing

__all__ = ["observed"]

F = TypeVar("F", bound=Callable[..., Any])

#: calls whose first argument is a session id (or key); the rest name it ``session_id=``
_SESSION_FIRST = frozenset({"record", "record_many", "restore", "clear_session", "delete_session"})


def observed(call: str) -> Callable[[F], F]:
    """A manager method observed as ``call`` (``self._metrics``, ``self._tracing``,
    ``self._backend``, ``self.agent_id``); free when it has neither."""

    def wrap(method: F) -> F:
        @wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            metrics: Metrics | None = self._metrics
            tracing: Tracing | None = self._tracing
            if metrics is None and tracing is None:
                return method(self, *args, **kwargs)
            started = time.perf_counter()
            ok = False
            try:
                with _span(tracing, call, self, args, kwargs) as span:
                    result = method(self, *args, **kwargs)
                    if span is not None and call in ("search", "restore"):
                        Tracing.results(span, result)
                ok = True
                return result
            finally:
                if metrics is not None:
                    metrics.observe(call, self._backend, time.perf_counter() - started, ok)

        return cast(F, run)

    return wrap


def _span(
    tracing: Tracing | None, call: str, manager: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if tracing is None:
        return nullcontext()
    session = args[0] if call in _SESSION_FIRST and args else kwargs.get("session_id")
    query = args[0] if call == "search" and args else kwargs.get("query")
    return tracing.span(
        call,
        backend=manager._backend,
        agent_id=manager.agent_id,
        session_id=session if isinstance(session, str) else None,
        query=query if isinstance(query, str) else None,
    )
