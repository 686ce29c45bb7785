"""The MCP server's tools over sessions and events, for
:func:`~memlane.integrations.mcp.build_server`: the read tools (``list_sessions``,
``search_memory``, ``restore_context``, ``get_events``), the write tools (``start_session``,
``end_session``, ``record``, ``record_step``, ``add_message``, ``add_pending``,
``complete_pending``), and the parameter types and bounds of their JSON schema.

``build_server`` owns the manager, names and describes each tool and registers it; the
user-memory tools are in ``_mcp_users`` and the results in ``_mcp_outputs``. The parameter
types are module-level names because the SDK reads each tool's schema from its annotations,
evaluated in this module's globals. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from ..aio import AsyncSessionManager
from ..errors import SessionKeyTaken, SessionManagerError
from ..events import KINDS, MESSAGE_ROLES
from . import require

require("mcp.server.mcpserver", "mcp")

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402  (after the check)
from pydantic import Field  # noqa: E402  (pydantic comes with mcp)

from ._mcp_outputs import (  # noqa: E402
    EventList,
    EventOut,
    PassageOut,
    SearchHit,
    SearchResult,
    SessionList,
    SessionOut,
    StartedSession,
    _call,
    _event_out,
    _session_out,
)

__all__ = [
    "MAX_EVENTS",
    "MAX_HITS",
    "MAX_RESTORE_TOKENS",
    "MAX_SESSIONS",
    "session_read_tools",
    "session_write_tools",
]

Tool = Callable[..., Awaitable[Any]]

#: ``list_sessions`` / ``get_events`` / ``search_memory`` return at most this many items.
MAX_SESSIONS = 100
MAX_EVENTS = 100
MAX_HITS = 25
#: The largest ``max_tokens`` restore_context accepts (a sanity bound, not a model limit).
MAX_RESTORE_TOKENS = 200_000

# -- parameter types: the JSON schema (types, bounds, descriptions) clients see --------------

SessionRef = Annotated[
    str,
    Field(
        description="The session: its id (from start_session or list_sessions) or the key it "
        "was started with.",
        min_length=1,
    ),
]
OptionalSessionRef = Annotated[
    str | None,
    Field(description="Only this session (its id or key); omit for all of this agent's sessions."),
]
KindsFilter = Annotated[
    list[str] | None,
    Field(description="Only events of these kinds (e.g. ['fact', 'decision']); omit for all."),
]
Text = Annotated[str, Field(description="The text to store (not empty).")]
Importance = Annotated[
    float | None,
    Field(
        description="0 to 1; how much restore_context should favour this event (default: "
        "by kind, e.g. decision 0.8, fact 0.6, message 0.3).",
        ge=0.0,
        le=1.0,
    ),
]
Tags = Annotated[list[str] | None, Field(description="Short labels to file the event under.")]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(description="Small JSON object stored with the item (filterable, e.g. {'tool': 'x'})."),
]
JsonValue = Annotated[
    Any, Field(description="Any JSON value (text, number, object, list); stored verbatim.")
]
FinalStatus = Literal["completed", "failed", "abandoned"]
SessionStatus = Literal["active", "completed", "failed", "abandoned"]
SearchModeParam = Literal["hybrid", "semantic", "keyword"]


def _by_name(*tools: Callable[..., Awaitable[Any]]) -> dict[str, Tool]:
    return {tool.__name__: tool for tool in tools}


def session_read_tools(manager: Callable[[], AsyncSessionManager], cap: int) -> dict[str, Tool]:
    """``list_sessions``, ``search_memory``, ``restore_context`` and ``get_events``, by name,
    over ``manager()`` (the server's), each event's and session's fields cut to ``cap``
    characters."""

    async def list_sessions(
        status: Annotated[
            SessionStatus | None, Field(description="Only sessions with this status.")
        ] = None,
        limit: Annotated[int, Field(description="At most this many.", ge=1, le=MAX_SESSIONS)] = 20,
    ) -> SessionList:
        mgr = manager()
        found = await _call(mgr.list_sessions(status, limit=limit + 1))
        return SessionList(
            sessions=[SessionOut(**_session_out(s, cap)) for s in found[:limit]],
            more=len(found) > limit,
        )

    async def search_memory(
        query: Annotated[str, Field(description="What to look for, in plain words.")],
        k: Annotated[int, Field(description="At most this many hits.", ge=1, le=MAX_HITS)] = 5,
        mode: Annotated[
            SearchModeParam,
            Field(
                description="hybrid (meaning and keywords, best in general), semantic "
                "(meaning only) or keyword (exact words)."
            ),
        ] = "hybrid",
        session_id: OptionalSessionRef = None,
        kinds: KindsFilter = None,
    ) -> SearchResult:
        mgr = manager()
        hits = await _call(mgr.search(query, k, mode=mode, session_id=session_id, kinds=kinds))
        return SearchResult(
            hits=[
                SearchHit(
                    score=hit.score,
                    event=_event_out(hit.event, cap),
                    passage=None
                    if hit.passage is None
                    else PassageOut(
                        text=hit.passage.text[:cap],
                        start=hit.passage.start,
                        stop=hit.passage.stop,
                    ),
                    records=[record[:cap] for record in hit.records],
                )
                for hit in hits
            ],
            waiting=hits.waiting,
        )

    async def restore_context(
        session_id: SessionRef,
        max_tokens: Annotated[
            int,
            Field(
                description="The token budget the returned text never exceeds (e.g. 2000).",
                ge=1,
                le=MAX_RESTORE_TOKENS,
            ),
        ],
        query: Annotated[
            str | None,
            Field(
                description="What the next turn is about, to pull in the relevant history "
                "(default: the goal and the pending steps)."
            ),
        ] = None,
        other_sessions: Annotated[
            bool, Field(description="Also draw relevant history from the agent's other sessions.")
        ] = False,
    ) -> str:
        mgr = manager()
        context = await _call(
            mgr.restore(session_id, max_tokens, query, other_sessions=other_sessions)
        )
        return context.text

    async def get_events(
        session_id: SessionRef,
        kinds: KindsFilter = None,
        limit: Annotated[
            int,
            Field(description="How many of the newest events to return.", ge=1, le=MAX_EVENTS),
        ] = 20,
    ) -> EventList:
        mgr = manager()
        newest = await _call(mgr.events(session_id, kinds, limit=limit + 1, newest_first=True))
        return EventList(
            events=[_event_out(e, cap) for e in reversed(newest[:limit])],
            more=len(newest) > limit,
        )

    return _by_name(list_sessions, search_memory, restore_context, get_events)


def session_write_tools(manager: Callable[[], AsyncSessionManager], cap: int) -> dict[str, Tool]:
    """``start_session``, ``end_session``, ``record``, ``record_step``, ``add_message``,
    ``add_pending`` and ``complete_pending``, by name, over ``manager()``, each event's and
    session's fields cut to ``cap`` characters."""

    async def start_session(
        goal: Annotated[str, Field(description="What the session is for, in a sentence.")],
        key: Annotated[
            str | None,
            Field(
                description="Your own name for the session (a conversation or task id), "
                "usable as session_id. If a session of this agent already has the key, that "
                "session is returned (created: false) instead of a new one."
            ),
        ] = None,
        user_id: Annotated[str | None, Field(description="The user the session is for.")] = None,
        metadata: Metadata = None,
    ) -> StartedSession:
        mgr = manager()
        try:
            session = await mgr.start_session(goal, user_id, metadata, key=key)
            created = True
        except SessionKeyTaken:
            session = await _call(mgr.get_session(key or ""))
            created = False
        except SessionManagerError as exc:
            raise ToolError(str(exc)) from exc
        return StartedSession(**_session_out(session, cap), created=created)

    async def end_session(
        session_id: SessionRef,
        status: Annotated[
            FinalStatus,
            Field(description="How it ended; the session then takes no new events."),
        ] = "completed",
    ) -> SessionOut:
        mgr = manager()
        return SessionOut(**_session_out(await _call(mgr.end_session(session_id, status)), cap))

    async def record(
        session_id: SessionRef,
        kind: Annotated[
            str,
            Field(
                description=f"One of {', '.join(sorted(KINDS - {'goal', 'summary'}))}, or a "
                "namespaced custom kind such as 'custom:plan'."
            ),
        ],
        content: Text,
        importance: Importance = None,
        tags: Tags = None,
        metadata: Metadata = None,
        ttl_seconds: Annotated[
            float | None,
            Field(
                description="Short-term memory: forget the event this many seconds from now "
                "(not for goals or pending steps). Leave out to keep it."
            ),
        ] = None,
    ) -> EventOut:
        mgr = manager()
        event = await _call(
            mgr.record(
                session_id,
                kind,
                content,
                importance=importance,
                tags=tags,
                metadata=metadata,
                ttl=ttl_seconds,
            )
        )
        return _event_out(event, cap)

    async def record_step(
        session_id: SessionRef,
        step: Annotated[str, Field(description="What was done, in a sentence.")],
        result: JsonValue = None,
        tool: Annotated[str | None, Field(description="The tool that did it, if any.")] = None,
    ) -> EventOut:
        mgr = manager()
        event = await _call(mgr.record_step(session_id, step, result, tool))
        return _event_out(event, cap)

    async def add_message(
        session_id: SessionRef,
        role: Annotated[
            str,
            Field(
                description=f"One of {', '.join(MESSAGE_ROLES)}, or a namespaced role such as "
                "'crew:critic'."
            ),
        ],
        content: Text,
    ) -> EventOut:
        mgr = manager()
        return _event_out(await _call(mgr.add_message(session_id, role, content)), cap)

    async def add_pending(
        session_id: SessionRef,
        text: Annotated[str, Field(description="The step still to do.")],
    ) -> EventOut:
        mgr = manager()
        return _event_out(await _call(mgr.add_pending(session_id, text)), cap)

    async def complete_pending(
        pending_id: Annotated[
            str, Field(description="The pending step's id (add_pending's result id).")
        ],
        result: JsonValue = None,
    ) -> EventOut:
        mgr = manager()
        return _event_out(await _call(mgr.complete_pending(pending_id, result)), cap)

    return _by_name(
        start_session, end_session, record, record_step, add_message, add_pending, complete_pending
    )
