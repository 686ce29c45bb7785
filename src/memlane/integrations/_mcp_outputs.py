"""What the MCP server's tools return (:mod:`memlane.integrations.mcp`): the output models
clients see as JSON schema, and contents bounded to what a model's context can take. Not
part of the public API.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from ..errors import SessionManagerError
from ..events import Event, Session
from . import require

require("mcp.server.mcpserver", "mcp")

from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402  (after the check)
from pydantic import BaseModel, Field  # noqa: E402  (pydantic comes with mcp)

__all__ = ["EventOut", "PassageOut", "SearchResult", "SessionList", "SessionOut", "StartedSession"]

_T = TypeVar("_T")


class SessionOut(BaseModel):
    """One session of the agent."""

    id: str = Field(description="The session id; pass it (or the key) as session_id.")
    key: str | None = Field(description="The caller's own name for the session, if given.")
    goal: str = Field(description="What the session is for (cut to the server's limit).")
    status: str = Field(description="active, completed, failed or abandoned.")
    user_id: str | None = None
    created_at: str = Field(description="ISO-8601 UTC.")
    updated_at: str = Field(description="ISO-8601 UTC; the last activity.")
    metadata: Any = Field(
        default=None, description="The session's metadata, or its JSON cut to the limit."
    )
    truncated: bool = Field(default=False, description="True when a field was cut.")


class StartedSession(SessionOut):
    """The session start_session opened, or the one its key already named."""

    created: bool = Field(
        description="False when the key already named a session: that session is returned, "
        "unchanged, instead of a new one."
    )


class EventOut(BaseModel):
    """One event of a session's log."""

    id: str = Field(description="The event id (a pending step's id is its pending_id).")
    session_id: str
    kind: str
    content: str = Field(description="The event's text, cut to the server's limit.")
    created_at: str = Field(description="ISO-8601 UTC.")
    importance: float
    status: str | None = Field(
        default=None, description="pending: open/done/cancelled; error: unresolved/resolved."
    )
    role: str | None = Field(default=None, description="The speaker of a message event.")
    tags: list[str] = Field(default_factory=list)
    metadata: Any = Field(default=None, description="Metadata, or its JSON cut to the limit.")
    payload: Any = Field(
        default=None, description="Structured detail (a step's result, ...), or its JSON cut."
    )
    truncated: bool = Field(default=False, description="True when a field was cut.")
    expires_at: str | None = Field(
        default=None, description="ISO-8601 UTC: when this short-term memory is forgotten."
    )


class SessionList(BaseModel):
    sessions: list[SessionOut]
    more: bool = Field(description="True when more sessions match than were returned.")


class EventList(BaseModel):
    events: list[EventOut] = Field(description="Oldest first.")
    more: bool = Field(description="True when the session has older matching events.")


class PassageOut(BaseModel):
    text: str = Field(description="The passage of a long event that matched.")
    start: int = Field(description="Where it starts in the event's content (characters).")
    stop: int = Field(description="Where it ends in the event's content (characters).")


class SearchHit(BaseModel):
    score: float = Field(description="Relevance; higher is better (comparable within a call).")
    event: EventOut
    passage: PassageOut | None = Field(
        default=None,
        description="For a long event found by one of its passages, that passage (the "
        "event's content may be cut; this is the part that answers).",
    )
    records: list[str] = Field(
        default_factory=list,
        description="For a JSON tool output, the records the query's words point at, best "
        "first, each as its path and JSON: 'data.invoices[23]: {\"id\": 23, ...}'.",
    )


class SearchResult(BaseModel):
    hits: list[SearchHit] = Field(description="Best first.")
    waiting: int = Field(
        default=0,
        description=(
            "Events in the searched scope still waiting for their vectors (just recorded, "
            "being embedded): they were matched by keyword only. Search again shortly for "
            "a ranking by meaning too."
        ),
    )


# -- bounding --------------------------------------------------------------------------------


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` or its first ``limit`` characters and a marker saying how much was cut."""
    if len(text) <= limit:
        return text, False
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]", True


def _bounded(value: Any, limit: int) -> tuple[Any, bool]:
    """A JSON value as is when its JSON text fits ``limit``, else that text cut."""
    if value is None:
        return None, False
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if len(text) <= limit:
        return value, False
    return _cut(text, limit)


def _session_out(session: Session, limit: int) -> dict[str, Any]:
    goal, cut_goal = _cut(session.goal, limit)
    metadata, cut_meta = _bounded(session.metadata or None, limit)
    return {
        "id": session.id,
        "key": session.key,
        "goal": goal,
        "status": session.status,
        "user_id": session.user_id,
        "created_at": session.created_at.isoformat(),
        "updated_at": session.updated_at.isoformat(),
        "metadata": metadata,
        "truncated": cut_goal or cut_meta,
    }


def _event_out(event: Event, limit: int) -> EventOut:
    content, cut_content = _cut(event.content, limit)
    metadata, cut_meta = _bounded(event.metadata or None, limit)
    payload, cut_payload = _bounded(event.payload, limit)
    return EventOut(
        id=event.id,
        session_id=event.session_id,
        kind=event.kind,
        content=content,
        created_at=event.created_at.isoformat(),
        importance=event.importance,
        status=event.status,
        role=event.role,
        tags=list(event.tags),
        metadata=metadata,
        payload=payload,
        truncated=cut_content or cut_meta or cut_payload,
        expires_at=None if event.expires_at is None else event.expires_at.isoformat(),
    )


async def _call(what: Awaitable[_T]) -> _T:
    """Await a library call; this library's errors become tool errors (``isError``) carrying
    their message. Anything else is a crash the SDK reports generically and logs."""
    try:
        return await what
    except SessionManagerError as exc:
        raise ToolError(str(exc)) from exc
