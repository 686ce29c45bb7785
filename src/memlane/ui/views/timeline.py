"""A session's timeline: its events in log order, a page at a time (a session of 100k
events opens as fast as one of ten), each with its kind, role, time, importance, status,
recall count, tags and metadata; long contents and payloads folded with their size."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..templates import templates
from .forms import integer, source, text

__all__ = ["PER_PAGE", "timeline_page"]

#: Events per page.
PER_PAGE = 100


def timeline_page(request: Request) -> Response:
    src = source(request)
    info = src.session(request.path_params["session"])
    event = text(request, "event")
    if event is not None:  # a link to one event: the page that shows it, scrolled to it
        page = src.event_page(info.session.id, event, PER_PAGE)
        path = request.app.url_path_for("timeline", session=info.session.id)
        return RedirectResponse(f"{path}?page={page}#e-{event}", status_code=303)
    kind = text(request, "kind")
    kinds = [kind] if kind else None
    pages = max(1, -(-info.events // PER_PAGE))
    last = text(request, "page") == "last"
    page = pages if last else integer(request, "page", 1, low=1, high=10**9, what="The page")
    events = src.events(info.session.id, page=page, per_page=PER_PAGE, kinds=kinds)
    return templates.TemplateResponse(
        request,
        "timeline.html",
        {
            "info": info,
            "session": info.session,
            "events": events,
            "page": page,
            # (with a kind filter the count is of every kind: "Next" shows while it may help)
            "pages": pages,
            "more": len(events) == PER_PAGE,
            "first_number": (page - 1) * PER_PAGE + 1,
            "kind": kind,
        },
    )
