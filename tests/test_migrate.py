"""`memlane migrate`: every backend to every other, losslessly, streaming, resumable."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from memlane import SessionManager
from memlane.admin import StoreAdmin, json_line
from memlane.cli import cli
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env


@pytest.fixture(autouse=True)
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")
    for name in ("MEMLANE_DB", "MEMLANE_AGENT", "MEMLANE_INDEX"):
        monkeypatch.delenv(name, raising=False)


def build(url: str, sessions: int = 3, events: int = 20) -> None:
    with SessionManager("researcher", url=url, embedder=HashEmbedder(), background=False) as mgr:
        for s in range(sessions):
            session = mgr.start_session(
                f"goal {s}", metadata={"n": s}, shared_pool="team" if s == 1 else None
            )
            for i in range(events):
                mgr.record_step(session.id, f"step {i} of {s}", result={"i": i, "ü": [1.5]})
            mgr.add_pending(session.id, f"todo {s}")
            mgr.record_error(session.id, f"error {s}", resolved=s % 2 == 0)
        mgr.search("step 3", k=3)  # recall counts travel too
    with SessionManager("writer", url=url, embedder=HashEmbedder(), background=False) as mgr:
        mgr.end_session(mgr.start_session("writer's").id, status="abandoned")


def export(url: str, index: str | None = None) -> list[str]:
    with StoreAdmin(url=url, index=index, embedder=HashEmbedder()) as admin:
        return [json_line(record) for record in admin.export()]


def migrate(*args: str) -> None:
    result = CliRunner().invoke(cli, ["migrate", *args])
    assert result.exit_code == 0, result.output
    assert "Copied" in result.output


@pytest.mark.postgres
@pytest.mark.chroma
def test_round_trip_through_every_backend(tmp_path: Path, postgres_url: str) -> None:
    source = f"sqlite:///{tmp_path}/source.db"
    build(source)
    original = export(source)
    pg = f"{postgres_url}?schema=migrated"
    migrate("--from", source, "--to", pg, "--embed")
    assert export(pg) == original
    chroma = f"chroma:///{tmp_path}/vectors"
    back = f"sqlite:///{tmp_path}/back.db"
    migrate("--from", pg, "--to", back, "--to-index", chroma, "--embed")
    assert export(back, chroma) == original
    with StoreAdmin(url=back, index=chroma, embedder=HashEmbedder()) as admin:
        stats = admin.stats()
        assert stats.vectors == stats.events and stats.pending_embeddings == 0
        assert admin.search("step 7 of 2", k=1, mode="semantic")[0].event.content == "step 7 of 2"
    migrate("--from", back, "--from-index", chroma, "--to", pg)  # again: nothing new
    assert export(pg) == original


def test_migrate_refuses_a_missing_source(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["migrate", "--from", str(tmp_path / "nope.db"), "--to", str(tmp_path / "x.db")]
    )
    assert result.exit_code == 1 and "does not exist" in result.output


@pytest.mark.slow
def test_an_interrupted_migration_resumes(tmp_path: Path) -> None:
    source = tmp_path / "source.db"
    build(f"sqlite:///{source}", sessions=4, events=1_500)
    target = tmp_path / "target.db"
    command = [PYTHON, "-m", "memlane", "migrate", "--from", str(source)]
    command += ["--to", str(target)]
    env = {**child_env(), "MEMLANE_EMBEDDER": "hash"}
    total = 4 * 1_503 + 1
    child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    copied = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if target.exists():
            try:
                with sqlite3.connect(f"file:{target}?mode=ro", uri=True) as conn:
                    copied = conn.execute("SELECT count(*) FROM events").fetchone()[0]
            except sqlite3.OperationalError:  # the schema is being created
                copied = 0
            if copied >= 500:
                break
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert 0 < copied < total, "the migration was not interrupted mid-way"
    # run it again: it skips what is there and copies the rest
    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "already in the target were skipped" in rerun.stdout
    assert export(str(target)) == export(str(source))
    with StoreAdmin(target, embedder=HashEmbedder()) as admin:
        assert admin.stats().pending_embeddings == admin.stats().events
