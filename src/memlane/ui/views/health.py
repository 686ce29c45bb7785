"""The store's health: the embedding backlog, how long its oldest event has waited (the
worker lag, whoever embeds), the last embedding and the last error any worker recorded, the
vector index, the store's and its WAL's size, the schema; and what is in it (sessions,
events by agent and kind, vectors, the embedder behind them)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...store import describe_url
from ..templates import templates
from .forms import source

__all__ = ["health_page"]


def health_page(request: Request) -> Response:
    src = source(request)
    index = None if src.index is None else describe_url(src.index)  # (no password shown)
    return templates.TemplateResponse(
        request,
        "health.html",
        {
            "health": src.health(),
            "stats": src.stats(),
            "index": index,
        },
    )
