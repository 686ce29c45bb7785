"""Erasing a user on SQLite (_erasure.py): a canary planted everywhere a user's data goes is
gone from the raw bytes of the database, its WAL and its snapshot folder; another user's is
not; one agent's erasure leaves other agents' sessions; SIGKILL mid-erasure, then again,
completes it; `memlane erase-user` prints the receipt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memlane import SessionManager
from memlane._erasure import journal_key
from memlane._scope import partition_of
from memlane.admin import StoreAdmin
from memlane.errors import StoreReadOnly
from memlane.store._snapshot_files import partition_digest
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env
from .test_cli import asm

Factory = Callable[..., SessionManager]
CANARY = "zebracanary7f3q"
OTHER = "okapiwitness9k2"


def _raw(db: Path) -> bytes:
    files = [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    cache = db.parent / (db.name + ".asm-cache")
    files += [p for p in cache.glob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


def _plant(mgr: SessionManager, user: str, word: str) -> None:
    """The user's data in every form the library keeps: goal, session metadata, messages,
    a step's payload, a large tool output, a fact, a summary."""
    session = mgr.start_session(f"Help with {word} order", user_id=user, metadata={"ref": word})
    for i in range(30):
        mgr.add_message(session.id, "user", f"message {i} about {word} and the weather")
    mgr.record_step(session.id, f"looked up {word}", result={"note": f"{word} account ok"})
    mgr.record_tool_output(session.id, {"rows": [f"{word} row {i}" for i in range(3000)]})
    mgr.remember(user, f"Prefers the {word} plan", key="plan")
    mgr.summarize(session.id)
    mgr.ingest(text=f"# Upload\n\nThe {word} contract, signed.", name=f"{user}.md", user_id=user)


def test_an_erased_user_leaves_no_bytes_behind(make_manager: Factory, db_path: Path) -> None:
    agent_a = make_manager("a", background=False)
    agent_b = make_manager("b", background=False)
    _plant(agent_a, "u-canary", CANARY)
    _plant(agent_b, "u-canary", CANARY)
    _plant(agent_a, "u-other", OTHER)
    for mgr in (agent_a, agent_b):
        mgr.flush()
        assert mgr.search(CANARY, k=3)
    # a snapshot file of an erased partition (they hold stems of the text) and of another
    cache = Path(str(db_path) + ".asm-cache")
    cache.mkdir(exist_ok=True)
    doomed = cache / f"keywords-{partition_digest(partition_of('a', None))}.asmkw"
    doomed.write_bytes(CANARY.encode())
    kept = cache / f"keywords-{partition_digest('agent:nobody')}.asmkw"
    kept.write_bytes(b"unrelated")
    assert CANARY.encode() in _raw(db_path)

    admin = StoreAdmin(db_path, embedder=HashEmbedder())
    try:
        receipt = admin.erase_user("u-canary")
        assert receipt.sessions == 4  # two task sessions, two memory sessions
        assert receipt.facts == 2 and receipt.events["message"] == 60
        assert receipt.events["summary"] == 2 and receipt.events["tool_output"] == 2
        assert receipt.events["knowledge"] == 2  # the documents ingested for the user
        assert any("backups" in note for note in receipt.unreachable)
        assert admin.sessions(user="u-canary") == []
        assert admin.store.get_meta(journal_key("u-canary")) is None
    finally:
        admin.close()
    for mgr in (agent_a, agent_b):  # reads stop seeing the user
        assert mgr.search(CANARY, k=3) == [] or all(
            CANARY not in hit.event.content for hit in mgr.search(CANARY, k=3)
        )
        assert mgr.facts("u-canary") == []
    assert [f.text for f in agent_a.facts("u-other")] == [f"Prefers the {OTHER} plan"]
    assert [d.name for d in agent_a.documents()] == ["u-other.md"]
    agent_a.close()
    agent_b.close()
    raw = _raw(db_path)
    assert CANARY.encode() not in raw
    assert OTHER.encode() in raw  # (the grep finds what is there)
    assert not doomed.exists() and kept.exists()


