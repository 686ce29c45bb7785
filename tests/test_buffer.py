"""The Redis working buffer (buffer.py) against a real `redis-server` on a free port: messages
served from Redis, shared by managers ("hosts"), never stale after this library's writes and
deletes, isolated per agent, and the log answering whenever Redis cannot."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memlane import SessionManager
from memlane.buffer import RedisBuffer, open_buffer
from memlane.errors import InvalidInput, SessionNotFound
from memlane.testing import HashEmbedder

from .servers import RedisServer, free_port, redis_server

pytestmark = pytest.mark.redis

redis = pytest.importorskip("redis")


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with redis_server() as running:
        yield running


@pytest.fixture
def raw(server: RedisServer) -> Iterator[Any]:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def host(server: RedisServer, raw: Any, db_path: Path) -> Iterator[Callable[..., SessionManager]]:
    """``host(agent_id, **buffer_options)``: a manager on the shared SQLite file with a Redis
    buffer of its own (as on another host), closed afterwards."""
    opened: list[SessionManager] = []

    def make(agent_id: str = "assistant", *, subscribe: tuple[str, ...] = (), **options: Any):
        buffer = RedisBuffer(server.url, **options) if options else server.url
        mgr = SessionManager(
            agent_id,
            db_path=db_path,
            embedder=HashEmbedder(),
            background=False,
            subscribe=subscribe,
            buffer=buffer,
        )
        opened.append(mgr)
        return mgr

    yield make
    for mgr in opened:
        mgr.close()


def _behind_its_back(db: Path, session_id: str, text: str) -> None:
    """Change the log without the library: an answer carrying ``text`` came from the log."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE events SET content = ? WHERE session_id = ? AND kind = 'message'",
            (text, session_id),
        )


def _contents(events: list[Any]) -> list[str]:
    return [event.content for event in events]


#: a short-lived message's TTL: the reads that must still see it take milliseconds; 3 s
#: leaves a loaded machine room (issue 29: 0.4 s did not)
_TTL = 3.0


def test_recent_messages_come_from_redis_once_filled(
    host: Callable[..., SessionManager], raw: Any, db_path: Path
) -> None:
    mgr = host()
    session = mgr.start_session("Chat")
    for i in range(5):
        mgr.add_message(session.id, "user" if i % 2 == 0 else "assistant", f"turn {i}")
    first = mgr.recent_messages(session.id, limit=3)  # from the log, which fills the buffer
    assert _contents(first) == ["turn 2", "turn 3", "turn 4"]
    assert raw.llen(f"asm:{{{session.id}}}:messages") == 5
    _behind_its_back(db_path, session.id, "changed in the log")
    again = mgr.recent_messages(session.id, limit=3)
    assert _contents(again) == ["turn 2", "turn 3", "turn 4"]  # Redis answered
    assert again == first  # every field comes back equal (payload, metadata, times, seq)
    assert again[0].role == "user" and again[1].role == "assistant"
    # a session key works too (resolved through the log, then the buffer answers by id)
    keyed = mgr.start_session("Keyed", key="thread-7")
    mgr.add_message(keyed.id, "user", "hello")
    assert _contents(mgr.recent_messages("thread-7")) == ["hello"]


def test_a_message_written_on_one_host_is_read_on_another(
    host: Callable[..., SessionManager], db_path: Path
) -> None:
    writer, reader = host(), host()
    session = writer.start_session("Chat")
    writer.add_message(session.id, "user", "one")
    assert _contents(reader.recent_messages(session.id)) == ["one"]  # filled by the reader
    writer.add_message(session.id, "assistant", "two")  # appended to the buffered list
    writer.record_many(
        session.id,
        [{"kind": "message", "role": "user", "content": "three"}, {"kind": "fact", "content": "x"}],
    )
    _behind_its_back(db_path, session.id, "changed in the log")
    assert _contents(reader.recent_messages(session.id)) == ["one", "two", "three"]


def test_writes_the_buffer_cannot_order_fall_back_to_the_log(
    host: Callable[..., SessionManager],
) -> None:
    mgr = host()
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", "now")
    assert _contents(mgr.recent_messages(session.id)) == ["now"]
    past = datetime.now(timezone.utc) - timedelta(days=1)
    mgr.add_message(session.id, "user", "yesterday", created_at=past)  # older than "now"
    assert _contents(mgr.recent_messages(session.id)) == ["yesterday", "now"]


