"""Helpers for testing code that uses session_manager.

``HashEmbedder`` is a deterministic, dependency-free embedder: words that share a stem land
in the same dimensions, so semantic search behaves plausibly, in microseconds, with no model.

>>> from session_manager import SessionManager
>>> from session_manager.testing import HashEmbedder
>>> mgr = SessionManager("t", "t.db", embedder=HashEmbedder())  # doctest: +SKIP
"""

from __future__ import annotations

from .embed import HashEmbedder

__all__ = ["HashEmbedder"]
