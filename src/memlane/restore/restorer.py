"""``restore()`` and ``summarize()`` on a manager's writer: what reads the session and its
history (gather.py), packs them (plan.py) and writes the rolling summaries (summaries.py).
Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from ..core.observed import observed
from ..events import Event
from ..protocols import Summarizer, TokenCounter
from ..records.validate import prepare_event
from ..store.base import EventFilter
from ..text.tokens import tokenizer_for
from ..write.path import Writer
from .gather import restore_session
from .result import BudgetShares, RestoredContext
from .summaries import covers, plan_summary

__all__ = ["Restorer"]


class Restorer:
    """A manager's restores and summaries, through its writer."""

    def __init__(
        self, writer: Writer, summarizer: Summarizer | None = None, *, count_recalls: bool = True
    ) -> None:
        self._writer = writer
        self._observer = writer.observer
        self.scope = writer.scope
        self.summarizer = summarizer
        self.count_recalls = count_recalls

    @observed("restore")
    def restore(
        self,
        session_id: str,
        max_tokens: int,
        query: str | None = None,
        model: str | TokenCounter | None = None,
        *,
        summarizer: Summarizer | None = None,
        other_sessions: bool = False,
        shares: BudgetShares | None = None,
        exclude_newest: int = 0,
        exclude: Collection[str] = (),
        knowledge: bool | None = None,
    ) -> RestoredContext:
        """Rebuild prompt context for a session within ``max_tokens``.

        After the goal, the budget is shared (:class:`BudgetShares`;
        docs/decisions/2026-11-23-restore-budget-shares.md):
        open pending steps, important events and unresolved errors, the session's rolling
        summary, a floor of the newest events, history relevant to ``query`` (default: the
        goal and the pending steps) — from this session, or with ``other_sessions=True`` also
        from this agent's other sessions and subscribed pools — then the rest of the recent
        events. ``model`` overrides the manager's model family for counting; ``summarizer``
        the manager's summariser; ``shares`` the default shares. ``exclude_newest=N`` leaves
        out the session's N newest events (the goal always stays): a framework that already
        puts the latest turns in the model's input restores only what it does not have;
        ``exclude`` leaves out these events (ids), wherever they are. ``knowledge``: a
        *Reference* section of the chunks of ingested documents relevant to the query
        (``True``: always; ``None``, the default: when a ``query`` is given; ``False``:
        never).

        >>> context = mgr.restore(session.id, max_tokens=4000)  # doctest: +SKIP
        >>> context.token_count <= 4000, context.report.sections  # doctest: +SKIP
        """
        context = restore_session(
            self._writer.log,
            self._writer.searcher,
            self._writer.get_session(session_id),
            max_tokens,
            query,
            tokenizer_for(model if model is not None else self._writer.model),
            summarizer or self.summarizer,
            other_sessions=other_sessions,
            shares=shares,
            count_recall=self.count_recalls,
            exclude_newest=exclude_newest,
            exclude=exclude,
            knowledge=knowledge,
        )
        if self._observer.metrics is not None:
            self._observer.metrics.restored(
                context.report.sections, context.token_count, max_tokens
            )
        return context

    @observed("summarize")
    def summarize(
        self,
        session_id: str,
        upto: str | datetime | None = None,
        max_tokens: int = 400,
        summarizer: Summarizer | None = None,
    ) -> Event:
        """Write a rolling ``summary`` event standing in for the session up to ``upto``.

        ``upto`` is an event id of the session or a time (default: its newest event). The
        summary covers everything from the session's first event to there: the previous
        summary (superseded, kept, no longer shown) plus the events after it. Sources are
        never changed. restore() shows the current summary in an *Earlier (summarised)*
        section when covered events do not fit. Works on ended sessions too.

        The default is offline and deterministic (extractive, dated bullets: decisions,
        unresolved errors, facts and completed steps first, then the turns closest to the
        goal by the stored vectors), within ``max_tokens`` as counted for this manager's
        model. ``summarizer`` (``(text, max_tokens) -> str``, e.g. an LLM; default: the
        manager's) is given the material; an empty, non-string or too long answer falls back
        to the extractive summary (``payload["method"]`` says so); an exception it raises
        propagates and nothing is written. If the current summary already reaches ``upto``,
        it is returned and nothing is written.

        >>> summary = mgr.summarize(session.id, max_tokens=300)  # doctest: +SKIP
        >>> summary.payload["covers"]["events"], summary.payload["method"]  # doctest: +SKIP
        (412, 'extractive')
        """
        self._writer.check_writable()
        session = self._writer.get_session(session_id)
        plan = plan_summary(
            self._writer.searcher,
            session,
            upto,
            max_tokens,
            summarizer or self.summarizer,
            self._writer.tokenizer().count,
        )
        if isinstance(plan, Event):
            return plan  # the current summary already reaches that far
        return self.write_summary(session.id, plan.text, plan.payload, plan.previous)

    def write_summary(
        self, session_id: str, text: str, payload: dict[str, Any], based_on: Event | None
    ) -> Event:
        """Append a summary unless another process wrote one that reaches as far meanwhile."""
        newest = EventFilter(self.scope, session_id=session_id, kinds=("summary",))
        prepared = prepare_event(
            "summary", text, payload, None, None, None, None, self._writer.count_tokens
        )
        with self._writer.write() as tx:
            _, _, pool = self._writer.owned(tx, session_id, allow_closed=True, adds=True)
            current = self._writer.log.events(newest, newest_first=True, limit=1, tx=tx)
            if current and (based_on is None or current[0].id != based_on.id):
                theirs = covers(current[0])
                if theirs is not None and theirs["to_us"] >= payload["covers"]["to_us"]:
                    return current[0]  # a concurrent summary already stands for this span
                # Rare (another process summarised meanwhile): counted again under the lock.
                payload = {**payload, "supersedes": current[0].id}
                prepared = prepare_event(
                    "summary", text, payload, None, None, None, None, self._writer.count_tokens
                )
            inserted = self._writer.insert(tx, session_id, pool, prepared, None, touch=False)
        self._writer.indexer.notify()
        return inserted.event()
