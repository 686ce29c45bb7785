"""Several real processes on one database file: the two-run check, SIGKILL, concurrency."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env


def run_child(code: str, *args: str, timeout: float = 300) -> str:
    result = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=timeout,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


FIRST_RUN = """
    import sys
    from memlane import SessionManager

    with SessionManager(agent_id="researcher", db_path=sys.argv[1]) as mgr:
        session = mgr.start_session(goal="Audit the staging environment's security settings")
        mgr.record_step(session.id, step="listed staging accounts", tool="admin_api",
                        result={"accounts": 14})
        mgr.record_step(session.id, step="checked the password policy", result="min length 12")
        mgr.record_decision(session.id, text="review service accounts before human ones")
        mgr.add_pending(session.id, "rotate the CI deploy key")
        mgr.record_tool_output(session.id,
            "Disabled two-factor authentication for the test account qa-bot "
            "so the e2e suite can log in.",
            tool="admin_api")
        mgr.record_fact(session.id, "the staging database runs PostgreSQL 16")
        mgr.add_message(session.id, "user", "please also look at the firewall rules")
        print(session.id)
"""

SECOND_RUN = """
    import json, sys
    from memlane import SessionManager

    with SessionManager(agent_id="researcher", db_path=sys.argv[1]) as mgr:
        context = mgr.restore(sys.argv[2], max_tokens=800)
        hits = mgr.semantic_search("did we turn off 2FA anywhere?", k=3)
        print(json.dumps({"text": context.text, "tokens": context.token_count,
                          "top": hits[0].event.content, "kind": hits[0].event.kind}))
"""


@pytest.mark.real_model
def test_two_runs_in_two_processes(db_path: Path) -> None:
    session_id = run_child(FIRST_RUN, str(db_path)).strip()
    out = json.loads(run_child(SECOND_RUN, str(db_path), session_id))
    assert out["tokens"] <= 800
    assert "Audit the staging environment's security settings" in out["text"]
    assert "rotate the CI deploy key" in out["text"]
    assert out["kind"] == "tool_output"
    assert "two-factor authentication" in out["top"]


CRASHY_WRITER = """
    import sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    mgr = SessionManager(agent_id="crashy", db_path=sys.argv[1], embedder=HashEmbedder())
    session = mgr.start_session("write until killed")
    print("session", session.id, flush=True)
    i = 0
    while True:
        event = mgr.record_fact(session.id, f"fact number {i} about topic {i % 17}",
                                payload={"i": i, "blob": "x" * (i % 500)})
        print("ack", event.id, flush=True)  # printed only after record() returned
        i += 1
"""


@pytest.mark.slow
def test_sigkill_loses_no_acknowledged_event(db_path: Path) -> None:
    rng = random.Random(1234)
    acknowledged: list[str] = []
    for _ in range(4):
        with subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(CRASHY_WRITER), str(db_path)],
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        ) as child:
            assert child.stdout is not None
            # the kill comes 0.5-2 s into the writing, counted from the session's start: on
            # a loaded machine the child's start-up alone took longer (10 acks in 4 runs)
            wait = rng.uniform(0.5, 2.0)
            deadline: float | None = None
            for line in child.stdout:
                kind, value = line.split()
                if kind == "ack":
                    acknowledged.append(value)
                if kind == "session":
                    deadline = time.monotonic() + wait
                if deadline is not None and time.monotonic() > deadline:
                    break
            os.kill(child.pid, signal.SIGKILL)
            rest = child.stdout.read()  # acks written before the kill still count
            acknowledged.extend(
                line.split()[1] for line in rest.splitlines() if line.startswith("ack ")
            )
    assert len(acknowledged) > 100

    with sqlite3.connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {row[0] for row in conn.execute("SELECT id FROM events")}
    assert set(acknowledged) <= stored

    with SessionManager("crashy", db_path, embedder=HashEmbedder()) as mgr:
        mgr.flush()  # the outbox catches up whatever the killed writers left pending
        assert mgr.pending_embeddings() == 0
        with sqlite3.connect(db_path) as conn:
            vectors = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
            fts = conn.execute("SELECT count(*) FROM events_fts").fetchone()[0]
        assert vectors == len(stored) == fts
        probe = rng.choice(acknowledged)
        content = mgr.get_event(probe).content
        # Deep enough for every tie at the top: each writer repeats the same texts, and the
        # hash embedder gives up to 9 of 6,000 of them the same vector; ties go to the
        # oldest, so at k = 5 a probe from the last writer could rank sixth (seen once).
        hits = mgr.search(content, k=50, mode="semantic")
        # (the vector is stored in half precision: its cosine with itself is 1 to ~1e-4)
        assert hits[0].score == pytest.approx(1.0, abs=1e-3)
        assert probe in {hit.event.id for hit in hits}


CONCURRENT_WRITER = """
    import sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    worker = sys.argv[2]
    with SessionManager(agent_id="agent-" + worker, db_path=sys.argv[1],
                        embedder=HashEmbedder()) as mgr:
        session = mgr.start_session(f"worker {worker}")
        for i in range(500):
            mgr.record_fact(session.id, f"worker {worker} fact {i}")
            if i % 100 == 0:
                mgr.search(f"fact {i}", k=3)  # reads interleaved with writes
        print("done")
"""


@pytest.mark.slow
def test_four_processes_five_hundred_records_each(db_path: Path) -> None:
    SessionManager("setup", db_path, embedder=HashEmbedder()).close()  # create the schema once
    children = [
        subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(CONCURRENT_WRITER), str(db_path), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for n in range(4)
    ]
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        assert out.strip() == "done" and "locked" not in err
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM events WHERE kind = 'fact'").fetchone()[0] == 2000
        per_agent = dict(conn.execute("SELECT agent_id, count(*) FROM events GROUP BY agent_id"))
    assert per_agent == {f"agent-{n}": 501 for n in range(4)}
    with SessionManager("agent-0", db_path, embedder=HashEmbedder()) as mgr:
        mgr.flush()
        assert mgr.pending_embeddings() == 0
