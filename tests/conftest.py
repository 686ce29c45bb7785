"""Shared fixtures: real SQLite files in tmp_path, the fast deterministic embedder by default."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

from .servers import postgres_server

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MEMLANE_SHARED_DIR", REPO.parent / "shared"))


@pytest.fixture(autouse=True)
def _no_leftover_workers() -> Iterator[None]:
    """Stop the embedding workers a test started and left running (a manager it never
    closed): otherwise they keep polling for the rest of the run, and the tests that measure
    event-loop lateness measure them instead."""
    from memlane.engine import indexer as indexer_module

    before = set(indexer_module._RUNNING)
    yield
    for indexer in set(indexer_module._RUNNING) - before:
        indexer.stop(timeout=5.0)


# -- PostgreSQL: one server for the whole run ----------------------------------------------

_RUN = uuid.uuid4().hex[:8]  # (MEMLANE_TEST_POSTGRES_URL may name a server that outlives us)


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """The run's one PostgreSQL server (tests/servers.py, or MEMLANE_TEST_POSTGRES_URL: a
    user that may create databases there). Tests take :func:`postgres_url`."""
    with postgres_server() as url:
        yield url


@pytest.fixture(scope="module")
def postgres_url(postgres_server_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of its own for each test module, on the run's one server: what a server
    per module gave before (issue 29: ~15 PostgreSQL start-ups a run), at the cost of a
    ``CREATE DATABASE``. The module's tests keep apart in it as they did (a schema each, or
    a fixed name one test owns). Dropped afterwards, with any connection left open."""
    import psycopg

    module = Path(str(request.node.path)).with_suffix("")
    stem = re.sub(r"[^a-z0-9]+", "_", "_".join(module.parts[-2:]).lower())
    name = f"memlane_{_RUN}_{stem}"[:63]
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield urlunsplit(urlsplit(postgres_server_url)._replace(path=f"/{name}"))
    with (
        contextlib.suppress(psycopg.Error),
        psycopg.connect(postgres_server_url, autocommit=True) as admin,
    ):
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- SQLite -----------------------------------------------------------------------------------


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
    from memlane.ranking.keyword import cache as keyword_cache

    original = keyword_cache.KeywordCache.__init__

    def foreground(self: Any, source: Any, *, background: bool = True, **options: Any) -> None:
        original(self, source, background=False, **options)

    monkeypatch.setattr(keyword_cache.KeywordCache, "__init__", foreground)
