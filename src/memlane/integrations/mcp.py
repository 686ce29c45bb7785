"""An MCP server over an agent's memory: any MCP client (Claude Desktop, IDEs, agent
frameworks) starts sessions, records events, searches and restores context through tools.

Install the extra: ``pip install 'memlane[mcp]'`` (the MCP Python SDK 2.x,
whose server class is ``MCPServer``). Then either run ``memlane mcp --db memory.db --agent
assistant`` (stdio, the transport MCP clients launch) or build the server yourself::

    from memlane import AsyncSessionManager
    from memlane.integrations.mcp import build_server

    server = build_server(lambda: AsyncSessionManager("assistant", "memory.db"))
    server.run()                                  # stdio; or hand it to mcp.Client in tests

What it guarantees (docs/integrations/mcp.md has the tool list):

* **One agent per server.** The manager's ``agent_id`` scopes every tool; session ids and
  session keys are interchangeable wherever a tool takes a ``session_id``.
* **Never blocks its event loop.** Every call runs on the worker threads of
  :class:`~memlane.AsyncSessionManager`.
* **Bad input is a tool error, not a crash.** An error of this library (unknown session or
  kind, empty content, too small a budget, a closed session, ...) comes back as a result with
  ``isError: true`` and the library's message; such calls write nothing.
* **Bounded output.** Lists are capped (``limit``/``k`` have maxima in the schema) and every
  event's content, payload and metadata are cut to ``max_chars`` characters (2,000 by default)
  with a ``… [N more characters]`` marker and ``truncated: true``. ``restore_context``
  returns the restored text, which already fits the ``max_tokens`` asked for.
* **stdout is the protocol.** Logs go to stderr only (:func:`run_stdio` sets that up).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import Any

from ..aio import AsyncSessionManager
from ..errors import InvalidInput
from . import require

require("mcp.server.mcpserver", "mcp")

import anyio  # noqa: E402  (after the check that names the extra; anyio comes with mcp)
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

from ._mcp_outputs import _call  # noqa: E402
from ._mcp_session_tools import (  # noqa: E402
    MAX_EVENTS,
    MAX_HITS,
    MAX_RESTORE_TOKENS,  # noqa: F401  (still importable from here, as before)
    MAX_SESSIONS,
    session_read_tools,
    session_write_tools,
)
from ._mcp_users import user_memory_tools  # noqa: E402

__all__ = [
    "DEFAULT_MAX_CHARS",
    "TOOL_NAMES",
    "ManagerFactory",
    "build_server",
    "run_stdio",
]

log = logging.getLogger("memlane.mcp")

#: Characters of an event's content (and of its payload's or metadata's JSON) a tool returns.
DEFAULT_MAX_CHARS = 2_000

#: A zero-argument callable that opens the manager the server uses (called when it starts).
ManagerFactory = Callable[[], AsyncSessionManager]

_READ_TOOLS = ("list_sessions", "search_memory", "restore_context", "get_events", "user_facts")
_WRITE_TOOLS = (
    "start_session",
    "end_session",
    "record",
    "record_step",
    "add_message",
    "add_pending",
    "complete_pending",
    "remember",
)
#: Every tool the server offers (``read_only=True`` offers the read ones only).
TOOL_NAMES: tuple[str, ...] = _WRITE_TOOLS + _READ_TOOLS

# -- the server ------------------------------------------------------------------------------


class _Manager:
    """The manager the tools use: the caller's instance, or one opened from a factory while
    the server runs (opened by the first connection, closed after the last)."""

    def __init__(self, source: AsyncSessionManager | ManagerFactory) -> None:
        self._factory: ManagerFactory | None = None
        self._manager: AsyncSessionManager | None = None
        if isinstance(source, AsyncSessionManager):
            self._manager = source
        elif callable(source):
            self._factory = source
        else:
            raise InvalidInput(
                "build_server takes an AsyncSessionManager or a zero-argument callable that "
                f"returns one, not {type(source).__name__}."
            )
        self._users = 0
        self._lock = anyio.Lock()

    @property
    def owned(self) -> bool:
        return self._factory is not None

    def get(self) -> AsyncSessionManager:
        if self._manager is None:
            raise ToolError("The memory store is not open: the server is not running.")
        return self._manager

    @asynccontextmanager
    async def lifespan(self, _server: MCPServer[None]) -> AsyncIterator[None]:
        factory = self._factory
        if factory is None:
            yield None
            return
        async with self._lock:
            if self._users == 0:
                manager = await anyio.to_thread.run_sync(factory)
                if not isinstance(manager, AsyncSessionManager):
                    raise InvalidInput(
                        "build_server's factory must return an AsyncSessionManager, not "
                        f"{type(manager).__name__}."
                    )
                self._manager = manager
            self._users += 1
        try:
            yield None
        finally:
            async with self._lock:
                self._users -= 1
                if self._users == 0 and self._manager is not None:
                    manager, self._manager = self._manager, None
                    await manager.close()


_INSTRUCTIONS = """\
Durable memory for one agent, kept across conversations. Call start_session once per task \
(pass key= your own conversation or task name to get the same session back later), record \
what you learn and decide as you work (record, record_step, add_message), and add_pending \
for work left to do. At the start of a new conversation, restore_context(session_id, \
max_tokens) gives back the goal, open pending steps, important events and relevant history \
within that token budget; search_memory finds past events by meaning and keywords. Use \
remember for what you learn about the user (with a key such as 'city' when it has one \
current value) and user_facts to look it up; restore_context shows it for a session started \
with that user_id."""


def _version() -> str:
    try:
        return _dist_version("memlane")
    except PackageNotFoundError:  # running from a checkout that is not installed
        return "0"


def build_server(
    manager: AsyncSessionManager | ManagerFactory,
    *,
    name: str = "memlane",
    read_only: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> MCPServer[None]:
    """An ``MCPServer`` (MCP Python SDK 2.x) whose tools read and write ``manager``'s memory.

    ``manager``: an :class:`~memlane.AsyncSessionManager` (yours: the server never
    closes it), or a zero-argument callable returning one, which the server calls when it
    starts and closes when it stops. ``read_only``: offer only the read tools
    (list_sessions, search_memory, restore_context, get_events). ``max_chars``: how many
    characters of each event's content, payload and metadata a tool returns.

    Serve it with ``server.run()`` (stdio), or connect ``mcp.Client(server)`` in-process.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 100:
        raise InvalidInput(f"max_chars must be an int of at least 100, not {max_chars!r}.")
    memory = _Manager(manager)
    server: MCPServer[None] = MCPServer(
        name,
        title="Agent session memory",
        instructions=_INSTRUCTIONS,
        version=_version(),
        lifespan=memory.lifespan if memory.owned else None,
    )
    cap = max_chars
    cut_note = f" Content, payload and metadata are cut to {cap:,} characters (truncated: true)."
    read = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    add = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    settle = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )

    session = {**session_read_tools(memory.get, cap), **session_write_tools(memory.get, cap)}
    user_facts, remember = user_memory_tools(memory.get, _call, cap)
    tools: list[tuple[Callable[..., Any], str, str, ToolAnnotations]] = [
        (
            session["list_sessions"],
            "List sessions",
            "List this agent's sessions, most recently active first (at most "
            f"{MAX_SESSIONS}).{cut_note}",
            read,
        ),
        (
            session["search_memory"],
            "Search memory",
            "Find past events (facts, decisions, steps, messages, ...) of this agent by "
            f"meaning and keywords, best first (at most {MAX_HITS} hits).{cut_note}",
            read,
        ),
        (
            session["restore_context"],
            "Restore context",
            "Rebuild a session's context as text within max_tokens: the goal, open pending "
            "steps, important events and unresolved errors, a summary of older history, the "
            "latest turns and the history relevant to query. Use it at the start of a new "
            "conversation to continue where the session left off.",
            read,
        ),
        (
            session["get_events"],
            "Get events",
            "A session's newest events (optionally of some kinds), returned oldest first "
            f"(at most {MAX_EVENTS}).{cut_note}",
            read,
        ),
        (
            user_facts,
            "What you know about a user",
            "The facts and preferences remembered about a user across all sessions: the "
            "current ones, what was true as_of a date, or with include_superseded the values "
            "keys had before.",
            read,
        ),
    ]
    if not read_only:
        tools[:0] = [
            (
                session["start_session"],
                "Start a session",
                "Start a session of this agent towards a goal (recorded as its first event) "
                "and return it; with a key already in use, return that session instead.",
                add,
            ),
            (
                session["end_session"],
                "End a session",
                "End a session as completed, failed or abandoned; it then takes no new "
                "events (ending it again with the same status changes nothing).",
                settle,
            ),
            (
                session["record"],
                "Record an event",
                "Append an event to an active session's log: a fact learned, a decision "
                "taken, an error met, a tool output, ... Returns the stored event."
                f"{cut_note}",
                add,
            ),
            (
                session["record_step"],
                "Record a step",
                "Record a completed step, with the tool that did it and its result (any "
                f"JSON).{cut_note}",
                add,
            ),
            (
                session["add_message"],
                "Add a message",
                f"Record one conversation turn (user, assistant, tool, ...).{cut_note}",
                add,
            ),
            (
                session["add_pending"],
                "Add a pending step",
                "Note a step still to do; restore_context always shows open pending steps. "
                "Returns the pending event: its id is the pending_id for complete_pending.",
                add,
            ),
            (
                session["complete_pending"],
                "Complete a pending step",
                "Mark an open pending step done and record the step that did it (with an "
                "optional result); returns that step.",
                add,
            ),
            (
                remember,
                "Remember a fact about a user",
                "Keep something learnt about the user (a fact or a preference) across "
                "sessions. With a key ('city', 'diet'), it replaces that key's current value; "
                "the same fact again is counted, not duplicated; facts close in meaning come "
                "back as similar. Nothing is ever deleted.",
                add,
            ),
        ]
    for fn, title, description, hints in tools:
        server.add_tool(fn, title=title, description=description, annotations=hints)
    return server


