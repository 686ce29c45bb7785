"""A long event cut into passages the embedder reads whole, as character spans of its text.

MiniLM reads the first 256 word pieces of a text: what a 1,500-token answer says after its
first paragraphs would be invisible to semantic search if the event had one vector. An event
longer than the embedder's window therefore gets one vector per *passage* (the
``vectors`` rows carry each passage's span), and a search scores the event by its best
passage and shows it (:attr:`memlane.Hit.passage`); restore shows a long event by its
passages relevant to the query.

:func:`passage_spans` cuts at structure, in this order: blank lines (paragraphs; a fenced
code block is one block however many blank lines it holds), then line ends (code, logs,
listings, CSV rows), then sentence ends and ``;`` (prose; a flattened JSON output
``a.b: 1; c: 2``), then spaces, then characters. Consecutive pieces are packed into
passages of at most ``size`` word pieces, and each passage after the first starts with the
last piece of the one before when that piece is short (at most a fifth of ``size``), so a
fact stated across a cut is read whole by one of them. A passage is a span of the text: what
is embedded and what is shown is ``text[start:stop]``, nothing added.

The cut depends only on the text, ``count_tokens`` and the sizes, so any process recomputes
the same spans; the index stores them anyway (a later version may cut differently).

An embedder that can say where its word pieces lie (``token_offsets``, as
:class:`~memlane.MiniLMEmbedder` has) is asked once per text instead of once per piece: a
piece whose ends fall between two words counts the word pieces of that one encoding inside
it, which is what encoding the piece alone gives (its tokenizer cuts words at spaces and
punctuation first); a piece cut inside a word is still counted alone. Same spans, a
fraction of the calls (restore's first look at a generated run's long events made 27,601 of
them: docs/decisions/2026-11-27-passages-for-long-events.md).
"""

from __future__ import annotations

import itertools
import re
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from .chunking import DEFAULT_WINDOW, SPECIAL_TOKENS, estimate_tokens, window_of

__all__ = [
    "MAX_PASSAGES",
    "PASSAGE_TOKENS",
    "Cutter",
    "TokenOffsets",
    "passage_spans",
]

#: ``text`` -> ``(start, stop, word)`` of each word piece of its encoding, in order: the
#: character span it was read from and the number of the word it belongs to (pieces of one
#: word share it). ``count_tokens(text)`` must equal the number of pieces.
TokenOffsets = Callable[[str], Sequence[tuple[int, int, int]]]

#: word pieces a passage holds at most (within the embedder's window): MiniLM was trained on
#: texts of up to 128 word pieces and reads 254; passages of about 200 keep a paragraph or a
#: code block together while a fact is still a sizeable part of what is embedded
PASSAGE_TOKENS = 200
#: passages indexed per event at most: what an event says past them (~40,000 characters of
#: prose) is found by keyword only. It bounds the embedding one event can cost the worker
#: and a search's catch-up.
MAX_PASSAGES = 48


@dataclass(frozen=True)
class Cutter:
    """How one embedder's index cuts long texts into passages: its tokenizer's count and its
    window. The indexer cuts with it, and restore cuts the same way, so that the passage a
    search found an event by is one restore can show (an estimate of the word pieces cut a
    traceback elsewhere: the answer's line fell outside the passage shown).

    >>> Cutter().spans("short enough")
    []
    """

    count: Callable[[str], int] = estimate_tokens
    window: int = DEFAULT_WINDOW
    #: where the word pieces ``count`` counts lie (``None``: each piece counted alone)
    offsets: TokenOffsets | None = None

    @classmethod
    def of(cls, embedder: object) -> Cutter:
        """The cutter of ``embedder`` (:func:`~memlane.text.chunking.window_of`), with its
        ``token_offsets`` when it has them besides its own ``count_tokens``."""
        count, window = window_of(embedder)
        offsets = getattr(embedder, "token_offsets", None)
        if count is estimate_tokens or not callable(offsets):
            offsets = None
        return cls(count, window, offsets)

    @property
    def key(self) -> Hashable:
        """What tells two cutters apart in a cache (a bound method is made anew each time
        it is read, so not the count itself)."""
        count = self.count
        owner = getattr(count, "__self__", None)
        return (getattr(count, "__qualname__", repr(count)), id(owner), self.window)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """:func:`passage_spans` of ``text`` with this count, window and offsets."""
        return passage_spans(text, self.count, self.window, offsets=self.offsets)


