"""The inspector's web application: its routes, the guard in front of them, and the pages
for errors. :func:`create_app` builds it on a :class:`~memlane.ui.source.Source`.

Read-only unless asked: on a source opened read-only (``memlane ui`` without
``--allow-write``) every route answers GET (HEAD) only and none writes. On a writable source
two more routes exist: ``/confirm`` (a GET page that asks) and ``/act`` (the POST that does,
with a CSRF token): :mod:`.views.write`.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import EventNotFound, SessionManagerError, SessionNotFound
from .security import Guard
from .source import Source
from .views.errors import http_error, library_error, not_found, unexpected_error
from .views.health import health_page
from .views.knowledge import knowledge_page
from .views.pools import pools_page
from .views.restore import restore_page
from .views.search import search_page
from .views.sessions import sessions_page
from .views.timeline import timeline_page
from .views.users import users_page
from .views.write import act, confirm_page

__all__ = ["STATIC", "create_app"]

#: The page's own files: htmx (vendored, with its licence), the style sheet, the script.
STATIC = Path(__file__).parent / "static"


def _home(request: Request) -> Response:
    return RedirectResponse(request.url_for("sessions"), status_code=307)


def create_app(
    source: Source, *, token: str, hosts: Iterable[str], close_source: bool = True
) -> Starlette:
    """The inspector's ASGI application on ``source``, answering requests whose Host is in
    ``hosts`` and that carry ``token`` (:mod:`memlane.ui.security`). ``close_source``: close
    the source when the application shuts down.

    >>> app = create_app(source, token=new_token(), hosts=["127.0.0.1:8760"])  # doctest: +SKIP
    """

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if close_source:
            source.close()

    routes = [
        Route("/", _home, methods=["GET"]),
        Route("/sessions", sessions_page, methods=["GET"], name="sessions"),
        Route("/sessions/{session:path}", timeline_page, methods=["GET"], name="timeline"),
        Route("/search", search_page, methods=["GET"], name="search"),
        Route("/restore", restore_page, methods=["GET"], name="restore"),
        Route("/users", users_page, methods=["GET"], name="users"),
        Route("/knowledge", knowledge_page, methods=["GET"], name="knowledge"),
        Route("/pools", pools_page, methods=["GET"], name="pools"),
        Route("/health", health_page, methods=["GET"], name="health"),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    if not source.read_only:  # memlane ui --allow-write
        routes += [
            Route("/confirm", confirm_page, methods=["GET"], name="confirm"),
            Route("/act", act, methods=["POST"], name="act"),
        ]
    app = Starlette(
        routes=routes,
        middleware=[Middleware(Guard, token=token, hosts=list(hosts))],
        exception_handlers={
            SessionNotFound: not_found,
            EventNotFound: not_found,
            SessionManagerError: library_error,
            HTTPException: http_error,
            Exception: unexpected_error,
        },
        lifespan=lifespan,
    )
    app.state.source = source
    app.state.csrf = secrets.token_urlsafe(32)  # what the write forms carry (no cookie)
    return app
