"""Large events on the SQLite store: what record() leaves to the worker (``engine/digests.py``) and
what every read sees meanwhile. The conformance suite checks the same on every backend."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.core.canonical_json import dumps
from memlane.records.validate import DIGEST_INLINE_CHARS
from memlane.text.tokens import tokenizer_for

Factory = Callable[..., SessionManager]


def rows(n: int, *, odd: int | None = None) -> dict[str, object]:
    found = [{"id": i, "host": f"db-{i % 40}.internal", "status": "ok"} for i in range(n)]
    if odd is not None:
        found[odd]["status"] = "CRITICAL disk full"
    return {"rows": found}


def deferred(db_path: Path) -> int:
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute("SELECT count(*) FROM events WHERE deferred").fetchone()[0])


def test_the_background_worker_digests_large_events(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager(background=True)
    session = mgr.start_session("nightly checks")
    output = mgr.record_tool_output(session.id, rows(5_000, odd=4_000), tool="df")
    exact = tokenizer_for("gpt-4o").count
    estimate = output.token_count  # from a sample, on the caller's path
    deadline = time.monotonic() + 20
    while deferred(db_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert deferred(db_path) == 0  # no flush(): the worker did it
    digested = mgr.get_event(output.id)
    with sqlite3.connect(db_path) as conn:
        payload_json, preview = conn.execute(
            "SELECT lp.payload, e.payload_preview FROM events e "
            "JOIN large_payloads lp ON lp.seq = e.seq WHERE e.id = ?",
            (output.id,),
        ).fetchone()
    assert digested.token_count == exact(output.content) + exact(payload_json)
    assert abs(estimate - digested.token_count) < 0.05 * digested.token_count
    assert preview is not None and "CRITICAL disk full" in preview


def test_a_large_unindexed_event_is_digested_but_never_searched(
    mgr: SessionManager, db_path: Path
) -> None:
    session = mgr.start_session("crawl")
    dump = "pelican " * (DIGEST_INLINE_CHARS // 4)
    bulky = mgr.record(session.id, "tool_output", dump, index=False)
    mgr.flush()
    assert deferred(db_path) == 0
    assert mgr.get_event(bulky.id).token_count == tokenizer_for("gpt-4o").count(dump)
    assert mgr.search("pelican", k=3, mode="keyword") == []
    with sqlite3.connect(db_path) as conn:
        indexed = conn.execute(
            "SELECT count(*) FROM events_fts WHERE rowid = ?", (bulky.seq,)
        ).fetchone()
    assert indexed == (0,)


def test_record_many_defers_its_large_items_only(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager(background=False)  # the digest waits for flush()
    session = mgr.start_session("batch")
    small, big = mgr.record_many(
        session.id,
        [
            {"kind": "fact", "content": "the disk is 80% full"},
            {"kind": "tool_output", "content": "df output", "payload": rows(3_000)},
        ],
    )
    assert deferred(db_path) == 1
    assert small.token_count == tokenizer_for("gpt-4o").count("the disk is 80% full")
    mgr.flush()
    assert deferred(db_path) == 0 and mgr.get_event(big.id).payload == rows(3_000)


def test_the_returned_payload_is_the_stored_one_not_the_callers_object(
    mgr: SessionManager,
) -> None:
    session = mgr.start_session("outputs")
    output = rows(3_000)
    event = mgr.record_tool_output(session.id, output, tool="sql")
    output["rows"].clear()  # type: ignore[attr-defined]
    assert event.payload == mgr.get_event(event.id).payload == rows(3_000)
    shaped = mgr.record_step(session.id, "listed", result=(1, 2, 3))  # a tuple: JSON's list
    assert shaped.payload == {"result": [1, 2, 3]} == mgr.get_event(shaped.id).payload


def test_a_failing_token_counter_never_blocks_the_queue(
    make_manager: Factory, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A deferred event whose digest fails (here the manager's token counter, only on
    megabytes) is finished anyway, with an estimate: the queue behind it moves on."""

    def counter(text: str) -> int:
        if len(text) > 100_000:
            raise RuntimeError("counter down")
        return len(text) // 4

    mgr = make_manager(background=False, model=counter)
    session = mgr.start_session("outputs")
    first = mgr.record_tool_output(session.id, rows(9_000), tool="sql")
    second = mgr.record_tool_output(session.id, rows(1_000), tool="sql")
    with caplog.at_level("WARNING", logger="memlane.deferred"):
        mgr.flush()
    assert deferred(db_path) == 0 and "counter down" in caplog.text
    assert mgr.get_event(first.id).token_count > 0
    assert (
        mgr.get_event(second.id).token_count
        == len(second.content) // 4 + len(dumps(rows(1_000))) // 4
    )
