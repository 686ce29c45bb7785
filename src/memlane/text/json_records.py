"""A JSON value as lines of records, and those lines cut into passages: how restore shows a
large JSON tool output by the records a query asks about.

A JSON tool output is kept as its payload; the event's content is the payload flattened
("invoices.id: INV-1; invoices.status: paid; …") and cut at 4,000 characters, for search.
Restore showed such an output whole or summarised it (its keys, its unusual items): the
record a question named was shown only when it happened to survive the summary, or sat in
the first 4,000 characters. Here the payload becomes one line per record — the smallest
object or array that holds a whole record, up to :data:`RECORD_CHARS` — with its path::

    invoices[0]: {"customer":"Mara Bakery","id":"INV-99955","status":"disputed"}
    invoices[1]: {"customer":"Saluri Pharma","id":"INV-13519","status":"paid"}
    meta.page: 3

so that a record's name and its values sit on one line (restore ranks passages first by a
line holding several of the question's words: ``search/passage_terms.lines_together``), and
each record is a passage of its own (:func:`line_spans` by :func:`record_of`: a record
too long for a line keeps its lines together; a passage over :data:`PASSAGE_CHARS`
characters is cut): a question about a record is answered by that record, and one about
many ("which tests failed?") by each record that holds its words.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .shrink import dumps

__all__ = [
    "PASSAGE_CHARS",
    "RECORD_CHARS",
    "VIEW_CHARS",
    "line_spans",
    "record_lines",
    "record_of",
]

#: The longest line one record is written on: an object or array whose JSON is longer is
#: written as its members' lines instead (a record of an API response, a log entry, a row).
RECORD_CHARS = 320
#: A passage of records holds at most this many characters (~150-250 word pieces of JSON,
#: about a text passage's size); a longer line is cut at spaces.
PASSAGE_CHARS = 640
#: The record lines of one output made at most: a megabyte output is shown by the records
#: of its first ~64,000 characters (the keyword index still reads all of it). It bounds the
#: work and the memory one output costs a restore (its lines are cut and stemmed once).
VIEW_CHARS = 64_000


def record_lines(
    value: Any, limit: int = VIEW_CHARS, width: int = RECORD_CHARS
) -> tuple[list[str], bool]:
    """``value``'s lines of records (see the module; records of at most ``width``
    characters), in document order, and whether they are all of it (False: cut after about
    ``limit`` characters).

    >>> value = {"rows": [{"id": 1, "ok": True}, {"id": 2}], "page": 3}
    >>> record_lines(value, width=24)
    (['rows[0]: {"id":1,"ok":true}', 'rows[1]: {"id":2}', 'page: 3'], True)
    >>> record_lines({"rows": [{"id": i} for i in range(1000)]}, limit=60, width=24)
    (['rows[0]: {"id":0}', 'rows[1]: {"id":1}', 'rows[2]: {"id":2}', 'rows[3]: {"id":3}'], False)
    >>> record_lines([1, "two"])  # a short value is one record
    (['[1,"two"]'], True)
    """
    lines: list[str] = []
    size = 0
    # Iterative (a deep payload must not hit the recursion limit), in document order.
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        if size >= limit:
            return lines, False
        item, path = stack.pop()
        if isinstance(item, Mapping | list | tuple) and item and not _fits(item, width):
            if isinstance(item, Mapping):
                stack.extend(
                    (sub, f"{path}.{_segment(key)}" if path else _segment(key))
                    for key, sub in reversed(list(item.items()))
                )
            else:
                stack.extend((sub, f"{path}[{i}]") for i, sub in reversed(list(enumerate(item))))
            continue
        text = dumps(item)
        line = f"{path}: {text}" if path else text
        lines.append(line)
        size += len(line) + 1
    return lines, True


#: a key written into a path as it is: none of the characters that separate a path's parts
#: (``.``, ``[``, ``]``), end it (``:``), quote it, or break its line
_PLAIN_KEY = re.compile(r'[^\x00-\x1f\x7f\x85\u2028\u2029.\[\]:"]+')


def _segment(key: Any) -> str:
    """``key`` as a part of a path: as it is, or JSON-quoted when it holds a character that
    would make the path say something else (``"a.b"``, ``"rows[0]"``, a newline: a record's
    line must stay one line, and its path must name one record).

    >>> _segment("invoices"), _segment("app.version"), _segment("we\\nird"), _segment("")
    ('invoices', '"app.version"', '"we\\\\nird"', '""')
    """
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) else dumps(text)


def _fits(value: Any, width: int) -> bool:
    """Whether ``value``'s compact JSON is at most about ``width`` characters, walking no
    more of it than that (a container of 3,000 records is not written out to find it is
    too long)."""
    size = 0
    stack = [value]
    while stack:
        if size > width:
            return False
        item = stack.pop()
        if isinstance(item, Mapping):
            size += 2 + len(item)  # braces, commas and colons
            for key, sub in item.items():
                size += len(str(key)) + 3
                stack.append(sub)
        elif isinstance(item, list | tuple):
            size += 1 + len(item)
            stack.extend(item)
        else:
            size += len(str(item)) + (2 if isinstance(item, str) else 0)
    return size <= width


def record_of(line: str) -> str:
    """The record a line of :func:`record_lines` belongs to: its path up to the first array
    index (the lines of one record too long for a line share it), or ``""``.

    >>> record_of('data.invoices[23].customer: {"name":"Mara Bakery"}'), record_of("page: 3")
    ('data.invoices[23]', '')
    >>> record_of('"a]b"[2].status: "ok"')  # (a quoted key's own brackets are not an index)
    '"a]b"[2]'
    """
    ends = line.find(": ")
    quote = line.find('"')
    if quote < 0 or 0 <= ends < quote:  # no quoted key in the path: the common case
        path = line if ends < 0 else line[:ends]
        end = path.find("]")
        return path[: end + 1] if end >= 0 else ""
    at, size = 0, len(line)
    while at < size:
        char = line[at]
        if char == '"':  # a quoted key: skip to its closing quote, over escapes
            at += 1
            while at < size and line[at] != '"':
                at += 2 if line[at] == "\\" else 1
        elif char == "]":
            return line[: at + 1]
        elif line.startswith(": ", at):
            return ""
        at += 1
    return ""


def line_spans(
    text: str, size: int = PASSAGE_CHARS, *, key: Callable[[str], str] | None = None
) -> list[tuple[int, int]]:
    """``text``'s passages as ``(start, stop)`` spans: whole lines packed up to ``size``
    characters each, never two lines of different ``key`` together (:func:`record_of`: a
    passage holds one record; None: any lines); a line longer than ``size``, cut at a
    space where it can be.

    >>> text = "a: 1\\nb: 2\\nc: 3"
    >>> [text[start:stop] for start, stop in line_spans(text, size=9)]
    ['a: 1\\nb: 2', 'c: 3']
    >>> text = "r[0].a: 1\\nr[0].b: 2\\nr[1].a: 3\\nr[1].b: 4"
    >>> [text[start:stop] for start, stop in line_spans(text, key=record_of)]
    ['r[0].a: 1\\nr[0].b: 2', 'r[1].a: 3\\nr[1].b: 4']
    >>> [stop - start for start, stop in line_spans("x " * 20, size=16)]
    [16, 16, 8]
    """
    spans: list[tuple[int, int]] = []
    start = 0  # of the passage being packed
    at = 0
    end = len(text)
    group: str | None = None
    while at < end:
        newline = text.find("\n", at)
        stop = end if newline < 0 else newline
        mine = key(text[at:stop]) if key is not None else ""
        if at > start and (mine != group or stop - start > size):  # a line starts a passage
            spans.append((start, at - 1))
            start = at
        group = mine
        while stop - start > size:  # a line too long alone: cut it at a space
            cut = text.rfind(" ", start + size // 2, start + size)
            cut = cut + 1 if cut > start else start + size
            spans.append((start, cut))
            start = cut
        at = stop + 1
    if start < end:
        spans.append((start, end))
    return [(a, b) for a, b in spans if text[a:b].strip()]