def test_this_librarys_deletes_reach_the_buffer(host: Callable[..., SessionManager]) -> None:
    mgr, other = host(), host()
    session = mgr.start_session("Chat")
    events = [mgr.add_message(session.id, "user", f"m{i}") for i in range(4)]
    assert _contents(other.recent_messages(session.id)) == ["m0", "m1", "m2", "m3"]
    mgr.delete_event(events[1].id)
    assert _contents(other.recent_messages(session.id)) == ["m0", "m2", "m3"]
    assert mgr.pop_event(session.id, kinds="message") is not None
    assert _contents(other.recent_messages(session.id)) == ["m0", "m2"]
    mgr.record(session.id, "message", "m4", metadata={"slot": "a"})
    mgr.record(session.id, "message", "m5", metadata={"slot": "a"}, replace={"slot": "a"})
    assert _contents(other.recent_messages(session.id)) == ["m0", "m2", "m5"]
    mgr.clear_session(session.id, kinds="message")
    assert other.recent_messages(session.id) == []
    mgr.delete_session(session.id)
    with pytest.raises(SessionNotFound):
        other.recent_messages(session.id)


def _wait_past(moment: datetime | None) -> None:
    """Until the clock has passed ``moment`` (an event's expires_at)."""
    assert moment is not None
    assert _until(lambda: datetime.now(timezone.utc) > moment, seconds=60)


def test_expired_messages_leave_the_buffered_answer(host: Callable[..., SessionManager]) -> None:
    """(issue 29: a 0.4 s TTL left a loaded machine too little time to see the message
    before it expired; the reads before the expiry take milliseconds.)"""
    mgr = host()
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", "kept")
    brief = mgr.add_message(session.id, "user", "code 1234", ttl=_TTL)
    assert _contents(mgr.recent_messages(session.id)) == ["kept", "code 1234"]
    assert brief.expires_at is not None and datetime.now(timezone.utc) < brief.expires_at
    _wait_past(brief.expires_at)
    assert _contents(mgr.recent_messages(session.id)) == ["kept"]
    assert _contents(mgr.recent_messages(session.id, limit=1)) == ["kept"]  # the newest expired


def test_the_buffer_keeps_agents_apart(host: Callable[..., SessionManager]) -> None:
    owner = host("owner")
    private = owner.start_session("Private")
    shared = owner.start_session("Shared", shared_pool="team")
    for session in (private, shared):
        owner.add_message(session.id, "user", "secret plan")
        owner.recent_messages(session.id)  # buffered now
    owner.grant("team", "member")
    stranger, member = host("stranger"), host("member", subscribe=("team",))
    with pytest.raises(SessionNotFound):
        stranger.recent_messages(private.id)
    with pytest.raises(SessionNotFound):
        stranger.recent_messages(shared.id)
    with pytest.raises(SessionNotFound):
        member.recent_messages(private.id)
    assert _contents(member.recent_messages(shared.id)) == ["secret plan"]
    owner.revoke("team", "member")  # the buffer still holds the messages: it must not answer
    with pytest.raises(SessionNotFound):
        member.recent_messages(shared.id)


def test_the_size_bounds_the_list_and_longer_reads_go_to_the_log(
    host: Callable[..., SessionManager], raw: Any
) -> None:
    mgr = host(size=4)
    session = mgr.start_session("Chat")
    for i in range(6):
        mgr.add_message(session.id, "user", f"m{i}")
    assert _contents(mgr.recent_messages(session.id, limit=3)) == ["m3", "m4", "m5"]
    mgr.add_message(session.id, "user", "m6")
    assert raw.llen(f"asm:{{{session.id}}}:messages") == 4
    assert _contents(mgr.recent_messages(session.id, limit=4)) == ["m3", "m4", "m5", "m6"]
    assert len(mgr.recent_messages(session.id, limit=7)) == 7  # more than it holds: the log


