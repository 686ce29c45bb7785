"""How hybrid search reads long events: scored by their best passage, raised by a short line
holding the query's words, and shown by the passage whose line holds the most of them.

A long event in hybrid's keyword ranking scores the better of its whole text and its best
passage (with its context): a long message whose one paragraph holds every word of the
question ranked below shorter ones that each hold some of them
(docs/decisions/2026-11-28-long-events-by-their-best-passage.md). Among those, the events
whose one short line (a log line, a table's row, a setting under its heading) holds the most
of the query's words score their best passage higher, and a hit shows a passage whose line
holds more of them than the passage its ranking chose
(docs/decisions/2026-11-28-a-line-holding-the-query-words.md). The passages are the vector
index's (``search/passage_terms.py``, cached by event).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ..core.clock import from_us
from ..events import Event
from ..ranking.keyword.scoring import PassageTerms
from ..store.base import SearchedLog
from ..text.passages import Cutter
from .passage_terms import (
    Analysis,
    analysed,
    lines_together,
    made_of_lines,
    most_together,
    needs_analysis,
    query_stems,
)
from .when import with_days_as_written

__all__ = ["LongHits"]

# A long event whose one short line (a log line, a table's row, a setting under its
# service's heading; at most _LINE_CHARS characters) holds the most of the query's words
# of any keyword candidate's has its best passage's keyword score raised by this share:
# BM25 reads a passage as a bag of words, and a log or a config block holds each word of
# "which host timed out in email-dispatcher?" on some line. Generated agent runs any@10
# 0.851 -> 0.910 (config 0.385 -> 0.769), mixed 0.857 -> 0.878; tech chats 0.860 / 0.838 ->
# 0.868 / 0.831 (docs/decisions/2026-11-28-a-line-holding-the-query-words.md). 0 turns
# it off.
_LINE_BOOST = 0.5
_LINE_CHARS = 200
_NO_TIME = from_us(0)

Ranking = list[tuple[int, float]]
Spans = dict[int, tuple[int, int]]


class _PassageSpans(Protocol):
    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]: ...


class LongHits:
    """The long-event steps of one searcher's hybrid search, over its log (``store``), the
    spans its vector index keeps (``storage``) and its embedder's cut (``cutter()``)."""

    def __init__(
        self, store: SearchedLog, storage: _PassageSpans, cutter: Callable[[], Cutter]
    ) -> None:
        self.store = store
        self.storage = storage
        self.cutter = cutter

    def by_passages(
        self,
        query: str,
        partitions: list[tuple[str, bool]],
        keyword: Ranking,
        *,
        lines_only: bool = False,
    ) -> tuple[Ranking, Spans]:
        """The keyword ranking with each long event in it scored by the better of its whole
        text and its best passage (``lines_only``: only those made of short lines), those
        whose one short line holds the most of the query's words raised by
        :data:`_LINE_BOOST`; and the span of each long event's best passage, which its hit
        shows when this ranking placed it higher than the semantic one."""
        candidates = [seq for seq, _ in keyword]
        if not candidates:
            return keyword, {}
        read: dict[int, tuple[str, Analysis]] = {}  # (each long candidate's content and cut)

        def passages_of(seqs: list[int]) -> dict[int, PassageTerms]:
            # (each event's id and content alone: what its passages are cut from)
            events = {
                seq: Event(event_id, "", "", "", content, _NO_TIME)
                for seq, (event_id, content) in self.store.event_contents(seqs).items()
                if not lines_only or made_of_lines(content)
            }
            for seq, analysis in self.analyses(events).items():
                read[seq] = (events[seq].content, analysis)
            return {
                seq: list(zip(analysis.terms, analysis.lengths, strict=True))
                for seq, (_, analysis) in read.items()
            }

        better = self.store.keyword_passage_scores(
            with_days_as_written(query), partitions, candidates, passages_of
        )
        if _LINE_BOOST and read:
            top, holders = most_together(read, query_stems(query), _LINE_CHARS)
            for seq in holders if top >= 2 else ():
                if seq in better:
                    score, index = better[seq]
                    better[seq] = (score * (1 + _LINE_BOOST), index)
        scores = dict(keyword)
        best: Spans = {}
        raised = False
        for seq, (score, index) in better.items():
            cuts = read[seq][1].spans if seq in read else ()
            if score > 0 and 0 <= index < len(cuts):
                best[seq] = cuts[index]
            if score > scores.get(seq, 0.0):
                scores[seq], raised = score, True
        if not raised:
            return keyword, best
        place = {seq: i for i, seq in enumerate(candidates)}  # ties: the earlier candidate
        return sorted(scores.items(), key=lambda pair: (-pair[1], place[pair[0]])), best

    def shown_spans(self, query: str, events: Mapping[int, Event], spans: Spans) -> Spans:
        """``spans`` (the passage each long hit shows, as the ranking that placed it found
        it), with a passage whose one line holds more of the query's words together instead
        where there is one (a table's row, a log line; the ranking scored passages by their
        words, not by where they sit)."""
        stems = query_stems(query)
        found = {seq: events[seq] for seq in spans if seq in events}
        if len(stems) < 2 or not found:
            return spans
        shown = dict(spans)
        for seq, analysis in self.analyses(found).items():
            together = lines_together(found[seq].content, analysis, stems)
            if not together:
                continue
            cuts = analysis.spans
            now = cuts.index(spans[seq]) if spans[seq] in cuts else -1
            best = max(together, key=lambda i: (together[i], i == now, -i))
            if together[best] > together.get(now, 0):
                shown[seq] = cuts[best]
        return shown

    def analyses(self, events: Mapping[int, Event]) -> dict[int, Analysis]:
        """The passages of each of ``events`` that has some (by seq): the spans the index
        holds read in one query for those not analysed yet, the others from the cache."""
        cutter = self.cutter()
        uncut = [seq for seq, event in events.items() if needs_analysis(event, cutter)]
        indexed = self.storage.passage_spans(uncut) if uncut else {}
        made = {seq: analysed(event, cutter, indexed.get(seq)) for seq, event in events.items()}
        return {seq: analysis for seq, analysis in made.items() if analysis is not None}
