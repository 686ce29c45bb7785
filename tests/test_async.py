"""AsyncSessionManager: the same API as SessionManager, awaitable, without blocking the loop.

The backend conformance suite also runs through it (tests/test_conformance.py, *Async)."""

from __future__ import annotations

import asyncio
import inspect
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memlane import AsyncSessionManager, InvalidInput, SessionManager, SessionNotFound
from memlane.testing import HashEmbedder

from . import event_loop
from .event_loop import LoopReport, watch_loop


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    """Public methods of ``cls``: its functions, and the methods it delegates to its parts
    (SessionManager's ``record = Delegated("_writer", Writer.record)``)."""
    found: dict[str, inspect.Signature] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for name, value in vars(klass).items():
            if not name.startswith("_") and callable(value) and not isinstance(value, type):
                found[name] = inspect.signature(value)
    return found


def test_parity_name_by_name_and_signature_by_signature() -> None:
    sync, aio = public_methods(SessionManager), public_methods(AsyncSessionManager)
    assert set(sync) <= set(aio), f"missing in the async twin: {sorted(set(sync) - set(aio))}"
    for name, signature in sync.items():
        assert inspect.iscoroutinefunction(getattr(AsyncSessionManager, name)), name
        assert aio[name] == signature, f"{name}: {aio[name]} != {signature}"
        assert getattr(AsyncSessionManager, name).__doc__, f"{name} has no docstring"
    extra = set(aio) - set(sync)
    assert extra == set(), f"async-only methods need a reason: {sorted(extra)}"
    sync_props = {
        n for k in SessionManager.__mro__ for n, v in vars(k).items() if isinstance(v, property)
    }
    aio_props = {n for n, v in vars(AsyncSessionManager).items() if isinstance(v, property)}
    assert sync_props <= aio_props


def test_constructor_takes_the_same_parameters_plus_max_threads() -> None:
    sync = dict(inspect.signature(SessionManager.__init__).parameters)
    aio = dict(inspect.signature(AsyncSessionManager.__init__).parameters)
    assert aio.pop("max_threads").default == 4
    assert aio == sync


def test_instance_attributes_read_the_same(db_path: Path) -> None:
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as sync:
        names = {n for n in vars(sync) if not n.startswith("_")}
        expected = {n: getattr(sync, n) for n in names}

    async def main() -> None:
        async with AsyncSessionManager(
            "a", db_path, embedder=HashEmbedder(), background=False
        ) as aio:
            assert {n: getattr(aio, n) for n in names} == expected
            assert aio.capabilities == sync.capabilities
            assert aio.embedder_name == sync.embedder_name

    asyncio.run(main())


def test_concurrent_calls_all_land(db_path: Path) -> None:
    async def main() -> None:
        async with AsyncSessionManager("a", db_path, embedder=HashEmbedder()) as mgr:
            session = await mgr.start_session("Collect facts concurrently")
            facts = await asyncio.gather(
                *(mgr.record_fact(session.id, f"fact {i} about widget {i % 5}") for i in range(60))
            )
            assert len({fact.id for fact in facts}) == 60
            hits, context, listed = await asyncio.gather(
                mgr.search("widget 3", k=5),
                mgr.restore(session.id, 2000, query="widget 3"),
                mgr.events(session.id, kinds="fact"),
            )
            assert len(listed) == 60
            assert hits and all("widget" in hit.event.content for hit in hits)
            assert "widget 3" in context.text and context.token_count <= 2000
            with pytest.raises(SessionNotFound):
                await mgr.get_session("nope")  # our errors cross the await unchanged
            await mgr.flush()
            assert (await mgr.health()).backlog == 0
        with pytest.raises(InvalidInput, match="is closed"):
            await mgr.search("widget")
        await mgr.close()  # twice is fine

    asyncio.run(main())


def test_max_threads_is_checked(db_path: Path) -> None:
    with pytest.raises(InvalidInput, match="max_threads"):
        AsyncSessionManager("a", db_path, embedder=HashEmbedder(), max_threads=0)


def test_the_event_loop_keeps_ticking_during_a_restore(db_path: Path) -> None:
    """A restore runs in a worker thread: no library call on the loop's thread, a ticker on
    the loop runs while the restores work, and never stalls pathologically (tests/event_loop.py;
    before issue 29 a 0.1 s bound on the worst stall, which a loaded machine exceeded)."""
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as sync:
        session = sync.start_session("A long session")
        for i in range(1500):
            sync.add_message(
                session.id, "user" if i % 2 else "assistant", f"turn {i} about topic {i % 40}"
            )
        sync.flush()

    async def main() -> LoopReport:
        async with AsyncSessionManager(
            "a", db_path, embedder=HashEmbedder(), background=False
        ) as mgr:
            await mgr.restore(session.id, 500)  # warm-up: tokenizer, caches

            async def work() -> None:
                # rounds until the restores have run long enough to show whether the loop
                # runs beside them (a ticker's worth many times over)
                started = time.perf_counter()
                for _ in range(20):
                    for query in ("topic 3", "topic 17", "turn 1200", None, "topic 39"):
                        await mgr.restore(session.id, 32000, query=query)
                    if time.perf_counter() - started > 0.5:
                        break

            return await watch_loop(work)

    report = asyncio.run(main())
    print(f"worst loop stall {report.worst * 1000:.1f} ms during {report.busy:.2f} s of restores")
    report.assert_free()


def test_the_loop_watcher_catches_a_call_that_blocks_the_loop(db_path: Path) -> None:
    """tests/event_loop.py itself: a library call made on the loop's thread fails the check
    however short it is, and a long one run inline gets no tick while it works."""
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as sync:
        session = sync.start_session("blocking on purpose")

        async def inline() -> None:  # the sync manager, called on the loop: what must fail
            for i in range(40):
                sync.add_message(session.id, "user", f"message {i}")
            sync.restore(session.id, 2000)

        report = asyncio.run(watch_loop(inline))
    assert report.on_loop and report.ticks_in_library == 0
    with pytest.raises(AssertionError, match="called on the event loop's thread"):
        report.assert_free()


def test_the_loop_watcher_catches_a_loop_that_waits_for_a_thread(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call handed to a thread while the loop waits for its result blocks the loop just the
    same, however short the call: the watcher sees the loop not answering."""
    monkeypatch.setattr(event_loop, "ANSWER_ALLOWANCE", 0.3)
    with SessionManager("a", db_path, embedder=HashEmbedder(), background=False) as sync:
        session = sync.start_session("blocking on purpose")

        async def waits() -> None:
            with ThreadPoolExecutor(1) as pool:  # the loop's thread waits: what must fail
                pool.submit(sync.add_message, session.id, "user", "one message").result()

        async def free() -> None:
            await asyncio.to_thread(sync.add_message, session.id, "user", "another message")

        blocked = asyncio.run(watch_loop(waits))
        assert blocked.blocking == ["add_message"] and not blocked.on_loop
        with pytest.raises(AssertionError, match="could not answer"):
            blocked.assert_free()
        asyncio.run(watch_loop(free)).assert_free()
        assert [e.content for e in sync.events(session.id)][-2:] == [
            "one message",
            "another message",
        ]
