"""How restore() writes events as text: every token should earn its place.

* One block per event, without a timestamp of its own: a section's events are printed oldest
  first, a ``[2026-11-22 10:31]`` line opens each new day (or the first event of a section),
  and a ``[10:40] `` prefix marks an event whose minute differs from the one before it. Time
  is said when it changes, not on every line (a full stamp is ~14 tokens).
* Runs of identical lines inside content collapse to one line and ``(×40)``.
* A payload, if any, follows on one ``"  payload: "`` line of compact JSON. Continuation lines
  of content are indented by four spaces, so content can never forge a payload line or a
  section header; :func:`json_fragments` returns every payload for checking.
* Bookkeeping that no reader needs is left out: a completed step's ``pending_id``, the
  flattened copy of a JSON tool output kept for search (``metadata["derived_content"]``).
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ..events import Event, Session
from ..memory import fact_label
from ..text.shrink import dumps

__all__ = [
    "INDENT",
    "PAYLOAD_PREFIX",
    "TITLES",
    "json_fragments",
    "opening_line",
    "render_block",
    "shown_content",
    "shown_payload",
    "stamp",
]

PAYLOAD_PREFIX = "  payload: "
TITLES = {
    "about": "",
    "goal": "## Goal",
    "instructions": "## The user's instructions and preferences",
    "user": "## About the user",
    "pending": "## Pending steps",
    "important": "## Important",
    "earlier": "## Earlier (summarised)",
    "reference": "## Reference",
    "relevant": "## Relevant history",
    "recent": "## Recent",
}
INDENT = "\n    "  # continuation lines: deeper than PAYLOAD_PREFIX, so never mistaken for it
_UTC = timezone.utc
_REPEAT_MIN = 3  # a line repeated this many times in a row collapses to "line (×N)"


def utc(moment: datetime) -> datetime:
    if moment.tzinfo is _UTC:  # what the stores return: nothing to convert
        return moment
    return moment.replace(tzinfo=_UTC) if moment.tzinfo is None else moment.astimezone(_UTC)


def stamp(previous: Event | None, event: Event, *, by_minute: bool = True) -> tuple[str, str]:
    """``(line before the block, prefix of its first line)`` that say ``event``'s time.

    A new day (or the first event) gets a line of its own; a new minute within the same
    day a short prefix; the same minute nothing. ``by_minute=False`` (history sections)
    writes the day line without a time: :func:`day_stamps` then decides, per day, whether
    minutes are worth saying at all.

    >>> a = Event("1", "s", "a", "fact", "x", datetime(2026, 11, 22, 10, 31, tzinfo=_UTC))
    >>> b = Event("2", "s", "a", "fact", "y", datetime(2026, 11, 22, 10, 40, tzinfo=_UTC))
    >>> stamp(None, a), stamp(a, b), stamp(b, b)
    (('[2026-11-22 10:31]\\n', ''), ('', '[10:40] '), ('', ''))
    >>> stamp(None, a, by_minute=False), stamp(a, b, by_minute=False)
    (('[2026-11-22]\\n', ''), ('', '[10:40] '))
    """
    when = utc(event.created_at)
    before = None if previous is None else utc(previous.created_at)
    if before is None or before.date() != when.date():
        return (f"[{when:%Y-%m-%d %H:%M}]\n" if by_minute else f"[{when:%Y-%m-%d}]\n"), ""
    if (before.hour, before.minute) != (when.hour, when.minute):
        return "", f"[{when:%H:%M}] "
    return "", ""


def day_stamps(events: Sequence[Event]) -> list[tuple[str, str]]:
    """Time marks for a history section's events (oldest first), dated by day.

    A day line opens each day; minutes are said only on days whose events differ in minute,
    and then on every event whose minute differs from the one before (the day's first too).
    """
    marks: list[tuple[str, str]] = []
    minutes_by_day: dict[Any, set[tuple[int, int]]] = {}
    for event in events:
        when = utc(event.created_at)
        minutes_by_day.setdefault(when.date(), set()).add((when.hour, when.minute))
    previous: Event | None = None
    for event in events:
        when = utc(event.created_at)
        head, prefix = stamp(previous, event, by_minute=False)
        if len(minutes_by_day[when.date()]) > 1:
            if head:
                prefix = f"[{when:%H:%M}] "
        else:
            prefix = ""
        marks.append((head, prefix))
        previous = event
    return marks


def render_block(
    event: Event, content: str, payload: str | None, *, summarised: bool = False
) -> str:
    """One event's block, without its time (see :func:`stamp`)."""
    label = label_of(event) + (" [summarised]" if summarised else "")
    # splitlines() knows every line break (\r, \x85, \u2028, ...): all become an indented
    # "\n    ", so no content line can start with PAYLOAD_PREFIX or look like a header.
    body = INDENT.join(content.splitlines()) if content else ""
    line = f"- {label}: {body}" if body else f"- {label}"
    return line if payload is None else f"{line}\n{PAYLOAD_PREFIX}{payload}"


def collapse_repeats(lines: Sequence[str]) -> list[str]:
    """Runs of identical lines become one line with a count.

    >>> collapse_repeats(["Traceback:", "  at f()", "  at f()", "  at f()", "end"])
    ['Traceback:', '  at f() (×3)', 'end']
    """
    # Most texts repeat no line: one comparison of each line with the next, in C, says so
    # (a restore of long events ran this ~120 times, ~5 ms in the Python loop below).
    if not any(map(operator.eq, lines, itertools.islice(lines, 1, None))):
        return list(lines)
    out: list[str] = []
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and lines[j + 1] == lines[i]:
            j += 1
        run = j - i + 1
        if run >= _REPEAT_MIN and lines[i].strip():
            out.append(f"{lines[i]} (×{run})")
        else:
            out.extend(lines[i : j + 1])
        i = j + 1
    return out


def label_of(event: Event) -> str:
    kind = _oneline(event.kind)
    about_user = fact_label(event.kind, event.metadata)
    if about_user is not None:  # a user fact: its kind, key and since when
        return _oneline(about_user)
    document = event.metadata.get("document")
    if event.kind == "knowledge" and document is not None:  # cited as source#chunk
        return f"knowledge ({citation(str(document), event.metadata.get('chunk', '?'))})"
    if event.kind in ("step", "tool_output"):
        tool = event.metadata.get("tool")
        if tool is None and isinstance(event.payload, dict):
            tool = event.payload.get("tool")
        return f"{kind} (tool: {_oneline(str(tool))})" if tool is not None else kind
    if event.kind == "message":
        return _oneline(event.role or "message")
    if event.kind == "error":
        return f"error ({'resolved' if event.status == 'resolved' else 'unresolved'})"
    if event.kind == "pending":
        if event.status == "cancelled":
            reason = event.metadata.get("cancel_reason")
            return f"pending (cancelled: {_oneline(str(reason))})" if reason else "cancelled"
        return "pending" if event.status in (None, "open") else f"pending ({event.status})"
    if event.status:
        return f"{kind} ({_oneline(event.status)})"
    return kind


def shown_content(event: Event) -> str:
    """The content to render: none when it is only a flattened copy of the payload.

    ``record_tool_output`` stores JSON output as the payload and a "key: value; ..."
    flattening of it as content (for search); printing both would pay for it twice.
    """
    if event.payload is not None and event.metadata.get("derived_content") is True:
        return ""
    content = event.content
    if content.count("\n") >= _REPEAT_MIN - 1:  # cheap test first: most content is one line
        content = "\n".join(collapse_repeats(content.splitlines()))
    return content


def shown_payload(event: Event) -> Any:
    """The payload to render, without bookkeeping: a completed step's link to its pending
    step, a step's tool when the label already names it, and a message's native object."""
    payload = event.payload
    if event.kind == "summary":
        return None  # what it covers is bookkeeping; its text is the summary
    if event.kind == "message":
        # a framework's own message object (add_message(payload=...)), kept verbatim for the
        # framework; its content is the text rendering, which is what a model should read
        return None
    if event.kind == "step" and isinstance(payload, dict):
        tool = event.metadata.get("tool")
        drop = {"pending_id"} | (
            {"tool"} if tool is not None and payload.get("tool") == tool else set()
        )
        if drop & payload.keys():
            payload = {key: value for key, value in payload.items() if key not in drop}
            return payload or None
    return payload


def payload_json(event: Event) -> str | None:
    payload = shown_payload(event)
    return None if payload is None else dumps(payload)


def opening_line(session: Session, *, other_sessions: bool) -> str:
    """What the block is, whose it is, and how to read its times (~25 tokens)."""
    who = [f"agent {session.agent_id}"]
    if session.user_id:
        who.append(f"user {session.user_id}")
    scope = ", with its earlier sessions" if other_sessions else ""
    line = (
        f"Memory of {', '.join(who)} (session {session.status} since "
        f"{utc(session.created_at):%Y-%m-%d %H:%M} UTC{scope}). Events oldest first."
    )
    if session.metadata:
        meta = json.dumps(session.metadata, ensure_ascii=False, separators=(",", ":"))
        line += f"\nSession metadata: {' '.join(meta.split())[:400]}"
    return line


def json_fragments(text: str) -> list[str]:
    """Every payload JSON fragment of a restored text (the rest of each payload line).

    >>> json_fragments('- step: ran\\n  payload: {"ok":true}')
    ['{"ok":true}']
    """
    return [
        line[len(PAYLOAD_PREFIX) :] for line in text.split("\n") if line.startswith(PAYLOAD_PREFIX)
    ]


#: how long a document's name may be in a citation before its middle gives way
CITATION_NAME = 48


def citation(document: str, chunk: object) -> str:
    """``document#chunk``, whole whatever the document's name: a path is cited by its file
    name, and a name longer than :data:`CITATION_NAME` loses its middle, never its end or the
    chunk number (a cut label could not be looked up).

    >>> citation("/srv/docs/runbook.md", 3)
    'runbook.md#3'
    >>> citation("x" * 30 + "middle" + "y" * 30, 12)
    'xxxxxxxxxxxxxxxxxxxxxxx…yyyyyyyyyyyyyyyyyyyyyyyy#12'
    """
    name = " ".join(document.split())
    if "/" in name.rstrip("/"):
        name = name.rstrip("/").rsplit("/", 1)[1]
    if len(name) > CITATION_NAME:
        head = (CITATION_NAME - 1) // 2
        name = name[:head] + "…" + name[len(name) - (CITATION_NAME - 1 - head) :]
    return f"{name}#{_oneline(str(chunk))}"


def _oneline(text: str) -> str:
    return " ".join(text.split())[:64]
