"""Gather restore() candidates from the store; the packing itself is I/O-free (restore.py).

Sections, in their order of claim on the budget (DESIGN.md §4):
1. pinned — the goal and every open pending step;
2. important — events with importance ≥ 0.7 and unresolved errors, best ``rank_score`` first;
3. recent — the latest events of the session;
4. relevant — older events found by hybrid search for ``query`` (default: the goal plus the
   open pending steps) within the session, or with ``other_sessions=True`` across the
   agent's other sessions and subscribed pools.
Events pulled in as relevant get one more recall, like search results.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ._time import from_us, now_us
from .errors import InvalidInput
from .events import Event, Session
from .protocols import Summarizer
from .restore import RestoreCandidates, RestoredContext, pack, rank_score
from .store.base import EventFilter

if TYPE_CHECKING:
    from .manager import SessionManager

__all__ = ["restore_session"]

IMPORTANCE_THRESHOLD = 0.7
RECENT_CANDIDATES = 200
IMPORTANT_CANDIDATES = 200
RELEVANT_CANDIDATES = 20


def _merge(*lists: list[Event], newest_first: bool = False) -> list[Event]:
    """The union of event lists (by seq) in log order (``created_at, seq``)."""
    unique = {event.seq: event for events in lists for event in events}
    return sorted(unique.values(), key=lambda e: (e.created_at, e.seq), reverse=newest_first)


def restore_session(
    mgr: SessionManager,
    session: Session,
    max_tokens: int,
    query: str | None,
    tokenizer: Any,
    summarizer: Summarizer | None,
    *,
    other_sessions: bool = False,
) -> RestoredContext:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"max_tokens must be a positive integer, got {max_tokens!r}.")
    store = mgr._store
    base = EventFilter(mgr.scope, session_id=session.id)
    pinned = _merge(
        store.events(replace(base, kinds=("goal",))),
        store.events(replace(base, kinds=("pending",), status="open")),
    )
    # important: importance ≥ threshold (goal and pending are pinned instead), or an
    # unresolved error — two reads, merged newest first, as one query would return them
    important = _merge(
        store.events(
            replace(base, exclude_kinds=("goal", "pending"), min_importance=IMPORTANCE_THRESHOLD),
            newest_first=True,
            limit=IMPORTANT_CANDIDATES,
        ),
        store.events(
            replace(base, kinds=("error",), status="unresolved"),
            newest_first=True,
            limit=IMPORTANT_CANDIDATES,
        ),
        newest_first=True,
    )[:IMPORTANT_CANDIDATES]
    now = from_us(now_us())
    important.sort(key=lambda event: rank_score(event, now), reverse=True)
    recent = store.events(
        replace(base, exclude_kinds=("goal",)), newest_first=True, limit=RECENT_CANDIDATES
    )
    recent.reverse()
    total = store.count_events(base)

    taken = {event.seq for event in (*pinned, *important, *recent)}
    relevant: list[tuple[Any, float]] = []
    if total > len(taken) or other_sessions:
        text = query or " ".join(
            [session.goal, *(e.content for e in pinned if e.kind == "pending")]
        )
        hits = mgr._searcher.search(
            text[:2_000],
            RELEVANT_CANDIDATES,
            session_id=None if other_sessions else session.id,
            count_recall=False,
            exclude=frozenset(taken),
        )
        relevant = [(hit.event, hit.score) for hit in hits]

    context = pack(
        RestoreCandidates(
            session=session,
            pinned=pinned,
            important=important,
            recent=recent,
            relevant=relevant,
            total_events=total,
        ),
        max_tokens,
        tokenizer,
        summarizer,
        now,
    )
    recalled = set(context.report.included_ids("relevant"))
    store.bump_recall([event.seq for event, _ in relevant if event.id in recalled])
    return context
