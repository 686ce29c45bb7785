"""The adapters' tests drive each framework's real package.

Outside CI, a framework that is not installed skips its tests with the install line; in CI
(``CI`` set, as ``.ci/run`` does) a missing framework fails them: a skipped adapter test
there would be a test that cannot fail.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import os
from collections.abc import Awaitable, Callable
from types import ModuleType

import pytest


def framework(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip (fail in CI) naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not installed: pip install -e '.[{extra}]' ({exc})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integrations/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


async def max_lateness(work: Callable[[], Awaitable[object]], tick: float = 0.005) -> float:
    """How late a ``tick``-second ticker on the running loop got, at worst, while ``work()``
    ran: every adapter is called from async code and must never block the loop."""
    late = 0.0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal late
        loop = asyncio.get_running_loop()
        while not stop.is_set():
            start = loop.time()
            await asyncio.sleep(tick)
            late = max(late, loop.time() - start - tick)

    # a full garbage collection of the whole run's objects stops every thread now and then:
    # what is measured is whether the adapter blocks the loop, not that
    gc.collect()
    gc.disable()
    running = asyncio.create_task(ticker())
    try:
        await work()
    finally:
        stop.set()
        await running
        gc.enable()
    return late
