"""How restore() shows a long event that it cannot show whole: by its passages relevant to
the query, not by its head and tail.

A 1,700-token answer whose one relevant paragraph is its sixth was cut to its first lines,
and a 1,000-token essay that merely shared the query's topic took room whole: restore fell
below a plain packing of its own search results on long technical chats (issue 31). An
event is cut into passages as the vector index cuts it (:func:`~memlane.text.passages.
passage_spans`: spans of its content, at paragraphs, code blocks, lines and sentences), and
shown as a one-line header and the chosen passages, in their order in the event::

    - [assistant message, 2024-05-02 14:03, 1,740 tokens — passages 3 and 5 of 9]
        <passage 3>
        …
        <passage 5>

Which passages (:func:`ranked`): those that match the query's words — first those with a
line that holds more of them together (a table's row, a log line: two or more), then by BM25
among the event's own passages (the library's keyword tokenizer: porter stems, as the
keyword index reads them; nothing is embedded at restore time) — and the search's best passage
(:attr:`memlane.Hit.passage`, when the search found the event by one): ahead of those
whose lines hold as many of the words, if it matches, else after them all; then the passage
after each (a question's answer is the next turn). An event no query touches keeps the
summary it had (head and tail: its first and last passages, tried, carried no more). The
packer decides between the passages and the whole event (restore/packer.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from ..events import Event, Passage
from ..search.passage_terms import (
    RELATIVE_SCORE,
    Analysis,
    held_stems,
    matching_passages,
    query_stems,
)
from ..text.instructions import sentences
from ..text.shrink import summarize_text
from .text import INDENT, collapse_repeats, label_of, utc

__all__ = [
    "LEAST_PASSAGES",
    "MAX_SHOWN",
    "RELATIVE_SCORE",
    "WHOLE_WITHIN",
    "Analysis",
    "Pricing",
    "Relevance",
    "Shown",
    "matching_sentences",
    "ranked",
    "shown",
]

#: The whole event is shown rather than its passages when it costs at most this many times
#: what the passages would (and fits what is left): a few tokens more for the whole context
#: are worth it, a 1,000-token essay for its one relevant paragraph is not. Measured on the
#: long-events benchmark (docs/restore.md, "Long events"): 1.0 to 2.0 within a point of each
#: other; the whole whenever it fits lost 5 points at 2k tokens and 7 at 8k.
WHOLE_WITHIN = 1.3
#: Passages of one event shown at most while sections are filled (tokens no section used
#: may add more at the end). Measured: 1 and 2 lose 2-8 points at 2k-4k tokens, 5 is no
#: better than 3.
MAX_SHOWN = 3
#: The most tokens one more passage number adds to a block's header (", 1234")
_NUMBER_TOKENS = 4
#: The fewest tokens a block of passages is given: its header is ~25, and a passage cut to
#: fewer than ~40 tells nothing.
LEAST_PASSAGES = 64


@dataclass(frozen=True)
class Relevance:
    """What makes a passage relevant in one restore: the query's stems (each with the query
    word it came from, for the report) and the search's best passage of each event found."""

    words: Mapping[str, str]
    best: Mapping[str, Passage]

    @classmethod
    def of(cls, query: str | None, best: Mapping[str, Passage] | None = None) -> Relevance:
        """The relevance of ``query`` (None: no words) and the search's passages ``best``.

        >>> sorted(Relevance.of("Which caches did we evict?").words.items())
        [('cach', 'caches'), ('evict', 'evict')]
        >>> sorted(Relevance.of("Caroline's status on port 5").words)
        ['5', 'carolin', 'port', 'statu']
        """
        return cls(query_stems(query), best or {})


@dataclass(frozen=True)
class Shown:
    """The passages of one event chosen to show: their numbers (from 1, in order), the block's
    text (without its time), its chat turn, and why each was chosen (for the report)."""

    numbers: tuple[int, ...]
    count: str  # "9", or "the first 48" of a huge event
    text: str
    turn: str
    why: str
    tokens: int = 0  # the block's count (its text and a line end)


