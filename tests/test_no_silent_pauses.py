"""No silent pauses (issue 29, item 3): a search never sits embedding a backlog it did not
ask for, and says how much it left to the worker; the command line embeds a backlog itself
with a progress bar (a line when not on a terminal) before the search that needs it."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memlane import Hits, SessionManager
from memlane.testing import HashEmbedder

from .test_cli import asm, ok


class Slow(HashEmbedder):
    """10 ms a text: a model on a busy machine (MiniLM is ~5 ms a text on two cores)."""

    def __call__(self, texts: list[str]) -> Any:
        time.sleep(0.01 * len(texts))
        return super().__call__(texts)


def test_a_search_leaves_a_big_backlog_to_the_worker_and_says_so(tmp_path: Path) -> None:
    with SessionManager("a", tmp_path / "s.db", embedder=Slow()) as mgr:
        sid = mgr.start_session("ingest a long document").id
        mgr.record_many(
            sid,
            [{"kind": "fact", "content": f"paragraph {i} of the handbook"} for i in range(300)]
            + [{"kind": "fact", "content": "the rotation period is ninety days"}],
        )
        hits = mgr.search("rotation period", k=3)
        assert isinstance(hits, Hits)
        # the old catch-up embedded this process's newest 256 first (2.6 s here); now at most
        # a few steps of 16, so most of the backlog is still the worker's
        assert hits.waiting >= 50, hits.waiting
        assert hits[0].event.content == "the rotation period is ninety days"  # by keyword
        mgr.flush()
        assert mgr.search("rotation period", k=3).waiting == 0


def test_a_small_backlog_is_embedded_by_the_search_itself(tmp_path: Path) -> None:
    with SessionManager("a", tmp_path / "s.db", embedder=HashEmbedder()) as mgr:
        sid = mgr.start_session("chat").id
        mgr.add_message(sid, "user", "the deploy key lives in the vault")
        hits = mgr.search("where is the deploy key?", k=1, mode="semantic")
        assert hits.waiting == 0 and "vault" in hits[0].event.content


@pytest.mark.parametrize("command", [["search", "handbook"], ["restore", "SID"]])
def test_the_command_line_embeds_a_backlog_first_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.setenv("MEMLANE_EMBEDDER", "hash")
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("read the handbook").id
        mgr.record_many(
            sid, [{"kind": "fact", "content": f"handbook page {i}"} for i in range(200)]
        )
    result = ok(asm(db, *[sid if part == "SID" else part for part in command]))
    assert "Embedded 201 event(s)" in result.stderr  # the goal too
    again = ok(asm(db, *[sid if part == "SID" else part for part in command]))
    assert "Embedded" not in again.stderr


class SlowCalls(HashEmbedder):
    """0.15 s a call, however few its texts (a model's fixed cost on a loaded machine); the
    background worker is held inside its first batch, so only searches embed."""

    def __init__(self) -> None:
        super().__init__()
        self.worker_in = threading.Event()
        self.release = threading.Event()

    def __call__(self, texts: list[str]) -> Any:
        if threading.current_thread().name.startswith("session-manager-i"):  # the worker
            self.worker_in.set()
            self.release.wait(60)
        else:
            time.sleep(0.15)
        return super().__call__(texts)


def test_a_search_embeds_the_agents_last_short_lines_in_one_step(tmp_path: Path) -> None:
    """Read-your-writes on a loaded machine: one embedding call per event let only the
    newest one or two of an agent's last lines in before the deadline (the rest found by
    keyword only, so a fact said a moment ago could lose to a step said after it). Short
    events are embedded together, in the first step, which is always taken."""
    embedder = SlowCalls()
    with SessionManager("a", tmp_path / "s.db", embedder=embedder) as mgr:
        try:
            sid = mgr.start_session("Find why the nightly payment export fails").id
            assert embedder.worker_in.wait(30)
            mgr.record(sid, "fact", "The export job runs at 02:00 UTC against the replica")
            mgr.record(sid, "decision", "Rerun the export against the primary database")
            mgr.record_step(sid, "read the job log", result={"error": "timeout after 300s"})
            mgr.add_message(sid, "user", "Is it fixed?")
            mgr.add_pending(sid, "raise the replica statement timeout")
            hits = mgr.search("when does the export job run?", k=3)
            assert hits.waiting == 0
            assert hits[0].event.kind == "fact" and set(hits[0].ranks) == {"keyword", "semantic"}
        finally:
            embedder.release.set()
