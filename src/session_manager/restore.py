"""The budgeted packer behind ``restore()``: pure, no I/O.

The storage layer gathers :class:`RestoreCandidates`; :func:`pack` turns them into a text
that never exceeds ``max_tokens`` as counted by the declared tokenizer, plus a report of
what was included, summarised or dropped and why.

Claim order on the budget: (1) the goal and open pending steps, (2) important events and
unresolved errors in the given order, within at most :data:`IMPORTANT_SHARE` of what the
pinned section left (the first one may take all of it), (3) recent events, newest first,
(4) relevant older events by score. Each section is printed chronologically. An event too
large for what is left is summarised (JSON stays valid JSON) into at most
:data:`SUMMARY_SHARE` of what is left when at least :data:`MIN_USEFUL_TOKENS` are left,
otherwise dropped. Finally the whole
text is counted exactly and, while it is over budget (BPE counts of pieces do not add up
exactly), the lowest-priority block is dropped: relevant first, then the oldest recent, ...

Rendered shape (one block per event; a payload, if any, on one line of compact JSON)::

    ## Goal
    - [2026-11-22 10:31 UTC] goal: Survey 2026 sparse attention methods

    ## Recent
    - [2026-11-22 10:40 UTC] step (tool: web_search): searched arXiv
      payload: {"query":"sparse attention","hits":12}

A ``tool_output`` whose content is only the flattened copy of its JSON payload
(``metadata["derived_content"]``) is rendered by its payload alone.

Continuation lines of multi-line content are indented by four spaces, so content can never
forge a ``"  payload: "`` line; :func:`json_fragments` returns every payload for checking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from .errors import BudgetTooSmall, InvalidInput
from .events import Event, Session
from .summarize import (
    bounded_text,
    dumps,
    json_preview,
    json_size_hint,
    summarize_json,
    summarize_text,
    user_summary,
)
from .tokens import Tokenizer

__all__ = [
    "IMPORTANT_SHARE",
    "MIN_USEFUL_TOKENS",
    "PAYLOAD_PREFIX",
    "SUMMARY_SHARE",
    "ReportItem",
    "RestoreCandidates",
    "RestoreReport",
    "RestoredContext",
    "json_fragments",
    "pack",
    "rank_score",
]

#: Below this many tokens left, an event that does not fit is dropped, not summarised.
MIN_USEFUL_TOKENS = 24
#: The largest share of the tokens left that one summarised event may take (not the goal).
SUMMARY_SHARE = 0.5
#: The largest share of the tokens left after the pinned section that important events may
#: take, so that a long session with many decisions still shows its most recent turns.
IMPORTANT_SHARE = 0.5
#: The goal is kept at least this long (in tokens) or restore() raises BudgetTooSmall.
GOAL_MIN_TOKENS = 24
PAYLOAD_PREFIX = "  payload: "
SECTIONS: tuple[str, ...] = ("goal", "pending", "important", "recent", "relevant")
_TITLES = {
    "goal": "## Goal",
    "pending": "## Pending steps",
    "important": "## Important",
    "recent": "## Recent",
    "relevant": "## Relevant history",
}
_INDENT = "\n    "  # continuation lines: deeper than PAYLOAD_PREFIX, so never mistaken for it
_CHARS_PER_TOKEN_CEILING = 16  # beyond this many chars per token left, do not render in full
_UTC = timezone.utc


@dataclass(frozen=True)
class RestoreCandidates:
    """What the storage layer found for one restore; :func:`pack` decides what fits."""

    session: Session
    pinned: list[Event]  # goal event (kind "goal") + open pending steps
    important: list[Event]  # importance >= 0.7 events and unresolved errors, best first
    recent: list[Event]  # the session's most recent events, oldest first
    relevant: list[tuple[Event, float]]  # semantically relevant older events, best first
    total_events: int = 0  # how many events the session has in all (for the report)


@dataclass(frozen=True)
class ReportItem:
    """The fate of one candidate event. ``tokens`` is what its block used (0 if dropped)."""

    event_id: str
    kind: str
    section: str
    action: str  # "included" | "summarised" | "dropped"
    reason: str
    tokens: int


@dataclass(frozen=True)
class RestoreReport:
    """Why the restored text looks the way it does.

    ``sections`` maps each non-empty section to the exact token count of its own text;
    these may differ from ``token_count`` (the whole text) by a token or two, since BPE
    counts of pieces do not add up exactly. ``items`` lists every candidate event once, in
    the order the packer considered them.

    >>> ctx = mgr.restore(session.id, max_tokens=2000)  # doctest: +SKIP
    >>> ctx.report.included_ids("important")  # doctest: +SKIP
    ['01JD3...']
    """

    budget: int
    model: str
    encoding: str
    estimate: bool
    note: str
    token_count: int
    total_events: int
    sections: dict[str, int]
    items: list[ReportItem]

    def included_ids(self, section: str | None = None) -> list[str]:
        """Ids of events that made it into the text (in full or summarised)."""
        return [
            item.event_id
            for item in self.items
            if item.action != "dropped" and (section is None or item.section == section)
        ]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict with stable field names (``items`` as a list of dicts)."""
        data = asdict(self)
        data["counts"] = {
            action: sum(1 for item in self.items if item.action == action)
            for action in ("included", "summarised", "dropped")
        }
        return data


