"""The store's health: the embedding backlog and whether anyone drains it, the last embedding,
the store's and its WAL's size, the schema; and what is in it (sessions, events by agent and
kind, vectors, the embedder behind them)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..templates import templates
from .forms import source

__all__ = ["health_page"]


def health_page(request: Request) -> Response:
    src = source(request)
    return templates.TemplateResponse(
        request, "health.html", {"health": src.health(), "stats": src.stats()}
    )
