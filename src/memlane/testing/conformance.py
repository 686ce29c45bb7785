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

This module holds the spec, the async bridge, the fixtures and the core record / read /
restore tests; the other tests are mixins beside it, one concern each (``search_``,
``projection_``, ``long_event_``, ``expiry_``, ``memory_``, ``privacy_``, ``pool_`` and
``process_conformance``), which :class:`BackendConformance` inherits.

``BackendSpec(..., front="async")`` runs the same suite through
:class:`~memlane.AsyncSessionManager` (each call awaited on an event loop of its own,
by :class:`AsyncBridge`), so the async twin is held to exactly the same behaviour.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..admin import StoreAdmin, json_line
from ..aio import AsyncSessionManager
from ..embed import HashEmbedder
from ..errors import (
    InvalidFilter,
    InvalidInput,
    InvalidPayload,
    SessionClosed,
    SessionKeyTaken,
    SessionNotFound,
)
from ..manager import SessionManager
from ..store.base import Capabilities
from .expiry_conformance import ShortTermMemoryConformance
from .long_event_conformance import LongEventConformance
from .memory_conformance import UserMemoryConformance
from .pool_conformance import PoolConformance
from .privacy_conformance import PrivacyConformance
from .process_conformance import ProcessConformance
from .projection_conformance import ProjectionConformance
from .search_conformance import SearchConformance

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


class BackendConformance(
    SearchConformance,
    UserMemoryConformance,
    ShortTermMemoryConformance,
    LongEventConformance,
    PrivacyConformance,
    PoolConformance,
    ProjectionConformance,
    ProcessConformance,
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

    # -- keys, batches, export ----------------------------------------------------------------

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
