"""A long event's passages and each passage's word counts, cut once and kept.

Search and restore read the same thing of a long event: its content cut into passages as
the vector index cuts it (:func:`~memlane.text.passages.passage_spans`), and the porter
stems of each passage, counted as the keyword index counts them. Search scores a long
event's words by its best passage (``search/searcher.py``); restore chooses which passages
to show (``restore/passages.py``). An agent searches and restores the same events turn
after turn, so an event's analysis is cached by event (the key holds no content: an event
may hold megabytes), and a restore that follows a search finds the events already cut.
"""

from __future__ import annotations

import math
import re
import threading
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import Stemmer

from ..core.lru import MISSING, SizedLru
from ..events import Event
from ..ranking.keyword.terms import query_words, tokens
from ..text.passages import MAX_PASSAGES, PASSAGE_TOKENS, Cutter
from .when import with_days_as_written

__all__ = [
    "LINES_FIRST",
    "RELATIVE_SCORE",
    "Analysis",
    "analysed",
    "forget_analyses",
    "held_stems",
    "lines_together",
    "made_of_lines",
    "matching_passages",
    "most_together",
    "needs_analysis",
    "porter_stem",
    "query_stems",
]

K = TypeVar("K")
#: A passage matching the query's words is chosen only when it scores at least this share of
#: the event's best-matching passage: one common word shared with the query does not make a
#: passage relevant. Measured on restore: 0.3 is at least as good as 0.5 everywhere, 0.8
#: loses 1-4 points, 0.15 wins on conversations and loses on tool outputs.
RELATIVE_SCORE = 0.3
#: Passages are ranked first by how many of the query's words one of their lines holds
#: together (a table's row, a log line, a setting): on the long-events benchmark's tool
#: outputs, the row a question names sat in a passage that held its words less often than
#: others holding each of them in different rows (generated runs, restore at 2k / 4k / 8k
#: 0.505 / 0.649 / 0.777 -> 0.543 / 0.691 / 0.830; conversations within a question or three).
#: False: BM25 alone (for measurement).
LINES_FIRST = True
# BM25's constants among one event's passages (the usual ones)
_K1 = 1.2
_B = 0.75
#: stems whose passages one analysis keeps (:meth:`Analysis.holding`)
_STEMS_HELD = 64

_STEMS_CACHED = 65_536  # distinct tokens whose porter stem is kept (~100 bytes each)
# What the kept analyses may take, by an estimate of their size (:func:`_bytes`): an event
# of ~5,600 characters in 14 passages takes ~21 KB, so ~1,500 of them fit. Search reads the
# analyses of up to 50 long candidates a search (~0.6 ms each to make): 512 events (the
# bound before) were fewer than ten agent runs of tool outputs hold, and a search over
# them made most again (long-events benchmark, generated runs: p95 without embedding 2.1 →
# 23 ms with the passage scores, docs/benchmarks.md "Long events").
_ANALYSES_BYTES = 32 * 1024 * 1024
_ENTRY_BYTES = 24  # a stem's count in a passage's Counter (its key is shared with _STEMS)
_PASSAGE_BYTES = 200  # a passage's Counter, span and length
_SHORT_CHARS = 254  # (no text this short needs passages: a word piece is a character or more)
_REACH = MAX_PASSAGES * PASSAGE_TOKENS * 12  # the characters passage_spans reads at most
# (by event and cutter; _bytes is read when an analysis is kept, so it may come below)
_ANALYSES: SizedLru[Analysis | None] = SizedLru(_ANALYSES_BYTES, lambda made: _bytes(made))


@dataclass(frozen=True)
class Analysis:
    """An event's content cut into passages, with each passage's stem counts; ``whole``:
    the passages reach its end (a huge event is cut, and indexed, only from its beginning:
    :data:`~memlane.text.passages.MAX_PASSAGES`; its header then says "of the first 48")."""

    spans: tuple[tuple[int, int], ...]
    terms: tuple[Counter[str], ...]
    lengths: tuple[int, ...]
    whole: bool
    #: each passage's tokens as shown, per tokenizer (kept with the event's passages)
    costs: dict[tuple[object, ...], int] = field(default_factory=dict, compare=False)
    #: the passages holding each stem asked about so far, with its count in each
    #: (:meth:`holding`): a JSON output's records are thousands of passages
    _holding: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict, compare=False)

    def holding(self, stem: str) -> tuple[tuple[int, int], ...]:
        """``(passage, count)`` of each passage holding ``stem``, in order (kept: an agent asks
        about the same events with the same words turn after turn)."""
        found = self._holding.get(stem)
        if found is None:
            found = tuple(
                (i, count) for i, terms in enumerate(self.terms) if (count := terms.get(stem, 0))
            )
            if len(self._holding) < _STEMS_HELD:
                self._holding[stem] = found
        return found


