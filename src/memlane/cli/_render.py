"""How events, sessions and sizes look in the terminal (rich; plain text when piped)."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from ..events import Event

__all__ = [
    "ago",
    "event_body",
    "fold_json",
    "human_size",
    "kind_label",
    "shorten",
    "snippet",
    "stamp",
    "status_text",
    "wrap_line",
]

KIND_STYLES = {
    "goal": "bold magenta",
    "step": "cyan",
    "tool_output": "blue",
    "decision": "bold green",
    "fact": "green",
    "pending": "yellow",
    "error": "bold red",
    "message": "white",
    "summary": "magenta",
}
STATUS_STYLES = {
    "active": "green",
    "completed": "blue",
    "failed": "red",
    "abandoned": "dim",
    "open": "yellow",
    "done": "green",
    "cancelled": "dim",
    "unresolved": "bold red",
    "resolved": "green",
    "current": "green",
    "superseded": "dim",
    "retracted": "dim red",
}
#: Payloads longer than this are folded unless --full (and one-line contents at twice it,
#: when the column's width is not known).
FOLD_CHARS = 160
#: How many lines of a content the timeline shows unless --full.
FOLD_LINES = 4
_WORD = re.compile(r"\w{3,}")


def table_of(*columns: str) -> Table:
    """A plain table with these column headings (the look every command shares)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for name in columns:
        table.add_column(name)
    return table


def human_size(size: int) -> str:
    """``38212`` → ``"38.2 kB"`` (decimal units, like file managers).

    >>> human_size(512), human_size(38_212), human_size(5_300_000)
    ('512 B', '38.2 kB', '5.3 MB')
    """
    if size < 1000:
        return f"{size} B"
    value, units = size / 1000, ["kB", "MB", "GB"]
    while value >= 1000 and len(units) > 1:
        value, units = value / 1000, units[1:]
    return f"{value:.1f} {units[0]}"


def stamp(moment: datetime, *, seconds: bool = True) -> str:
    """``2026-11-22 10:31:05`` in UTC."""
    return moment.astimezone(timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    )


def ago(moment: datetime, now: datetime | None = None) -> str:
    """``"5 min ago"``, ``"3 h ago"``, ``"2 d ago"``; a date beyond a week."""
    now = now or datetime.now(timezone.utc)
    seconds = (now - moment).total_seconds()
    if seconds < 0 or seconds >= 7 * 86_400:
        return stamp(moment, seconds=False)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86_400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86_400)} d ago"