@dataclass(frozen=True)
class RestoredContext:
    """The packed memory: ``text``, ready-made ``messages`` and an explanation.

    ``messages`` is ``[{"role": "system", "content": text}]`` (empty when the text is):
    the memory goes in as one system message, so ``token_count`` (the exact count of
    ``text``) is what it costs, plus the few framing tokens a chat format adds per message.

    >>> ctx = mgr.restore(session.id, max_tokens=4000, model="gpt-4o")  # doctest: +SKIP
    >>> messages = ctx.messages + [{"role": "user", "content": "Continue."}]  # doctest: +SKIP
    """

    text: str
    messages: list[dict[str, str]]
    token_count: int
    report: RestoreReport

    def __str__(self) -> str:
        return self.text


def rank_score(event: Event, now: datetime, *, half_life_hours: float = 24.0) -> float:
    """The blend that orders important events: higher is more worth restoring.

    ``0.6 * importance + 0.25 * recall + 0.15 * recency``, where
    ``recall = min(1, log1p(recall_count) / log1p(10))`` (saturates at 10 recalls) and
    ``recency = 0.5 ** (age_hours / half_life_hours)`` (halves every ``half_life_hours``;
    events from the future count as brand new). The result lies in 0..1.

    >>> from datetime import datetime, timezone
    >>> now = datetime(2026, 11, 22, tzinfo=timezone.utc)
    >>> e = Event("01J", "s", "a", "decision", "use arXiv", now, importance=0.8)
    >>> round(rank_score(e, now), 3)
    0.63
    """
    recall = min(1.0, math.log1p(max(0, event.recall_count)) / math.log1p(10))
    age_hours = max(0.0, (_utc(now) - _utc(event.created_at)).total_seconds() / 3600)
    recency = 0.5 ** (age_hours / half_life_hours) if half_life_hours > 0 else 0.0
    return 0.6 * event.importance + 0.25 * recall + 0.15 * recency


def json_fragments(text: str) -> list[str]:
    """Every payload JSON fragment of a restored text (the rest of each payload line).

    >>> json_fragments('- [2026-11-22 10:31 UTC] step: ran\\n  payload: {"ok":true}')
    ['{"ok":true}']
    """
    return [
        line[len(PAYLOAD_PREFIX) :] for line in text.split("\n") if line.startswith(PAYLOAD_PREFIX)
    ]


# ---------------------------------------------------------------------------------------
# Packing
# ---------------------------------------------------------------------------------------


@dataclass
class _Block:
    event: Event
    section: str
    text: str
    tokens: int
    action: str
    reason: str
    rank: int = 0  # claim order: the highest is trimmed first; the goal (0) never is


