"""Reading a page's query parameters: empty means absent, a number must be one, and a bad
value is the library's :class:`~memlane.errors.InvalidInput` (shown on the page, 400)."""

from __future__ import annotations

from starlette.requests import Request

from ...errors import InvalidInput
from ..source import Source

__all__ = ["integer", "is_partial", "source", "text"]


def text(request: Request, name: str) -> str | None:
    """The parameter's text, stripped; None when absent or blank."""
    value = request.query_params.get(name, "").strip()
    return value or None


def integer(request: Request, name: str, default: int, *, low: int, high: int, what: str) -> int:
    """The parameter as an integer within ``low..high`` (``default`` when absent)."""
    raw = text(request, name)
    if raw is None:
        return default
    try:
        value = int(raw.replace(",", "").replace("_", ""))
    except ValueError:
        raise InvalidInput(f"{what} must be a whole number, not {raw!r}.") from None
    if not low <= value <= high:
        raise InvalidInput(f"{what} must be between {low:,} and {high:,}, not {value:,}.")
    return value


def is_partial(request: Request) -> bool:
    """Whether htmx asked for a fragment (it sends ``HX-Request``), not a whole page."""
    return request.headers.get("hx-request") == "true"


def source(request: Request) -> Source:
    """The app's :class:`~memlane.ui.source.Source`."""
    found: Source = request.app.state.source
    return found
