"""The restore preview: for a session, a budget (and a second one beside it), a model and a
query, exactly what ``restore()`` returns — its text and ``.messages`` — each section's
tokens against the budget, and every considered event's fate (included, summarised,
dropped) with the reason, from the report restore builds.

No request runs two restores: with a second budget the page comes back with the first
budget's column and a placeholder that htmx fills with a second request (``only=2``), so each
answer costs one restore (a 2k and an 8k restore of a 100k-event session in one request took
~250 ms; each alone is within the page budget of 150 ms)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ...errors import InvalidInput, SessionManagerError, SessionNotFound
from ...restore.result import RestoredContext
from ..source import Source
from ..templates import templates
from .forms import integer, is_partial, source, text

__all__ = ["FATES", "MODELS", "Column", "restore_page"]

#: The fates restore's report gives an event, in the order the page lists them ("passages":
#: a long event shown by its passages relevant to the query).
FATES = ("included", "passages", "summarised", "dropped")
#: Suggestions for the model field (any name restore() knows is accepted).
MODELS = ("gpt-4o", "gpt-4.1", "gpt-3.5-turbo", "claude-sonnet-4", "llama-3.1-70b")
_MAX_BUDGET = 2_000_000


@dataclass(frozen=True)
class Column:
    """One budget's preview: the context restore() returned, or why it could not."""

    budget: int
    context: RestoredContext | None
    error: str | None
    #: Where the page fetches this column from when it was not restored in this request.
    later: str | None = None
    #: The page of this budget alone (the placeholder's link for a browser without scripts).
    alone: str | None = None

    @property
    def counts(self) -> dict[str, int]:
        """How many events met each fate, in the order of :data:`FATES` (then any other the
        report names)."""
        if self.context is None:
            return {}
        found = [item.action for item in self.context.report.items]
        order = [*FATES, *sorted(set(found) - set(FATES))]
        return {action: found.count(action) for action in order}


def _restored(
    src: Source, session: str, budget: int, query: str | None, model: str | None
) -> Column:
    """One budget's column: the restored context, or the library's message for this budget
    (an unknown session is not a column's problem: it raises, for the 404 page)."""
    try:
        return Column(budget, src.restore(session, budget, query=query, model=model), None)
    except SessionNotFound:
        raise
    except SessionManagerError as exc:
        return Column(budget, None, str(exc))


def restore_page(request: Request) -> Response:
    src = source(request)
    session = text(request, "session")
    query = text(request, "query")
    model = text(request, "model")
    error: str | None = None
    columns: list[Column] = []
    budgets: list[int] = []
    try:
        budgets.append(integer(request, "budget", 2000, low=-(10**9), high=10**9, what="Budget"))
        second = text(request, "budget2")
        if second is not None:
            budgets.append(
                integer(request, "budget2", 0, low=-(10**9), high=10**9, what="Second budget")
            )
        for budget in budgets:
            if budget > _MAX_BUDGET:
                raise InvalidInput(
                    f"Budget {budget:,} is more than this page previews ({_MAX_BUDGET:,} tokens)."
                )
        only_second = text(request, "only") == "2" and len(budgets) == 2
        if session is not None and only_second and is_partial(request):
            column = _restored(src, session, budgets[1], query, model)
            return templates.TemplateResponse(
                request, "_restore_column.html", {"col": column, "columns": [column]}
            )
        if session is not None:
            columns.append(_restored(src, session, budgets[0], query, model))
            if len(budgets) == 2:
                here = str(request.app.url_path_for("restore"))
                params = dict(request.query_params)
                alone = {**params, "budget": str(budgets[1])}
                alone.pop("budget2", None)
                columns.append(
                    Column(
                        budgets[1],
                        None,
                        None,
                        later=f"{here}?{urlencode({**params, 'only': '2'})}",
                        alone=f"{here}?{urlencode(alone)}",
                    )
                )
    except SessionNotFound:
        raise  # the 404 page
    except SessionManagerError as exc:
        error = str(exc)
    context = {
        "session": session or "",
        "query": query or "",
        "model": model or "",
        "budget": budgets[0] if budgets else 2000,
        "budget2": budgets[1] if len(budgets) > 1 else "",
        "columns": columns,
        "models": MODELS,
        "error": error,
    }
    failed = error is not None or any(column.error for column in columns)
    if is_partial(request):  # (htmx swaps in 2xx answers only: the message must be one)
        return templates.TemplateResponse(request, "_restore_result.html", context)
    return templates.TemplateResponse(
        request, "restore.html", context, status_code=400 if failed else 200
    )
