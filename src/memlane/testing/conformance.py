"""The backend conformance suite: one set of tests every store must pass, written once.

Subclass :class:`BackendConformance` in a pytest module and give it a ``backend`` fixture
returning a :class:`BackendSpec` that names a fresh, empty store; every test then runs against
that backend unchanged::

    import pytest
    from memlane.testing import BackendConformance, BackendSpec

    class TestSqlite(BackendConformance):
        @pytest.fixture
        def backend(self, tmp_path):
            return BackendSpec("sqlite", url=f"sqlite:///{tmp_path}/s.db")

It covers record / restore / search semantics, ``where`` filters (and that a filtered search
still returns k results when k exist), isolation between agents and pools, bad input, export,
deletes reaching every projection, events past every size threshold (text and JSON) and the
deletes and expiry of their neighbours, crash catch-up from another process, and concurrency. What
a backend declares it cannot do (:class:`~memlane.store.base.Capabilities`) is checked
as well: e.g. a store that is not ``multi_process`` must refuse a second process clearly.

``BackendSpec(..., front="async")`` runs the same suite through
:class:`~memlane.AsyncSessionManager` (each call awaited on an event loop of its own,
by :class:`AsyncBridge`), so the async twin is held to exactly the same behaviour.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..admin import StoreAdmin, json_line
from ..aio import AsyncSessionManager
from ..core.canonical_json import dumps
from ..embed import HashEmbedder
from ..errors import (
    EventNotFound,
    InvalidFilter,
    InvalidInput,
    InvalidPayload,
    SessionClosed,
    SessionKeyTaken,
    SessionNotFound,
)
from ..manager import SessionManager
from ..store.base import Capabilities
from ..write.reads import SearchMode
from .expiry_conformance import ShortTermMemoryConformance
from .long_event_conformance import LongEventConformance
from .memory_conformance import UserMemoryConformance
from .pool_conformance import PoolConformance
from .privacy_conformance import PrivacyConformance
from .search_conformance import MODES, SearchConformance

__all__ = ["AsyncBridge", "BackendConformance", "BackendSpec"]

ManagerFactory = Callable[..., SessionManager]


@dataclass(frozen=True)
class BackendSpec:
    """A store to test: ``url`` (and ``index``) as ``SessionManager`` takes them;
    ``front="async"`` drives it through :class:`~memlane.AsyncSessionManager`."""

    name: str
    url: str
    index: str | None = None
    front: str = "sync"

    def manager(self, agent_id: str, **options: Any) -> SessionManager:
        options.setdefault("embedder", HashEmbedder())
        options.setdefault("background", False)
        if self.front == "async":
            bridge = AsyncBridge(
                AsyncSessionManager(agent_id, url=self.url, index=self.index, **options)
            )
            return bridge  # type: ignore[return-value]  # the same methods, blocking
        return SessionManager(agent_id, url=self.url, index=self.index, **options)

    def admin(self) -> StoreAdmin:
        return StoreAdmin(url=self.url, index=self.index, embedder=HashEmbedder())


class AsyncBridge:
    """A blocking view of an :class:`~memlane.AsyncSessionManager`: every coroutine
    method is awaited on an event loop running in a thread of its own, so tests written for
    the synchronous API drive the async twin unchanged."""

    def __init__(self, manager: AsyncSessionManager) -> None:
        self._manager = manager
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._manager, name)
        if not inspect.iscoroutinefunction(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            future = asyncio.run_coroutine_threadsafe(value(*args, **kwargs), self._loop)
            return future.result()

        return call

    def close(self) -> None:
        if self._loop.is_closed():
            return  # closing twice is allowed, as for SessionManager
        asyncio.run_coroutine_threadsafe(self._manager.close(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


def _run_child(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


_CHILD_WRITER = """
    import os, sys
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    url, index, agent, count, mode = sys.argv[1:6]
    mgr = SessionManager(agent, url=url, index=index or None, embedder=HashEmbedder(),
                         background=False)
    session = mgr.start_session(f"{agent} writes {count} facts")
    for i in range(int(count)):
        mgr.record_fact(session.id, f"{agent} fact {i} about widget {i % 7}")
    print(session.id, flush=True)
    if mode == "crash":
        os._exit(0)  # no close(), no flush(): the outbox is left for someone else
    mgr.close()