def test_a_fill_that_raced_a_write_is_refused(server: RedisServer, raw: Any) -> None:
    buffer = RedisBuffer(server.url)
    try:
        version = buffer.version("s1")
        assert version is not None
        from memlane.core.clock import from_us
        from memlane.events import Event

        event = Event("e1", "s1", "a", "message", "late", from_us(1), seq=1)
        buffer.append("s1", [event])  # a writer committed after the reader's log read
        assert not buffer.fill("s1", version, "a", None, [], complete=True)
        assert buffer.read("s1", 10) is None
        assert buffer.fill("s1", buffer.version("s1") or "", "a", None, [event], complete=True)
        found = buffer.read("s1", 10)
        assert found is not None and [e.content for e in found.messages] == ["late"]
    finally:
        buffer.close()


def test_concurrent_writers_and_readers_never_see_a_gap(
    host: Callable[..., SessionManager], raw: Any
) -> None:
    """Two writers (hosts) and a reader on a third. A message's time is taken before its
    write waits for the lock, so the log is not in commit order: a later commit may sort
    before earlier ones. Every answer is in log order; whatever the buffer holds once the
    writers stop is exactly the log's newest messages; the last answer is the log's."""
    writers = [host(), host()]
    reader = host()
    session = writers[0].start_session("Busy chat")
    stop = threading.Event()
    answers: list[list[str]] = []

    def write(mgr: SessionManager, name: str) -> None:
        for i in range(60):
            mgr.add_message(session.id, "user", f"{name}-{i}")

    def read() -> None:
        while not stop.is_set():
            answers.append([event.id for event in reader.recent_messages(session.id, limit=8)])

    threads = [threading.Thread(target=write, args=(m, f"w{n}")) for n, m in enumerate(writers)]
    watcher = threading.Thread(target=read)
    watcher.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    watcher.join()
    log = reader.events(session.id, kinds=["message"])
    position = {event.id: n for n, event in enumerate(log)}
    assert len(answers) > 10
    for answer in answers:
        places = [position[event_id] for event_id in answer]
        assert places == sorted(set(places)), answer
    held = raw.lrange(f"asm:{{{session.id}}}:messages", 0, -1)
    if held:  # (the last write may have dropped it: then the log answers)
        ids = [entry.split('"id":"', 1)[1].split('"', 1)[0] for entry in held]
        assert ids == [event.id for event in log[-len(ids) :]]
    assert reader.recent_messages(session.id, limit=8) == log[-8:]


def _one_buffered_message(db: Path, buffer: RedisBuffer, text: str) -> tuple[SessionManager, Any]:
    """A manager with ``buffer`` and a session whose one message is buffered."""
    mgr = SessionManager("a", db_path=db, embedder=HashEmbedder(), background=False, buffer=buffer)
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", text)
    assert _contents(mgr.recent_messages(session.id)) == [text]
    return mgr, session


