"""Shared fixtures: real SQLite files in tmp_path, the fast deterministic embedder by default."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MEMLANE_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(autouse=True)
def _no_leftover_workers() -> Iterator[None]:
    """Stop the embedding workers a test started and left running (a manager it never
    closed): otherwise they keep polling for the rest of the run, and the tests that measure
    event-loop lateness measure them instead."""
    from memlane import _indexer

    before = set(_indexer._RUNNING)
    yield
    for indexer in set(_indexer._RUNNING) - before:
        indexer.stop(timeout=5.0)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def make_manager(db_path: Path) -> Iterator[object]:
    """Factory: ``make_manager(agent_id, **options)`` with the hash embedder, closed after."""
    opened: list[SessionManager] = []

    def make(agent_id: str = "researcher", **options: object) -> SessionManager:
        options.setdefault("embedder", HashEmbedder())
        options.setdefault("db_path", db_path)
        mgr = SessionManager(agent_id=agent_id, **options)  # type: ignore[arg-type]
        opened.append(mgr)
        return mgr

    yield make
    for mgr in opened:
        mgr.close()


@pytest.fixture
def mgr(make_manager: object) -> SessionManager:
    return make_manager()  # type: ignore[operator,no-any-return]


def child_env() -> dict[str, str]:
    """Environment for child processes: they import the package from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    return env


PYTHON = sys.executable


@pytest.fixture
def keyword_index_in_foreground(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite's in-memory keyword index built by the search that needs it, not in the
    background (where the first searches rank with FTS5): for tests of that index."""
    from memlane.store import _keyword_cache

    original = _keyword_cache.KeywordCache.__init__

    def foreground(self: Any, source: Any, *, background: bool = True, **options: Any) -> None:
        original(self, source, background=False, **options)

    monkeypatch.setattr(_keyword_cache.KeywordCache, "__init__", foreground)
