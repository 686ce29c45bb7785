"""Deletes while the embedding worker runs, on PostgreSQL: before, 31 of 300 add-then-clear
cycles were aborted as deadlock victims (StoreBusy), because a delete's cascade and the
worker's finish took the same outbox rows in opposite orders. Both now lock them in seq
order first."""

from __future__ import annotations

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

pytestmark = pytest.mark.postgres


def test_clearing_while_the_worker_embeds_never_deadlocks(postgres_url: str) -> None:
    url = postgres_url
    joiner = "&" if "?" in url else "?"
    mgr = SessionManager("a", url=f"{url}{joiner}schema=deadlocks", embedder=HashEmbedder())
    mgr.start_session("chat", key="k")
    for i in range(150):
        turns = [{"kind": "message", "role": "user", "content": f"m {i} {j}"} for j in range(5)]
        mgr.record_many("k", turns)
        assert mgr.clear_session("k", kinds="message") == 5
    assert mgr.health().last_error is None or "deadlock" not in mgr.health().last_error
    mgr.close()
