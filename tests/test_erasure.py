"""Erasing a user on SQLite (privacy/erasure.py): a canary planted everywhere a user's data goes is
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
from memlane.admin import StoreAdmin
from memlane.core.scope import partition_of
from memlane.errors import StoreReadOnly
from memlane.privacy.erasure import journal_key
from memlane.ranking.snapshot_files import partition_digest
from memlane.testing import HashEmbedder

from .conftest import PYTHON, child_env
from .test_cli import asm

Factory = Callable[..., SessionManager]
CANARY = "zebracanary7f3q"
OTHER = "okapiwitness9k2"


def _raw(db: Path) -> bytes:
    """The bytes of the database, its WAL and every file under its cache folders (of this
    name and the former one)."""
    files = [p for p in db.parent.glob(db.name + "*") if p.is_file()]
    for cache in db.parent.glob(db.name + ".*-cache"):
        files += [p for p in cache.rglob("*") if p.is_file()]
    return b"".join(p.read_bytes() for p in files)


def _cache_files(db: Path) -> list[Path]:
    return sorted(p for p in Path(str(db) + ".memlane-cache").glob("*") if p.is_file())


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
    # snapshot files of an erased partition (they hold stems of the text), a keyword one of
    # another (every keyword snapshot goes: stale once the generation moves), and a vector one
    # of another (kept: it holds nothing of the user)
    cache = Path(str(db_path) + ".memlane-cache")
    cache.mkdir(exist_ok=True)
    doomed = cache / f"keywords-{partition_digest(partition_of('a', None))}.asmkw"
    doomed.write_bytes(CANARY.encode())
    vectors = cache / f"vectors-{partition_digest(partition_of('a', None))}.asmvec"
    vectors.write_bytes(CANARY.encode())
    stale = cache / f"keywords-{partition_digest('agent:nobody')}.asmkw"
    stale.write_bytes(b"unrelated")
    kept = cache / f"vectors-{partition_digest('agent:nobody')}.asmvec"
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
    assert not doomed.exists() and not vectors.exists() and not stale.exists()
    assert kept.exists()


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
    assert len(agent_b.list_sessions(user_id="u1", internal=True)) == 2
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


# A second live process: the keyword index of agent a's partition and of the pool "team"
# built in the background (a few hundred events count as big) and saved; "build" searches
# again (after an erasure, the index is rebuilt and saved again), "close" closes.
_LIVE = """
    import sys
    from memlane import SessionManager
    from memlane.ranking.keyword import cache as keyword_cache
    from memlane.testing import HashEmbedder
    keyword_cache._CHUNK = 32
    mgr = SessionManager(
        "a", sys.argv[1], embedder=HashEmbedder(), background=False, subscribe=["team"]
    )
    for line in sys.stdin:
        if line.strip() == "build":
            mgr.search("what about the weather", k=3, mode="keyword")
            builder = mgr._writer.searcher.store._keywords._builder
            if builder is not None:
                builder.join(60)
            print("built", flush=True)
        elif line.strip() == "close":
            break
    mgr.close()
    print("closed", flush=True)
