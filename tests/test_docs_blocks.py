"""Every ```python block of README.md and the docs pages below runs as written: a page's blocks
in order, as one script, in a fresh folder, with the real model (what a reader would run).
Placeholders for servers (``redis://cache:6379/0``) point at real ones the test starts.
docs/integrations/*.md have their own runner (tests/integrations/test_docs_examples.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO, child_env

_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

#: pages whose blocks need no server
PLAIN = ["README.md", "docs/api.md", "docs/restore.md"]
#: pages whose blocks name a Redis server as ``redis://cache:6379/0``
WITH_REDIS = ["docs/memory.md"]


def blocks(page: str) -> str:
    found = _BLOCK.findall((REPO / page).read_text(encoding="utf-8"))
    assert found, f"{page} has no ```python block"
    return "\n".join(found)


def run(page: str, folder: Path, **replace: str) -> None:
    code = blocks(page)
    for placeholder, real in replace.items():
        code = code.replace(placeholder, real)
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


@pytest.mark.real_model
@pytest.mark.redis
@pytest.mark.parametrize("page", WITH_REDIS)
def test_the_page_runs_with_its_servers(page: str, tmp_path: Path, redis_url: str) -> None:
    run(page, tmp_path, **{"redis://cache:6379/0": redis_url})


def test_the_readme_stays_a_front_door() -> None:
    """Issue 29: the reference lives in docs/; README says what it is, how to install it, a
    tour and where to read on."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    assert "## Install" in text
    for page in re.findall(r"\]\((docs/[\w/]+\.md)", text):
        assert (REPO / page).exists(), page
