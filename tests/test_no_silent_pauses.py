"""No silent pauses (issue 29, item 3): a search never sits embedding a backlog it did not
ask for, and says how much it left to the worker; the command line embeds a backlog itself
with a progress bar (a line when not on a terminal) before the search that needs it."""

from __future__ import annotations

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
