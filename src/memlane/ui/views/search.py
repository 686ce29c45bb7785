"""The search page: a query, its mode (hybrid, semantic, keyword), k, and a session; each
hit with its score, the ranks the search gave it (``Hit.ranks``) and, for a long event found
by a passage, that passage. htmx swaps the hits in place as the form is submitted."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ...errors import SessionManagerError
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
    error: str | None = None
    hits: Hits | None = None
    k = 10
    try:
        k = integer(request, "k", 10, low=1, high=200, what="k (how many hits)")
        if query is not None:
            hits = src.search(
                query, k=k, mode=mode, session=session, kinds=[kind] if kind else None
            )
    except SessionManagerError as exc:  # a bad mode, kind or session: said beside the form
        error = str(exc)
    context = {
        "q": query or "",
        "mode": mode,
        "k": k,
        "session": session or "",
        "kind": kind or "",
        "modes": MODES,
        "scale": SCALES.get(mode, ""),
        "hits": hits,
        "error": error,
    }
    name = "_hits.html" if is_partial(request) else "search.html"
    return templates.TemplateResponse(request, name, context, status_code=400 if error else 200)
