"""The sessions page: agent, user, status, goal, events and tokens, last activity; filtered
by agent, user, status and text (goal, id or key), a page at a time."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...events import SESSION_STATUSES
from ..templates import templates
from .forms import integer, source, text

__all__ = ["PER_PAGE", "SCAN", "sessions_page"]

#: Sessions per page.
PER_PAGE = 50
#: A text filter looks at this many of the most recently active sessions (a substring has no
#: index: ~135 ms to read 100k sessions), unless the page is asked to look at all of them
#: (``scan=all``).
SCAN = 10_000


def sessions_page(request: Request) -> Response:
    src = source(request)
    filters = {
        "agent": text(request, "agent"),
        "user": text(request, "user"),
        "status": text(request, "status"),
        "q": text(request, "q"),
    }
    page = integer(request, "page", 1, low=1, high=10**9, what="The page")
    everything = text(request, "scan") == "all"
    found = src.sessions(
        agent=filters["agent"],
        user=filters["user"],
        status=filters["status"],
        text=filters["q"],
        page=page,
        per_page=PER_PAGE,
        scan=None if everything else SCAN,
    )
    query = {key: value for key, value in filters.items() if value is not None}
    if everything and filters["q"] is not None:
        query["scan"] = "all"
    return templates.TemplateResponse(
        request,
        "sessions.html",
        {
            "found": found,
            "filters": filters,
            "query": query,
            "scan": None if everything or filters["q"] is None else SCAN,
            "agents": src.agents(),
            "fixed_agent": src.agent,
            "statuses": SESSION_STATUSES,
        },
    )
