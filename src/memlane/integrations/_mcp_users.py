"""The MCP server's user-memory tools (``remember``, ``user_facts``): what the agent knows
about the people it works for, over :meth:`~memlane.SessionManager.remember` and
:meth:`~memlane.SessionManager.facts`. Built by :func:`user_memory_tools` for
``mcp.build_server``, which owns the manager and the error mapping."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, Field

from ..aio import AsyncSessionManager
from ..memory import Fact, RememberResult

__all__ = ["FactList", "FactOut", "RememberOut", "user_memory_tools"]

_T = TypeVar("_T")

UserId = Annotated[
    str, Field(description="Who the fact is about: your id for the user.", min_length=1)
]
FactKey = Annotated[
    str | None,
    Field(
        description="What the fact is the value of ('city', 'diet', 'employer'): a fact with a "
        "key replaces that key's current value (the old one is kept as history). Omit for a "
        "fact that stands alone."
    ),
]


class FactOut(BaseModel):
    """One thing the agent knows about a user."""

    id: str = Field(description="The fact id.")
    user_id: str
    text: str = Field(description="The fact, cut to the server's limit.")
    kind: str = Field(description="fact or preference.")
    key: str | None = None
    status: str = Field(description="current, superseded (by a newer value) or retracted.")
    valid_from: str = Field(description="ISO-8601 UTC: since when it is true.")
    valid_until: str | None = Field(default=None, description="ISO-8601 UTC, if it ended.")
    seen: int = Field(description="How many times it was remembered.")
    source: str | None = None
    truncated: bool = Field(default=False, description="True when the text was cut.")


class RememberOut(BaseModel):
    status: str = Field(
        description="added, superseded (it replaced the key's value), unchanged (already "
        "known: counted once more) or skipped."
    )
    fact: FactOut | None = None
    superseded: list[FactOut] = Field(default_factory=list)
    similar: list[FactOut] = Field(
        default_factory=list,
        description="Current facts close in meaning, left as they are (decide whether one "
        "should be replaced: remember it again with a key).",
    )
    note: str | None = None


class FactList(BaseModel):
    facts: list[FactOut] = Field(description="Oldest first.")


def _fact_out(fact: Fact, limit: int) -> FactOut:
    text = fact.text
    cut = len(text) > limit
    if cut:
        text = f"{text[:limit]}… [{len(fact.text) - limit:,} more characters]"
    return FactOut(
        id=fact.id,
        user_id=fact.user_id,
        text=text,
        kind=fact.kind,
        key=fact.key,
        status=fact.status,
        valid_from=fact.valid_from.isoformat(),
        valid_until=None if fact.valid_until is None else fact.valid_until.isoformat(),
        seen=fact.seen,
        source=fact.source,
        truncated=cut,
    )


def _remember_out(result: RememberResult, limit: int) -> RememberOut:
    return RememberOut(
        status=result.status,
        fact=None if result.fact is None else _fact_out(result.fact, limit),
        superseded=[_fact_out(f, limit) for f in result.superseded],
        similar=[_fact_out(f, limit) for f in result.similar],
        note=result.note,
    )


def user_memory_tools(
    manager: Callable[[], AsyncSessionManager],
    call: Callable[[Awaitable[Any]], Awaitable[Any]],
    limit: int,
) -> tuple[Callable[..., Awaitable[FactList]], Callable[..., Awaitable[RememberOut]]]:
    """``(user_facts, remember)``: the read tool and the write tool, over ``manager()``
    (the server's), each library error mapped to a tool error by ``call``."""

    async def user_facts(
        user_id: UserId,
        key: Annotated[str | None, Field(description="Only the values of this key.")] = None,
        as_of: Annotated[
            str | None,
            Field(description="ISO-8601 date or time: what was true then (default: now)."),
        ] = None,
        include_superseded: Annotated[
            bool, Field(description="Also the values keys had before (their history).")
        ] = False,
    ) -> FactList:
        found = await call(manager().facts(user_id, key, include_superseded, as_of))
        return FactList(facts=[_fact_out(fact, limit) for fact in found])

    async def remember(
        user_id: UserId,
        text: Annotated[str, Field(description="The fact, in a sentence (not empty).")],
        key: FactKey = None,
        kind: Annotated[
            Literal["fact", "preference"],
            Field(description="fact (what is true of the user) or preference (what they like)."),
        ] = "fact",
        source: Annotated[
            str | None, Field(description="Where it was learnt (a conversation id, ...).")
        ] = None,
    ) -> RememberOut:
        result = await call(manager().remember(user_id, text, key, kind, source))
        return _remember_out(result, limit)

    return user_facts, remember
