"""Helpers for testing code that uses memlane, and the backend conformance suite.

``HashEmbedder`` is a deterministic, dependency-free embedder: words that share a stem land
in the same dimensions, so semantic search behaves plausibly, in microseconds, with no model.

>>> from memlane import SessionManager
>>> from memlane.testing import HashEmbedder
>>> mgr = SessionManager("t", "t.db", embedder=HashEmbedder())  # doctest: +SKIP

``BackendConformance`` (needs pytest) is the suite every backend passes: subclass it in a test
module and give it a ``backend`` fixture that returns a :class:`BackendSpec` for a fresh,
empty store (see :mod:`memlane.testing.conformance`)::

    from memlane.testing import BackendConformance, BackendSpec

    class TestMyPostgres(BackendConformance):
        @pytest.fixture
        def backend(self, request):
            return BackendSpec("postgres", url=f"postgresql://me@db/test?schema=t{id(request)}")
"""

from __future__ import annotations

from typing import Any

from ..embed import HashEmbedder

__all__ = ["AsyncBridge", "BackendConformance", "BackendSpec", "HashEmbedder"]


def __getattr__(name: str) -> Any:
    # The suite imports pytest: load it only when asked for.
    if name in ("AsyncBridge", "BackendConformance", "BackendSpec"):
        from . import conformance

        return getattr(conformance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
