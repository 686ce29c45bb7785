"""What an agent knows about a user: every fact it remembered, grouped by key, each with its
status (current, superseded, retracted), when it was (or is) true, when it was learnt, how
often, why it was retracted, and the session it lives in; optionally as it stood at a time
(``as_of``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...core.clock import to_us
from ...memory import Fact
from ..templates import templates
from .forms import source, text

__all__ = ["users_page"]


def users_page(request: Request) -> Response:
    src = source(request)
    agent = text(request, "agent")
    user = text(request, "user")
    as_of = text(request, "as_of")
    groups: list[tuple[str, list[Fact]]] = []
    current = 0
    if user is not None:
        agent = src.agent_for(agent)
        history = src.fact_history(agent, user)
        if as_of is not None:
            when = to_us(as_of, "as_of")  # the library's message for a bad time
            history = [fact for fact in history if fact.true_at(when)]
        by_key: dict[str, list[Fact]] = {}
        for fact in history:  # a fact without a key is its own group
            by_key.setdefault(fact.key or f"\0{fact.id}", []).append(fact)
        groups = sorted(
            ((key, facts) for key, facts in by_key.items()),
            key=lambda pair: (pair[0].startswith("\0"), pair[0]),
        )
        current = sum(1 for fact in history if fact.status == "current")
    return templates.TemplateResponse(
        request,
        "users.html",
        {
            "agent": agent or "",
            "user": user or "",
            "as_of": as_of or "",
            "agents": src.agents(),
            "fixed_agent": src.agent,
            "groups": groups,
            "current": current,
            "asked": user is not None,
        },
    )