_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_BLANK = re.compile(r"\n[ \t]*\n\s*")
_LINE = re.compile(r"\n")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+")
_SPACE = re.compile(r"\s+")


def passage_spans(
    text: str,
    count_tokens: Callable[[str], int] = estimate_tokens,
    window: int = DEFAULT_WINDOW,
    *,
    size: int | None = None,
    limit: int | None = None,
    offsets: TokenOffsets | None = None,
) -> list[tuple[int, int]]:
    """The ``(start, stop)`` spans of ``text``'s passages, in order; ``[]`` when the text fits
    the embedder's window whole (``window`` word pieces, two of them special; counted with
    ``count_tokens``) and needs none. Passages of at most ``size`` word pieces (default
    :data:`PASSAGE_TOKENS`), at most ``limit`` of them (:data:`MAX_PASSAGES`), from the
    beginning. ``offsets`` (:data:`TokenOffsets`, of the same tokenizer as ``count_tokens``)
    give the same spans with one encoding of the text instead of one per piece.

    >>> text = "\\n\\n".join(f"Paragraph {i} says something about topic {i}." for i in range(60))
    >>> spans = passage_spans(text, window=64, size=40)
    >>> len(spans) > 1, spans[0][0], text[spans[-1][0]:spans[-1][1]].endswith("topic 59.")
    (True, 0, True)
    >>> passage_spans("short enough", window=64)
    []
    """
    room = window - SPECIAL_TOKENS
    if room < 16:
        raise ValueError(f"a window of {window} tokens is too small to cut passages for")
    # (the module's constants read at each call: a benchmark may try other sizes)
    size = max(8, min(PASSAGE_TOKENS if size is None else size, room))
    limit = MAX_PASSAGES if limit is None else limit
    # (a word piece is at least one character: a text this short fits; a text over twelve
    # characters a piece of the window is not counted whole, it cannot fit)
    if len(text) <= room:
        return []
    reach = text[: limit * size * 12]
    if offsets is not None:
        count_tokens = _Encoded(reach, offsets(reach), count_tokens)
    if len(text) <= room * 12 and count_tokens(text) <= room:
        return []
    pieces = (
        (start, stop, _count(reach, start, stop, count_tokens, size))
        for start, stop in _pieces(reach)
    )
    return _pack(reach, pieces, count_tokens, size, limit)


class _Encoded:
    """``count_tokens`` for the substrings of one text, from one encoding of it: the word
    pieces between ``start`` and ``stop`` when neither end falls inside a word (there,
    encoding the substring alone gives the same pieces: the tokenizer splits words at
    spaces and punctuation before it cuts them into pieces), else the substring counted
    alone. Called with the text itself (``passage_spans``'s does-it-fit check), the
    encoding's length."""

    def __init__(
        self, text: str, pieces: Sequence[tuple[int, int, int]], count: Callable[[str], int]
    ) -> None:
        self.text, self.fallback = text, count
        self.starts = [p[0] for p in pieces]
        self.stops = [p[1] for p in pieces]
        self.words = [p[2] for p in pieces]

    def __call__(self, text: str) -> int:
        if text is self.text or text == self.text:
            return len(self.starts)
        return self.fallback(text)

    def span(self, start: int, stop: int) -> int:
        first, end = self._between(start), self._between(stop)
        if first is None or end is None:
            return self.fallback(self.text[start:stop])
        return end - first

    def _between(self, at: int) -> int | None:
        """The number of pieces that start before ``at``, when ``at`` is between two words
        (or at an end of the text), else ``None``."""
        i = bisect_left(self.starts, at)
        if 0 < at < len(self.text) and i > 0:
            if self.stops[i - 1] > at:  # a piece runs across it
                return None
            if i < len(self.starts) and self.words[i - 1] == self.words[i]:
                return None  # between two pieces of one word ("una|##ffa|##ble")
        return i


