"""A large JSON tool output seen as its records, so that restore can show the ones a query
asks about (text/json_records.py) instead of a summary that keeps its keys and odd items.

The records are a text made from the payload, so the view is the event with that text as
its content and no payload: restore's passages (restore/passages.py) then rank its record
lines by the query's words and show the best, under a header naming the output. Made once
per output and kept (an agent restores the same outputs every turn): by event, with the
output's size, in a bounded cache that an erasure empties. (In search's room beside the
passages' analyses, which it shares its life with.) A search hit of such an output names the
records its query's words point at (:func:`best_records`, :attr:`memlane.Hit.records`):
the flattened content its passage is cut from has lost which fields belong to one record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..core.lru import MISSING, SizedLru
from ..events import Event
from ..text.json_records import line_spans, record_lines, record_of
from ..text.passages import Cutter
from ..text.shrink import dumps
from .passage_terms import analysed, matching_passages, query_stems

__all__ = ["RECORDS_IN_HIT", "RecordView", "best_records", "forget_record_views", "record_view"]

#: The records a search hit names at most (:attr:`memlane.Hit.records`)
RECORDS_IN_HIT = 3

#: What the kept views may hold, in characters of their text (each at most
#: :data:`~memlane.text.json_records.VIEW_CHARS`).
_VIEWS_CHARS = 16 * 1024 * 1024
_VIEWS: SizedLru[RecordView | None] = SizedLru(_VIEWS_CHARS, lambda view: _chars(view))
#: a payload this short is shown whole or summarised as it is: the view would add nothing
_SHORT_CHARS = 1_000
#: the kinds of event whose text may be a tool's JSON output
_OUTPUTS = ("tool_output", "step")


@dataclass(frozen=True, slots=True)
class RecordView:
    """The event seen as its record lines (``event``: content = the lines, no payload) and
    their passages' spans (``spans``: a record each)."""

    event: Event
    spans: list[tuple[int, int]]


def is_json_output(event: Event) -> bool:
    """Whether ``event`` is a JSON tool output of some size: a payload that its content
    flattens (``record_tool_output``), or a text output that is JSON (a pretty-printed API
    response passed as a string: whether it parses is found when its view is made)."""
    if event.metadata.get("derived_content") is True:
        return (
            isinstance(event.payload, Mapping | list)
            and (event.payload_chars or len(event.content)) >= _SHORT_CHARS
        )
    content = event.content
    return (
        event.kind in _OUTPUTS
        and event.payload is None
        and len(content) >= _SHORT_CHARS
        and content.lstrip()[:1] in ("{", "[")
        and content.rstrip()[-1:] in ("}", "]")
    )


def record_view(event: Event, payload_of: Callable[[Event], Any] | None) -> RecordView | None:
    """``event`` seen as its records, or None when it is not a JSON output of some size.
    ``payload_of(event)``: its whole payload, when ``event`` holds only the preview of it
    (restore's reads); without it, such an event has no view."""
    if not is_json_output(event) or not event.id:
        return None
    if event.preview and payload_of is None:
        return None
    key = (event.id, event.payload_chars or 0, hash(event.content))
    found = _VIEWS.get(key)
    if found is not MISSING:
        return found
    made = _view(event, payload_of)  # (outside the cache's lock)
    _VIEWS.put(key, made)
    return made


def best_records(event: Event, query: str, cutter: Cutter) -> tuple[str, ...]:
    """The records of ``event``, a JSON tool output, that ``query``'s words point at, best
    first (at most :data:`RECORDS_IN_HIT`), each as its path and its JSON
    (``data.invoices[23]: {"id": 23, ...}``; a record too big for a line is its members'
    lines): ranked as restore ranks passages, by how many of the words one line holds, then
    BM25 (``search/passage_terms.matching_passages``). Empty when ``event`` is not a JSON
    output of some size, was read by its preview only, or no record holds a query word."""
    view = record_view(event, None)
    if view is None:
        return ()
    words = query_stems(query)
    analysis = analysed(view.event, cutter, view.spans) if words else None
    if analysis is None:
        return ()
    content = view.event.content
    chosen = matching_passages(content, analysis, words)[:RECORDS_IN_HIT]
    return tuple(content[slice(*analysis.spans[i])].strip() for i in chosen)


def forget_record_views() -> None:
    """Let go of every kept view (an erasure: they are made from the erased payloads)."""
    _VIEWS.clear()


def _view(event: Event, payload_of: Callable[[Event], Any] | None) -> RecordView | None:
    if event.metadata.get("derived_content") is True:
        payload = event.payload
        if event.preview and payload_of is not None:
            payload = payload_of(event)
        chars = event.payload_chars or len(dumps(payload))
        # its size in a passages header: the payload's share of the recorded count (which
        # counts the flattened content and the payload both)
        tokens = round(event.token_count * chars / (chars + len(event.content)))
    else:  # a text output that may be JSON
        try:
            payload = json.loads(event.content)
        except ValueError:
            return None
        tokens = event.token_count
    if not isinstance(payload, Mapping | list):
        return None
    lines, whole = record_lines(payload)
    if len(lines) < 2:
        return None
    text = "\n".join(lines)
    spans = line_spans(text, key=record_of)  # (a record is a passage of its own)
    if not whole:
        # (after the last passage: the passages then do not reach the end, and the header
        # says they are of the output's beginning)
        text += "\n…"
    if len(spans) < 2:
        return None
    seen = replace(
        event,
        content=text,
        payload=None,
        preview=False,
        token_count=tokens,
        metadata={k: v for k, v in event.metadata.items() if k != "derived_content"},
    )
    return RecordView(seen, spans)


def _chars(view: RecordView | None) -> int:
    return 64 if view is None else len(view.event.content) + 64