def analysed(
    event: Event, cutter: Cutter | None = None, indexed: Sequence[tuple[int, int]] | None = None
) -> Analysis | None:
    """``event``'s content cut into passages as ``cutter`` (default: an estimate of the word
    pieces) cuts it: the index's, so that the search's passage is one of them; None when it
    needs none (it fits the embedder's window whole) or has only one. ``indexed``: the spans
    the index holds for it (``Storage.passage_spans``), taken instead of cutting again when
    they fit the content — the same spans, without tokenizing the event (a third of a
    restore's time on tool-heavy sessions). Cached by event (events never change, and an
    agent restores its session every turn; the key holds no content: an event may hold
    megabytes)."""
    cutter = cutter or Cutter()
    content = event.content
    if len(content) <= _SHORT_CHARS:
        return None
    if not event.id:
        return _analyse(content, cutter)
    key = _key(event, cutter)
    found = _ANALYSES.get(key)
    if found is not MISSING:
        return found
    # (made outside the cache's lock: other restores go on meanwhile)
    made = _analyse(content, cutter, indexed)
    _ANALYSES.put(key, made)
    return made


def forget_analyses() -> None:
    """Let go of every kept analysis and stemmed token (an erasure: they are derived from the
    erased text; a process that wants the memory back)."""
    _ANALYSES.clear()
    _STEMS.clear()


def _bytes(analysis: Analysis | None) -> int:
    """An estimate of what ``analysis`` takes in memory (None: a key's worth)."""
    if analysis is None:
        return _PASSAGE_BYTES
    entries = sum(len(terms) for terms in analysis.terms)
    return entries * _ENTRY_BYTES + len(analysis.terms) * _PASSAGE_BYTES


def _key(event: Event, cutter: Cutter) -> tuple[str, int, int, str, Hashable]:
    # (what the cut reads is hashed: pack()'s callers may reuse an id for other content)
    content = event.content
    return (event.id, len(content), hash(content[:_REACH]), content[-64:], cutter.key)


def needs_analysis(event: Event, cutter: Cutter) -> bool:
    """Whether :func:`analysed` would cut ``event`` now: long enough to have passages
    (``window - 2`` characters or more) and not in its cache (an agent restores the same
    events every turn: restore reads the index's spans only for the others)."""
    if len(event.content) <= max(_SHORT_CHARS, cutter.window - 2) or not event.id:
        return False
    return _key(event, cutter) not in _ANALYSES


def _analyse(
    content: str, cutter: Cutter, indexed: Sequence[tuple[int, int]] | None = None
) -> Analysis | None:
    spans = list(indexed) if indexed and _spans_of(content, indexed) else cutter.spans(content)
    if len(spans) < 2:
        return None
    # each passage's tokens counted (in C), then each distinct token of the event stemmed
    # once: a third of the time of stemming token by token
    counted = [Counter(tokens(content[start:stop])) for start, stop in spans]
    stem_of = _stems_of({token for found in counted for token in found})
    terms: list[Counter[str]] = []
    for found in counted:
        stems: dict[str, int] = {}
        for token, count in found.items():
            stem = stem_of[token]
            stems[stem] = stems.get(stem, 0) + count
        terms.append(Counter(stems))
    whole = not content[spans[-1][1] :].strip()
    return Analysis(tuple(spans), tuple(terms), tuple(sum(t.values()) for t in terms), whole)


def _spans_of(content: str, spans: Sequence[tuple[int, int]]) -> bool:
    """Whether ``spans`` can be passages of ``content``: ordered, within it, none empty (a
    row that says otherwise is not trusted: the content is cut again)."""
    last = 0
    for start, stop in spans:
        if not last <= start < stop <= len(content):
            return False
        last = start
    return True


_STEMMERS = threading.local()  # a stemmer is not thread-safe: one per thread
_STEMS: dict[str, str] = {}


def _stems_of(distinct: Iterable[str]) -> dict[str, str]:
    """The porter stem of each of ``distinct`` tokens: those not cached stemmed together."""
    known = _STEMS.get
    found: dict[str, str] = {}
    missing: list[str] = []
    for token in distinct:
        stem = known(token)
        if stem is None:
            missing.append(token)
        else:
            found[token] = stem
    if missing:
        stemmed = dict(zip(missing, _stemmer().stemWords(missing), strict=True))
        found.update(stemmed)
        if len(_STEMS) + len(stemmed) > _STEMS_CACHED:
            _STEMS.clear()
        _STEMS.update(stemmed)
    return found


