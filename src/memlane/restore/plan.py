"""The budgeted packer behind ``restore()``: pure, no I/O. (Its inputs and results, the
public types, are in :mod:`memlane.restore.result`.)

The storage layer gathers :class:`RestoreCandidates`; :func:`pack` turns them into a text and
chat messages that never exceed ``max_tokens`` as counted by the declared tokenizer, plus a
report of what was included, summarised or dropped, each section's share, and why.

The budget is shared, not claimed in a strict order
(docs/decisions/2026-11-23-restore-budget-shares.md has the policy and its measurement). After the
goal (always kept, summarised if it must be), the sections
are filled in this order, each up to its share of what the goal left (:class:`BudgetShares`):

1. **pending** — open pending steps, oldest first; those that do not fit are counted in a
   ``(+N more pending steps)`` line; then **user** ("About the user") — the current facts
   the agent remembered about the session's user (``remember``), keyed ones first, then by
   relevance to the query times importance, each with "since <date>" (none when the
   session has no user); then **reference** — chunks of ingested documents relevant to the
   query, cited as ``document#chunk`` (``restore(knowledge=...)``);
2. **important** — decisions, unresolved errors and other events of importance ≥ 0.7, best
   :func:`rank_score` first (the first of them may take all that is left);
3. **earlier** — the session's current rolling summary (``SessionManager.summarize``),
   standing in for covered events that did not fit (left out when every event it covers is
   shown anyway);
4. **recent floor** — the newest few events, so the flow of the conversation is never lost;
5. **relevant** — older events found by search for the query, best first; a real share when
   the caller gives a query, a smaller one for the default query (goal + pending steps);
6. **recent** — the rest of the newest events, newest first, contiguous;
7. **relevant** again, with whatever is left.

A section that does not use its share leaves it in the pool for the sections after it; the
last two take all that is left. An event appears once, in the first section that claims it.
An event too large for what is left is summarised (JSON stays valid JSON) into at most
:data:`SUMMARY_SHARE` of it, unless it is short: short events are kept whole or dropped.
Finally the whole text (and the messages) are counted exactly and, while over budget (BPE
counts of pieces do not add up exactly), the block claimed last is dropped
(:mod:`memlane.restore.assembly`).

Text shape (see :mod:`memlane.restore.text`)::

    Restored memory of an agent session (agent researcher; session active, started ...).
    Times are UTC; sections list events oldest first.

    ## Goal
    [2026-11-22 10:31]
    - goal: Survey 2026 sparse attention methods

    ## Recent
    [2026-11-22 10:40]
    - step (tool: web_search): searched arXiv
      payload: {"query":"sparse attention","hits":12}
    - [10:44] user: also cover RWKV

Chat shape: :attr:`RestoredContext.messages` is one system message (everything but the recent
conversation) followed by the recent ``message`` events as ``user`` / ``assistant`` / ``tool``
turns; :attr:`RestoredContext.system` and :attr:`RestoredContext.turns` give the two parts
apart (Anthropic's API takes ``system`` separately). Their count — each message's content
plus :data:`MESSAGE_OVERHEAD` tokens of chat framing per turn, plus any ``tool_calls`` JSON;
the system message counted as its content, as ``text`` is — is kept within ``max_tokens``
too.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from ..errors import BudgetTooSmall, InvalidInput
from ..errors import shown as _shown
from ..events import Event
from ..memory import EXTRACTED_BY, EXTRACTED_FROM, KIND
from ..text.shrink import summarize_text
from ..text.tokens import Tokenizer
from .assembly import assemble
from .packer import (
    MIN_PAYLOAD_SUMMARY,
    MIN_USEFUL_TOKENS,
    TIMELESS,
    Block,
    Packer,
    chrono,
)
from .passages import Relevance, matching_sentences
from .result import BudgetShares, RestoreCandidates, RestoredContext
from .text import (
    TITLES,
    opening_line,
    render_block,
)

__all__ = ["ABOUT_SHARE", "GOAL_MIN_TOKENS", "pack"]

#: The opening line (what the text is, whose, since when) is left out when it would take
#: more than this share of what the goal left: a tiny budget is better spent on events.
ABOUT_SHARE = 0.06
#: The goal is kept at least this long (in tokens) or restore() raises BudgetTooSmall.
GOAL_MIN_TOKENS = 24


def pack(
    candidates: RestoreCandidates,
    max_tokens: int,
    tokenizer: Tokenizer,
    summarizer: Callable[[str, int], str] | None = None,
    now: datetime | None = None,
    *,
    shares: BudgetShares | None = None,
) -> RestoredContext:
    """Pack ``candidates`` into at most ``max_tokens`` tokens (see the module docstring).

    ``summarizer`` (``(text, max_tokens) -> str``, e.g. an LLM call) is tried first for
    events that need shortening; its output is used only if it fits (and, for payloads,
    parses as JSON). ``shares`` overrides the default :class:`BudgetShares`. ``now`` is
    accepted for callers that rank with :func:`rank_score`; packing itself does not depend
    on the clock.

    Raises :class:`~memlane.errors.BudgetTooSmall` when even the goal summarised to
    :data:`GOAL_MIN_TOKENS` tokens does not fit; the message names the smallest budget.

    >>> ctx = pack(candidates, 4000, tokenizer_for("gpt-4o"))  # doctest: +SKIP
    >>> ctx.token_count <= 4000  # doctest: +SKIP
    True
    """
    del now  # see docstring: the order of `important` is the caller's ranking
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise InvalidInput(f"max_tokens must be a non-negative int, not {_shown(max_tokens)}.")
    if shares is not None and not isinstance(shares, BudgetShares):
        raise InvalidInput(f"shares must be a BudgetShares or None, got {_shown(shares)}.")
    shares = shares or BudgetShares()
    full = _pack(candidates, max_tokens, tokenizer, summarizer, shares, with_summary=True)
    if not full.report.included_ids("earlier"):
        return full
    shown = candidates.covered_ids & set(full.report.included_ids())
    if len(shown) >= candidates.covered_count:  # everything it stands for is shown
        return _pack(candidates, max_tokens, tokenizer, summarizer, shares, with_summary=False)
    # The summary stands in for the events it covers: none of them is shown again beside
    # it (each event once), and their room goes to events it does not cover.
    return _pack(
        _without(candidates, candidates.covered_ids),
        max_tokens,
        tokenizer,
        summarizer,
        shares,
        with_summary=True,
    )


def _without(candidates: RestoreCandidates, ids: frozenset[str]) -> RestoreCandidates:
    """The candidates less the events in ``ids`` (pinned ones stay: a to-do is always listed)."""
    return replace(
        candidates,
        important=[e for e in candidates.important if e.id not in ids],
        recent=[e for e in candidates.recent if e.id not in ids],
        relevant=[(e, s) for e, s in candidates.relevant if e.id not in ids],
    )


def _pack(
    candidates: RestoreCandidates,
    max_tokens: int,
    tokenizer: Tokenizer,
    summarizer: Callable[[str, int], str] | None,
    shares: BudgetShares,
    *,
    with_summary: bool,
) -> RestoredContext:
    session = candidates.session
    # (the text gather.py searched with: the caller's query, else the goal and pending steps)
    searched = candidates.query or " ".join(
        [session.goal, *(e.content for e in candidates.pinned if e.kind == "pending")]
    )
    p = Packer(
        tokenizer,
        summarizer,
        max_tokens,
        relevance=Relevance.of(searched[:2_000], candidates.passages),
        asked=candidates.query is not None,
        cutter=candidates.cutter,
        indexed=candidates.indexed,
        payload_of=candidates.payload_of,
    )

    goal_events = [e for e in candidates.pinned if e.kind == "goal"]
    goal = max(goal_events, key=chrono) if goal_events else None
    if goal is None and session.goal.strip():
        goal = Event("", session.id, session.agent_id, "goal", session.goal, session.created_at)
    if goal is not None:
        _claim_goal(p, goal, synthetic=not goal.id)
    about = opening_line(session, other_sessions=candidates.other_sessions)
    about_tokens = p.small_count(about + "\n\n")
    if about_tokens <= p.left * ABOUT_SHARE:
        about_event = Event("", session.id, session.agent_id, "about", about, session.created_at)
        block = Block(about_event, "about", about, about_tokens, "included", "opening line")
        block.rank = 1
        p.blocks.append(block)
        p.by_section["about"] = [block]
        p.used += about_tokens
    base = p.left  # the pool the shares are fractions of
    p.floor = max(1, tokenizer.count("- x\n"))

    pending = [e for e in candidates.pinned if e is not goal and e.kind == "pending"]
    others = [e for e in candidates.pinned if e is not goal and e.kind != "pending"]
    total_pending = max(candidates.open_pending or 0, len(pending))
    if others:
        p.fill(others, "pending", _pinned_reason, None, "pinned events: all that fits")
    note_reserve = p.small_count("\n(+9999 more pending steps)") if len(pending) > 1 else 0
    left_out = p.fill(
        pending,
        "pending",
        _pinned_reason,
        int(base * shares.pending) - note_reserve,
        f"open pending steps: up to {shares.pending:.0%} of the {base:,} tokens after the goal",
    )
    hidden = total_pending - (len(pending) - len(left_out))
    if hidden > 0:  # never let the model believe its to-do list is shorter than it is
        shown = "pending" in p.by_section
        note = f"(+{hidden} {'more ' if shown else ''}pending step{'s' if hidden != 1 else ''})"
        cost = p.small_count(("\n" if shown else f"\n\n{TITLES['pending']}\n") + note)
        if cost <= p.left:
            p.notes["pending"] = note
            p.used += cost

    if candidates.instructions:
        # a rule's message the query also found shows what the query asks of it too (its
        # rule's window alone hid the rest: each event is shown once, and here it is)
        found = {event.id for event, _ in candidates.relevant} if p.asked else set()
        p.fill(
            [
                _as_stated(
                    event,
                    (*said, *matching_sentences(event.content, p.relevance))
                    if event.id in found
                    else said,
                )
                for event, said in candidates.instructions
            ],
            "instructions",
            lambda e: "the user's standing instruction or preference",
            int(base * shares.instructions),
            f"instructions and preferences the user stated, those bearing on a request "
            f"first, then newest first: up to "
            f"{shares.instructions:.0%} of {base:,}",
        )
    user_facts = _not_said_as_instructions(p, candidates.user_facts)
    if user_facts:
        p.fill(
            user_facts,
            "user",
            lambda e: "about the user" + (" (keyed)" if e.metadata.get("fact_key") else ""),
            int(base * shares.user),
            f"what the agent knows about user {session.user_id}: keyed facts first, then by "
            f"relevance x importance; up to {shares.user:.0%} of {base:,}",
        )
    recent = [e for e in candidates.recent if _recent_worthy(e)]
    unworthy = [e for e in candidates.recent if not _recent_worthy(e)]
    unworthy += [e for e, _ in candidates.relevant if not _recent_worthy(e)]
    newest_first = list(reversed(recent))
    floor_events = newest_first[: shares.recent_floor_events]
    important_share = int(base * shares.important)
    # The most important event may take the whole pool even when the share is smaller (a
    # summary of it at most half): on a tight budget a decision beats small talk.
    first = p.fill(
        candidates.important[:1],
        "important",
        _important_reason,
        None,
        "the most important event: all that is left",
    )
    used_first = p.shares[-1].used if len(first) < len(candidates.important[:1]) else 0
    p.fill(
        candidates.important,
        "important",
        _important_reason,
        important_share - used_first,
        f"important events and unresolved errors: up to {shares.important:.0%} of {base:,}",
    )
    if with_summary and candidates.summary is not None:
        # At least a few dozen tokens, so a tiny budget gets the summary instead of nothing.
        p.fill(
            [candidates.summary],
            "earlier",
            lambda e: "the session's current summary, standing in for earlier events",
            max(int(base * shares.earlier), min(base, 3 * MIN_USEFUL_TOKENS)),
            f"the session's summary: up to {shares.earlier:.0%} of {base:,}",
        )
    p.fill(
        floor_events,
        "recent",
        lambda e: "recent (floor)",
        int(base * shares.recent_floor),
        f"the newest {len(floor_events)} events: up to {shares.recent_floor:.0%} "
        f"of {base:,} (the flow of the conversation)",
        contiguous=True,
        whole_only=True,
    )
    if candidates.references:
        cited = {e.id: s for e, s in candidates.references}
        p.fill(
            [e for e, _ in candidates.references],
            "reference",
            lambda e: f"reference (score {cited[e.id]:.2f})",
            int(base * shares.reference),
            f"chunks of ingested documents relevant to "
            f"{'the query' if candidates.query else 'the goal and pending steps'}: up to "
            f"{shares.reference:.0%} of {base:,}",
        )
    relevant_share = shares.relevant_query if candidates.query else shares.relevant_default
    scores = {e.id: s for e, s in candidates.relevant}
    relevant = [e for e, _ in candidates.relevant if _recent_worthy(e)]

    def relevant_reason(event: Event) -> str:
        return f"relevant (score {scores[event.id]:.2f})"

    p.fill(
        relevant,
        "relevant",
        relevant_reason,
        int(base * relevant_share),
        f"history relevant to {'the query' if candidates.query else 'the goal and pending steps'}"
        f": up to {relevant_share:.0%} of {base:,}",
    )
    p.fill(
        newest_first,
        "recent",
        lambda e: "recent",
        None,
        "the newest events, contiguous: all that is left",
        contiguous=True,
    )
    p.fill(relevant, "relevant", relevant_reason, None, "more relevant history: all that is left")
    _grow_summaries(p)
    _join_recent(p, newest_first)
    for event in unworthy:
        if event.id not in p.items:
            p.record(event, "recent", "dropped", _unworthy_reason(event), 0)
    return assemble(p, candidates, tokenizer, max_tokens)


_WORDS = re.compile(r"[\w']+")


def _not_said_as_instructions(p: Packer, facts: list[Event]) -> list[Event]:
    """The user's facts less the extracted preferences the instructions section already shows.

    "I prefer window seats" is pinned as the user's instruction and, once extracted, is also
    the preference "Prefers window seats": shown twice, it costs two shares and reads as two
    things. The instructions section keeps it: those are the user's own words, with what
    qualifies them ("on long flights"), pinned whatever the query, newest first; the fact is a
    paraphrase of them. A preference is left out of "About the user" only when it was
    extracted (a program's ``remember()`` is kept as written), every message it came from
    is shown in the instructions section (one that did not fit leaves the fact in), and
    its words, but the verb, are in the sentences shown there."""
    shown = {block.event.id: block.text for block in p.by_section.get("instructions", [])}
    if not shown:
        return facts
    kept = []
    for fact in facts:
        sources = fact.metadata.get(EXTRACTED_FROM)
        covered = (
            fact.metadata.get(EXTRACTED_BY) is not None
            and fact.metadata.get(KIND) == "preference"
            and isinstance(sources, list)
            and bool(sources)
            and all(source in shown for source in sources)
        )
        if covered and isinstance(sources, list):
            said = {w for s in sources for w in _WORDS.findall(shown[s].lower())}
            covered = set(_WORDS.findall(fact.content.lower())[1:]) <= said
        if covered:
            p.record(fact, "user", "dropped", "shown in the user's instructions (said so)", 0)
        else:
            kept.append(fact)
    return kept


#: Characters of its message a stated rule is shown within, at least (where the message has
#: them): the rule reads in the user's words with what surrounds it, and a reader checking
#: that the message is in the context finds a passage of it, not a sentence cut out of it
#: (issue 31's held-out rule counts a message present by its opening or any 200 characters)
RULE_WINDOW_CHARS = 220


def _as_stated(event: Event, said: tuple[str, ...]) -> Event:
    """A user's message as its instructions section shows it: whole when its statements are
    most of it, else each statement (``said``: its rules, and the sentences a query that
    found the message asks about) within a window of :data:`RULE_WINDOW_CHARS` of the
    message around it, cut at word boundaries, joined by ``…`` (the rest of it is history
    like any other)."""
    text = event.content
    windows: list[list[int]] = []
    placed = sorted((text.find(sentence), sentence) for sentence in said)
    for start, sentence in placed:  # in the message's order: windows merge with the last
        if start < 0:  # (statements are the message's own sentences: never, but be safe)
            continue
        stop = start + len(sentence)
        grow = max(0, RULE_WINDOW_CHARS - len(sentence))
        start, stop = max(0, start - grow // 2), min(len(text), stop + grow - grow // 2)
        if stop == len(text):  # room the end did not have goes before, and the reverse
            start = max(0, min(start, stop - RULE_WINDOW_CHARS))
        if start == 0:
            stop = min(len(text), max(stop, RULE_WINDOW_CHARS))
        start, stop = _word_start(text, start), _word_stop(text, stop)
        if windows and start <= windows[-1][1]:
            windows[-1][1] = max(windows[-1][1], stop)
        else:
            windows.append([start, stop])
    shown = sum(stop - start for start, stop in windows)
    if not windows or len(text) <= shown * 3 // 2 + 40:
        return event
    parts = [text[start:stop].strip() for start, stop in windows]
    stated = " … ".join(parts)
    if windows[0][0] > 0:
        stated = "…" + stated
    if windows[-1][1] < len(text):
        stated += "…"
    return replace(event, content=stated, payload=None, token_count=0)


def _word_start(text: str, at: int) -> int:
    """``at`` moved back to the start of the word it cuts (a window widens, never narrows)."""
    while at > 0 and not text[at - 1].isspace():
        at -= 1
    return at


def _word_stop(text: str, at: int) -> int:
    """``at`` moved on to the end of the word it cuts."""
    while at < len(text) and not text[at].isspace():
        at += 1
    return at


def _grow_summaries(p: Packer) -> None:
    """Spend what every section left unused on the events summarised (or shown by their
    passages) under a tight share.

    A summary made within a section's share (a 1 MB report claimed as relevant history) may
    end up beside hundreds of unused tokens; it is made again with them, in claim order. A
    long event shown by its passages gets the passages beside them, or is shown whole.
    """
    for block in sorted(p.blocks, key=lambda b: b.rank):
        spare = p.budget - p.used
        if spare < MIN_PAYLOAD_SUMMARY:
            return
        if block.action not in ("summarised", "passages") or block.rank <= 1:
            continue
        if block.section in TIMELESS:
            continue
        room = max((block.tokens + spare) // 2, block.tokens)
        if block.action == "passages":
            grown = p.more_passages(block, room)
        else:
            grown = p.summarised(block.event, block.section, room)
        if grown is None or grown.tokens <= block.tokens:
            continue
        p.used += grown.tokens - block.tokens
        block.text, block.tokens, block.turn = grown.text, grown.tokens, grown.turn
        block.action, block.passages = grown.action, grown.passages
        item = p.items[block.event.id]
        reason = item.reason if grown.action == "summarised" else grown.reason
        p.items[block.event.id] = replace(
            item,
            action=block.action,
            reason=f"{reason}; grown into tokens no section used",
            tokens=block.tokens,
            passages=block.passages,
        )


def _join_recent(p: Packer, newest_first: list[Event]) -> None:
    """Relevant events inside the recent window belong to Recent: that is where a reader
    (and the chat view's turns) expects them, in order with the rest; so do the user's
    instructions there, when shown whole (a turn is not to lose its other sentences). The
    window is the newest events up to the first one shown nowhere."""
    window: set[str] = set()
    for event in newest_first:
        if event.id not in p.claimed:
            break
        window.add(event.id)
    whole = {event.id: event.content for event in newest_first if event.id in window}
    recent = p.by_section.setdefault("recent", [])
    for name in ("relevant", "instructions"):
        for block in [b for b in p.by_section.get(name, []) if b.event.id in window]:
            if name == "instructions" and block.event.content != whole[block.event.id]:
                continue
            p.by_section[name].remove(block)
            block.section = "recent"
            bisect.insort(recent, block, key=lambda b: chrono(b.event))
            p.items[block.event.id] = replace(p.items[block.event.id], section="recent")
    for name in ("relevant", "instructions", "recent"):
        if name in p.by_section and not p.by_section[name]:
            del p.by_section[name]


def _claim_goal(p: Packer, goal: Event, *, synthetic: bool) -> None:
    """Claim the goal; raise BudgetTooSmall unless at least a short summary of it fits.

    The rule is simple enough to state in the error: the goal fits in full, or it is kept
    summarised to no less than its :data:`GOAL_MIN_TOKENS`-token summary (``minimal``).
    """
    count = p.tok.count
    if goal.content != goal.content.rstrip():
        # trailing blank lines say nothing and the text ends without them: counted with them,
        # the smallest budget named in BudgetTooSmall was a token or two too high
        goal = replace(goal, content=goal.content.rstrip())
    head = f"{TITLES['goal']}\n"  # the opening line dates the session: the goal needs no time
    block, _ = p.fit(goal, "goal", p.budget - count(head), "pinned goal")
    if block is None or block.action != "included" or count(head + block.text) > p.budget:
        short = summarize_text(goal.content, GOAL_MIN_TOKENS, count) or ""
        minimal = render_block(goal, short, None, summarised=short != goal.content)
        whole = render_block(goal, goal.content, None)
        # a short goal can undercut its own summary (a long one never does: skip counting it)
        if len(whole) <= 4 * len(minimal) + 64 and count(whole) <= count(minimal):
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
            block = Block(goal, "goal", minimal, count(minimal + "\n"), action, reason)
    p.used = count(head + block.text)  # exact: the goal alone is a valid final text
    block.tokens = p.used
    block.rank = 0
    p.blocks.append(block)
    p.by_section["goal"] = [block]
    if not synthetic:
        p.claimed.add(goal.id)
        p.record(goal, "goal", block.action, block.reason, block.tokens)


def _recent_worthy(event: Event) -> bool:
    """Recent history leaves out what another line already says: a completed pending step
    (its step is shown), an open one (pinned), and summaries (the earlier section)."""
    if event.kind == "pending":
        return event.status not in ("done", "open")
    return event.kind not in ("goal", "summary")


def _unworthy_reason(event: Event) -> str:
    if event.kind == "pending":
        return (
            f"pending step {event.status}: shown by its step"
            if event.status == "done"
            else ("open pending step: pinned")
        )
    if event.kind == "summary":
        return "not the session's current summary (or covered events are shown)"
    return "pinned"


def _pinned_reason(event: Event) -> str:
    return "open pending step" if event.kind == "pending" else f"pinned {event.kind}"


def _important_reason(event: Event) -> str:
    if event.kind == "error" and event.status != "resolved":
        return "unresolved error"
    return f"important (importance {event.importance:.2f})"