"""

_CHILD_OPEN = """
    import sys
    from memlane import SessionManager, StoreBusy
    from memlane.testing import HashEmbedder

    try:
        SessionManager("other", url=sys.argv[1], index=sys.argv[2] or None,
                       embedder=HashEmbedder(), background=False).close()
    except StoreBusy as exc:
        print("refused:", exc)
    else:
        print("opened")
"""


class BackendConformance(
    SearchConformance,
    UserMemoryConformance,
    ShortTermMemoryConformance,
    LongEventConformance,
    PrivacyConformance,
    PoolConformance,
):
    """The tests every backend passes; subclasses provide the ``backend`` fixture."""

    @pytest.fixture
    def backend(self) -> BackendSpec:
        raise NotImplementedError("Give the subclass a `backend` fixture (a fresh store).")

    @pytest.fixture
    def make(self, backend: BackendSpec) -> Iterator[ManagerFactory]:
        opened: list[SessionManager] = []

        def make(agent_id: str = "agent", **options: Any) -> SessionManager:
            mgr = backend.manager(agent_id, **options)
            opened.append(mgr)
            return mgr

        yield make
        for mgr in opened:
            mgr.close()

    # -- declarations -------------------------------------------------------------------------

    def test_declares_its_capabilities(self, make: ManagerFactory, backend: BackendSpec) -> None:
        caps = make().capabilities
        assert isinstance(caps, Capabilities)
        assert caps.name.startswith(backend.name.split("+")[0])
        assert not (caps.multi_host and not caps.multi_process)

    # -- record, read, restore ----------------------------------------------------------------

    def test_record_and_read_back(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("Audit staging", user_id="u1", metadata={"team": "a"})
        base = datetime(2026, 1, 1, tzinfo=timezone.utc)
        mgr.record_fact(session.id, "third", created_at=base + timedelta(days=3))
        step = mgr.record_step(
            session.id, "listed accounts", result={"accounts": 14, "ok": True}, tool="admin"
        )
        mgr.record_fact(session.id, "first", created_at=base + timedelta(days=1))
        events = mgr.events(session.id)
        assert [e.content for e in events[:2]] == ["first", "third"]  # by time, then order
        assert {e.kind for e in events} == {"goal", "fact", "step"}
        got = mgr.get_event(step.id)
        assert got.payload == {"result": {"accounts": 14, "ok": True}, "tool": "admin"}
        assert got.metadata == {"tool": "admin"} and got.token_count > 0
        assert mgr.events(session.id, kinds=["fact"], limit=1)[0].content == "first"
        assert mgr.get_session(session.id).metadata == {"team": "a"}
        assert [s.id for s in mgr.list_sessions(user_id="u1")] == [session.id]

    def test_pending_errors_and_restore(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("Ship the release")
        todo = mgr.add_pending(session.id, "rotate the deploy key")
        other = mgr.add_pending(session.id, "tell the team")
        error = mgr.record_error(session.id, "deploy failed: key expired")
        for i in range(30):
            mgr.add_message(session.id, "assistant", f"progress note {i} " + "word " * 20)
        step = mgr.complete_pending(todo.id, result="rotated")
        assert mgr.get_event(todo.id).status == "done"
        assert mgr.get_event(todo.id).metadata["completed_by"] == step.id
        mgr.cancel_pending(other.id, reason="not needed")
        assert mgr.resolve_error(error.id).status == "resolved"
        with pytest.raises(InvalidInput):
            mgr.complete_pending(todo.id)
        context = mgr.restore(session.id, max_tokens=300)
        assert context.token_count <= 300
        assert "Ship the release" in context.text
        assert "progress note 29" in context.text  # the most recent turns come in

    def test_session_lifecycle_and_bad_input(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("goal")
        bad: list[tuple[Callable[[], Any], type[Exception]]] = [
            (lambda: mgr.record(session.id, "decison", "typo kind"), InvalidInput),
            (lambda: mgr.record_fact(session.id, "   "), InvalidInput),
            (lambda: mgr.record_fact(session.id, "x", payload={"n": float("nan")}), InvalidPayload),
            (lambda: mgr.record_fact(session.id, "x", importance=2), InvalidInput),
            (lambda: mgr.record_fact("no-such-session", "x"), SessionNotFound),
            (lambda: mgr.search("x", where={"a": {"$regex": "x"}}), InvalidFilter),
            (lambda: mgr.search("x", k=0), InvalidInput),
        ]
        for call, error in bad:
            with pytest.raises(error):
                call()
        assert len(mgr.events(session.id)) == 1  # nothing was written by rejected calls
        mgr.end_session(session.id, status="completed")
        with pytest.raises(SessionClosed):
            mgr.record_fact(session.id, "too late")
        assert mgr.list_sessions(status="active") == []

    # -- deletes, reindex, operators ----------------------------------------------------------

    def test_deletes_reach_every_projection(
        self, make: ManagerFactory, backend: BackendSpec
    ) -> None:
        mgr = make()
        doomed = mgr.start_session("doomed session about zebras")
        mgr.record_fact(doomed.id, "zebras graze at dawn")
        kept = mgr.start_session("kept session about lions")
        mgr.record_fact(kept.id, "lions sleep at noon")
        old = mgr.record_tool_output(kept.id, "zebra crossing log output", tool="cam")
        mgr.flush()
        assert mgr.delete_session(doomed.id) == 2
        for mode in MODES:
            assert all(h.event.session_id != doomed.id for h in mgr.search("zebras", 10, mode=mode))
        with StoreAdmin(url=backend.url, index=backend.index, embedder=HashEmbedder()) as admin:
            pruned = admin.prune(datetime.now(timezone.utc) + timedelta(days=1), kind="tool_output")
            assert pruned.events == 1
            stats = admin.stats()
            assert stats.events == 2 and stats.vectors == 2 and stats.pending_embeddings == 0
        for mode in MODES:
            assert old.id not in {h.event.id for h in mgr.search("zebra crossing", 10, mode=mode)}
        assert mgr.reindex() == 2
        assert mgr.search("lions sleep at noon", k=1, mode="semantic")[0].event.content == (
            "lions sleep at noon"
        )

    def test_session_keys(self, make: ManagerFactory) -> None:
        """A caller's key names one session per agent and works wherever an id does."""
        mgr, other = make(), make("other")
        session = mgr.start_session("chat with a user", key="thread-42")
        assert session.key == "thread-42" and mgr.get_session("thread-42").id == session.id
        mgr.add_message("thread-42", "user", "Where is the staging database?")
        assert [e.kind for e in mgr.events("thread-42")] == ["goal", "message"]
        assert mgr.search("staging database", k=1, session_id="thread-42")
        assert "staging" in mgr.restore("thread-42", max_tokens=300).text
        with pytest.raises(SessionKeyTaken, match="session_for"):
            mgr.start_session("a second chat", key="thread-42")
        assert len(mgr.list_sessions()) == 1  # the refused start wrote nothing
        assert other.start_session("its own thread", key="thread-42").id != session.id
        assert mgr.session_for("thread-42").id == session.id
        with pytest.raises(SessionNotFound, match="thread-7"):
            mgr.session_for("thread-7")  # no goal: get only
        created: list[str] = []
        threads = [
            threading.Thread(
                target=lambda: created.append(mgr.session_for("thread-7", goal="race").id)
            )
            for _ in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(created) == 6 and len(set(created)) == 1  # racing creators share one
        assert mgr.end_session("thread-7").status == "completed"

    def test_event_deletes_pops_and_clears(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("a chat about birds")
        said = [mgr.add_message(session.id, "user", f"message {i} about herons") for i in range(12)]
        fact = mgr.record_fact(session.id, "herons nest in colonies")
        mgr.flush()
        assert mgr.delete_event(said[0].id).id == said[0].id
        with pytest.raises(EventNotFound):
            mgr.get_event(said[0].id)
        for mode in MODES:  # gone from every index
            hits = mgr.search("message 0 about herons", 20, mode=mode)
            assert said[0].id not in {h.event.id for h in hits}
        newest = mgr.pop_event(session.id)  # the newest of any kind
        assert newest is not None and newest.id == fact.id
        popped: list[str] = []

        def pop() -> None:
            while (event := mgr.pop_event(session.id, kinds="message")) is not None:
                popped.append(event.id)

        threads = [threading.Thread(target=pop) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(popped) == sorted(e.id for e in said[1:])  # each exactly once
        assert [e.kind for e in mgr.events(session.id)] == ["goal"]
        mgr.add_message(session.id, "user", "one more")
        mgr.record_decision(session.id, "watch herons at dawn")
        assert mgr.clear_session(session.id, kinds="message") == 1
        assert [e.kind for e in mgr.events(session.id)] == ["goal", "decision"]
        assert mgr.clear_session(session.id) == 2 and mgr.events(session.id) == []
        assert mgr.get_session(session.id).goal == "a chat about birds"  # the session stays

    def test_unindexed_events_are_kept_but_never_searched(
        self, make: ManagerFactory, backend: BackendSpec
    ) -> None:
        mgr = make()
        session = mgr.start_session("a crawl of bird sightings")
        bulky = mgr.record(
            session.id, "tool_output", "raw dump: pelican pelican pelican", index=False
        )
        kept = mgr.record_fact(session.id, "a pelican was seen at the pier")
        mgr.flush()
        assert not bulky.indexed and kept.indexed and mgr.pending_embeddings() == 0
        assert [e.indexed for e in mgr.events(session.id)] == [True, False, True]
        for mode in MODES:
            found = {h.event.id for h in mgr.search("raw dump pelican", 10, mode=mode)}
            assert kept.id in found and bulky.id not in found
        assert "raw dump" in mgr.restore(session.id, max_tokens=400).text  # still in the log
        assert mgr.reindex() == 2  # the goal and the fact: never the unindexed dump
        assert bulky.id not in {h.event.id for h in mgr.search("raw dump", 10, mode="keyword")}
        with backend.admin() as admin:
            exported = [r for r in admin.export() if r.get("id") == bulky.id]
            assert exported[0]["indexed"] is False

    def test_large_events_are_digested_off_the_callers_path(self, make: ManagerFactory) -> None:
        """A large event's exact token count, preview and keyword text are the worker's
        (``flush`` here); the caller's counter never sees its megabytes. A value deep in a
        3,000-row output is found by keyword and hybrid search, before and after; a message
        of a megabyte of distinct words (past PostgreSQL's 1 MB tsvector) records."""
        seen: list[int] = []

        def counter(text: str) -> int:
            seen.append(len(text))
            return len(text) // 4

        mgr = make(model=counter)
        session = mgr.start_session("nightly checks")
        rows = [{"id": i, "status": "ok", "host": f"db-{i % 7}"} for i in range(3_000)]
        rows[2_500]["status"] = "CRITICAL disk full on /var/lib/postgres"
        seen.clear()
        output = mgr.record_tool_output(session.id, {"rows": rows}, tool="df")
        words = " ".join(f"w{i:07d}" for i in range(120_000))  # ~1 MB, every word new
        message = mgr.add_message(session.id, "tool", words)
        assert max(seen, default=0) <= 32_768  # nothing large counted on the caller's path
        assert output.payload == {"rows": rows}
        # Before the worker: the in-memory keyword ranking reads the rows themselves.
        assert mgr.search("w0000042", 3, mode="keyword")[0].event.id == message.id
        wordy: tuple[SearchMode, ...] = ("keyword", "hybrid")
        for mode in wordy:
            assert mgr.search("disk full postgres", 3, mode=mode)[0].event.id == output.id
        mgr.flush()
        assert max(seen) > 100_000  # the worker counted the payload
        exact = len(output.content) // 4 + len(dumps({"rows": rows})) // 4
        assert mgr.get_event(output.id).token_count == exact
        assert mgr.get_event(message.id).token_count == len(words) // 4
        for mode in wordy:
            assert mgr.search("disk full postgres", 3, mode=mode)[0].event.id == output.id
        assert mgr.search("w0000042", 3, mode="keyword")[0].event.id == message.id
        assert "disk full" in mgr.restore(session.id, max_tokens=2_000, query="disk full").text

    def test_record_with_replace_is_an_upsert(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("keyed items")
        first = mgr.record(session.id, "x:item", "colour blue", metadata={"key": "colour"})
        mgr.record(session.id, "x:item", "size large", metadata={"key": "size"})
        mgr.record(session.id, "fact", "colour is a fact too", metadata={"key": "colour"})
        mgr.flush()
        second = mgr.record(
            session.id,
            "x:item",
            "colour green",
            metadata={"key": "colour"},
            replace={"key": "colour"},
        )
        items = mgr.events(session.id, kinds="x:item")
        assert [e.content for e in items] == ["size large", "colour green"]
        assert len(mgr.events(session.id, kinds="fact")) == 1  # another kind: untouched
        for mode in MODES:  # the replaced event is gone from every index
            found = {h.event.id for h in mgr.search("colour blue", 10, mode=mode)}
            assert first.id not in found
        assert second.id in {h.event.id for h in mgr.search("colour green", 10)}
        with pytest.raises(InvalidInput, match="non-empty"):
            mgr.record(session.id, "x:item", "all gone?", replace={})
        assert len(mgr.events(session.id)) == 4  # the refused upsert wrote nothing

    def test_record_many_is_all_or_nothing(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("a batch of turns")
        written = mgr.record_many(
            session.id,
            [
                {"kind": "message", "role": "user", "content": "where do herons nest?"},
                {
                    "kind": "message",
                    "role": "assistant",
                    "content": "in colonies",
                    "payload": {"id": 1},
                },
                {"kind": "pending", "content": "check the heron colony"},
                {"kind": "tool_output", "content": "raw", "index": False},
            ],
        )
        assert [e.kind for e in written] == ["message", "message", "pending", "tool_output"]
        assert written[0].role == "user" and written[2].status == "open" and not written[3].indexed
        assert [e.id for e in mgr.events(session.id)][1:] == [e.id for e in written]
        for bad in (
            [{"kind": "fact", "content": "fine"}, {"kind": "fact", "content": ""}],
            [
                {"kind": "fact", "content": "fine"},
                {"kind": "message", "role": "usr", "content": "x"},
            ],
            [{"kind": "fact", "content": "fine", "colour": "blue"}],
        ):
            with pytest.raises(InvalidInput, match="record_many"):
                mgr.record_many(session.id, bad)
        with pytest.raises(SessionNotFound):
            mgr.record_many("no-such-session", [{"kind": "fact", "content": "x"}])
        assert len(mgr.events(session.id)) == 5  # nothing of the refused batches
        assert mgr.record_many(session.id, []) == []
        mgr.flush()
        assert mgr.search("heron colonies", k=5, mode="keyword")

    def test_export_is_the_same_on_every_backend(
        self, make: ManagerFactory, backend: BackendSpec, tmp_path: Any
    ) -> None:
        mgr = make()
        session = mgr.start_session("export me", metadata={"b": 1, "a": [1.5, "x"]})
        mgr.record_step(session.id, "did a thing", result={"z": 1, "a": {"y": None}}, tool="t")
        mgr.record_fact(session.id, "ünïcödé ✓ fact", tags=["x", "y"], importance=0.9)
        mgr.search("thing", k=2)
        with backend.admin() as admin:
            first = [json_line(record) for record in admin.export()]
        with StoreAdmin(tmp_path / "copy.db", embedder=HashEmbedder()) as copy:
            result = copy.import_records(first)
            assert result.events_inserted == 3 and result.sessions_inserted == 1
            assert [json_line(record) for record in copy.export()] == first
        with backend.admin() as admin:  # importing again changes nothing
            assert admin.import_records(first).inserted == 0

    # -- processes and threads ----------------------------------------------------------------

    def test_crash_catch_up(self, make: ManagerFactory, backend: BackendSpec) -> None:
        make().close()  # create the schema once
        out = _run_child(_CHILD_WRITER, backend.url, backend.index or "", "crashy", "40", "crash")
        assert out.returncode == 0, out.stderr
        session_id = out.stdout.split()[0]
        mgr = make("crashy")
        assert mgr.pending_embeddings() >= 40
        mgr.flush()
        assert mgr.pending_embeddings() == 0
        assert len(mgr.events(session_id)) == 41
        hits = mgr.search("crashy fact 17 about widget 3", k=3, mode="semantic")
        assert "crashy fact 17 about widget 3" in {hit.event.content for hit in hits}

    def test_several_processes_as_declared(
        self, make: ManagerFactory, backend: BackendSpec
    ) -> None:
        mgr = make("watcher")
        if not mgr.capabilities.multi_process:
            # declared single-process: a second process is refused while this one has it open
            out = _run_child(_CHILD_OPEN, backend.url, backend.index or "")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("refused:") and "server" in out.stdout
            return
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    textwrap.dedent(_CHILD_WRITER),
                    backend.url,
                    backend.index or "",
                    f"writer-{n}",
                    "60",
                    "close",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(3)
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err
        mgr.flush()
        with backend.admin() as admin:
            stats = admin.stats()
        for n in range(3):
            assert sum(stats.events_by_agent[f"writer-{n}"].values()) == 61
        assert stats.pending_embeddings == 0 and stats.vectors == stats.events

    def test_threads_share_one_manager(self, make: ManagerFactory) -> None:
        mgr = make(background=True)
        session = mgr.start_session("threads")
        errors: list[BaseException] = []

        def work(n: int) -> None:
            try:
                for i in range(40):
                    mgr.record_fact(session.id, f"thread {n} fact {i}")
                    if i % 10 == 0:
                        mgr.search(f"thread {n}", k=3)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        mgr.flush()
        assert len(mgr.events(session.id, kinds=["fact"])) == 160
        assert mgr.pending_embeddings() == 0
