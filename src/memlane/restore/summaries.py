"""Rolling summary memory: ``summarize()`` writes a ``summary`` event standing in for a span.

A summary covers a session from its first event up to an end (``upto``): it is built from the
previous summary (if any) and the events after it, so each summary stands for everything
before its end, and the newest summary is the session's *current* one. Nothing is changed or
deleted: sources stay as they are, a superseded summary stays in the log (restore shows only
the current one), and the new event does not even touch the session's ``updated_at``.

The payload says exactly what the summary stands for::

    {"covers": {"from": id, "from_us": int, "to": id, "to_us": int, "events": int},
     "method": "extractive" | "summarizer" | "extractive (fallback: ...)",
     "supersedes": id | None}

The default method is offline and deterministic (*extractive*): dated bullets of the span's
decisions, unresolved errors, the previous summary's bullets, facts and completed steps, then
the turns closest to the session's goal and decisions (one query embedding against the
vectors already stored), within ``max_tokens`` as counted by the manager's tokenizer. A user
``summarizer`` (e.g. an LLM) gets that material at eight times the size; an answer that is not
a non-empty string within ``max_tokens`` falls back to the extractive summary, and the
payload's ``method`` says so. An exception from the user's summariser propagates, and nothing
is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from ..core.clock import from_us, now_us, to_us
from ..core.scope import Scope, partition_of
from ..errors import EventNotFound, InvalidInput, shown
from ..events import Event, Session
from ..search.searcher import Searcher
from ..store.base import EventFilter, LogReader
from ..text.shrink import summarize_text
from .text import label_of, utc

__all__ = ["AutoSummary", "SummaryPlan", "plan_summary"]

PRIORITY_CANDIDATES = 100  # newest events read per priority kind of the span
CENTRAL_CANDIDATES = 40  # turns ranked by closeness to the goal and decisions
BULLET_TOKENS = 60  # one bullet's content at most
MIN_SUMMARY_TOKENS = 32
_SOURCE_FACTOR = 8  # a user summariser sees this many times max_tokens of material
_EXCLUDED = ("goal", "summary")


@dataclass(frozen=True)
class _Span:
    session: Session
    previous: Event | None  # the current summary, which the new one supersedes
    first: Event  # the session's first summarisable event
    last: Event  # the span's end
    after: tuple[int, int] | None  # (created_us, seq) the previous summary ends at
    events: int  # events the new summary covers in all


@dataclass(frozen=True)
class SummaryPlan:
    """What a new summary event would hold; the front end writes it (one write path)."""

    text: str
    payload: dict[str, Any]
    previous: Event | None  # the summary it supersedes


def plan_summary(
    searcher: Searcher,
    session: Session,
    upto: str | datetime | None,
    max_tokens: int,
    summarizer: Callable[[str, int], str] | None,
    count: Callable[[str], int],
) -> SummaryPlan | Event:
    """The summary of ``session`` up to ``upto`` (read in ``searcher``'s scope), or the
    current summary when it already reaches that far."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidInput(f"max_tokens must be an int, not {shown(max_tokens)}.")
    if summarizer is not None and not callable(summarizer):
        raise InvalidInput(
            f"summarizer must be a callable (text, max_tokens) -> str, got {shown(summarizer)}."
        )
    if max_tokens < MIN_SUMMARY_TOKENS:
        raise InvalidInput(
            f"max_tokens={max_tokens} is too small for a summary; give at least "
            f"{MIN_SUMMARY_TOKENS} (the default is 400)."
        )
    span = _span(searcher, session, upto)
    if span is None:
        current = _current_summary(searcher, session.id)
        if current is not None:
            return current  # nothing new since the current summary: it still stands
        raise InvalidInput(
            f"Session {session.id!r} has nothing to summarise"
            + (" up to that point" if upto is not None else "")
            + " (only its goal). Record events first."
        )
    lines = _bullets(searcher, span, count)
    header = _header(span)
    text = _fit(header, lines, max_tokens, count)
    method = "extractive"
    if summarizer is not None:
        source = _fit(header, lines, max_tokens * _SOURCE_FACTOR, count)
        out = summarizer(source, max_tokens)  # an exception propagates: nothing is written
        if not isinstance(out, str):
            method = f"extractive (fallback: the summarizer returned {type(out).__name__})"
        elif not out.strip():
            method = "extractive (fallback: the summarizer returned nothing)"
        elif count(out) > max_tokens:
            method = f"extractive (fallback: the summarizer's answer was over {max_tokens} tokens)"
        else:
            text, method = out, "summarizer"
    payload = {
        "covers": {
            "from": span.first.id,
            "from_us": to_us(span.first.created_at),
            "to": span.last.id,
            "to_us": to_us(span.last.created_at),
            "events": span.events,
        },
        "method": method,
        "supersedes": span.previous.id if span.previous is not None else None,
        # the session's size in tokens when summarised: what auto_summary measures growth by
        "session_tokens": searcher.store.session_sizes([session.id]).get(session.id, (0, 0))[1],
    }
    return SummaryPlan(text, payload, span.previous)


class _Summarising(Protocol):
    """What :class:`AutoSummary` needs: the agent's sessions, and a way to summarise one."""

    def list_sessions(self, *args: Any, **kwargs: Any) -> list[Session]: ...
    def summarize(self, session_id: str) -> Event: ...


class AutoSummary:
    """The background worker's hook: summarise active sessions that grew by ``threshold``
    tokens since their last summary (``SessionManager(auto_summary=...)``)."""

    def __init__(self, mgr: _Summarising, searcher: Searcher, threshold: int) -> None:
        self.mgr = mgr
        self.searcher = searcher
        self.threshold = threshold
        self.checked_us: int | None = None  # sessions updated since then are looked at

    def __call__(self) -> None:
        mgr = self.mgr
        started = now_us()
        sessions = mgr.list_sessions(
            status="active",
            since=None if self.checked_us is None else from_us(self.checked_us),
            limit=None,
            include_shared=False,
            internal=True,  # users' memory sessions grow too
        )
        store = self.searcher.store
        sizes = store.session_sizes([s.id for s in sessions]) if sessions else {}
        for session in sessions:
            tokens = sizes.get(session.id, (0, 0))[1]
            current = _current_summary(self.searcher, session.id)
            before = 0
            if current is not None and isinstance(current.payload, dict):
                before = int(current.payload.get("session_tokens", 0) or 0)
                before += current.token_count  # the summary itself is not growth
            if tokens - before >= self.threshold:
                mgr.summarize(session.id)
        self.checked_us = started - 1_000_000  # overlap a second: clocks and commit order


def covers(summary: Event | None) -> dict[str, Any] | None:
    """A summary's ``covers`` record, if it is well formed."""
    if summary is None or not isinstance(summary.payload, dict):
        return None
    record = summary.payload.get("covers")
    if not isinstance(record, dict) or not isinstance(record.get("to_us"), int):
        return None
    return record


def _current_summary(searcher: Searcher, session_id: str) -> Event | None:
    flt = EventFilter(searcher.scope, session_id=session_id, kinds=("summary",))
    found = searcher.store.events(flt, newest_first=True, limit=1)
    return found[0] if found else None


def _span(searcher: Searcher, session: Session, upto: str | datetime | None) -> _Span | None:
    store = searcher.store
    # EventFilter.until_us is exclusive: "+ 1" makes each end below inclusive.
    # Short-term memory (record(ttl=...)) is left out: a summary would outlive it.
    base = EventFilter(searcher.scope, session_id=session.id, exclude_kinds=_EXCLUDED, lasting=True)
    end_flt = base
    if upto is not None:
        end_flt = replace(base, until_us=_upto_us(searcher, session, upto) + 1)
    ends = store.events(end_flt, newest_first=True, limit=1)
    if not ends:
        return None
    last = ends[0]
    previous = _current_summary(searcher, session.id)
    record = covers(previous)
    after: tuple[int, int] | None = None
    covered_before = 0
    if previous is not None and record is not None:
        boundary = store.event(str(record.get("to", "")), searcher.scope)
        after = (record["to_us"], boundary.seq if boundary is not None else 0)
        covered_before = int(record.get("events", 0))
        if (to_us(last.created_at), last.seq) <= after:
            return None  # the current summary already reaches this far
    first_events = store.events(base, limit=1)
    first = first_events[0] if first_events else last
    if after is None:
        new = store.count_events(replace(base, until_us=to_us(last.created_at) + 1))
        new -= _same_time_after(store, base, last)
    else:
        window = replace(base, since_us=after[0], until_us=to_us(last.created_at) + 1)
        new = store.count_events(window)
        new -= sum(
            1
            for e in store.events(replace(base, since_us=after[0], until_us=after[0] + 1))
            if e.seq <= after[1]
        )
        new -= _same_time_after(store, base, last)
    return _Span(session, previous, first, last, after, covered_before + new)


def _same_time_after(store: LogReader, base: EventFilter, last: Event) -> int:
    """Events at ``last``'s exact time but recorded after it (not covered)."""
    moment = to_us(last.created_at)
    same = store.events(replace(base, since_us=moment, until_us=moment + 1))
    return sum(1 for e in same if e.seq > last.seq)


def _upto_us(searcher: Searcher, session: Session, upto: str | datetime) -> int:
    if isinstance(upto, str) and len(upto) == 26 and upto.isalnum():  # an event id
        event = searcher.store.event(upto, searcher.scope)
        if event is None:
            raise EventNotFound(
                f"Event {shown(upto)} does not exist for agent {searcher.scope.agent_id!r}."
            )
        if event.session_id != session.id:
            raise InvalidInput(
                f"Event {shown(upto)} belongs to session {event.session_id!r}, not {session.id!r}; "
                "upto must be an event of the session being summarised, or a time."
            )
        return to_us(event.created_at)
    return to_us(upto, "upto")


def _span_filter(scope: Scope, span: _Span, **narrow: Any) -> EventFilter:
    return EventFilter(
        scope,
        session_id=span.session.id,
        exclude_kinds=_EXCLUDED,
        since_us=span.after[0] if span.after else None,
        until_us=to_us(span.last.created_at) + 1,  # until_us is exclusive
        lasting=True,
        **narrow,
    )


def _in_span(span: _Span, event: Event) -> bool:
    key = (to_us(event.created_at), event.seq)
    return (span.after is None or key > span.after) and key <= (
        to_us(span.last.created_at),
        span.last.seq,
    )


def _bullets(searcher: Searcher, span: _Span, count: Callable[[str], int]) -> list[str]:
    """Candidate bullets, best first (the order :func:`_fit` takes them in)."""
    store = searcher.store

    def read(**narrow: Any) -> list[Event]:
        flt = replace(_span_filter(searcher.scope, span), exclude_kinds=None, **narrow)
        found = store.events(flt, newest_first=True, limit=PRIORITY_CANDIDATES)
        return [e for e in found if _in_span(span, e)]

    decisions = sorted(read(kinds=("decision",)), key=lambda e: -e.importance)
    errors = read(kinds=("error",), status="unresolved")
    facts = read(kinds=("fact",))
    steps = read(kinds=("step",))
    chosen = [*decisions, *errors]
    previous = _previous_bullets(span.previous)
    central = _central(searcher, span, [*decisions, *facts])
    ordered: list[str] = []
    seen: set[str] = set()
    for event in chosen:
        _add(ordered, seen, event, count)
    ordered.extend(line for line in previous if line not in ordered)
    for event in (*facts, *steps, *central):
        _add(ordered, seen, event, count)
    return ordered


def _add(out: list[str], seen: set[str], event: Event, count: Callable[[str], int]) -> None:
    if event.id in seen:
        return
    seen.add(event.id)
    content = " ".join(event.content.split())
    short = summarize_text(content, BULLET_TOKENS, count) or content[:200]
    out.append(f"- [{utc(event.created_at):%Y-%m-%d}] {label_of(event)}: {short}")


def _previous_bullets(previous: Event | None) -> list[str]:
    if previous is None:
        return []
    return [line for line in previous.content.splitlines() if line.startswith("- ")]


def _central(searcher: Searcher, span: _Span, anchors: list[Event]) -> list[Event]:
    """The span's events closest to the goal and its decisions and facts, by stored vectors."""
    probe = " ".join([span.session.goal, *(e.content for e in anchors[:10])])[:2_000]
    partition = partition_of(span.session.agent_id, span.session.shared_pool)
    if searcher.writes:
        searcher.indexer.catch_up([partition])
    flt = _span_filter(searcher.scope, span)
    vector = searcher.query_vector(probe)
    hits = searcher.storage.search_vectors(vector, flt, [(partition, False)], CENTRAL_CANDIDATES)
    events = searcher.store.events_by_seq([hit.seq for hit in hits])
    return [
        events[hit.seq] for hit in hits if hit.seq in events and _in_span(span, events[hit.seq])
    ]


def _header(span: _Span) -> str:
    start = f"{utc(span.first.created_at):%Y-%m-%d}"
    end = f"{utc(span.last.created_at):%Y-%m-%d}"
    when = start if start == end else f"{start} to {end}"
    return f"Summary of {span.events:,} event{'s' if span.events != 1 else ''}, {when}:"


def _fit(header: str, lines: list[str], max_tokens: int, count: Callable[[str], int]) -> str:
    """The header and as many bullets (best first) as fit, printed in date order."""
    kept: list[tuple[int, str]] = []
    used = count(header)
    for rank, line in enumerate(lines):
        cost = count("\n" + line)
        if used + cost <= max_tokens:
            kept.append((rank, line))
            used += cost

    def render(items: list[tuple[int, str]]) -> str:
        ordered = sorted(items, key=lambda item: (item[1][3:13], item[0]))
        more = f"\n(+{len(lines) - len(items)} more not listed)" if len(items) < len(lines) else ""
        return "\n".join([header, *(line for _, line in ordered)]) + more

    text = render(kept)
    while kept and count(text) > max_tokens:  # pieces need not add up; the note costs too
        kept.pop()
        text = render(kept)
    if count(text) > max_tokens:
        text = summarize_text(header, max_tokens, count) or header[: max_tokens * 2]
    return text
