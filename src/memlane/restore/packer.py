"""How restore() claims its budget, one event at a time: include, show by passages,
summarise or drop.

:class:`Packer` is the running state of one :func:`~memlane.restore.pack`: the tokens
used, the blocks claimed per section (kept in time order, to price their time marks), and a
:class:`ReportItem` per candidate. ``fill`` claims a section's events within its share;
``fit`` decides whether an event goes in whole, by its passages relevant to the query (a
long text: restore/passages.py; the whole only when it fits comfortably), summarised (JSON
stays JSON, short content stays whole, a user summariser is tried first) or not at all. The
order of the sections and their shares are restore/plan.py's; the text of a block is
restore/text.py's.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

from ..core.lru import MISSING, SizedLru
from ..events import Event
from ..search.passage_terms import analysed
from ..search.records import record_view
from ..text.passages import Cutter
from ..text.shrink import (
    bounded_text,
    json_preview,
    json_size_hint,
    summarize_json,
    summarize_text,
    user_summary,
)
from ..text.tokens import Tokenizer
from .passages import (
    LEAST_PASSAGES,
    WHOLE_WITHIN,
    Analysis,
    Pricing,
    Relevance,
    Shown,
    passage_cost,
    ranked,
    shown,
)
from .text import (
    TITLES,
    payload_json,
    render_block,
    shown_content,
    shown_payload,
    stamp,
    utc,
)

__all__ = [
    "MIN_PAYLOAD_SUMMARY",
    "MIN_USEFUL_TOKENS",
    "SUMMARY_SHARE",
    "TIMELESS",
    "UNDATED",
    "Block",
    "Packer",
    "ReportItem",
    "SectionShare",
    "chrono",
    "head_lines",
]

#: Below this many tokens left, an event that does not fit is dropped, not summarised.
MIN_USEFUL_TOKENS = 24
#: Records of one JSON output shown at most while sections are filled (a record is a
#: passage of its own: search/records.py); a question about many of them ("which tests
#: failed?") is answered by each that holds its words, not by three.
RECORDS_SHOWN = 24
#: A summary of an event with a payload gets at least this many tokens (and 1/32 of the
#: budget), or it is dropped: a few dozen tokens of a large JSON document tell a reader
#: nothing, and each summary costs restore a few milliseconds.
MIN_PAYLOAD_SUMMARY = 64
#: Events whose whole block costs fewer tokens than this are kept whole or dropped: a
#: summary of a short event carries nothing ("…[41 chars omitted]…").
SHORT_EVENT_TOKENS = 64
#: Content up to this many tokens is kept whole when an event's payload is summarised.
KEEP_CONTENT_TOKENS = 40
#: The largest share of the tokens left that one summarised event may take (not the goal).
SUMMARY_SHARE = 0.5
#: Counts of short pieces (time marks, passage headers, titles) kept across restores, per
#: encoding: a restore of long events counted ~140 of them (~5 ms), mostly the same as the
#: last restore's. Keyed by the text's hash, not the text (no erased words kept); a
#: collision could only misjudge what fits, which the exact count of the whole text
#: (restore/assembly.py) corrects.
_SHORT_COUNTS: SizedLru[int] = SizedLru(16_384)
_SHORT = 256  # characters: longer pieces are counted each restore (and rarely repeat)
#: Sections without time marks: the goal (dated by the opening line) and the summary
#: (dated by its own text); each holds one event in its own share.
TIMELESS = ("goal", "earlier")
#: Sections shown without time marks: those, and the user's facts (each says since when).
UNDATED = (*TIMELESS, "user", "reference")
_CHARS_PER_TOKEN_CEILING = 16  # beyond this many chars per token left, do not render in full
_NOTHING = Relevance({}, {})


class Readable(NamedTuple):
    """What a long event is shown by passages of (:meth:`Packer.readable`): the event as
    read (its content, or a JSON output's records as its content), its passages, what makes
    one relevant, and whether the passages are a JSON output's records."""

    event: Event
    analysis: Analysis
    relevance: Relevance
    records: bool


#: Extractive summaries already made, per (event, token target, tokenizer). An agent
#: restores its session every turn, and the same large tool outputs are summarised to the
#: same targets each time: summarising a JSON preview costs ~2 ms, so twelve of them were
#: most of a restore. Events never change once recorded (their id fixes content and
#: payload), and the extractive summary is deterministic, so a cached one is exact. A
#: user's summariser is never cached here (it may be an LLM whose answers vary).
_SUMMARIES: SizedLru[tuple[str | None, str | None, str]] = SizedLru(2_048)


@dataclass(frozen=True)
class ReportItem:
    """The fate of one candidate event. ``tokens`` is what its block used (0 if dropped);
    ``passages`` the numbers (from 1) of the passages shown of a long event (action
    ``"passages"``; the reason says why each was chosen)."""

    event_id: str
    kind: str
    section: str
    action: str  # "included" | "passages" | "summarised" | "dropped"
    reason: str
    tokens: int
    passages: tuple[int, ...] = ()


@dataclass(frozen=True)
class SectionShare:
    """The budget one section was offered, what it used, and why it was offered that."""

    section: str
    offered: int  # tokens the section could use at most when it was filled
    used: int  # tokens its blocks used (summed per block; before the exact trim)
    why: str


@dataclass
class Block:
    event: Event
    section: str
    text: str  # "- label: body" (+ payload line), without its time
    tokens: int  # what it was charged: its text, its time marks, its neighbour's change
    action: str
    reason: str
    turn: str | None = None  # the content it has as a chat turn (messages only)
    rank: int = 0  # claim order: the highest is trimmed first; the goal (0) never is
    passages: tuple[int, ...] = ()  # the passages shown of a long event (from 1)
    basis: str = ""  # why it was claimed at all (a passages block's reason says more)


@dataclass
class Packer:
    tok: Tokenizer
    summarizer: Callable[[str, int], str] | None
    budget: int
    used: int = 0
    limit: int | None = None  # the current section's ceiling on `used`
    blocks: list[Block] = field(default_factory=list)
    by_section: dict[str, list[Block]] = field(default_factory=dict)
    items: dict[str, ReportItem] = field(default_factory=dict)
    claimed: set[str] = field(default_factory=set)
    notes: dict[str, str] = field(default_factory=dict)
    shares: list[SectionShare] = field(default_factory=list)
    floor: int = 1  # tokens of the smallest possible block
    user_cache: dict[tuple[str, bool], str] = field(default_factory=dict)
    count_cache: dict[str, int] = field(default_factory=dict)
    #: what makes a long event's passages relevant: the query (or the default one) and the
    #: search's best passages; ``asked``: the caller gave the query (else Recent's long
    #: events, which no search ranked, keep their summary)
    relevance: Relevance = field(default_factory=lambda: Relevance({}, {}))
    asked: bool = False
    cutter: Cutter = field(default_factory=Cutter)  # how the index cut long events
    indexed: Mapping[int, Sequence[tuple[int, int]]] = field(default_factory=dict)  # its spans
    #: the whole payload of an event read with its preview (JSON outputs shown by records)
    payload_of: Callable[[Event], Any] | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    passage_costs: dict[str, dict[tuple[object, ...], int]] = field(default_factory=dict)
    #: each event's shown content, by the event object (kept, so its id is never reused):
    #: a restore tries an event in several sections and shares, and collapsing a long
    #: output's repeated lines each time was ~10% of a restore of tool-heavy sessions
    contents: dict[int, tuple[Event, str]] = field(default_factory=dict)

    @property
    def left(self) -> int:
        ceiling = self.budget if self.limit is None else min(self.budget, self.limit)
        return ceiling - self.used

    def content_of(self, event: Event) -> str:
        """:func:`~memlane.restore.text.shown_content` of ``event``, once per restore."""
        found = self.contents.get(id(event))
        if found is not None and found[0] is event:
            return found[1]
        content = shown_content(event)
        self.contents[id(event)] = (event, content)
        return content

    def small_count(self, text: str) -> int:
        """Count a short, often repeated piece (time marks, headers) once."""
        cached = self.count_cache.get(text)
        if cached is None:
            cached = self.count_cache[text] = _short_count(self.tok, text)
        return cached

    # -- claiming ------------------------------------------------------------------------

    def placement(self, event: Event, section: str) -> int:
        """Tokens of time marks that placing ``event`` in ``section`` adds (approximate)."""
        blocks = self.by_section.get(section, [])
        if section in UNDATED:
            return 0 if blocks else self.small_count(f"\n\n{TITLES[section]}\n")
        at = bisect.bisect(blocks, chrono(event), key=lambda b: chrono(b.event))
        before = blocks[at - 1].event if at else None
        after = blocks[at].event if at < len(blocks) else None
        minute = section == "recent"  # history sections are dated by day (day_stamps)
        cost = self.small_count("".join(stamp(before, event, by_minute=minute)))
        if after is not None:  # its mark now depends on this event instead of `before`
            cost += self.small_count("".join(stamp(event, after, by_minute=minute)))
            cost -= self.small_count("".join(stamp(before, after, by_minute=minute)))
        if not blocks:
            cost += self.small_count(f"\n\n{TITLES[section]}\n")
        return max(0, cost)

    def claim(self, event: Event, section: str, reason: str, *, whole_only: bool = False) -> bool:
        """Include, summarise or drop one event, charging the running budget."""
        # An event whose stored count (maybe another tokenizer's) is well over what is left,
        # and that is short or has no room to be summarised in, can neither fit nor be
        # summarised: skip the rendering and counting.
        hopeless = event.token_count < SHORT_EVENT_TOKENS or self.left < MIN_USEFUL_TOKENS
        if (
            event.token_count > 0
            and hopeless
            and event.token_count * 0.8 > self.left
            and "\n" not in event.content  # collapsed repeats can make it much shorter
            and not event.metadata.get("derived_content")
        ):
            why = f"over budget: ~{event.token_count} tokens > {self.left:,} left (short)"
            self.record(event, section, "dropped", why, 0)
            return False
        extra = self.placement(event, section)
        block, why = self.fit(event, section, self.left - extra, reason)
        if block is not None and whole_only and block.action != "included":
            block, why = None, "too large for this share: left for a later section"
        if block is None:
            self.record(event, section, "dropped", why, 0)
            return False
        block.tokens += extra
        self.used += block.tokens
        block.rank = len(self.blocks) + 1
        self.blocks.append(block)
        placed = self.by_section.setdefault(section, [])
        bisect.insort(placed, block, key=lambda b: chrono(b.event))
        self.claimed.add(event.id)
        self.record(event, section, block.action, block.reason, block.tokens, block.passages)
        return True

    def fit(self, event: Event, section: str, left: int, reason: str) -> tuple[Block | None, str]:
        if left <= 0:
            return None, "share spent" if self.limit is not None else "budget spent"
        need = too_big(event, left, self.content_of(event))
        # A long text is shown by its passages relevant to the query, unless the whole fits
        # comfortably (counted only when it may); Recent keeps the whole where it fits.
        # (analysed only when passages may be shown: most candidates meet a spent share, and
        # cutting and stemming the rest was ~85% of a first restore of long events)
        passages = self.passages(event, section, left) if section != "recent" else None
        full: int | None = None
        if need is None and (passages is None or self.may_fit_whole(event, passages, left)):
            text = render_block(event, self.content_of(event), payload_json(event))
            full = self.tok.count(text + "\n")
            if full <= left and (passages is None or full <= WHOLE_WITHIN * passages.tokens):
                return Block(event, section, text, full, "included", reason, event.content), ""
            if full > left:
                need = f"{full:,} tokens"
        if passages is None and section == "recent":
            passages = self.passages(event, section, left)
        if passages is not None:
            if need is not None:
                why = f"{need} > {left:,} left"
            else:
                whole = f"{full:,}" if full is not None else f"~{event.token_count:,}"
                why = (
                    f"the whole {whole} tokens > {WHOLE_WITHIN:g}x its passages' {passages.tokens}"
                )
            return self.passage_block(event, section, passages, reason, why), ""
        assert need is not None  # (a whole that fits was returned)
        least = (
            MIN_USEFUL_TOKENS
            if shown_payload(event) is None
            else max(MIN_PAYLOAD_SUMMARY, self.budget // 32)
        )
        if left < least:
            return None, f"over budget: {need} > {left:,} left"
        if full is not None and full < SHORT_EVENT_TOKENS and section not in TIMELESS:
            return None, f"over budget: {need} > {left:,} left (short: kept whole or not at all)"
        # A summary takes at most half of what is left (the goal: all of it), so one huge
        # event cannot crowd out every smaller one after it.
        alone = section in ("goal", "earlier")  # one event in its own share
        share = left if alone else max(least, int(left * SUMMARY_SHARE))
        block = self.summarised(event, section, share)
        if block is None:
            return None, f"over budget: {need} > {left:,} left, and no summary fits"
        block.reason = f"{reason}; summarised: {need} > {left:,} left" + block.reason
        return block, ""

    def passages(self, event: Event, section: str, left: int) -> Shown | None:
        """``event``'s passages relevant to the query within half of ``left``
        (restore/passages.py), or None: it is not a long text shown by passages, none is
        relevant (the event keeps its summary, head and tail: its first and last passages
        were measured to carry no more), or none fits."""
        allowance = int(left * SUMMARY_SHARE)
        if allowance < LEAST_PASSAGES:
            return None  # (most candidates meet a spent share: no ranking for them)
        readable = self.readable(event, section)
        if readable is None:
            return None
        seen, analysis, relevance, records = readable
        order = ranked(seen, analysis, relevance, follow=not records)
        if not order:
            return None
        pricing = self.pricing(seen, analysis)
        most = RECORDS_SHOWN if records else None
        return shown(
            seen,
            analysis,
            order[: 4 * RECORDS_SHOWN],
            self.size_of(seen),
            allowance,
            pricing,
            most=most,
        )

    @staticmethod
    def may_fit_whole(event: Event, passages: Shown, left: int) -> bool:
        """Whether the whole of ``event`` may fit ``left`` comfortably beside ``passages``,
        by its recorded count (maybe another model's: a fifth of slack), before it is
        rendered and counted."""
        recorded = event.token_count
        slack = 1.2
        return recorded <= 0 or recorded <= slack * min(left, WHOLE_WITHIN * passages.tokens)

    def passage_block(
        self, event: Event, section: str, chosen: Shown, basis: str, why: str | None
    ) -> Block:
        """The block of ``chosen`` passages; its reason: ``basis`` (why the event is shown),
        ``why`` (why not whole, if said) and why each passage."""
        said = ", ".join(str(n) for n in chosen.numbers)
        return Block(
            event,
            section,
            chosen.text,
            chosen.tokens,
            "passages",
            f"{basis}; by passages{f' ({why})' if why else ''}: "
            f"passage{'s' if len(chosen.numbers) > 1 else ''} {said} of {chosen.count} — "
            f"{chosen.why}",
            chosen.turn,
            passages=chosen.numbers,
            basis=basis,
        )

    def more_passages(self, block: Block, allowance: int) -> Block | None:
        """More of a long event shown by its passages, within ``allowance`` tokens: the whole
        when it fits, else its relevant passages and then the passages beside them."""
        event, section = block.event, block.section
        readable = self.readable(event, section)
        if readable is None:
            return None
        seen, analysis, relevance, records = readable
        if too_big(event, allowance, self.content_of(event)) is None:
            text = render_block(event, self.content_of(event), payload_json(event))
            full = self.tok.count(text + "\n")
            if full <= allowance:
                why = f"{block.basis}; whole"
                return Block(event, section, text, full, "included", why, event.content)
        order = ranked(seen, analysis, relevance, follow=not records)
        if not order:
            return None
        picked = {i for i, _ in order}
        near = [n - 1 for n in block.passages] or [0]
        # (a JSON output's records beside the chosen ones only: they are thousands)
        reach = RECORDS_SHOWN if records else len(analysis.spans)
        around = {i for j in near for i in range(j - reach, j + reach + 1)}
        beside = sorted(
            (i for i in around if 0 <= i < len(analysis.spans) and i not in picked),
            key=lambda i: (min(abs(i - j) for j in near), i),
        )
        order += [(i, "beside a chosen passage") for i in beside]
        size = self.size_of(seen)
        everything = len(analysis.spans)
        pricing = self.pricing(seen, analysis)
        chosen = shown(seen, analysis, order, size, allowance, pricing, most=everything)
        if chosen is None:
            return None
        return self.passage_block(event, section, chosen, block.basis, None)

    def readable(self, event: Event, section: str) -> Readable | None:
        """What ``event`` is shown by passages of in ``section``, with its passages and what
        makes one relevant: a long text's content, or a JSON tool output's records when a
        query may ask about them (search/records.py: the search's passage is of the
        flattened content, not of the records, so only the query's words choose). None: not
        shown by passages — the goal or the summary, which stand alone; a payload that is
        not a JSON output's (summarised as JSON); a text that fits the embedder whole."""
        if section in TIMELESS or event.kind == "summary":
            return None
        relevance = self.relevance_in(section)
        # (records only for the caller's query: the default one, the goal's words, matches
        # most records of an output about it, and the JSON summary keeps the unusual ones)
        view = record_view(event, self.payload_of) if self.asked and relevance.words else None
        if view is not None:
            analysis = analysed(view.event, self.cutter, view.spans)
            if analysis is not None:
                return Readable(view.event, analysis, replace(relevance, best={}), records=True)
        if shown_payload(event) is not None:
            return None
        analysis = analysed(event, self.cutter, self.indexed.get(event.seq))
        return None if analysis is None else Readable(event, analysis, relevance, records=False)

    def relevance_in(self, section: str) -> Relevance:
        """What makes a passage relevant in ``section``: the query, or the default one
        (goal and pending steps) outside Recent; in Recent without a query, nothing."""
        return self.relevance if self.asked or section != "recent" else _NOTHING

    def size_of(self, event: Event) -> int:
        """The tokens of ``event``'s content, said in a passages header: as recorded (the
        manager's model family; counting again would cost more than the passages)."""
        if event.token_count > 0:
            return event.token_count
        size = self.sizes.get(event.id)
        if size is None:
            content = event.content
            size = self.tok.count(content) if len(content) <= 256 * 1024 else len(content) // 4
            self.sizes[event.id] = size
        return size

    def pricing(self, event: Event, analysis: Analysis) -> Pricing:
        """How ``event``'s passages are priced: each counted once, and kept with its
        passages for the next restore unless the tokenizer is the caller's own (it may
        not count the same twice)."""
        tok = self.tok
        key: tuple[object, ...] = (tok.model, tok.encoding_name, tok.margin)
        costs = self.passage_costs.setdefault(event.id, {}) if tok.custom else analysis.costs

        def passage(index: int) -> int:
            found = costs.get((*key, index))
            if found is None:
                found = costs[(*key, index)] = passage_cost(event, analysis, index, tok.count)
            return found

        return Pricing(tok.count, passage, self.small_count)

    def summarised(self, event: Event, section: str, left: int) -> Block | None:
        """The richest summary of ``event`` whose block counts <= ``left``, or None."""
        count = self.tok.count
        header = count(render_block(event, "", None, summarised=True) + "\n")
        target = left - header
        notes: list[str] = []
        for _ in range(4):  # pieces rarely add up exactly; shrink by the excess and retry
            if target <= 0:
                return None
            content, payload = self.split_summary(event, target, notes)
            if content is None or (not content.strip("… ") and payload is None):
                return None  # a summary that carries nothing is not worth its header
            text = render_block(event, content, payload, summarised=True)
            tokens = count(text + "\n")
            if tokens <= left:
                extra = f" ({notes[-1]})" if notes else ""
                turn = f"[summarised] {content}"
                return Block(event, section, text, tokens, "summarised", extra, turn)
            target -= tokens - left + 2
        return None

    def split_summary(
        self, event: Event, target: int, notes: list[str]
    ) -> tuple[str | None, str | None]:
        """Share ``target`` tokens between content and payload summaries."""
        if self.summarizer is not None or self.tok.custom or not event.id:
            return self._split_summary(event, target, notes)
        tok = self.tok
        key = (event.id, event.preview, target, tok.model, tok.encoding_name, tok.margin)
        cached = _SUMMARIES.get(key)
        if cached is MISSING:
            made: list[str] = []
            content, payload = self._split_summary(event, target, made)
            cached = (content, payload, made[-1] if made else "")
            _SUMMARIES.put(key, cached)
        if cached[2]:
            notes.append(cached[2])
        return cached[0], cached[1]

    def _split_summary(
        self, event: Event, target: int, notes: list[str]
    ) -> tuple[str | None, str | None]:
        content = self.content_of(event)
        payload_value = shown_payload(event)
        if event.kind == "summary":  # bullets: keep the best first lines, not head and tail
            return head_lines(content, target, self.tok.count), None
        if payload_value is None:
            return self.shrink_text(content, target, notes), None
        prefix = 4  # "\n  payload: " and the seams around it
        content_tokens = (
            self.tok.count(content)
            if len(content) <= target * _CHARS_PER_TOKEN_CEILING
            else target + 1
        )
        # Short content is kept whole (a summary of it carries nothing); long content keeps
        # up to a third; the payload (usually the bulk) gets the rest.
        if content_tokens <= KEEP_CONTENT_TOKENS:
            content_share = content_tokens
        else:
            content_share = max(target // 3, KEEP_CONTENT_TOKENS)
        payload_budget = target - content_share - prefix
        payload = (
            self.shrink_json(payload_value, payload_budget, notes) if payload_budget > 0 else None
        )
        if payload is None:  # no JSON fits: spend everything on the content instead
            return self.shrink_text(content, target, notes), None
        payload_used = self.tok.count(payload)
        content_budget = max(0, target - payload_used - prefix)
        if content_tokens <= content_budget:
            return content, payload
        return self.shrink_text(content, content_budget, notes) or "…", payload

    def shrink_text(self, text: str, budget: int, notes: list[str]) -> str | None:
        if not text:
            return ""
        if self.summarizer is not None:
            out = self.ask_user(text, budget, notes, as_json=False)
            if out is not None:
                return out
        return summarize_text(text, budget, self.tok.count)

    def shrink_json(self, value: Any, budget: int, notes: list[str]) -> str | None:
        if self.summarizer is not None:
            preview = json_preview(value, 8 * budget + 256)
            out = self.ask_user(preview, budget, notes, as_json=True)
            if out is not None:
                return out
        return summarize_json(value, budget, self.tok.count)

    def ask_user(self, text: str, budget: int, notes: list[str], *, as_json: bool) -> str | None:
        assert self.summarizer is not None
        # A retry with a slightly smaller budget reuses the answer if it still fits: the
        # user summariser may be a slow, paid LLM call.
        key = (text, as_json)
        cached = self.user_cache.get(key)
        if cached is not None and self.tok.count(cached) <= budget:
            return cached
        source = text if as_json else bounded_text(text, max(64 * budget, 4096))
        out, why = user_summary(self.summarizer, source, budget, self.tok.count, as_json=as_json)
        notes.append(why)
        if out is not None:
            self.user_cache[key] = out
        return out

    def record(
        self,
        event: Event,
        section: str,
        action: str,
        reason: str,
        tokens: int,
        passages: tuple[int, ...] = (),
    ) -> None:
        self.items[event.id] = ReportItem(
            event.id, event.kind, section, action, reason, tokens, passages
        )

    def unclaim(self, block: Block, reason: str) -> None:
        self.blocks.remove(block)
        self.by_section[block.section].remove(block)
        self.claimed.discard(block.event.id)
        self.used -= block.tokens
        self.record(block.event, block.section, "dropped", reason, 0)

    # -- sections --------------------------------------------------------------------------

    def fill(
        self,
        events: Iterable[Event],
        section: str,
        reason_of: Callable[[Event], str],
        offered: int | None,
        why: str,
        *,
        contiguous: bool = False,
        whole_only: bool = False,
    ) -> list[Event]:
        """Claim ``events`` in order within ``offered`` tokens; return those left out.

        ``contiguous`` stops at the first event that does not fit (recent history keeps no
        holes); the rest are reported as dropped. ``whole_only`` claims only events that fit
        in full: a large one is left for a later section with more room to summarise it in.
        """
        self.limit = None if offered is None else self.used + max(0, offered)
        start = self.used
        left_out: list[Event] = []
        stopped = False
        for event in events:
            if event.id in self.claimed:
                continue  # shown in an earlier section: reported there
            if stopped or self.left < self.floor:
                spent = "share spent" if self.limit is not None else "budget spent"
                self.record(event, section, "dropped", f"{spent} ({self.left} left)", 0)
                left_out.append(event)
                continue
            if not self.claim(event, section, reason_of(event), whole_only=whole_only):
                left_out.append(event)
                stopped = contiguous
        self.limit = None
        offered_tokens = self.budget - start if offered is None else max(0, offered)
        self.shares.append(SectionShare(section, offered_tokens, self.used - start, why))
        return left_out


def _short_count(tok: Tokenizer, text: str) -> int:
    """``tok.count(text)``, kept across restores for a short text and a bundled encoding (a
    caller's own counter may not count the same twice)."""
    if not text:
        return 0
    if tok.custom or len(text) > _SHORT:
        return tok.count(text)
    key = (tok.encoding_name, tok.margin, len(text), hash(text))
    found = _SHORT_COUNTS.get(key)
    if found is MISSING:
        found = tok.count(text)
        _SHORT_COUNTS.put(key, found)
    return found


def head_lines(text: str, budget: int, count: Callable[[str], int]) -> str | None:
    """The first lines of ``text`` that fit ``budget`` and a count of the rest, or None."""
    lines = text.splitlines()

    def cut(keep: int) -> str:
        return "\n".join([*lines[:keep], f"(+{len(lines) - keep} more lines not shown)"])

    lo, hi, best = 1, len(lines) - 1, None  # the longest head that fits, by bisection
    while lo <= hi:
        mid = (lo + hi) // 2
        if count(candidate := cut(mid)) <= budget:
            best, lo = candidate, mid + 1
        else:
            hi = mid - 1
    return best


def too_big(event: Event, left: int, content: str | None = None) -> str | None:
    """Why ``event`` obviously cannot fit in ``left`` tokens (for the report), else None;
    ``content``: its :func:`~memlane.restore.text.shown_content`, if known.

    Bounds the work: a multi-megabyte event is never serialised or counted in full.
    """
    if event.preview:  # only a preview of the payload was read: it is too large to show
        return f"{event.payload_chars or 0:,} chars of payload"
    if content is None:
        content = shown_content(event)
    # The stored count (of content and payload as recorded; maybe by another tokenizer)
    # says nothing when the rendering drops or collapses content.
    if len(content) == len(event.content) and event.token_count // 2 > left:
        return f"~{event.token_count:,} tokens"
    cap = left * _CHARS_PER_TOKEN_CEILING
    if len(content) > cap:
        return f"{len(content):,} chars"
    payload = shown_payload(event)
    if len(content) + json_size_hint(payload, cap - len(content), 2 * left + 16) > cap:
        return f"more than {cap:,} chars"
    return None


def chrono(event: Event) -> tuple[datetime, str]:
    return utc(event.created_at), event.id
