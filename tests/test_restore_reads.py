"""Restore's reads of the log take the indexes made for them (a read that walks every newer
event of a 10k-event session costs ~10x the one that walks an index of what it wants)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.core.seams import EventFilter
from memlane.events import IMPORTANT_FROM
from memlane.store import sqlite as sqlite_store

Factory = Callable[..., SessionManager]


def _important_session(mgr: SessionManager) -> str:
    session = mgr.start_session("Ship the release")
    for i in range(120):
        mgr.add_message(session.id, "user", f"message {i}")
        if i % 10 == 0:
            mgr.record_decision(session.id, f"decision {i}")  # (0.8)
        if i % 15 == 0:
            mgr.record_fact(session.id, f"borderline {i}", importance=IMPORTANT_FROM)
            mgr.record_fact(session.id, f"just under {i}", importance=0.69)
    return session.id


def test_restore_reads_a_sessions_important_events_through_their_index(
    make_manager: Factory, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = make_manager(background=False)
    session_id = _important_session(mgr)
    reads: list[tuple[str, list[Any]]] = []
    read = sqlite_store.SqliteStore._read

    def spy(self: Any, sql: str, params: Any = (), *args: Any, **kwargs: Any) -> Any:
        reads.append((sql, list(params)))
        return read(self, sql, params, *args, **kwargs)

    monkeypatch.setattr(sqlite_store.SqliteStore, "_read", spy)
    context = mgr.restore(session_id, max_tokens=2_000)
    (important_sql, params) = next((s, p) for s, p in reads if "e.importance >=" in s)
    with sqlite3.connect(db_path) as conn:
        plan = " ".join(str(r) for r in conn.execute("EXPLAIN QUERY PLAN " + important_sql, params))
    assert "events_important" in plan and "TEMP B-TREE" not in plan  # (in log order)
    shown = {item.event_id for item in context.report.items if item.section == "important"}
    assert shown  # (the decisions, newest first, are what the section shows)


@pytest.mark.parametrize("threshold", [IMPORTANT_FROM, 0.69, 0.75])
def test_an_importance_filter_keeps_what_it_did(make_manager: Factory, threshold: float) -> None:
    """At the indexed threshold the number is written into the SQL; at any other it is a
    parameter: either way the events are those at or above it, newest first."""
    mgr = make_manager(background=False)
    session_id = _important_session(mgr)
    store = mgr._writer.searcher.store  # type: ignore[attr-defined]
    base = EventFilter(mgr._writer.searcher.scope, session_id=session_id)  # type: ignore[attr-defined]
    found = store.events(replace(base, min_importance=threshold), newest_first=True, limit=25)
    every = store.events(base, newest_first=True)
    assert [e.id for e in found] == [e.id for e in every if e.importance >= threshold][:25]