def shorten(text: str, width: int) -> str:
    """One line, at most ``width`` characters, an ellipsis where it was cut."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(0, width - 1)].rstrip() + "…"


def snippet(content: str, query: str, width: int = 90) -> Text:
    """A one-line window of ``content`` around the first query word it contains, with the
    query's words in bold."""
    line = " ".join(content.split())
    words = [w.lower() for w in _WORD.findall(query)]
    lower = line.lower()
    first = min((i for i in (lower.find(w) for w in words) if i >= 0), default=0)
    start = max(0, first - width // 3) if len(line) > width else 0
    piece = line[start : start + width]
    if start > 0:
        piece = "…" + piece[1:]
    if start + width < len(line):
        piece = piece[:-1] + "…"
    text = Text(piece)
    text.highlight_words(words, style="bold", case_sensitive=False)
    return text


def status_text(status: str | None) -> Text:
    if not status:
        return Text("")
    return Text(f"[{status}]", style=STATUS_STYLES.get(status, ""))


def kind_label(event: Event) -> Text:
    label = event.kind
    if event.kind == "message" and event.role:
        label = f"{event.role}"
    return Text(label, style=KIND_STYLES.get(event.kind, "white"))


def _json_items(value: Any) -> str:
    if isinstance(value, dict):
        return f"{len(value)} key{'s' * (len(value) != 1)}"
    if isinstance(value, list):
        return f"{len(value)} item{'s' * (len(value) != 1)}"
    return type(value).__name__


#: where a line may break: after a space, a comma or a semicolon (in JSON, between tokens)
_BREAKS = re.compile(r"[ ,;]")


def wrap_line(line: str, width: int) -> list[str]:
    """Pieces of ``line`` at most ``width`` characters wide, broken after a space, a comma
    or a semicolon: never inside a word, a number, an id or a JSON token. A piece with no
    such place in reach stays whole, wider than ``width``, rather than be cut in two.

    >>> wrap_line('{"name":"pkg-0","version":"1.0.0"}', 20)
    ['{"name":"pkg-0",', '"version":"1.0.0"}']
    >>> wrap_line("finished 0.5 s later", 12)
    ['finished 0.5', 's later']
    """
    pieces: list[str] = []
    start = 0
    while len(line) - start > width:
        window = line[start : start + width + 1]
        cut = max(window.rfind(" "), window.rfind(","), window.rfind(";"))
        if cut <= 0:  # nothing in reach: the next place after it
            found = _BREAKS.search(line, start + width)
            if found is None:
                break
            cut = found.start() - start
        pieces.append(line[start : start + cut + 1].rstrip())
        start += cut + 1
        while start < len(line) and line[start] == " ":
            start += 1
    pieces.append(line[start:])
    return pieces


def fold_json(value: Any, *, full: bool) -> Text:
    """A JSON value: compact and cut with its size when long, or pretty with ``full``.
    Compact keeps a space after each comma and colon, so that a long value wraps between
    its tokens rather than inside a number or a string."""
    compact = json.dumps(value, ensure_ascii=False)
    if full:
        if len(compact) <= FOLD_CHARS:
            return Text(compact)
        return Text(json.dumps(value, ensure_ascii=False, indent=2))
    if len(compact) <= FOLD_CHARS:
        return Text(compact)
    size = human_size(len(compact.encode("utf-8")))
    text = Text(compact[:FOLD_CHARS] + "…")
    text.append(f"  ({size}, {_json_items(value)}; --full shows it all)", style="dim")
    return text


def _cut(line: str, width: int) -> str:
    """``line`` if it fits in ``width`` characters, else its start and an ellipsis."""
    return line if len(line) <= width else line[: max(1, width - 1)].rstrip() + "…"


def _labels(event: Event, tool: str | None) -> Text:
    """What follows the first line of an event: its tool, status and tags."""
    labels = Text()
    if tool:
        labels.append(f"  (tool: {tool})", style="dim")
    if event.status:
        labels.append("  ")
        labels.append_text(status_text(event.status))
    for tag in event.tags:
        labels.append(f"  #{tag}", style="dim")
    return labels


def _content_with_labels(content: str, labels: Text, *, full: bool, width: int | None) -> Text:
    """The content with ``labels`` right after its first line. Folded unless ``full``: the
    first :data:`FOLD_LINES` lines, each cut to ``width`` (so the labels stay on the first
    line), then how much more there is. A 17-line traceback shows its head, not all of it."""
    lines = content.splitlines() or [""]
    if full:
        kept, first = lines[1:], lines[0]
    else:
        room = width or FOLD_CHARS * 2
        first = _cut(lines[0], max(20, room - labels.cell_len))
        kept = [_cut(line, room) for line in lines[1:FOLD_LINES]]
    text = Text(first)
    text.append_text(labels)
    for line in kept:
        text.append("\n" + line)
    hidden = len(lines) - 1 - len(kept)
    if hidden or [first, *kept] != lines[: 1 + len(kept)]:
        more = f"{hidden} more line{'s' * (hidden != 1)}, " if hidden else ""
        size = human_size(len(content.encode("utf-8")))
        text.append(f"\n… ({more}{size} in all; --full shows it all)", style="dim")
    return text


def event_body(event: Event, *, full: bool, width: int | None = None) -> Text:
    """Content, labels and folded payload of one event, for the timeline; ``width`` is the
    column's, which folded lines are cut to."""
    body = Text()
    payload = event.payload
    derived = bool(event.metadata.get("derived_content")) and payload is not None
    tool = event.metadata.get("tool")
    if derived:
        body.append(f"{tool} returned " if tool else "returned ", style="dim")
        body.append_text(fold_json(payload, full=full))
        body.append_text(_labels(event, None))
        payload = None
    else:
        labels = _labels(event, tool)
        body.append_text(_content_with_labels(event.content, labels, full=full, width=width))
    if isinstance(payload, dict) and event.kind == "step":
        for key in ("input", "result"):
            if key in payload:
                body.append(f"\n{key}: ", style="dim")
                body.append_text(fold_json(payload[key], full=full))
        extra = {k: v for k, v in payload.items() if k not in ("tool", "input", "result")}
        if extra:
            body.append("\npayload: ", style="dim")
            body.append_text(fold_json(extra, full=full))
    elif payload is not None:
        body.append("\npayload: ", style="dim")
        body.append_text(fold_json(payload, full=full))
    return body