def test_the_log_answers_while_redis_is_down_and_the_buffer_resumes(
    db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer()
    server.start()
    buffer = RedisBuffer(server.url, retry_after=0.3)
    mgr, session = _one_buffered_message(db_path, buffer, "before")
    try:
        server.stop()
        started = time.monotonic()
        mgr.add_message(session.id, "user", "during")  # the log takes it
        for _ in range(20):
            assert _contents(mgr.recent_messages(session.id)) == ["before", "during"]
        assert time.monotonic() - started < 3  # one timeout, then the log without waiting
        assert buffer.error is not None and mgr.health().buffer_error == buffer.error
        assert not mgr.health().ok
        assert "unavailable" in caplog.text
        server.start()  # empty: everything it held is gone
        time.sleep(0.35)
        mgr.add_message(session.id, "user", "after")
        assert _contents(mgr.recent_messages(session.id)) == ["before", "during", "after"]
        assert buffer.error is None and mgr.health().buffer_error is None
        _behind_its_back(db_path, session.id, "changed in the log")
        assert _contents(mgr.recent_messages(session.id)) == ["before", "during", "after"]
    finally:
        mgr.close()
        buffer.close()
        server.stop()


def test_writes_missed_while_redis_stalled_are_dropped_before_it_answers(
    server: RedisServer, raw: Any, db_path: Path
) -> None:
    """Redis stalls (CLIENT PAUSE) but keeps its data: a message written meanwhile never
    reached the buffer, so the host drops that session's entry before serving it again."""
    buffer = RedisBuffer(server.url, retry_after=0.3, timeout=0.2)
    mgr, session = _one_buffered_message(db_path, buffer, "first")
    try:
        # 2 s: the append below must reach the paused Redis, also on a loaded machine
        raw.execute_command("CLIENT", "PAUSE", "2000", "ALL")
        mgr.add_message(session.id, "user", "second")  # the append times out
        assert _contents(mgr.recent_messages(session.id)) == ["first", "second"]  # the log
        # answered once the pause is over (raw has no timeout: this waits for it), well past
        # retry_after; the stale list is still in Redis
        assert raw.llen(f"asm:{{{session.id}}}:messages") == 1
        assert _contents(mgr.recent_messages(session.id)) == ["first", "second"]
        assert raw.llen(f"asm:{{{session.id}}}:messages") == 2  # dropped, then filled again
    finally:
        mgr.close()
        buffer.close()


def test_bad_buffer_options_are_refused(server: RedisServer) -> None:
    with pytest.raises(InvalidInput, match="redis:// URL"):
        open_buffer("memcached://localhost")
    with pytest.raises(InvalidInput, match="size"):
        RedisBuffer(server.url, size=0)
    with pytest.raises(InvalidInput, match="ttl"):
        RedisBuffer(server.url, ttl=timedelta(0))
    with pytest.raises(InvalidInput, match="prefix"):
        RedisBuffer(server.url, prefix="a{b}")


def test_recent_messages_without_a_buffer(make_manager: Callable[..., SessionManager]) -> None:
    mgr = make_manager(background=False)
    session = mgr.start_session("Chat")
    for i in range(3):
        mgr.add_message(session.id, "user", f"m{i}")
    mgr.record_fact(session.id, "not a message")
    assert _contents(mgr.recent_messages(session.id, limit=2)) == ["m1", "m2"]
    with pytest.raises(InvalidInput, match="limit"):
        mgr.recent_messages(session.id, limit=0)


def test_erasing_a_user_drops_their_buffered_messages(
    host: Callable[..., SessionManager], raw: Any
) -> None:
    mgr = host()
    session = mgr.start_session("Chat", user_id="u1")
    mgr.add_message(session.id, "user", "my plan")
    mgr.recent_messages(session.id)
    assert raw.exists(f"asm:{{{session.id}}}:messages")
    receipt = mgr.erase_user("u1")
    assert receipt.buffered_sessions == 1
    assert not raw.exists(f"asm:{{{session.id}}}:messages", f"asm:{{{session.id}}}:head")


def test_a_long_read_fills_only_part_of_the_session(host: Callable[..., SessionManager]) -> None:
    """A read longer than the buffer fills its newest ``size`` messages, which are not the
    whole session: when one of them expires, the next read goes to the log rather than
    answering short."""
    mgr = host(size=4)
    session = mgr.start_session("Chat")
    for i in range(5):
        mgr.add_message(session.id, "user", f"m{i}")
    brief = mgr.add_message(session.id, "user", "gone soon", ttl=_TTL)
    assert len(mgr.recent_messages(session.id, limit=10)) == 6  # fills m2, m3, m4, gone soon
    assert brief.expires_at is not None and datetime.now(timezone.utc) < brief.expires_at
    _wait_past(brief.expires_at)
    assert _contents(mgr.recent_messages(session.id, limit=4)) == ["m1", "m2", "m3", "m4"]


# -- the buffer is never the only witness (issue 28, D4) ---------------------------------------


@pytest.fixture
def persistent() -> Iterator[RedisServer]:
    """A `redis-server` that keeps an append-only file (synced at every write) and loads it
    back when started again on the same port and folder: a Redis run with persistence."""
    server = RedisServer(appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def _manager(db: Path, buffer: RedisBuffer | str | None, agent: str = "a") -> SessionManager:
    return SessionManager(
        agent, db_path=db, embedder=HashEmbedder(), background=False, buffer=buffer
    )


def _until(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Poll ``condition`` until it holds (True) or ``seconds`` pass (False): a generous
    deadline for events, never a timing that is asserted."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_erased_messages_stay_erased_when_redis_restarts_with_its_data(
    persistent: RedisServer, db_path: Path
) -> None:
    """The trial's scenario: 8 messages of a user buffered and read, Redis killed (-9), the
    user erased meanwhile, Redis started again from its append-only file on the same port and
    folder, holding all 8. Neither the manager that erased nor one opened afterwards (a
    process that never saw Redis fail) serves them; the restored entry is dropped."""
    raw = redis.Redis.from_url(persistent.url, decode_responses=True)
    buffer = RedisBuffer(persistent.url, retry_after=0.2)
    mgr = _manager(db_path, buffer)
    try:
        session = mgr.start_session("Chat", user_id="uGone")
        for i in range(8):
            mgr.add_message(session.id, "user", f"uGone's secret {i}")
        assert len(mgr.recent_messages(session.id)) == 8
        key = f"asm:{{{session.id}}}:messages"
        assert raw.llen(key) == 8  # (served from Redis from now on)
        persistent.stop()  # kill -9
        receipt = mgr.erase_user("uGone")
        assert receipt.sessions == 1
        assert any("Redis working buffer" in note for note in receipt.unreachable)
        persistent.start()  # its append-only file brings the 8 messages back
        assert raw.llen(key) == 8
        later = _manager(db_path, persistent.url)
        try:
            with pytest.raises(SessionNotFound):
                later.recent_messages(session.id)
            with pytest.raises(SessionNotFound):
                later.get_session(session.id)
            assert not raw.exists(key)  # the stale entry was dropped, not served
        finally:
            later.close()
        # the manager that erased, once it uses Redis again
        assert _until(lambda: buffer.read(session.id, 20) is None and buffer.error is None)
        with pytest.raises(SessionNotFound):
            mgr.recent_messages(session.id)
    finally:
        mgr.close()
        buffer.close()
        raw.close()


def test_a_redis_that_comes_back_older_than_it_acknowledged_is_not_served(
    persistent: RedisServer, db_path: Path
) -> None:
    """An append-only file synced once a second (Redis's default) can lose the last
    acknowledged writes in a crash: here a delete the buffer took is lost that way (the
    append-only file copied before it is put back). Nobody saw Redis fail, so the store's
    epoch never moved; the restarted server's run id is what tells its entries apart."""
    writer = _manager(db_path, persistent.url)
    try:
        session = writer.start_session("Chat")
        events = [writer.add_message(session.id, "user", f"m{i}") for i in range(3)]
        assert _contents(writer.recent_messages(session.id)) == ["m0", "m1", "m2"]
        before = persistent.root / "before-delete"
        shutil.copytree(persistent.root / "appendonlydir", before)
        writer.delete_event(events[1].id)  # the buffer drops the entry: acknowledged
    finally:
        writer.close()
    persistent.stop()  # kill -9, and the file loses what it acknowledged last
    shutil.rmtree(persistent.root / "appendonlydir")
    shutil.copytree(before, persistent.root / "appendonlydir")
    persistent.start()
    raw = redis.Redis.from_url(persistent.url, decode_responses=True)
    assert raw.llen(f"asm:{{{session.id}}}:messages") == 3  # the stale entry is back
    reader = _manager(db_path, persistent.url)
    try:
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m2"]
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m2"]  # filled again
        assert raw.llen(f"asm:{{{session.id}}}:messages") == 2
    finally:
        reader.close()
        raw.close()


@pytest.fixture
def cut_off(db_path: Path) -> Iterator[SessionManager]:
    """A manager whose buffer cannot reach Redis (nothing listens on its port) while the
    others' can: a host cut off from Redis, or a Redis failing for it alone."""
    buffer = RedisBuffer(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5, retry_after=60)
    mgr = _manager(db_path, buffer)
    yield mgr
    mgr.close()
    buffer.close()


def test_a_delete_redis_missed_is_not_served_by_other_hosts(
    server: RedisServer, raw: Any, db_path: Path, cut_off: SessionManager
) -> None:
    reader = _manager(db_path, RedisBuffer(server.url, epoch_check=0))
    try:
        session = reader.start_session("Chat")
        events = [reader.add_message(session.id, "user", f"m{i}") for i in range(3)]
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m1", "m2"]
        cut_off.delete_event(events[1].id)  # its buffer cannot drop the entry
        assert raw.llen(f"asm:{{{session.id}}}:messages") == 3  # still in Redis
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m2"]
        cut_off.delete_session(session.id)
        with pytest.raises(SessionNotFound):
            reader.recent_messages(session.id)
    finally:
        reader.close()


def test_a_write_redis_missed_is_not_left_out_by_other_hosts(
    server: RedisServer, raw: Any, db_path: Path, cut_off: SessionManager
) -> None:
    reader = _manager(db_path, RedisBuffer(server.url, epoch_check=0))
    try:
        session = reader.start_session("Chat")
        reader.add_message(session.id, "user", "before")
        assert _contents(reader.recent_messages(session.id)) == ["before"]
        cut_off.add_message(session.id, "assistant", "during")  # Redis never sees it
        cut_off.record_many(session.id, [{"kind": "message", "content": "also during"}])
        assert raw.llen(f"asm:{{{session.id}}}:messages") == 1
        assert _contents(reader.recent_messages(session.id)) == ["before", "during", "also during"]
        assert _contents(reader.recent_messages(session.id)) == ["before", "during", "also during"]
    finally:
        reader.close()


def test_a_manager_rereads_the_epoch_within_epoch_check(
    server: RedisServer, db_path: Path, cut_off: SessionManager
) -> None:
    """With ``epoch_check`` seconds (here 0.3), a host that saw no failure may serve an
    entry the store has moved past for at most that long: after it, never."""
    reader = _manager(db_path, RedisBuffer(server.url, epoch_check=0.3))
    try:
        session = reader.start_session("Chat")
        events = [reader.add_message(session.id, "user", f"m{i}") for i in range(2)]
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m1"]
        cut_off.delete_event(events[0].id)
        time.sleep(0.35)  # (the bound is a lower one: any longer wait proves the same)
        assert _contents(reader.recent_messages(session.id)) == ["m1"]
    finally:
        reader.close()


def test_an_erasure_without_the_buffer_is_not_served_from_it(
    server: RedisServer, raw: Any, db_path: Path
) -> None:
    """`memlane erase-user` without --buffer cannot reach Redis; the epoch it moves in its
    transaction stops every buffered manager from serving the user's messages."""
    from memlane.admin import StoreAdmin

    reader = _manager(db_path, RedisBuffer(server.url, epoch_check=0))
    try:
        session = reader.start_session("Chat", user_id="u9")
        reader.add_message(session.id, "user", "my address is 1 Elm Street")
        assert len(reader.recent_messages(session.id)) == 1
        with StoreAdmin(db_path) as admin:
            assert admin.erase_user("u9").sessions == 1
        assert raw.exists(f"asm:{{{session.id}}}:messages")  # not reached
        with pytest.raises(SessionNotFound):
            reader.recent_messages(session.id)
        assert not raw.exists(f"asm:{{{session.id}}}:messages")
    finally:
        reader.close()


def test_a_manager_that_cannot_move_the_epoch_reads_the_log(
    server: RedisServer, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write Redis missed, and the store refuses the epoch's move too (full): this
    manager serves nothing from the buffer — not even other sessions' entries, which other
    hosts' missed writes may have left stale — until the move is written, at its next read
    after the store takes writes again."""
    from memlane import StoreFull

    buffer = RedisBuffer(server.url, epoch_check=60)
    mgr = _manager(db_path, buffer)
    try:
        chat, other = mgr.start_session("Chat"), mgr.start_session("Other")
        for session in (chat, other):
            mgr.add_message(session.id, "user", "one")
            assert _contents(mgr.recent_messages(session.id)) == ["one"]  # buffered
        store = mgr._writer.log
        epoch = store.buffer_epoch()

        def full(tx: Any) -> int:
            raise StoreFull("disk full")

        def unreachable(*args: Any, **kwargs: Any) -> Any:
            raise OSError("Redis unreachable")

        with monkeypatch.context() as patch:
            patch.setattr(store, "bump_buffer_epoch", full)
            patch.setattr(buffer, "_append", unreachable)
            mgr.add_message(chat.id, "user", "two")  # Redis missed it; the move failed
        assert store.buffer_epoch() == epoch
        _behind_its_back(db_path, other.id, "from the log")
        with monkeypatch.context() as patch:
            patch.setattr(store, "bump_buffer_epoch", full)  # (still full)
            assert _contents(mgr.recent_messages(other.id)) == ["from the log"]
            assert _contents(mgr.recent_messages(chat.id)) == ["one", "two"]
        assert store.buffer_epoch() == epoch
        assert _contents(mgr.recent_messages(other.id)) == ["from the log"]  # moved now
        assert store.buffer_epoch() == epoch + 1
    finally:
        mgr.close()
        buffer.close()


def test_reads_never_renew_an_entry(host: Callable[..., SessionManager], raw: Any) -> None:
    """An entry lives ``ttl`` after it was last written (filled or appended to): however
    often it is read, its time to live only goes down, and it expires."""
    mgr = host(ttl=timedelta(hours=1))
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", "hello")
    mgr.recent_messages(session.id)  # filled
    key = f"asm:{{{session.id}}}:messages"
    time.sleep(0.05)
    left = raw.pttl(key)
    assert 0 < left <= 3_600_000 - 50
    for _ in range(5):
        assert _contents(mgr.recent_messages(session.id)) == ["hello"]
    assert 0 < raw.pttl(key) <= left
    assert 0 < raw.pttl(f"asm:{{{session.id}}}:head") <= left


def test_an_entry_read_all_the_time_still_expires(
    host: Callable[..., SessionManager], raw: Any
) -> None:
    mgr = host(ttl=timedelta(seconds=1))
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", "hello")
    key = f"asm:{{{session.id}}}:messages"

    def gone_while_read() -> bool:
        if not raw.exists(key):
            return True
        assert _contents(mgr.recent_messages(session.id)) == ["hello"]
        return False

    mgr.recent_messages(session.id)  # filled
    assert raw.exists(key)
    assert _until(gone_while_read, seconds=30)  # (1 s; before issue 28, never)


def test_the_store_keeps_the_buffer_epoch(db_path: Path) -> None:
    """Migration 0011_buffer_epoch starts it at 0; moves are atomic increments."""
    from memlane.store.sqlite import SqliteStore

    store = SqliteStore(db_path)
    try:
        assert store.get_meta("buffer_epoch") == "0" and store.buffer_epoch() == 0
        with store.atomic() as tx:
            assert store.bump_buffer_epoch(tx) == 1
            assert store.bump_buffer_epoch(tx) == 2
        assert store.buffer_epoch() == 2
    finally:
        store.close()


def test_bad_epoch_check_is_refused(server: RedisServer) -> None:
    for bad in (-1, "1", True, 10_000):
        with pytest.raises(InvalidInput, match="epoch_check"):
            RedisBuffer(server.url, epoch_check=bad)  # type: ignore[arg-type]


@pytest.mark.postgres
def test_the_epoch_on_a_postgresql_log(server: RedisServer, raw: Any, postgres_url: str) -> None:
    """The same guarantees with the log in PostgreSQL (migration 0012_buffer_epoch): a delete
    and a write the buffer missed, and an erasure, are never served by another host."""
    url = postgres_url + ("&" if "?" in postgres_url else "?") + "schema=buffer_epoch"

    def manager(buffer: RedisBuffer) -> SessionManager:
        return SessionManager(
            "a", url=url, embedder=HashEmbedder(), background=False, buffer=buffer
        )

    cut = RedisBuffer(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5, retry_after=60)
    reader, cut_off = manager(RedisBuffer(server.url, epoch_check=0)), manager(cut)
    try:
        assert reader._writer.log.get_meta("buffer_epoch") == "0"
        session = reader.start_session("Chat", user_id="u1")
        events = [reader.add_message(session.id, "user", f"m{i}") for i in range(3)]
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m1", "m2"]
        cut_off.delete_event(events[1].id)
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m2"]
        cut_off.add_message(session.id, "user", "m3")
        assert _contents(reader.recent_messages(session.id)) == ["m0", "m2", "m3"]
        assert raw.exists(f"asm:{{{session.id}}}:messages")
        assert cut_off.erase_user("u1").sessions == 1
        with pytest.raises(SessionNotFound):
            reader.recent_messages(session.id)
        assert reader._writer.log.buffer_epoch() == 3
    finally:
        reader.close()
        cut_off.close()
        cut.close()
