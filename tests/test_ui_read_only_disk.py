"""memlane ui on a store on a read-only disk (issue 32): every page answers. The disk is a
real read-only filesystem, a tmpfs remounted read-only, as in tests/test_read_only_disk.py
(root only; skipped, saying so, elsewhere)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="memlane ui needs the [ui] extra")

from starlette.testclient import TestClient

from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder
from memlane.ui import Source, create_app
from memlane.ui.security import cookie_name

from .ui_store import build

TOKEN = "disk-token-0123456789"


@pytest.fixture
def frozen_store(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """The test store on a filesystem that is then made read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a read-only filesystem needs root")
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")
    try:
        built = tmp_path / "built.db"
        ids = build(built)
        for file in tmp_path.glob("built.db*"):  # a cleanly closed store (its cache too)
            if file.is_dir():
                shutil.copytree(file, mount / file.name.replace("built", "sessions"))
            else:
                shutil.copy(file, mount / file.name.replace("built", "sessions"))
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        with pytest.raises(OSError):
            (mount / "probe").write_text("x")  # (really read-only, for root too)
        yield mount / "sessions.db", ids
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_every_page_answers_on_a_read_only_disk(
    frozen_store: tuple[Path, dict[str, str]],
) -> None:
    db_path, ids = frozen_store
    admin = StoreAdmin(db_path, embedder=HashEmbedder(), read_only=True)
    app = create_app(Source(admin), token=TOKEN, hosts=["testserver"])
    with TestClient(app) as client:
        client.cookies.set(cookie_name(TOKEN), TOKEN)
        pages = [
            "/sessions",
            "/sessions?q=queue",
            f"/sessions/{ids['main']}",
            f"/sessions/{ids['long']}?page=last",
            "/search?q=Postgres+production",
            "/search?q=Postgres&mode=semantic",
            "/search?q=Postgres&mode=keyword",
            f"/restore?session={ids['main']}&budget=500&budget2=2000",
            "/users?agent=researcher&user=u-42",
            "/knowledge?agent=researcher",
            "/pools",
            "/health",
        ]
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, (page, response.text[-800:])
        assert "Postgres 16" in client.get("/search?q=Postgres+production").text