@dataclass
class _Packer:
    tok: Tokenizer
    summarizer: Callable[[str, int], str] | None
    budget: int
    used: int = 0
    limit: int | None = None  # a section's own ceiling on `used`, below the budget
    blocks: list[_Block] = field(default_factory=list)
    items: dict[str, ReportItem] = field(default_factory=dict)
    seen_sections: set[str] = field(default_factory=set)
    floor: int = 1  # tokens of the smallest possible block (a bare header)
    user_cache: dict[tuple[str, bool], str] = field(default_factory=dict)

    @property
    def left(self) -> int:
        ceiling = self.budget if self.limit is None else min(self.budget, self.limit)
        return ceiling - self.used

    # -- claiming ------------------------------------------------------------------------

    def claim(self, event: Event, section: str, reason: str) -> None:
        """Include, summarise or drop one event, charging the running budget."""
        heading = (
            0 if section in self.seen_sections else self.tok.count(f"\n\n{_TITLES[section]}\n")
        )
        left = self.left - heading
        block, why = self.fit(event, section, left, reason)
        if block is None:
            self.record(event, section, "dropped", why, 0)
            return
        self.seen_sections.add(section)
        self.used += heading + block.tokens
        block.rank = len(self.blocks) + 1
        self.blocks.append(block)
        self.record(event, section, block.action, block.reason, block.tokens)

    def fit(self, event: Event, section: str, left: int, reason: str) -> tuple[_Block | None, str]:
        if left <= 0:
            return None, "important share spent" if self.limit is not None else "budget spent"
        need = _too_big(event, left)
        if need is None:
            text = _render(event, _shown(event), _payload_json(event.payload))
            tokens = self.tok.count(text + "\n")
            if tokens <= left:
                return _Block(event, section, text, tokens, "included", reason), ""
            need = f"{tokens:,} tokens"
        if left < MIN_USEFUL_TOKENS:
            return None, f"over budget: {need} > {left:,} left"
        # A summary takes at most half of what is left (the goal: all of it), so one huge
        # event cannot crowd out every smaller one after it.
        share = left if section == "goal" else max(MIN_USEFUL_TOKENS, int(left * SUMMARY_SHARE))
        block = self.summarised(event, section, share)
        if block is None:
            return None, f"over budget: {need} > {left:,} left, and no summary fits"
        block.reason = f"{reason}; summarised: {need} > {left:,} left" + block.reason
        return block, ""

    def summarised(self, event: Event, section: str, left: int) -> _Block | None:
        """The richest summary of ``event`` whose block counts <= ``left``, or None."""
        count = self.tok.count
        header = count(_render(event, "", None, summarised=True) + "\n")
        target = left - header
        notes: list[str] = []
        for _ in range(4):  # pieces rarely add up exactly; shrink by the excess and retry
            if target <= 0:
                return None
            content, payload = self.split_summary(event, target, notes)
            if content is None:
                return None
            text = _render(event, content, payload, summarised=True)
            tokens = count(text + "\n")
            if tokens <= left:
                extra = f" ({notes[-1]})" if notes else ""
                return _Block(event, section, text, tokens, "summarised", extra)
            target -= tokens - left + 2
        return None

    def split_summary(
        self, event: Event, target: int, notes: list[str]
    ) -> tuple[str | None, str | None]:
        """Share ``target`` tokens between content and payload summaries."""
        content = _shown(event)
        if event.payload is None:
            return self.shrink_text(content, target, notes), None
        prefix = 4  # "\n  payload: " and the seams around it
        content_tokens = (
            self.tok.count(content)
            if len(content) <= target * _CHARS_PER_TOKEN_CEILING
            else target + 1
        )
        # Content keeps up to a third; the payload (usually the bulk) gets the rest.
        content_share = min(content_tokens, max(target // 3, min(content_tokens, 8)))
        payload_budget = target - content_share - prefix
        payload = (
            self.shrink_json(event.payload, payload_budget, notes) if payload_budget > 0 else None
        )
        if payload is None:  # no JSON fits: spend everything on the content instead
            return self.shrink_text(content, target, notes), None
        payload_used = self.tok.count(payload)
        content_budget = max(0, target - payload_used - prefix)
        if content_tokens <= content_budget:
            return content, payload
        # Better a bare "…" than losing a payload that fits.
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

    def record(self, event: Event, section: str, action: str, reason: str, tokens: int) -> None:
        self.items[event.id] = ReportItem(event.id, event.kind, section, action, reason, tokens)


def pack(
    candidates: RestoreCandidates,
    max_tokens: int,
    tokenizer: Tokenizer,
    summarizer: Callable[[str, int], str] | None = None,
    now: datetime | None = None,
) -> RestoredContext:
    """Pack ``candidates`` into at most ``max_tokens`` tokens (see the module docstring).

    ``summarizer`` (``(text, max_tokens) -> str``, e.g. an LLM call) is tried first for
    events that need shortening; its output is used only if it fits (and, for payloads,
    parses as JSON). ``now`` is accepted for callers that rank with :func:`rank_score`;
    packing itself does not depend on the clock.

    Raises :class:`~session_manager.errors.BudgetTooSmall` when even the goal summarised to
    :data:`GOAL_MIN_TOKENS` tokens does not fit; the message names the smallest budget.

    >>> ctx = pack(candidates, 4000, tokenizer_for("gpt-4o"))  # doctest: +SKIP
    >>> ctx.token_count <= 4000  # doctest: +SKIP
    True
    """
    del now  # see docstring: the order of `important` is the caller's ranking
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise InvalidInput(f"max_tokens must be a non-negative int, not {max_tokens!r}.")
    p = _Packer(tokenizer, summarizer, max_tokens)
    session = candidates.session

    goal_events = [e for e in candidates.pinned if e.kind == "goal"]
    goal = max(goal_events, key=_chrono) if goal_events else None
    if goal is None and session.goal.strip():
        goal = Event("", session.id, session.agent_id, "goal", session.goal, session.created_at)
    if goal is not None:
        _claim_goal(p, goal, synthetic=not goal.id)

    probe = Event("", "", "", "x", "", datetime(2026, 1, 1, tzinfo=_UTC))
    p.floor = max(1, tokenizer.count(_render(probe, "", None) + "\n"))

    def walk(events: Iterable[Event], section: str, reason_of: Callable[[Event], str]) -> None:
        for event in events:
            if event.id in p.items:
                continue  # claimed (or dropped) by an earlier section: reported there
            if p.left < p.floor:  # nothing more can fit: report without rendering
                spent = "important share spent" if p.limit is not None else "budget spent"
                p.record(event, section, "dropped", f"{spent} ({p.left} tokens left)", 0)
                continue
            p.claim(event, section, reason_of(event))

    walk((e for e in candidates.pinned if e is not goal), "pending", _pinned_reason)
    # The most important event may use everything left (it beats recent turns on a tight
    # budget); together, important events stop at IMPORTANT_SHARE of it.
    cap = p.used + int(p.left * IMPORTANT_SHARE)
    for event in candidates.important:
        walk([event], "important", _important_reason)
        if "important" in p.seen_sections:
            p.limit = cap
    p.limit = None
    walk(reversed(candidates.recent), "recent", lambda e: "recent")
    scores = {e.id: s for e, s in candidates.relevant}
    walk(
        (e for e, _ in candidates.relevant),
        "relevant",
        lambda e: f"relevant (score {scores[e.id]:.2f})",
    )

    text, exact = _finish(p)
    sections = {
        name: tokenizer.count(_section_text(name, blocks))
        for name, blocks in _by_section(p.blocks).items()
    }
    report = RestoreReport(
        budget=max_tokens,
        model=tokenizer.model,
        encoding=tokenizer.encoding_name,
        estimate=tokenizer.estimate,
        note=tokenizer.note,
        token_count=exact,
        total_events=candidates.total_events,
        sections=sections,
        items=list(p.items.values()),
    )
    messages = [{"role": "system", "content": text}] if text else []
    return RestoredContext(text=text, messages=messages, token_count=exact, report=report)


def _claim_goal(p: _Packer, goal: Event, *, synthetic: bool) -> None:
    """Claim the goal; raise BudgetTooSmall unless at least a short summary of it fits.

    The rule is simple enough to state in the error: the goal fits in full, or it is kept
    summarised to no less than its :data:`GOAL_MIN_TOKENS`-token summary (``minimal``).
    """
    count = p.tok.count
    head = f"{_TITLES['goal']}\n"
    block, _ = p.fit(goal, "goal", p.budget - count(head), "pinned goal")
    if block is None or block.action != "included" or count(head + block.text) > p.budget:
        short = summarize_text(goal.content, GOAL_MIN_TOKENS, count) or ""
        minimal = _render(goal, short, None, summarised=short != goal.content)
        whole = _render(goal, goal.content, None)
        if count(whole) <= count(minimal):  # a short goal can undercut its own summary
            minimal = whole
        need = count(head + minimal)
        if need > p.budget:
            raise BudgetTooSmall(
                f"max_tokens={p.budget} cannot hold the session goal even summarised; "
                f"the smallest budget that works is {need} tokens "
                f"({p.tok.model}, {p.tok.encoding_name}). Raise max_tokens to at least {need}."
            )
        if block is None or not need <= count(head + block.text) <= p.budget:
            if minimal == whole:
                action, reason = "included", "pinned goal"
            else:
                action, reason = "summarised", "pinned goal; summarised to its minimum to fit"
            block = _Block(goal, "goal", minimal, count(minimal + "\n"), action, reason)
    p.seen_sections.add("goal")
    p.used = count(head + block.text)  # exact: the goal alone is a valid final text
    block.rank = 0
    p.blocks.append(block)
    if not synthetic:
        p.record(goal, "goal", block.action, block.reason, block.tokens)


def _finish(p: _Packer) -> tuple[str, int]:
    """Assemble, count exactly, and trim lowest-priority blocks until within budget."""
    while True:
        text = "\n\n".join(
            _section_text(name, blocks) for name, blocks in _by_section(p.blocks).items()
        )
        exact = p.tok.count(text)
        if exact <= p.budget:
            return text, exact
        excess = exact - p.budget
        droppable = sorted((b for b in p.blocks if b.rank > 0), key=lambda b: b.rank)
        if not droppable:  # the goal alone was counted exactly and fits; cannot happen
            raise BudgetTooSmall(f"max_tokens={p.budget} cannot hold the session goal.")
        freed = 0
        while droppable and freed < excess:
            block = droppable.pop()
            freed += block.tokens
            p.blocks.remove(block)
            reason = f"trimmed: the whole text counted {exact:,} tokens > {p.budget:,}"
            p.record(block.event, block.section, "dropped", reason, 0)


def _by_section(blocks: list[_Block]) -> dict[str, list[_Block]]:
    grouped: dict[str, list[_Block]] = {name: [] for name in SECTIONS}
    for block in blocks:
        grouped[block.section].append(block)
    return {
        name: sorted(items, key=lambda b: _chrono(b.event))
        for name, items in grouped.items()
        if items
    }


def _section_text(name: str, blocks: list[_Block]) -> str:
    return _TITLES[name] + "\n" + "\n".join(b.text for b in blocks)


def _pinned_reason(event: Event) -> str:
    return "open pending step" if event.kind == "pending" else f"pinned {event.kind}"


def _important_reason(event: Event) -> str:
    if event.kind == "error" and event.status != "resolved":
        return "unresolved error"
    return f"important (importance {event.importance:.2f})"


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------


def _render(event: Event, content: str, payload: str | None, *, summarised: bool = False) -> str:
    ts = _utc(event.created_at).strftime("%Y-%m-%d %H:%M UTC")
    label = _label(event) + (" [summarised]" if summarised else "")
    # splitlines() knows every line break (\r, \x85, \u2028, ...): all become an indented
    # "\n    ", so no content line can start with PAYLOAD_PREFIX or look like a header.
    body = _INDENT.join(content.splitlines()) if content else ""
    line = f"- [{ts}] {label}: {body}" if body else f"- [{ts}] {label}"
    return line if payload is None else f"{line}\n{PAYLOAD_PREFIX}{payload}"


def _label(event: Event) -> str:
    kind = _oneline(event.kind)
    if event.kind in ("step", "tool_output"):
        tool = event.metadata.get("tool")
        if tool is None and isinstance(event.payload, dict):
            tool = event.payload.get("tool")
        return f"{kind} (tool: {_oneline(str(tool))})" if tool is not None else kind
    if event.kind == "message":
        return f"message ({_oneline(event.role or 'unknown')})"
    if event.kind == "error":
        return f"error ({'resolved' if event.status == 'resolved' else 'unresolved'})"
    if event.status:
        return f"{kind} ({_oneline(event.status)})"
    return kind


def _shown(event: Event) -> str:
    """The content to render: none when it is only a flattened copy of the payload.

    ``record_tool_output`` stores JSON output as the payload and a "key: value; ..."
    flattening of it as content (for search); printing both would pay for it twice.
    """
    if event.payload is not None and event.metadata.get("derived_content") is True:
        return ""
    return event.content


def _oneline(text: str) -> str:
    return " ".join(text.split())[:64]


def _payload_json(payload: Any) -> str | None:
    return None if payload is None else dumps(payload)


def _too_big(event: Event, left: int) -> str | None:
    """Why ``event`` obviously cannot fit in ``left`` tokens (for the report), else None.

    Bounds the work: a multi-megabyte event is never serialised or counted in full.
    """
    if event.token_count // 2 > left:  # stored counts may come from another tokenizer
        return f"~{event.token_count:,} tokens"
    cap = left * _CHARS_PER_TOKEN_CEILING
    content = _shown(event)
    if len(content) > cap:
        return f"{len(content):,} chars"
    if len(content) + json_size_hint(event.payload, cap - len(content), 2 * left + 16) > cap:
        return f"more than {cap:,} chars"
    return None


def _chrono(event: Event) -> tuple[datetime, str]:
    return _utc(event.created_at), event.id


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=_UTC) if moment.tzinfo is None else moment.astimezone(_UTC)
