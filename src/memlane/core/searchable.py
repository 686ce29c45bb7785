"""The text keyword search indexes for an event, and JSON flattened into such text.

A JSON tool output (``record_tool_output``) has no words of its own: its ``content`` is the
payload flattened ("rows.status: CRITICAL disk full; ...") and cut to
:data:`CONTENT_CHARS`, which is what restore and every reader show. Keyword search indexes
the payload flattened *whole* instead, so that a value deep inside a 3,000-row output is
found; the whole flattening is made off the caller's path (the background worker, or the
in-memory keyword index as it reads the row) and never stored as the event's content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONTENT_CHARS", "flatten_json", "needs_whole_text", "searchable_text"]

#: The characters of a flattened JSON output kept as its event's content.
CONTENT_CHARS = 4_000


def flatten_json(value: Any, limit: int | None = CONTENT_CHARS) -> str:
    """``{"a": {"b": 1}, "c": [2]}`` → ``"a.b: 1; c: 2"``: JSON made searchable as text, at
    most ``limit`` characters (None: all of it). A cut flattening is a prefix of the whole.

    >>> flatten_json({"a": {"b": 1}, "c": [2, None]})
    'a.b: 1; c: 2'
    >>> flatten_json({"rows": list(range(5))}, limit=20)
    'rows: 0; rows: 1; ro'
    """
    parts: list[str] = []
    size = 0
    bound = float("inf") if limit is None else limit
    # Iterative (a deep payload must not hit the recursion limit), in document order.
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack and size - 2 <= bound:  # (size - 2: the joined length so far)
        item, path = stack.pop()
        if isinstance(item, Mapping):
            stack.extend(
                (sub, f"{path}.{key}" if path else str(key))
                for key, sub in reversed(list(item.items()))
            )
        elif isinstance(item, list | tuple):
            stack.extend((sub, path) for sub in reversed(item))
        elif item is not None:
            text = f"{path}: {item}" if path else str(item)
            parts.append(text)
            size += len(text) + 2
    joined = "; ".join(parts)
    return joined if limit is None else joined[:limit]


def needs_whole_text(content: str, derived: bool) -> bool:
    """Whether an event's searchable text is more than its content: a flattened JSON output
    (``derived``) cut at :data:`CONTENT_CHARS`."""
    return derived and len(content) >= CONTENT_CHARS


def searchable_text(content: str, payload: Any, derived: bool) -> str:
    """What keyword search indexes for an event: its content, or for a flattened JSON
    output that was cut, its whole payload (decoded) flattened.

    >>> searchable_text("rows: 1", {"rows": [1]}, derived=True)
    'rows: 1'
    >>> rows = [{"status": "ok"}] * 700 + [{"status": "CRITICAL disk full"}]
    >>> head = flatten_json({"rows": rows})
    >>> "CRITICAL" in head, "CRITICAL" in searchable_text(head, {"rows": rows}, derived=True)
    (False, True)
    """
    if not needs_whole_text(content, derived):
        return content
    return flatten_json(payload, limit=None)
