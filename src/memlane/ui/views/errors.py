"""What went wrong, as a page: an unknown session is a 404, a value the library refused is a
400 with the library's own message, anything else a 500 that names no more than the
exception's type (the traceback goes to the server's log, never to the page)."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from ...errors import EventNotFound, SessionNotFound
from ..templates import templates

__all__ = ["http_error", "library_error", "not_found", "unexpected_error"]

log = logging.getLogger("memlane.ui")


def _page(request: Request, status: int, title: str, message: str) -> Response:
    return templates.TemplateResponse(
        request, "error.html", {"title": title, "message": message}, status_code=status
    )


def not_found(request: Request, exc: Exception) -> Response:
    """An unknown session, event or fact: 404, with the library's "did you mean"."""
    assert isinstance(exc, SessionNotFound | EventNotFound)
    return _page(request, 404, "Not found", str(exc))


def library_error(request: Request, exc: Exception) -> Response:
    """A value the library refused (a bad filter, budget or kind): 400, its message."""
    return _page(request, 400, "Cannot show this", str(exc))


def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    title = "Not found" if exc.status_code == 404 else "Cannot show this"
    message = exc.detail if exc.status_code != 404 else f"No page at {request.url.path!r}."
    return _page(request, exc.status_code, title, message)


def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("memlane ui: %s on %s", type(exc).__name__, request.url.path)
    return _page(
        request,
        500,
        "Unexpected error",
        f"Unexpected {type(exc).__name__}; the server's output has the traceback. "
        "Please report it.",
    )
