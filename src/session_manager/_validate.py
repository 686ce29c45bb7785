"""Validation shared by every write path: ``record()`` and ``StoreAdmin.import_records()``.

Everything here checks its input and returns the stored form; nothing does I/O. A rejected
value raises :class:`~session_manager.errors.InvalidInput` (or a subclass) naming the value
and the fix, before any transaction opens, so bad input writes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from . import _json
from ._time import now_us, to_us
from .errors import InvalidInput
from .events import CUSTOM_KIND_IMPORTANCE, DEFAULT_IMPORTANCE, validate_kind

__all__ = ["EVENT_STATUSES", "PreparedEvent", "identifier", "prepare_event", "text"]

#: The statuses an event of each kind may have; kinds not listed have none (``None``).
EVENT_STATUSES: Mapping[str, tuple[str, ...]] = {
    "pending": ("open", "done", "cancelled"),
    "error": ("unresolved", "resolved"),
}

#: ``(kind, content, payload_json, importance, tags, metadata, created_us)``
PreparedEvent = tuple[str, str, str | None, float, tuple[str, ...], dict[str, Any], int]


# What to say when a text argument is empty: each message names the argument it is about.
_EMPTY_HINTS = {
    "content": "give the text to store (e.g. what the agent did)",
    "query": "give the words or question to search for",
    "goal": "give the session's goal (what the agent is trying to do)",
    "agent_id": "give the agent's name (e.g. 'researcher')",
}


def text(value: Any, what: str) -> str:
    """A non-empty string that UTF-8 can store.

    >>> text("ran the tests", "content")
    'ran the tests'
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__} {value!r:.60}.")
    _json.check_text(value, what)
    if not value.strip():
        hint = _EMPTY_HINTS.get(what, f"give a non-empty {what}")
        raise InvalidInput(f"{what} is empty; {hint}.")
    return value


def identifier(value: Any, what: str) -> str:
    """A name (agent, user, pool, tag): at most 200 characters, no outer spaces.

    >>> identifier("researcher", "agent_id")
    'researcher'
    """
    name = text(value, what)
    if len(name) > 200 or name != name.strip():
        raise InvalidInput(f"{what} {name!r:.60} must be ≤ 200 characters with no outer spaces.")
    return name


def prepare_event(
    kind: str,
    content: str,
    payload: Any,
    importance: float | None,
    tags: Sequence[str] | None,
    metadata: Mapping[str, Any] | None,
    created_at: datetime | str | None,
) -> PreparedEvent:
    """Validate one event's fields and return their stored form (see :data:`PreparedEvent`).

    >>> prepare_event("fact", "x", {"b": 1}, None, ["t"], None, "2026-01-01T00:00:00Z")
    ('fact', 'x', '{"b":1}', 0.6, ('t',), {}, 1767225600000000)
    """
    validate_kind(kind)
    content = text(content, "content")
    payload_json = None if payload is None else _json.dumps(payload, "payload")
    if importance is None:
        importance = DEFAULT_IMPORTANCE.get(kind, CUSTOM_KIND_IMPORTANCE)
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not math.isfinite(importance)
        or not 0 <= importance <= 1
    ):
        raise InvalidInput(f"importance must be a number from 0 to 1, got {importance!r}.")
    if isinstance(tags, str):
        raise InvalidInput(f"tags must be a list of strings, got the string {tags!r}.")
    tag_tuple = tuple(identifier(tag, "tag") for tag in (tags or ()))
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
    meta = dict(metadata or {})
    _json.dumps(meta, "metadata")
    when = now_us() if created_at is None else to_us(created_at)
    return kind, content, payload_json, float(importance), tag_tuple, meta, when
