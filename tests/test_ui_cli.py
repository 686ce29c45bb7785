"""``memlane ui`` as a user starts it: the URL with its token on the first line, the page
behind it, a warning for an address other machines reach, Ctrl-C to stop."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")

import httpx

from .conftest import PYTHON, child_env
from .ui_store import build


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db_path = tmp_path_factory.mktemp("ui-cli") / "sessions.db"
    build(db_path)
    return db_path


@contextmanager
def running(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``python -m memlane --embedder hash ui ARGS``; yields it and its first lines."""
    process = subprocess.Popen(
        [PYTHON, "-m", "memlane", "--embedder", "hash", "ui", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline().strip()]
        if lines[0].startswith("http"):
            lines.append(process.stdout.readline().strip())
        yield process, lines
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def test_the_first_line_is_the_url_with_its_token(store: Path) -> None:
    with running("--db", str(store), "--port", "0") as (process, lines):
        url = lines[0]
        assert url.startswith("http://127.0.0.1:") and "/?token=" in url
        assert "read-only" in lines[1]
        base = url.split("/?", 1)[0]
        assert httpx.get(f"{base}/sessions").status_code == 401  # without the token
        with httpx.Client(follow_redirects=True) as browser:
            page = browser.get(url)
            assert page.status_code == 200
            assert "Compare Postgres and SQLite" in page.text
            assert str(page.url).endswith("/sessions")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0


def test_another_address_is_announced_with_a_warning(store: Path) -> None:
    with running("--db", str(store), "--port", "0", "--host", "0.0.0.0") as (_, lines):
        assert lines[0].startswith("http://127.0.0.1:")
        assert lines[1].startswith("Warning: listening on 0.0.0.0")


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    with running("--db", str(tmp_path / "nope.db"), "--port", "0") as (process, lines):
        assert process.wait(timeout=30) == 1
        assert process.stderr is not None
        error = process.stderr.read()
        assert error.startswith("Error: The database") and "Traceback" not in error
        assert lines == [""]


def test_the_token_stays_out_of_reprs(store: Path) -> None:
    from memlane.admin import StoreAdmin
    from memlane.ui import Inspector, Source

    inspector = Inspector(Source(StoreAdmin(store, read_only=True)), port=0)
    try:
        assert inspector.token not in repr(inspector)
        assert inspector.token in inspector.url
    finally:
        inspector.stop()
        inspector.source.close()
