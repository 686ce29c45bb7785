"""Knowledge documents cut into chunks the embedder reads whole.

MiniLM reads 256 word pieces (two of them its special tokens); a longer text is embedded by
its beginning only, so a chunk past that window would be half invisible to semantic search.
:func:`chunk_markdown` keeps every chunk within the window **as counted by the embedder's own
tokenizer** (``count_tokens``, e.g. :meth:`MiniLMEmbedder.count_tokens
<memlane.MiniLMEmbedder.count_tokens>`), headings path included: it cuts at headings,
then packs whole paragraphs, and splits a paragraph too long for one chunk at sentence ends,
then at words. Each chunk carries the path of headings above it ("Guide > Install"), which
is also the first line of the text embedded, so a chunk is found by its section's name too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Chunk", "chunk_markdown", "estimate_tokens", "window_of"]

#: the window of an embedder that does not say its own (MiniLM's)
DEFAULT_WINDOW = 256
#: word pieces the model adds around every text ([CLS], [SEP])
SPECIAL_TOKENS = 2

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_PIECE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Chunk:
    """One piece of a document: its ``text`` and the ``headings`` above it, outermost
    first. :attr:`embedded` is what the index sees."""

    text: str
    headings: tuple[str, ...] = ()

    @property
    def embedded(self) -> str:
        """The headings path, then the text: what is stored, embedded and searched."""
        if not self.headings:
            return self.text
        return " > ".join(self.headings) + "\n\n" + self.text


def estimate_tokens(text: str) -> int:
    """A generous count of BERT word pieces for an embedder without a tokenizer to ask:
    every word and punctuation mark, plus one piece in three for long words split apart.

    >>> estimate_tokens("Install the package, then run it.")
    10
    """
    pieces = _PIECE.findall(text)
    return len(pieces) + sum(len(p) // 6 for p in pieces)


def window_of(embedder: object) -> tuple[Callable[[str], int], int]:
    """``(count_tokens, window)`` of an embedder: its own tokenizer's count and the word
    pieces it reads (``count_tokens`` and ``max_tokens``, as
    :class:`~memlane.MiniLMEmbedder` has), else :func:`estimate_tokens` and
    :data:`DEFAULT_WINDOW`.

    >>> window_of(object())[1]
    256
    """
    count = getattr(embedder, "count_tokens", None)
    window = getattr(embedder, "max_tokens", None)
    if not callable(count) or not isinstance(window, int) or isinstance(window, bool):
        return estimate_tokens, DEFAULT_WINDOW
    return count, window


def chunk_markdown(
    text: str,
    count_tokens: Callable[[str], int] = estimate_tokens,
    window: int = DEFAULT_WINDOW,
) -> list[Chunk]:
    """``text`` (Markdown, or plain text) as chunks whose :attr:`Chunk.embedded` counts at
    most ``window - 2`` with ``count_tokens`` (see the module docstring).

    >>> [c.headings for c in chunk_markdown("# Guide\\n\\nIntro.\\n\\n## Install\\n\\nRun it.")]
    [('Guide',), ('Guide', 'Install')]
    """
    room = window - SPECIAL_TOKENS
    if room < 16:
        raise ValueError(f"a window of {window} tokens is too small to chunk into")
    chunks: list[Chunk] = []
    for headings, paragraphs in _sections(text):
        prefix = " > ".join(headings) + "\n\n" if headings else ""
        # a headings path longer than the window's half is cut: the text needs the room
        while headings and count_tokens(prefix) > room // 2:
            headings = headings[1:]
            prefix = " > ".join(headings) + "\n\n" if headings else ""
        fits = room - count_tokens(prefix) if prefix else room
        current: list[str] = []
        for piece in _pieces(paragraphs, count_tokens, fits):
            candidate = "\n\n".join([*current, piece])
            if current and count_tokens(prefix + candidate) > room:
                chunks.append(Chunk("\n\n".join(current), headings))
                current = [piece]
            else:
                current.append(piece)
        if current:
            chunks.append(Chunk("\n\n".join(current), headings))
    return chunks


def _sections(text: str) -> Iterator[tuple[tuple[str, ...], list[str]]]:
    """``(headings path, paragraphs)`` per section, in order; fenced code stays one
    paragraph."""
    path: list[tuple[int, str]] = []
    paragraphs: list[str] = []
    lines: list[str] = []
    fenced = False

    def close_paragraph() -> None:
        if lines and "".join(lines).strip():
            paragraphs.append("\n".join(lines).strip("\n"))
        lines.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            lines.append(line)
            continue
        heading = None if fenced else _HEADING.match(line)
        if heading:
            close_paragraph()
            if paragraphs:
                yield tuple(name for _, name in path), paragraphs
                paragraphs = []
            level = len(heading.group(1))
            path = [(lvl, name) for lvl, name in path if lvl < level]
            path.append((level, heading.group(2)))
        elif not line.strip() and not fenced:
            close_paragraph()
        else:
            lines.append(line)
    close_paragraph()
    if paragraphs:
        yield tuple(name for _, name in path), paragraphs


def _pieces(paragraphs: list[str], count: Callable[[str], int], fits: int) -> Iterator[str]:
    """The paragraphs, each split (at sentence ends, then at words) until it fits."""
    for paragraph in paragraphs:
        if count(paragraph) <= fits:
            yield paragraph
            continue
        if _FENCE.match(paragraph):  # code: cut between its lines, never inside one
            yield from _pack(paragraph.split("\n"), "\n", count, fits)
            continue
        yield from _pack(_SENTENCE_END.split(paragraph), " ", count, fits)


def _pack(parts: list[str], joiner: str, count: Callable[[str], int], fits: int) -> Iterator[str]:
    """Consecutive ``parts`` joined as long as they fit; a part that alone does not fit is
    split at words (and a word that alone does not fit, at characters)."""
    current = ""
    for part in parts:
        if count(part) > fits:
            if current:
                yield current
                current = ""
            if joiner in (" ", "\n"):  # a sentence, or a line of code, too long alone
                yield from _pack(part.split(), " " if " " in part else "", count, fits)
            else:
                yield from _split_word(part, count, fits)
            continue
        candidate = f"{current}{joiner}{part}" if current else part
        if current and count(candidate) > fits:
            yield current
            current = part
        else:
            current = candidate
    if current:
        yield current


def _split_word(word: str, count: Callable[[str], int], fits: int) -> Iterator[str]:
    """A word longer than a chunk (a hash, a URL), cut into pieces that fit."""
    start = 0
    while start < len(word):
        end = len(word)
        while end > start + 1 and count(word[start:end]) > fits:
            end = start + max(1, (end - start) // 2)
        yield word[start:end]
        start = end