def ranked(
    event: Event, analysis: Analysis, relevance: Relevance, *, follow: bool = True
) -> list[tuple[int, str]]:
    """The relevant passages of ``event`` best first, as ``(index, why)``: those matching the
    query's words (:func:`~memlane.search.passage_terms.matching_passages`: at least
    :data:`RELATIVE_SCORE` of the best match, those with a line holding more of the query's
    words together first, then the search's best passage, then by BM25); then the search's
    best passage if it matches none, then (``follow``) the passage after each of those (its
    reply, its continuation; not for a JSON output's records, where the next record is
    another one). Empty when nothing is relevant.

    Words first: the search's passage is the event's nearest *by meaning* to the whole query,
    which on long events was the passage holding the answer less often than the one sharing
    its words (docs/restore.md, "Long events": +1 to +3 points over the other order). It
    still finds what shares no word with the query.
    """
    best = relevance.best.get(event.id)
    searched = _covering(analysis, best) if best is not None else []
    matching = matching_passages(event.content, analysis, relevance.words, first=searched)
    order: list[tuple[int, str]] = []
    for i in matching:
        found = dict.fromkeys(  # (a word of several stems, "batch_size", is named once)
            word for stem, word in relevance.words.items() if analysis.terms[i][stem]
        )
        terms = "matches query terms " + ", ".join(found)
        order.append((i, f"best passage of the search, {terms}" if i in searched else terms))
    order += [(i, "best passage of the search") for i in searched if i not in matching]
    if not follow:
        return order
    # then the passage after each of them: a question's answer is the next turn, a
    # heading's or a log line's substance the lines after it (long-events benchmark: the
    # answer sat in the passage after a chosen one in 15 of the 19 questions restore lost to
    # its own search packed whole at 8,000 tokens; docs/restore.md, "Long events")
    chosen = {i for i, _ in order}
    after = [i + 1 for i, _ in order if i + 1 < len(analysis.spans) and i + 1 not in chosen]
    # (index i is passage number i + 1, so the one it follows is number i)
    order += [(i, f"follows passage {i}") for i in dict.fromkeys(after)]
    return order


class Pricing(NamedTuple):
    """How a block of passages is priced: ``count`` counts exactly; ``passage(i)`` is the
    tokens of passage ``i`` as shown, and ``short`` counts a short piece (a header): both
    may be cached by the caller, since an agent restores the same events every turn."""

    count: Callable[[str], int]
    passage: Callable[[int], int]
    short: Callable[[str], int]

    @classmethod
    def plain(cls, event: Event, analysis: Analysis, count: Callable[[str], int]) -> Pricing:
        return cls(count, lambda i: passage_cost(event, analysis, i, count), count)


def shown(
    event: Event,
    analysis: Analysis,
    order: Sequence[tuple[int, str]],
    size: int,
    allowance: int,
    pricing: Pricing,
    *,
    most: int | None = None,
) -> Shown | None:
    """The most of ``order`` (best first, at most ``most``: default :data:`MAX_SHOWN`) that
    fit ``allowance`` tokens; the best passage cut to fit when none fits whole; None when not
    even that fits. ``size`` is the whole event's token count (said in the header).

    A block is priced as the sum of its parts (its header, its passages, a ``…`` line
    between those apart), which is what :attr:`Shown.tokens` says: counting every choice
    whole doubled restore's time. The exact count of the whole text is the packer's last
    step (restore/plan.py), and trims should the parts fall short of it.
    """
    most = MAX_SHOWN if most is None else most
    why = dict(order)
    gap = pricing.short(INDENT + "…")
    named = _named(event, size)

    def head_of(trial: list[int]) -> int:
        return pricing.short(f"- {named}{_which([i + 1 for i in trial], _of(analysis), cut=False)}")

    chosen: list[int] = []
    chosen_head = 0  # the exact price of the header naming `chosen`
    used = 0
    for index, _ in order:
        if len(chosen) >= most:
            break
        trial = sorted([*chosen, index])
        # a number more in the header costs at most _NUMBER_TOKENS (", 1234"): the header
        # is counted exactly only for a passage that fits so (a JSON output's records are
        # tried by the dozen, and counting each trial's header was most of a restore)
        head = chosen_head + _NUMBER_TOKENS if chosen else head_of(trial)
        gaps = sum(1 for a, b in itertools.pairwise(trial) if b > a + 1)
        rest = sum(pricing.passage(i) for i in trial) + gap * gaps + 1  # (+ "\n")
        if head + rest <= allowance:
            exact = head_of(trial) if chosen else head
            if exact + rest <= allowance:
                chosen, used, chosen_head = trial, exact + rest, exact
    if chosen:
        return replace(_block(event, analysis, chosen, size, why), tokens=used)
    if not order or allowance < LEAST_PASSAGES:
        return None
    return _cut(event, analysis, order[0], size, allowance, pricing.count)