"""


def _erase(db: Path, user_id: str) -> int:
    """Erase ``user_id`` as `memlane erase-user` would (a store of its own); the sessions."""
    admin = StoreAdmin(db, embedder=HashEmbedder())
    try:
        return admin.erase_user(user_id).sessions
    finally:
        admin.close()


def _ask(child: subprocess.Popen[str], command: str) -> str:
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(command + "\n")
    child.stdin.flush()
    return child.stdout.readline().strip()


def _build_keywords(mgr: SessionManager) -> None:
    mgr.search("what about the weather", k=3, mode="keyword")
    builder = mgr._writer.searcher.store._keywords._builder  # type: ignore[attr-defined]
    if builder is not None:
        builder.join(60)


def test_erased_words_leave_the_snapshots_of_every_live_process(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28, D3: the canary's stem in no file under the cache folder after the erasure,
    although two live processes (this one and a child) had built and saved the keyword index
    with it, and build and save it again after the erasure (their vocabulary still holds it)."""
    from memlane.ranking.keyword import cache as keyword_cache
    from memlane.ranking.keyword.terms import Words

    monkeypatch.setattr(keyword_cache, "_CHUNK", 32)
    stem = Words().stem(CANARY).encode()
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as owner:
        owner.create_pool("team")
    mgr = SessionManager(
        "a", db_path, embedder=HashEmbedder(), background=False, subscribe=["team"]
    )
    try:
        kept = mgr.start_session("ops", user_id="u-keep")
        pool = mgr.start_session("team notes", user_id="u-keep", shared_pool="team")
        gone = mgr.start_session("orders", user_id="u-gone")
        for i in range(200):
            mgr.add_message(kept.id, "user", f"deploy {i} of the staging database, and the weather")
            mgr.add_message(pool.id, "user", f"team note {i} on the login error and the weather")
        for i in range(20):
            mgr.add_message(gone.id, "user", f"my {CANARY} order {i}, and the weather")
        _build_keywords(mgr)  # this process's snapshots
        with subprocess.Popen(
            [PYTHON, "-c", textwrap.dedent(_LIVE), str(db_path)],
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as child:
            try:
                assert _ask(child, "build") == "built"
                assert len(_cache_files(db_path)) >= 2  # both partitions saved
                assert stem in _raw(db_path)  # (the grep finds what is there)
                assert _erase(db_path, "u-gone") == 1
                assert _ask(child, "build") == "built"  # rebuilt after the erasure, saved
                _build_keywords(mgr)  # and here
                assert _ask(child, "close") == "closed"
                assert child.wait(60) == 0
            finally:
                if child.poll() is None:
                    child.kill()
        assert any(p.name.startswith("keywords-") for p in _cache_files(db_path))
        assert mgr.search(CANARY, k=3, mode="keyword") == []
    finally:
        mgr.close()
    assert stem not in _raw(db_path)
    assert b"stage" in _raw(db_path)  # (the others' stems are still saved)


# A process killed while it writes a keyword snapshot: the whole file is in its temporary
# file, not yet renamed.
_KILLED_MID_WRITE = """
    import sys, time
    from memlane import SessionManager
    from memlane.ranking.keyword import cache as keyword_cache
    from memlane.ranking import snapshot_files
    from memlane.testing import HashEmbedder
    keyword_cache._CHUNK = 32
    write = snapshot_files.write_arrays

    def stuck(file, meta, arrays):
        write(file, meta, arrays)
        file.flush()
        print("writing", flush=True)
        time.sleep(600)

    snapshot_files.write_arrays = stuck
    mgr = SessionManager("a", sys.argv[1], embedder=HashEmbedder(), background=False)
    mgr.search("what about the weather", k=3, mode="keyword")
    time.sleep(600)
"""


def _killed_mid_write(db_path: Path) -> list[Path]:
    """Run :data:`_KILLED_MID_WRITE`, kill it, return the temporary files it left."""
    with subprocess.Popen(
        [PYTHON, "-c", textwrap.dedent(_KILLED_MID_WRITE), str(db_path)],
        env=child_env(),
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
        child.kill()
    cache = db_path.parent / (db_path.name + ".memlane-cache")
    legacy = db_path.parent / (db_path.name + ".asm-cache")  # (where versions before it wrote)
    return sorted([*cache.glob("tmp*.tmp"), *legacy.glob("tmp*.tmp")])


def test_a_partial_snapshot_of_a_killed_process_is_removed_at_open(
    make_manager: Factory, db_path: Path
) -> None:
    stem = CANARY.encode()
    mgr = make_manager("a", background=False)
    session = mgr.start_session("orders", user_id="u-gone")
    for i in range(200):
        mgr.add_message(session.id, "user", f"my {CANARY} order {i}")
    mgr.close()
    (orphan,) = _killed_mid_write(db_path)
    assert stem in orphan.read_bytes()
    SessionManager("b", db_path, embedder=HashEmbedder(), background=False).close()
    assert not orphan.exists()


def test_erasure_removes_every_temporary_file_and_open_those_of_dead_writers(
    make_manager: Factory, db_path: Path
) -> None:
    """At open, a temporary file is removed if its writer's process is gone or it has not
    changed for ORPHAN_SECONDS (an older version's name gives no process); a live writer's is
    left. Erasure removes them all (the live writer's save then fails: best effort). The
    folder of the project's former name goes at open."""
    from memlane.ranking.snapshot_files import ORPHAN_SECONDS

    mgr = make_manager("a", background=False)
    mgr.start_session("orders", user_id="u-gone")
    mgr.close()
    cache = Path(str(db_path) + ".memlane-cache")
    cache.mkdir()
    legacy = Path(str(db_path) + ".asm-cache")
    legacy.mkdir()
    (legacy / "keywords-0123.asmkw").write_bytes(CANARY.encode())
    with subprocess.Popen([PYTHON, "-c", "import time; time.sleep(60)"]) as writer:
        try:
            dead = subprocess.run(
                [PYTHON, "-c", "import os; print(os.getpid())"],
                capture_output=True,
                text=True,
                check=True,
            )
            files = {
                "dead writer": cache / f"tmp-{dead.stdout.strip()}-a1.tmp",
                "live writer": cache / f"tmp-{writer.pid}-b2.tmp",
                "old name, recent": cache / "tmpc3d4.tmp",
                "old name, old": cache / "tmpe5f6.tmp",
                "live writer, unchanged for long": cache / f"tmp-{writer.pid}-g7.tmp",
            }
            for path in files.values():
                path.write_bytes(CANARY.encode())
            old = time.time() - ORPHAN_SECONDS - 60
            for name in ("old name, old", "live writer, unchanged for long"):
                os.utime(files[name], (old, old))
            SessionManager("b", db_path, embedder=HashEmbedder(), background=False).close()
            left = sorted(name for name, path in files.items() if path.exists())
            assert left == ["live writer", "old name, recent"]
            assert not legacy.exists()
            reader = SessionManager("b", db_path, embedder=HashEmbedder(), read_only=True)
            reader.close()  # (a read-only open removes nothing)
            assert sorted(name for name, path in files.items() if path.exists()) == left
            assert _erase(db_path, "u-gone") == 1
            assert not any(p.exists() for p in files.values())
        finally:
            writer.kill()
    assert CANARY.encode() not in _raw(db_path)