def run_stdio(
    manager: AsyncSessionManager | ManagerFactory,
    *,
    name: str = "memlane",
    read_only: bool = False,
    max_chars: int = DEFAULT_MAX_CHARS,
    log_level: int = logging.INFO,
) -> None:
    """Serve ``manager``'s memory over stdin/stdout until the client closes stdin.

    A factory is called before serving starts, so a store that cannot be opened fails here
    with this library's error, and its manager is closed when serving ends; an instance is
    left open. Logging goes to stderr (stdout carries only protocol messages).
    """
    logging.basicConfig(
        stream=sys.stderr,
        level=log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def serve() -> None:
        if isinstance(manager, AsyncSessionManager):
            mgr, owned = manager, False
        else:
            mgr, owned = await anyio.to_thread.run_sync(manager), True
        try:
            server = build_server(mgr, name=name, read_only=read_only, max_chars=max_chars)
            log.info(
                "serving the memory of agent %r in %s over stdio (%d tools%s)",
                mgr.agent_id,
                mgr.url,
                len(TOOL_NAMES) - (len(_WRITE_TOOLS) if read_only else 0),
                ", read-only" if read_only else "",
            )
            await server.run_stdio_async()
            log.info("stdin closed; stopping")
        finally:
            if owned:
                await mgr.close()

    anyio.run(serve)