def passage_cost(event: Event, analysis: Analysis, index: int, count: Callable[[str], int]) -> int:
    """The tokens of passage ``index`` of ``event`` as a block shows it (indented lines)."""
    start, stop = analysis.spans[index]
    return count(INDENT + INDENT.join(collapse_repeats(event.content[start:stop].splitlines())))


def header(event: Event, size: int, numbers: Sequence[int], count: str, *, cut: bool) -> str:
    """``[assistant message, 2024-05-02 14:03, 1,740 tokens — passages 3 and 5 of 9]``

    >>> from datetime import datetime, timezone
    >>> when = datetime(2024, 5, 2, 14, 3, tzinfo=timezone.utc)
    >>> e = Event("01J", "s", "a", "message", "...", when, metadata={"role": "assistant"})
    >>> header(e, 1740, [3, 5], "9", cut=False)
    '[assistant message, 2024-05-02 14:03, 1,740 tokens — passages 3 and 5 of 9]'
    >>> header(e, 1740, [6], "9", cut=True)
    '[assistant message, 2024-05-02 14:03, 1,740 tokens — passage 6 of 9, cut]'
    """
    return _named(event, size) + _which(numbers, count, cut=cut)


def _named(event: Event, size: int) -> str:
    """The header's first part: ``[assistant message, 2024-05-02 14:03, 1,740 tokens — ``."""
    what = f"{label_of(event)} message" if event.kind == "message" else label_of(event)
    return f"[{what}, {utc(event.created_at):%Y-%m-%d %H:%M}, {size:,} tokens — "


def _which(numbers: Sequence[int], count: str, *, cut: bool) -> str:
    """The header's second part: ``passages 3 and 5 of 9]``."""
    plural = "s" if len(numbers) > 1 else ""
    return f"passage{plural} {_numbers(numbers)} of {count}{', cut' if cut else ''}]"


def _numbers(numbers: Sequence[int]) -> str:
    """``3``, ``3 and 5``, ``1, 3 and 5``; a run of three or more as ``7-9`` (a JSON
    output's records shown side by side are many).

    >>> _numbers([3]), _numbers([1, 3, 5]), _numbers([2, 7, 8, 9, 10, 12])
    ('3', '1, 3 and 5', '2, 7-10 and 12')
    """
    said: list[str] = []
    run: list[int] = []
    for n in [*numbers, None]:
        if n is not None and run and n == run[-1] + 1:
            run.append(n)
            continue
        if len(run) >= 3:
            said.append(f"{run[0]}-{run[-1]}")
        else:
            said += [str(m) for m in run]
        run = [] if n is None else [n]
    return said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"