def test_one_agent_erases_only_its_own_sessions(make_manager: Factory) -> None:
    agent_a = make_manager("a", background=False)
    agent_b = make_manager("b", background=False)
    for mgr in (agent_a, agent_b):
        session = mgr.start_session("Chat", user_id="u1")
        mgr.add_message(session.id, "user", "hello")
        mgr.remember("u1", "Likes tea")
        mgr.ingest(text="# Notes\n\nTea, twice a day.", name="notes.md")
        mgr.ingest(text="# Notes\n\nTea, twice a day.", name="notes.md", user_id="u1")  # now theirs
        mgr.ingest(text="# Guide\n\nGeneral advice.", name="guide.md")  # nobody's
    receipt = agent_a.erase_user("u1")
    assert receipt.agent_id == "a" and receipt.sessions == 2 and receipt.facts == 1
    assert receipt.events["knowledge"] == 1
    assert [d.name for d in agent_a.documents()] == ["guide.md"]
    assert sorted(d.name for d in agent_b.documents()) == ["guide.md", "notes.md"]
    assert agent_a.list_sessions(user_id="u1") == [] and agent_a.facts("u1") == []
    assert len(agent_b.list_sessions(user_id="u1")) == 2
    assert [f.text for f in agent_b.facts("u1")] == ["Likes tea"]
    assert agent_a.erase_user("u1").sessions == 0  # again: nothing left, nothing fails


_CHILD = """
    import sys
    from memlane.admin import StoreAdmin
    from memlane.testing import HashEmbedder
    admin = StoreAdmin(sys.argv[1], embedder=HashEmbedder())
    admin.store.get_meta("generation")  # (opened, schema checked)
    print("erasing", flush=True)
    admin.erase_user("u-canary")
    print("done", flush=True)
"""


def test_a_killed_erasure_is_completed_by_the_next(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    for n in range(60):
        session = mgr.start_session(f"{CANARY} task {n}", user_id="u-canary")
        mgr.record_many(
            session.id, [{"kind": "message", "content": f"{CANARY} {i}"} for i in range(50)]
        )
    mgr.close()
    outcomes = []
    for delay in (0.0, 0.01, 0.03, 0.06, 0.1):  # into the delete, the scrub, or after
        with subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(_CHILD), str(db_path)],
            env=child_env(),
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            assert child.stdout is not None and child.stdout.readline().strip() == "erasing"
            time.sleep(delay)
            os.kill(child.pid, signal.SIGKILL)
            outcomes.append(child.stdout.read().strip() or "killed")
    admin = StoreAdmin(db_path, embedder=HashEmbedder())
    try:
        admin.erase_user("u-canary")  # completes whatever the killed ones left
        assert admin.sessions(user="u-canary") == []
        assert admin.store.get_meta(journal_key("u-canary")) is None
    finally:
        admin.close()
    assert CANARY.encode() not in _raw(db_path), outcomes
    assert "killed" in outcomes  # (at least one erasure was cut short)


def test_asm_erase_user_prints_a_receipt(make_manager: Factory, db_path: Path) -> None:
    mgr = make_manager("a", background=False)
    session = mgr.start_session("Chat", user_id="u9")
    mgr.add_message(session.id, "user", "hello")
    mgr.close()
    declined = asm(db_path, "erase-user", "u9", input="n\n")
    assert "1 session(s) with 2 event(s)" in declined.output and "Nothing" in declined.output
    done = asm(db_path, "erase-user", "u9", "--yes", "--json")
    assert done.exit_code == 0, done.output
    receipt = json.loads(done.output)
    assert receipt["sessions"] == 1 and receipt["events"] == {"goal": 1, "message": 1}
    text = asm(db_path, "erase-user", "u9", "--yes")
    assert "Erased user 'u9': 0 session(s)" in text.output and "backups" in text.output


def test_a_read_only_manager_cannot_erase(make_manager: Factory, db_path: Path) -> None:
    make_manager("a", background=False).start_session("x", user_id="u1")
    reader = SessionManager("a", db_path, embedder=HashEmbedder(), read_only=True)
    try:
        with pytest.raises(StoreReadOnly):
            reader.erase_user("u1")
    finally:
        reader.close()


def test_the_receipt_is_json(make_manager: Factory) -> None:
    mgr = make_manager("a", background=False)
    mgr.start_session("x", user_id="u1")
    data = mgr.erase_user("u1").to_dict()
    assert json.loads(json.dumps(data))["sessions"] == 1
