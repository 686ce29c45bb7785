"""Every ```python block of README.md and docs/*.md runs as written: a page's blocks in order,
as one script, in a fresh folder, with the real model (what a reader would run).

Pages that name servers keep showing the URLs a reader would use (``postgresql://app@db/
agents``, ``redis://cache:6379/0``); :data:`SERVERS` puts real ones in their place, which the
test starts (tests/servers.py: PostgreSQL with pgvector, ``chroma run``, ``redis-server``).
docs/integrations/*.md have their own runner (tests/integrations/test_docs_examples.py).

A block that cannot run on a test machine (a cloud service, say) starts with the line
``# Not run by the tests: <why>``, which the reader sees too; :data:`NOT_RUN` names every such
block, so the set cannot grow unnoticed. Today it is empty.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from .conftest import REPO, child_env

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
_NOT_RUN = re.compile(r"\A# Not run by the tests: (.+)\n")

#: pages whose blocks need no server
PLAIN = ["README.md", "docs/api.md", "docs/restore.md"]
#: pages whose blocks name servers, and which (the tests' markers)
WITH_SERVERS = {
    "docs/memory.md": ("redis",),
    "docs/backends.md": ("postgres", "chroma"),
    "docs/privacy.md": ("postgres", "redis"),
    "docs/operations.md": ("postgres",),
}
#: what the pages name -> what the test puts in its place, in this order (the whole URLs
#: first; ``@db/agents`` is what is left of a URL a block builds in code)
SERVERS = {
    "postgresql://app:pw@db:5432/agents": "{postgres}",
    "postgresql://owner@db/agents": "{postgres}",
    "postgresql://app@db/agents": "{postgres}",
    "@db/agents": "@{postgres_host}",
    "chroma+http://chroma:8000": "{chroma}",
    "redis://cache:6379/0": "{redis}",
    "start_http_server(9108": "start_http_server({free_port}",  # docs/operations.md, metrics
}
#: the server each placeholder stands for (the markers a page needs)
_NEEDS = {"postgres": "postgres", "postgres_host": "postgres", "chroma": "chroma", "redis": "redis"}
#: (page, why) of every block marked ``# Not run by the tests: ...``; keep it short
NOT_RUN: set[tuple[str, str]] = set()


def page_blocks(page: str) -> list[str]:
    found = _BLOCK.findall((REPO / page).read_text(encoding="utf-8"))
    assert found, f"{page} has no ```python block"
    return found


def blocks(page: str) -> str:
    return "\n".join(block for block in page_blocks(page) if not _NOT_RUN.match(block))


def run(page: str, folder: Path, servers: dict[str, str] | None = None) -> None:
    code = blocks(page)
    for placeholder, real in SERVERS.items():
        if placeholder in code:
            assert servers is not None, f"{page} names {placeholder}: list it in WITH_SERVERS"
            code = code.replace(placeholder, real.format(**servers))
    script = folder / "example.py"
    script.write_text(code, encoding="utf-8")
    env = {**child_env(), "PYTHONWARNINGS": "error::DeprecationWarning:memlane"}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert result.returncode == 0, f"{page}:\n{result.stderr[-3000:]}"


@pytest.mark.real_model
@pytest.mark.parametrize("page", PLAIN)
def test_the_page_runs_as_written(page: str, tmp_path: Path) -> None:
    run(page, tmp_path)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    from .servers import redis_server

    with redis_server() as server:
        yield server.url


@pytest.fixture(scope="module")
def chroma_url() -> Iterator[str]:
    from .servers import chroma_server

    with chroma_server() as url:
        yield url


@pytest.fixture
def page_database(postgres_server_url: str) -> Iterator[str]:
    """A database of the run's PostgreSQL for one page: pages do not share stores (one
    turns on row-level security)."""
    import psycopg

    name = f"memlane_docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield urlunsplit(urlsplit(postgres_server_url)._replace(path=f"/{name}"))
    with psycopg.connect(postgres_server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.real_model
@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=[getattr(pytest.mark, server) for server in servers])
        for page, servers in WITH_SERVERS.items()
    ],
)
def test_the_page_runs_with_its_servers(
    page: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from .servers import free_port

    code = blocks(page)
    named = {
        _NEEDS[field]
        for placeholder, real in SERVERS.items()
        if placeholder in code
        for field in re.findall(r"\{(\w+)\}", real)
        if field in _NEEDS
    }
    assert named == set(WITH_SERVERS[page]), f"{page} names {sorted(named)}: fix WITH_SERVERS"
    servers = {"free_port": str(free_port())}
    if "postgres" in named:
        url = request.getfixturevalue("page_database")
        servers |= {"postgres": url, "postgres_host": url.split("@", 1)[1]}  # host:port/db
    if "chroma" in named:
        servers["chroma"] = request.getfixturevalue("chroma_url")
    if "redis" in named:
        servers["redis"] = request.getfixturevalue("redis_url")
    run(page, tmp_path, servers)


def test_every_page_with_python_blocks_is_run() -> None:
    """A new page's examples cannot be forgotten: every page with a ```python block is in a
    list above (docs/integrations/ has its own runner), and the blocks marked as not run
    are exactly :data:`NOT_RUN`."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    with_blocks = {
        str(path.relative_to(REPO)) for path in pages if _BLOCK.search(path.read_text("utf-8"))
    }
    integrations = {page for page in with_blocks if page.startswith("docs/integrations/")}
    assert integrations, "docs/integrations/ lost its examples?"
    assert with_blocks - integrations == set(PLAIN) | set(WITH_SERVERS)
    marked = {
        (page, match.group(1))
        for page in with_blocks
        for block in page_blocks(page)
        if (match := _NOT_RUN.match(block))
    }
    assert marked == NOT_RUN
    assert len(NOT_RUN) <= 3, "most examples must run: fix the example, not the list"


def test_the_readme_stays_a_front_door() -> None:
    """Issue 29: the reference lives in docs/; README says what it is, how to install it, a
    tour and where to read on."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "## Install" in text
    for page in re.findall(r"\]\((docs/[\w/]+\.md)", text):
        assert (REPO / page).exists(), page