def _block(
    event: Event, analysis: Analysis, indexes: list[int], size: int, why: Mapping[int, str]
) -> Shown:
    """The block of ``event`` showing its passages ``indexes`` (ascending): adjacent ones
    joined into one span (their overlap said once), ``…`` between the others."""
    content = event.content
    groups: list[tuple[int, int]] = []
    previous = -2
    for i in indexes:
        start, stop = analysis.spans[i]
        if i == previous + 1 and groups:
            groups[-1] = (groups[-1][0], max(groups[-1][1], stop))
        else:
            groups.append((start, stop))
        previous = i
    lines: list[str] = []
    for n, (start, stop) in enumerate(groups):
        if n:
            lines.append("…")
        lines += collapse_repeats(content[start:stop].splitlines())
    numbers = [i + 1 for i in indexes]
    head = header(event, size, numbers, _of(analysis), cut=False)
    reasons = "; ".join(f"{i + 1}: {why[i]}" for i in indexes)
    return _shown(head, lines, numbers, _of(analysis), reasons)


def _cut(
    event: Event,
    analysis: Analysis,
    first: tuple[int, str],
    size: int,
    allowance: int,
    count: Callable[[str], int],
) -> Shown | None:
    """The best passage shortened (head and tail) to fit ``allowance``, or None."""
    index, why = first
    head = header(event, size, [index + 1], _of(analysis), cut=True)
    room = allowance - count("- " + head + INDENT + "\n") - 1
    start, stop = analysis.spans[index]
    for _ in range(4):  # the lines' indents are counted after: shrink by more than the
        # excess (a summary's size moves by whole lines), and retry
        text = summarize_text(event.content[start:stop], room, count) if room > 8 else None
        if not text:
            return None
        lines = collapse_repeats(text.splitlines())
        result = _shown(head, lines, [index + 1], _of(analysis), f"{index + 1}: {why}, cut")
        tokens = count(result.text + "\n")
        if tokens <= allowance:
            return replace(result, tokens=tokens)
        room -= tokens - allowance + room // 16
    return None


def _of(analysis: Analysis) -> str:
    """How many passages the event has: ``9``, or ``the first 48`` of a huge one."""
    return str(len(analysis.spans)) if analysis.whole else f"the first {len(analysis.spans)}"


def _shown(head: str, lines: list[str], numbers: list[int], total: str, why: str) -> Shown:
    body = INDENT.join(line for line in lines)
    return Shown(
        tuple(numbers), total, f"- {head}{INDENT}{body}", head + "\n" + "\n".join(lines), why
    )


def _covering(analysis: Analysis, best: Passage) -> list[int]:
    """The passages that hold the search's best passage: the one it is, or when the index
    cut the event otherwise (another embedder's word pieces), those holding a third of it
    or more."""
    spans = analysis.spans
    if best.span in spans:
        return [spans.index(best.span)]
    length = max(1, best.stop - best.start)
    held = [
        (min(stop, best.stop) - max(start, best.start), i) for i, (start, stop) in enumerate(spans)
    ]
    found = sorted((i for overlap, i in held if overlap * 3 >= length), key=lambda i: -held[i][0])
    if not found:
        overlap, i = max(held)
        found = [i] if overlap > 0 else []
    return found


def matching_sentences(text: str, relevance: Relevance, most: int = 2) -> tuple[str, ...]:
    """The sentences of ``text`` (a message: not cut into passages) that hold the most of the
    query's words, two or more, best first, at most ``most``: what of a pinned rule's message
    a query asks about (restore/plan.py shows them beside the rule).

    >>> matching_sentences("I prefer tabs. The passwords rotate every 90 days.",
    ...                    Relevance.of("How often do the passwords rotate?"))
    ('The passwords rotate every 90 days.',)
    """
    wanted = frozenset(relevance.words)
    scored: list[tuple[int, int, str]] = []
    for place, sentence in enumerate(sentences(text)):
        held = len(held_stems(sentence, wanted))
        if held >= 2:
            scored.append((-held, place, sentence.strip()))
    return tuple(sentence for _, _, sentence in sorted(scored)[:most])
