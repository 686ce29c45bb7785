"""The Redis working buffer (buffer.py) against a real `redis-server` on a free port: messages
served from Redis, shared by managers ("hosts"), never stale after this library's writes and
deletes, isolated per agent, and the log answering whenever Redis cannot."""

from __future__ import annotations

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

from .servers import RedisServer, redis_server

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


def test_expired_messages_leave_the_buffered_answer(host: Callable[..., SessionManager]) -> None:
    mgr = host()
    session = mgr.start_session("Chat")
    mgr.add_message(session.id, "user", "kept")
    brief = mgr.add_message(session.id, "user", "code 1234", ttl=0.4)
    assert _contents(mgr.recent_messages(session.id)) == ["kept", "code 1234"]
    assert brief.expires_at is not None
    time.sleep(max(0.0, (brief.expires_at - datetime.now(timezone.utc)).total_seconds()) + 0.05)
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
        from memlane._time import from_us
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
        raw.execute_command("CLIENT", "PAUSE", "800", "ALL")
        mgr.add_message(session.id, "user", "second")  # the append times out
        assert _contents(mgr.recent_messages(session.id)) == ["first", "second"]  # the log
        time.sleep(1.0)  # the pause is over; the stale list is still in Redis
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
    brief = mgr.add_message(session.id, "user", "gone soon", ttl=0.4)
    assert len(mgr.recent_messages(session.id, limit=10)) == 6  # fills m2, m3, m4, gone soon
    assert brief.expires_at is not None
    time.sleep(max(0.0, (brief.expires_at - datetime.now(timezone.utc)).total_seconds()) + 0.05)
    assert _contents(mgr.recent_messages(session.id, limit=4)) == ["m1", "m2", "m3", "m4"]
