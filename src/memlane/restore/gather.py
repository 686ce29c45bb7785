"""Gather restore() candidates from the store; the packing itself is I/O-free (restore/plan.py).

Candidates (restore/plan.py shares the budget among them):
- pinned — the goal and the open pending steps (up to 500; the count of all of them);
- important — events with importance ≥ 0.7 and unresolved errors, best ``rank_score`` first;
- recent — the latest events of the session, as many as the budget could show;
- the session's current summary (its newest ``summary`` event) and the ids it covers;
- relevant — events found by hybrid search for ``query`` (default: the goal plus the open
  pending steps) within the session, or with ``other_sessions=True`` across the agent's
  other sessions and subscribed pools; the search depth grows with the budget.
Candidate counts follow the budget, not the session's length, so restore's cost does too.
Events shown as relevant get one more recall, like search results (``count_recall``).
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..core.canonical_json import check_text
from ..core.clock import from_us, now_us, to_us
from ..errors import InvalidInput, StoreUnavailable, shown
from ..events import IMPORTANT_FROM, Event, Session
from ..memory import KEY, KNOWLEDGE_SESSION, MEMORY_SESSION, USER
from ..protocols import Summarizer
from ..search.passage_terms import needs_analysis
from ..search.rules import newest_first
from ..search.searcher import Searcher
from ..store.base import EventFilter, Log, SessionFilter
from ..text.instructions import standing
from .plan import pack
from .result import BudgetShares, RestoreCandidates, RestoredContext, rank_score
from .summaries import covers

__all__ = ["restore_session"]

IMPORTANT_CANDIDATES = 200
PENDING_CANDIDATES = 500
USER_FACT_CANDIDATES = 200
#: A knowledge chunk is shown under Reference only when both rankings of hybrid search vouch
#: for it: a fused score (weighted reciprocal ranks, ``_search.py``) of at least
#: REFERENCE_FLOOR, which no chunk reaches from one ranking alone (a first place is worth
#: 0.136 by keyword, 0.091 by meaning; both rankings' top five, or one's first place and the
#: other's top ~30, pass), and a cosine similarity to the query of at least REFERENCE_COSINE
#: (the noise of normalised embedders: MiniLM scores unrelated texts about 0-0.2). Measured on
#: three corpora (docs/restore.md): the answering chunk of all 44 questions that had it in
#: their top six kept; unrelated queries shown a chunk: 44 of 44 before, 7 after.
REFERENCE_FLOOR = 0.16
REFERENCE_COSINE = 0.2


def recent_candidates(max_tokens: int) -> int:
    """Recent events to read: more than the recent section can show (a block costs at
    least ~16 tokens with its time), and bounded."""
    return min(1_000, max(40, max_tokens // 16))


def relevant_candidates(max_tokens: int) -> int:
    """Search depth for relevant history: grows with the budget, so a bigger budget buys
    more history; bounded so restore stays fast. A conversational turn shown as history
    costs ~30 tokens and relevant history gets at most 85% of the budget, so ``// 24`` is
    deeper than the section can show (measured on LoCoMo: ``// 16`` was no better)."""
    return min(500, max(20, max_tokens // 24))


def _merge(*lists: list[Event], newest_first: bool = False) -> list[Event]:
    """The union of event lists (by seq) in log order (``created_at, seq``)."""
    unique = {event.seq: event for events in lists for event in events}
    return sorted(unique.values(), key=lambda e: (e.created_at, e.seq), reverse=newest_first)


def restore_session(
    store: Log,
    searcher: Searcher,
    session: Session,
    max_tokens: int,
    query: str | None,
    tokenizer: Any,
    summarizer: Summarizer | None,
    *,
    other_sessions: bool = False,
    shares: BudgetShares | None = None,
    count_recall: bool = True,
    exclude_newest: int = 0,
    exclude: Collection[str] = (),
    knowledge: bool | None = None,
) -> RestoredContext:
    """Gather the candidates of one restore of ``session`` (read in ``searcher``'s scope)
    and pack them; see the module docstring."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput(f"max_tokens must be a positive integer, got {shown(max_tokens)}.")
    if (
        isinstance(exclude_newest, bool)
        or not isinstance(exclude_newest, int)
        or exclude_newest < 0
    ):
        raise InvalidInput(f"exclude_newest must be 0 or more, got {shown(exclude_newest)}.")
    if query is not None:
        if not isinstance(query, str):
            raise InvalidInput(f"query must be a string or None, got {shown(query)}.")
        check_text(query, "query")
    if summarizer is not None and not callable(summarizer):
        raise InvalidInput(
            f"summarizer must be a callable (text, max_tokens) -> str, got {shown(summarizer)}."
        )
    if isinstance(exclude, str):
        raise InvalidInput("exclude takes a collection of event ids, not a single string.")
    if exclude is not None and (
        not isinstance(exclude, Iterable) or isinstance(exclude, Mapping | bytes)
    ):
        raise InvalidInput(f"exclude takes a collection of event ids, got {shown(exclude)}.")
    exclude = tuple(exclude or ())
    if not all(isinstance(event_id, str) for event_id in exclude):
        raise InvalidInput(f"exclude takes a collection of event ids (str), got {shown(exclude)}.")
    # Large payloads come as their stored previews: restore never parses megabytes it
    # could not show (the preview is what a summary of them needs).
    store_events = functools.partial(store.events, previews=True)
    base = EventFilter(searcher.scope, session_id=session.id)
    goal = store_events(replace(base, kinds=("goal",)), newest_first=True, limit=1)
    # what the caller's model already has (a framework's latest turns): left out everywhere
    newest = (
        store.events(
            replace(base, exclude_kinds=("goal", "summary")),
            newest_first=True,
            limit=min(exclude_newest, 2**62),  # (more than a store holds: all of them)
        )
        if exclude_newest
        else []
    )
    excluded = frozenset(event.id for event in newest) | frozenset(exclude or ())

    def kept(events: list[Event]) -> list[Event]:
        return [event for event in events if event.id not in excluded] if excluded else events

    open_filter = replace(base, kinds=("pending",), status="open")
    open_pending = store.count_events(open_filter)
    pending = kept(store_events(open_filter, limit=PENDING_CANDIDATES))
    pinned = _merge(goal, pending)
    # important: importance ≥ threshold (goal, pending and summaries have their own
    # sections), or an unresolved error — two reads, merged newest first
    important = _merge(
        store_events(
            replace(
                base,
                exclude_kinds=("goal", "pending", "summary"),
                min_importance=IMPORTANT_FROM,
            ),
            newest_first=True,
            limit=IMPORTANT_CANDIDATES,
        ),
        store_events(
            replace(base, kinds=("error",), status="unresolved"),
            newest_first=True,
            limit=IMPORTANT_CANDIDATES,
        ),
        newest_first=True,
    )[:IMPORTANT_CANDIDATES]
    # a resolved error is no longer important, whatever importance it was recorded with
    important = [e for e in kept(important) if not (e.kind == "error" and e.status == "resolved")]
    now = from_us(now_us())
    important.sort(key=lambda event: rank_score(event, now), reverse=True)
    recent = kept(
        store_events(
            replace(base, exclude_kinds=("goal", "summary")),
            newest_first=True,
            limit=recent_candidates(max_tokens) + len(excluded),  # what is left out: read more
        )
    )
    recent.reverse()
    total = store.count_events(base)
    summaries = store_events(replace(base, kinds=("summary",)), newest_first=True, limit=1)
    summary = summaries[0] if summaries else None

    # what the user asked the agent to keep doing, whatever the query (text/instructions.py):
    # the user's messages holding an instruction's words, found by the keyword index (reading
    # the user's last 400 messages took ~20-40 ms at 10k events), kept when a pattern says so
    rule_candidates = searcher.rule_messages(session.id)  # (read once: the search below too)
    users = kept(newest_first(rule_candidates))
    instructions = standing(users)
    if query:
        # a request for work shows the rules that bear on it first: the section's ceiling
        # drops the rest, and a session's asides ("I prefer things I can maintain alone")
        # outnumber its rules (tech chats: the rule a request needed fell off at 8k)
        first = searcher.rules_bearing_on(query, users)
        place = {seq: i for i, seq in enumerate(first)}
        instructions.sort(key=lambda stated: place.get(stated[0].seq, len(place)))

    pinned_seqs = frozenset(event.seq for event in (*pinned, *important))
    # Searched even when every event is a recent candidate: recent history is walked newest
    # first, and what the query needs may be older than what the budget reaches.
    text = query or " ".join([session.goal, *(e.content for e in pinned if e.kind == "pending")])
    depth = relevant_candidates(max_tokens)
    hits = searcher.search(
        text[:2_000],
        depth + min(len(excluded), depth),  # excluded hits are dropped below: look deeper
        session_id=None if other_sessions else session.id,
        count_recall=False,
        exclude=pinned_seqs | {event.seq for event in newest},  # excluded ids go below
        previews=True,
        # conversations ranked by whole events: restore shows long ones by their passages
        # itself, and scoring them by their best passage here moved restore's evidence by
        # -1.6 to +1.0 points on the long-events sets (tech chats: -2 / -3 / -1 at 2k / 4k
        # / 8k); a log, a table, a config block by its best passage (generated agent runs
        # +13 / +9 / +3; docs/decisions/2026-11-28-a-line-holding-the-query-words.md)
        by_passages="lines",
        shown_by_lines=False,  # (restore/passages.py chooses what it shows of an event)
        rule_candidates=rule_candidates,
    )
    relevant = [
        (hit.event, hit.score)
        for hit in hits
        if hit.event.kind != "summary" and hit.event.id not in excluded
    ]
    # a long event found by one of its passages is shown by it first (restore/passages.py)
    passages = {hit.event.id: hit.passage for hit in hits if hit.passage is not None}

    user_facts = _about_user(store, searcher, session, text[:2_000])
    asked = knowledge if knowledge is not None else query is not None
    references = _references(store, searcher, text[:2_000], depth) if asked else []
    shown_elsewhere = {event.id for event in user_facts} | {e.id for e, _ in references}
    relevant = [(event, score) for event, score in relevant if event.id not in shown_elsewhere]
    # (a chunk found but not vouched for is shown nowhere: not as relevant history either)
    references = _vouched_for(searcher, text[:2_000], references, depth)
    covered_ids, covered_count = _covered(summary, (*recent, *(e for e, _ in relevant), *important))
    cutter = searcher.indexer.cutter
    # the passages the index cut long candidates into, read in one query: cutting them again
    # means tokenizing each (a third of a restore's time on tool-heavy sessions); only for
    # those not analysed yet (the same events come back every turn)
    indexed = searcher.storage.passage_spans(
        [
            event.seq
            for event in (*pinned, *important, *recent, *(e for e, _ in relevant))
            if event.seq and needs_analysis(event, cutter)
        ]
    )
    context = pack(
        RestoreCandidates(
            session=session,
            pinned=pinned,
            important=important,
            recent=recent,
            relevant=relevant,
            total_events=total,
            query=query,
            summary=summary,
            covered_ids=covered_ids,
            covered_count=covered_count,
            open_pending=open_pending,
            other_sessions=other_sessions,
            user_facts=user_facts,
            references=references,
            passages=passages,
            cutter=cutter,
            indexed=indexed,
            payload_of=functools.partial(_whole_payload, store),
            instructions=instructions,
        ),
        max_tokens,
        tokenizer,
        summarizer,
        now,
        shares=shares,
    )
    if count_recall:
        recalled = set(context.report.included_ids("relevant"))
        searcher.count_recalls([event.seq for event, _ in relevant if event.id in recalled])
    return context


def _whole_payload(store: Log, event: Event) -> Any:
    """The payload of ``event`` in full (it was read with its preview): a JSON output that
    restore shows by the records a query asks about (search/records.py, once per output)."""
    found = store.events_by_seq([event.seq]).get(event.seq)
    return None if found is None else found.payload


def _about_user(store: Log, searcher: Searcher, session: Session, text: str) -> list[Event]:
    """The current facts remembered about the session's user (``SessionManager.remember``),
    in this agent's scope: keyed ones first (most important first), then the rest by their
    relevance to ``text`` times their importance. None for a session without a user, or for
    a user's memory session itself."""
    user = session.user_id
    if not user or session.metadata.get("asm") == MEMORY_SESSION:
        return []
    memories = store.sessions(
        SessionFilter(searcher.scope, user_id=user, marked=MEMORY_SESSION), limit=None
    )
    facts: list[Event] = []
    for memory in memories:
        facts += store.events(
            EventFilter(searcher.scope, session_id=memory.id, kinds=("fact",), status="current"),
            newest_first=True,
            limit=USER_FACT_CANDIDATES,
            previews=True,
        )
    facts = [event for event in facts if event.metadata.get(USER) == user]
    keyed = [event for event in facts if event.metadata.get(KEY)]
    keyed.sort(key=lambda event: (-event.importance, str(event.metadata[KEY])))
    others = [event for event in facts if not event.metadata.get(KEY)]
    relevance: dict[str, float] = {}
    if len(others) > 1:
        for memory in memories:
            for hit in searcher.search(
                text, min(len(others), 50), session_id=memory.id, kinds="fact", count_recall=False
            ):
                relevance[hit.event.id] = max(relevance.get(hit.event.id, 0.0), hit.score)
    others.sort(
        key=lambda event: (
            -relevance.get(event.id, 0.0) * event.importance,
            -event.importance,
            -event.created_at.timestamp(),
        )
    )
    return keyed + others


def _references(store: Log, searcher: Searcher, text: str, depth: int) -> list[tuple[Event, float]]:
    """Chunks of the documents ingested into this agent's knowledge (or its pools'), best
    first for ``text``; nothing is searched when there are none (one indexed probe of the
    sessions: listing them all cost 11 ms at 2,000 sessions, a search of the kind ~3 ms)."""
    if not store.sessions(SessionFilter(searcher.scope, marked=KNOWLEDGE_SESSION), limit=1):
        return []
    hits = searcher.search(text, depth, kinds="knowledge", count_recall=False, previews=True)
    return [(hit.event, hit.score) for hit in hits]


def _vouched_for(
    searcher: Searcher, text: str, found: list[tuple[Event, float]], depth: int
) -> list[tuple[Event, float]]:
    """The chunks of ``found`` relevant enough to show (:data:`REFERENCE_FLOOR`,
    :data:`REFERENCE_COSINE`; their cosines from the semantic ranking alone: the query's
    vector is cached, so this costs a scan of the knowledge chunks' vectors)."""
    found = [(event, score) for event, score in found if score >= REFERENCE_FLOOR]
    if not found:
        return []
    try:  # (50 deep: without a time in the query, a chunk past the floor is in the first 32)
        nearest = searcher.search(
            text, max(depth, 50), mode="semantic", kinds="knowledge", count_recall=False,
            previews=True,
        )  # fmt: skip
    except StoreUnavailable:  # the vector index is out of reach: nothing vouches for meaning
        return []
    cosine = {hit.event.id: hit.score for hit in nearest}
    return [(e, score) for e, score in found if cosine.get(e.id, -1.0) >= REFERENCE_COSINE]


def _covered(summary: Event | None, events: Iterable[Event]) -> tuple[frozenset[str], int]:
    """The ids among ``events`` that ``summary`` covers, and how many events it covers."""
    record = covers(summary)
    if summary is None or record is None:
        return frozenset(), 0
    end = record["to_us"], str(record.get("to", ""))
    ids = frozenset(
        e.id
        for e in events
        if e.session_id == summary.session_id
        and e.kind not in ("goal", "summary")
        and (to_us(e.created_at, "created_at"), e.id) <= end
    )
    return ids, int(record.get("events", 0))
