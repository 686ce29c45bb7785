"""The search page: a query, its mode (hybrid, semantic, keyword), k, and a session; each
hit with its score, the ranks the search gave it (``Hit.ranks``) and, for a long event found
by a passage, that passage. htmx swaps the hits in place as the form is submitted."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInput, SessionManagerError
from ...events import Hits
from ..templates import templates
from .forms import integer, is_partial, source, text

__all__ = ["MODES", "SCALES", "search_page"]

MODES = ("hybrid", "semantic", "keyword")
#: What a score is in each mode (they differ by an order of magnitude).
SCALES = {"hybrid": "fused (RRF)", "semantic": "cosine", "keyword": "BM25"}


def search_page(request: Request) -> Response:
    src = source(request)
    query = text(request, "q")
    mode = text(request, "mode") or "hybrid"
    session = text(request, "session")
    kind = text(request, "kind")
    where_text = text(request, "where")
    since = text(request, "since")
    until = text(request, "until")
    error: str | None = None
    hits: Hits | None = None
    k = 10
    try:
        k = integer(request, "k", 10, low=1, high=200, what="k (how many hits)")
        where = None if where_text is None else _where(where_text)
        if query is not None:
            hits = src.search(
                query,
                k=k,
                mode=mode,
                session=session,
                kinds=[kind] if kind else None,
                where=where,
                since=since,
                until=until,
            )
    except SessionManagerError as exc:  # a bad mode, kind or session: said beside the form
        error = str(exc)
    context = {
        "q": query or "",
        "mode": mode,
        "k": k,
        "session": session or "",
        "kind": kind or "",
        "where": where_text or "",
        "since": since or "",
        "until": until or "",
        "modes": MODES,
        "scale": SCALES.get(mode, ""),
        "hits": hits,
        "error": error,
    }
    if is_partial(request):  # (htmx swaps in 2xx answers only: the message must be one)
        return templates.TemplateResponse(request, "_hits.html", context)
    return templates.TemplateResponse(
        request, "search.html", context, status_code=400 if error else 200
    )


def _where(written: str) -> dict[str, Any]:
    """A metadata filter as JSON (``{"tool": "psql"}``, ``{"year": {"$gte": 2024}}``); the
    library checks its operators."""
    try:
        parsed = json.loads(written)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"The metadata filter is not JSON ({exc.msg}); write e.g. "
            '{"tool": "psql"} or {"year": {"$gte": 2024}}.'
        ) from None
    if not isinstance(parsed, dict):
        raise InvalidInput('The metadata filter is a JSON object, e.g. {"tool": "psql"}.')
    return parsed