def _pieces(text: str) -> Iterator[tuple[int, int]]:
    """Spans of ``text``'s blocks: paragraphs between blank lines, a fenced code block whole
    (an unclosed fence runs to the end), surrounding whitespace left out."""
    fences = [m.start() for m in _FENCE.finditer(text)]
    fenced: list[tuple[int, int]] = []
    for i in range(0, len(fences), 2):
        if i + 1 >= len(fences):
            fenced.append((fences[i], len(text)))
            break
        close_end = text.find("\n", fences[i + 1])
        fenced.append((fences[i], len(text) if close_end < 0 else close_end))
    start = 0
    for gap in _BLANK.finditer(text):
        if any(lo < gap.start() < hi for lo, hi in fenced):
            continue
        yield from _trimmed(text, start, gap.start())
        start = gap.end()
    yield from _trimmed(text, start, len(text))


def _count(text: str, start: int, stop: int, count: Callable[[str], int], size: int) -> int:
    """The word pieces of ``text[start:stop]``, or ``size + 1`` for a span too long to fit
    (over twelve characters a piece: counting a huge block whole would be wasted)."""
    if stop - start > size * 12:
        return size + 1
    if isinstance(count, _Encoded):
        return count.span(start, stop)
    return count(text[start:stop])


def _trimmed(text: str, start: int, stop: int) -> Iterator[tuple[int, int]]:
    while start < stop and text[start].isspace():
        start += 1
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    if stop > start:
        yield start, stop


def _split(
    text: str, start: int, stop: int, count: Callable[[str], int], size: int
) -> Iterator[tuple[int, int, int]]:
    """``text[start:stop]`` as pieces of at most ``size`` word pieces: the span whole if it
    fits, else cut at line ends, sentence ends, spaces, then characters."""
    tokens = _count(text, start, stop, count, size)
    if tokens <= size:
        yield start, stop, tokens
        return
    for cut in (_LINE, _SENTENCE, _SPACE):
        bounds = [start]
        bounds.extend(start + m.end() for m in cut.finditer(text[start:stop]))
        if len(bounds) > 1:
            bounds.append(stop)
            for lo, hi in itertools.pairwise(bounds):
                for a, b in _trimmed(text, lo, hi):
                    yield from _split(text, a, b, count, size)
            return
    # one word longer than a passage (a hash, a URL, base64): halves until they fit
    middle = start + (stop - start) // 2
    yield from _split(text, start, middle, count, size)
    yield from _split(text, middle, stop, count, size)


def _pack(
    text: str,
    blocks: Iterable[tuple[int, int, int]],
    count: Callable[[str], int],
    size: int,
    limit: int,
) -> list[tuple[int, int]]:
    """Consecutive pieces packed into passages of at most ``size`` word pieces, with the
    short last piece of one passage repeated at the start of the next (lazily: the text
    past ``limit`` passages is never counted)."""
    pieces = (
        piece
        for start, stop, tokens in blocks
        for piece in (
            [(start, stop, tokens)] if tokens <= size else _split(text, start, stop, count, size)
        )
    )
    spans: list[tuple[int, int]] = []
    current: list[tuple[int, int, int]] = []
    used = 0
    for piece in pieces:
        if current and used + piece[2] > size:
            spans.append((current[0][0], current[-1][1]))
            if len(spans) >= limit:
                return spans
            carry = current[-1]
            current, used = [], 0
            if carry[2] <= size // 5 and carry[2] + piece[2] <= size:
                current, used = [carry], carry[2]
        current.append(piece)
        used += piece[2]
    if current and len(spans) < limit:
        spans.append((current[0][0], current[-1][1]))
    return spans
