"""The documents in an agent's knowledge (:meth:`SessionManager.ingest`): name, version,
chunks, pool and when last updated."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..templates import templates
from .forms import source, text

__all__ = ["knowledge_page"]


def knowledge_page(request: Request) -> Response:
    src = source(request)
    asked = text(request, "agent")
    agents = src.agents()
    agent = src.agent_for(asked) if asked is not None or len(agents) == 1 or src.agent else None
    documents = src.documents(agent) if agent is not None else None
    return templates.TemplateResponse(
        request,
        "knowledge.html",
        {
            "agent": agent or "",
            "agents": agents,
            "fixed_agent": src.agent,
            "documents": documents,
        },
    )