def _stemmer() -> Stemmer.Stemmer:
    """This thread's porter stemmer (a stemmer is not thread-safe)."""
    stemmer = getattr(_STEMMERS, "porter", None)
    if stemmer is None:
        stemmer = _STEMMERS.porter = Stemmer.Stemmer("porter")
    return stemmer


def porter_stem(token: str) -> str:
    """``token``'s porter stem, as the keyword index makes it (cached: stemming is pure)."""
    found = _STEMS.get(token)
    if found is None:
        found = str(_stemmer().stemWord(token))
        if len(_STEMS) >= _STEMS_CACHED:
            _STEMS.clear()
        _STEMS[token] = found
    return found


def query_stems(query: str | None) -> dict[str, str]:
    """The porter stems of ``query``'s words (stop words dropped), each with the word it came
    from: what a passage shares with the query.

    >>> sorted(query_stems("Which caches did we evict?").items())
    [('cach', 'caches'), ('evict', 'evict')]
    >>> sorted(query_stems("Caroline's status on port 5"))
    ['5', 'carolin', 'port', 'statu']
    >>> sorted(query_stems("the dump of March 5"))  # and the day as an ISO date writes it
    ['03', '05', '5', 'dump', 'march']
    """
    words: dict[str, str] = {}
    for word in query_words(with_days_as_written(query or "")):
        for token in tokens(word):
            # a one-letter word is the "s" of a possessive ("Caroline's": its stem is
            # empty) or a stray initial: in most passages, so it made passages that
            # matched nothing else of the query look relevant (a digit says something)
            if len(token) > 1 or token.isdigit():
                words.setdefault(porter_stem(token), word)
    return words


def lines_together(
    content: str,
    analysis: Analysis,
    stems: Iterable[str],
    longest: int | None = None,
    at_least: int = 2,
) -> dict[int, int]:
    """For each passage of ``content`` (cut as ``analysis`` says) with a line that holds two
    or more of ``stems`` together, how many that line holds, on its best line: a table's
    row, a log line, a setting that names what a question asks about. A line under a heading
    (:data:`_HEADING`: ``# payments/settings.py``, ``[payments]``, ``Payments:``) holds its
    heading's words too. A passage of one line is read from its stem counts; one of several
    is tokenized line by line (only when it holds two of the stems at all)."""
    wanted = frozenset(stems)
    together: dict[int, int] = {}
    if len(wanted) < 2:
        return together
    at_least = max(2, at_least)
    held = _held_per_passage(analysis, wanted)
    for i in sorted(held):
        present = held[i]
        if present < at_least:
            continue
        start, stop = analysis.spans[i]
        text = content[start:stop].strip()
        if "\n" in text:
            present = _best_line(text, wanted, longest, at_least)
        elif longest is not None and len(text) > longest:
            continue
        if present >= at_least:
            together[i] = present
    return together


#: A text "made of lines" has at least this many lines, of at most this many characters on
#: average: a log, a table, a listing, a config block — not prose, whose paragraphs are
#: lines of hundreds of characters, nor an answer mixing prose and code (restore ranks
#: those whole: docs/decisions/2026-11-28-a-line-holding-the-query-words.md).
LINES_AT_LEAST = 8
LINE_CHARS_ON_AVERAGE = 80


def made_of_lines(text: str) -> bool:
    """Whether ``text`` is made of short lines (:data:`LINES_AT_LEAST`,
    :data:`LINE_CHARS_ON_AVERAGE`).

    >>> made_of_lines("\\n".join(f"2026-03-07 ERROR svc[{i}]: timed out" for i in range(20)))
    True
    >>> made_of_lines("\\n\\n".join(["A paragraph of prose that goes on for a while. " * 4] * 5))
    False
    """
    lines = text.count("\n") + 1
    return lines >= LINES_AT_LEAST and len(text) <= LINE_CHARS_ON_AVERAGE * lines


def most_together(
    analysed_events: Mapping[K, tuple[str, Analysis]], stems: Iterable[str], longest: int
) -> tuple[int, list[K]]:
    """The most of ``stems`` one short line (``longest`` characters at most) of any of
    ``analysed_events`` holds together (0 below two), and the events that hold it. Bounded
    work: each event's passages give an upper bound from their stem counts, and only the
    events whose bound reaches the best count found so far are read line by line."""
    wanted = frozenset(stems)
    if len(wanted) < 2:
        return 0, []
    bounds = sorted(
        (
            (max(_held_per_passage(analysis, wanted).values(), default=0), key)
            for key, (_, analysis) in analysed_events.items()
        ),
        key=lambda pair: -pair[0],
    )
    top, holders = 0, []
    for bound, key in bounds:
        if bound < max(2, top):
            break
        content, analysis = analysed_events[key]
        found = max(lines_together(content, analysis, wanted, longest, top).values(), default=0)
        if found > top:
            top, holders = found, [key]
        elif found == top and found:
            holders.append(key)
    return top, holders


def _held_per_passage(analysis: Analysis, wanted: frozenset[str]) -> Counter[int]:
    """How many of ``wanted`` each passage holding any of them holds (from its stem counts:
    the most any one of its lines can hold)."""
    return Counter(i for stem in wanted for i, _ in analysis.holding(stem))


#: A line that names what the lines after it are about: a comment or Markdown heading, an
#: INI section, a line ending with a colon ("Settings for the mailer:", a YAML key)
_HEADING = re.compile(r"^\s*(?:#|\[[^\]]+\]\s*$)|:\s*$")


def held_stems(text: str, wanted: frozenset[str]) -> frozenset[str]:
    """The stems of ``wanted`` that ``text`` (a line, a sentence) holds."""
    return wanted.intersection(porter_stem(token) for token in tokens(text))


def _best_line(text: str, wanted: frozenset[str], longest: int | None = None, need: int = 2) -> int:
    """How many of ``wanted`` the best line of ``text`` holds, with its heading's (lines
    over ``longest`` characters not counted), when at least ``need`` (else 0 or less).

    A line is tokenized only when it may hold ``need``: a porter stem less its last letter
    is the start of the word it came from ("timed" → "time", "happy" → "happi"), so an ASCII
    line whose lowercase text holds fewer of those starts than ``need`` cannot (a search
    reads the lines of ~50 long events: tokenizing every one was most of its time on logs).
    """
    starts = [stem[:-1] if len(stem) >= 3 else stem for stem in wanted]
    best = 0
    heading: frozenset[str] = frozenset()
    for line in text.split("\n"):
        bare = line.strip()
        if bare.startswith("```"):  # a code block's fence ends its heading's reach
            heading = frozenset()
            continue
        if longest is not None and len(line) > longest:
            continue
        # (the pattern is tried only on a line that may be a heading: most are not)
        if (bare[:1] in ("#", "[") or bare.endswith(":")) and _HEADING.search(line):
            heading = held_stems(line, wanted)
            best = max(best, len(heading))
            continue
        low = line.lower()
        # (the tokenizer folds accents: a line that is not ASCII is tokenized whatever)
        may_hold = sum(1 for start in starts if start in low) if low.isascii() else len(starts)
        if len(heading) + may_hold < max(need, best + 1):
            continue
        best = max(best, len(held_stems(line, wanted) | heading))
    return best


def matching_passages(
    content: str,
    analysis: Analysis,
    words: Iterable[str],
    first: Iterable[int] = (),
) -> list[int]:
    """The passages of ``content`` (cut as ``analysis`` says) that match the query's stems
    ``words``, best first: those scoring at least :data:`RELATIVE_SCORE` of the best by BM25
    among the event's own passages, those with a line holding more of the words together
    first (:data:`LINES_FIRST`), then those of ``first`` (restore: the search's passage),
    then by BM25. Restore shows these of a long event; a JSON output's hit names its
    records by them (``search/records.py``)."""
    stems = list(words)
    scores = _passage_bm25(analysis, stems)
    together = lines_together(content, analysis, stems) if LINES_FIRST else {}
    top = max(scores, default=0.0)
    preferred = frozenset(first)
    return sorted(
        (i for i, score in enumerate(scores) if top > 0 and score >= top * RELATIVE_SCORE),
        key=lambda i: (-together.get(i, 0), i not in preferred, -scores[i], i),
    )


def _passage_bm25(analysis: Analysis, stems: Sequence[str]) -> list[float]:
    """Each passage's BM25 score for ``stems`` among the event's own passages (a word in
    every passage is the event's topic, not a reason to prefer one of them)."""
    n = len(analysis.spans)
    average = sum(analysis.lengths) / n or 1.0
    scores = [0.0] * n
    for stem in stems:
        holding = analysis.holding(stem)
        if not holding:
            continue
        df = len(holding)
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, tf in holding:
            norm = _K1 * (1 - _B + _B * analysis.lengths[i] / average)
            scores[i] += idf * tf * (_K1 + 1) / (tf + norm)
    return scores
