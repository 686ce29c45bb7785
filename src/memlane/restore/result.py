"""What ``restore()`` takes and gives: the budget's shares (:class:`BudgetShares`), the
candidates the store gathered (:class:`RestoreCandidates`), and the result — the text, the
chat messages and a report of every event's fate (:class:`RestoredContext`,
:class:`RestoreReport`); and how candidates rank (:func:`rank_score`). The packing is
:mod:`memlane.restore.plan`'s.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from ..errors import InvalidInput
from ..errors import shown as _shown
from ..events import Event, Passage, Session
from ..text.passages import Cutter
from .packer import ReportItem, SectionShare
from .text import utc

__all__ = [
    "BudgetShares",
    "RestoreCandidates",
    "RestoreReport",
    "RestoredContext",
    "rank_score",
]


@dataclass(frozen=True)
class BudgetShares:
    """Each section's share of the budget left after the goal (fractions of it).

    The defaults were chosen on the development half of LoCoMo (bench/restore_quality.py;
    docs/decisions/2026-11-23-restore-budget-shares.md has the ablation). A share is a ceiling, not
    a reservation: what a section leaves unused stays in the pool for the sections after it.

    >>> pack(candidates, 4000, tok, shares=BudgetShares(relevant_query=0.9))  # doctest: +SKIP
    """

    pending: float = 0.25
    #: standing instructions and preferences the user stated in the session's messages
    #: ("from now on, always add type hints"; text/instructions.py), each shown within ~220
    #: characters of its message (0.1 left rules out at 2,000 tokens on long technical chats)
    instructions: float = 0.15
    #: what the agent knows about the session's user (:meth:`SessionManager.remember`)
    user: float = 0.15
    #: chunks of ingested documents relevant to the query (:meth:`SessionManager.ingest`)
    reference: float = 0.25
    recent_floor: float = 0.1
    recent_floor_events: int = 3
    important: float = 0.25
    earlier: float = 0.2
    #: relevant history when the caller gave a query: what it asked for
    relevant_query: float = 0.85
    #: relevant history for the default query (the goal and the open pending steps)
    relevant_default: float = 0.35

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if name == "recent_floor_events":
                ok = isinstance(value, int) and value >= 0
            else:
                ok = isinstance(value, int | float) and 0 <= value <= 1
            if not ok:
                raise InvalidInput(
                    f"BudgetShares.{name} must be "
                    + ("a non-negative int" if name == "recent_floor_events" else "within 0..1")
                    + f", not {_shown(value)}."
                )


@dataclass(frozen=True)
class RestoreCandidates:
    """What the storage layer found for one restore; :func:`pack` decides what fits."""

    session: Session
    pinned: list[Event]  # goal event (kind "goal") + open pending steps, oldest first
    important: list[Event]  # importance >= 0.7 events and unresolved errors, best first
    recent: list[Event]  # the session's most recent events, oldest first
    relevant: list[tuple[Event, float]]  # events relevant to the query, best first
    total_events: int = 0  # how many events the session has in all (for the report)
    query: str | None = None  # the caller's query (None: the default query was used)
    summary: Event | None = None  # the session's current rolling summary, if any
    covered_ids: frozenset[str] = frozenset()  # candidates the summary covers
    covered_count: int = 0  # events the summary covers in all
    open_pending: int | None = None  # open pending steps in all (pinned may hold fewer)
    other_sessions: bool = False  # relevant history came from other sessions too
    user_facts: list[Event] = field(default_factory=list)  # about the user, best first
    references: list[tuple[Event, float]] = field(default_factory=list)  # document chunks
    #: the search's best passage of the long events it found (:attr:`Hit.passage`), by id
    passages: Mapping[str, Passage] = field(default_factory=dict)
    #: how the index cut long events into passages (its embedder's tokenizer and window):
    #: restore shows them cut the same way
    cutter: Cutter = field(default_factory=Cutter)
    #: the spans the index holds for the long candidates, by seq (read once: the others are
    #: cut with ``cutter``)
    indexed: Mapping[int, Sequence[tuple[int, int]]] = field(default_factory=dict)
    #: the whole payload of an event read with only its preview (``Event.preview``): a JSON
    #: tool output is shown by the records a query asks about (restore/records.py); None:
    #: such an output is summarised from its preview
    payload_of: Callable[[Event], Any] | None = None
    #: the user's messages that state standing instructions or preferences, newest first
    #: (those whose rules bear most on a request for work before them: search/rules.py),
    #: each with those sentences (text/instructions.py)
    instructions: list[tuple[Event, tuple[str, ...]]] = field(default_factory=list)


@dataclass(frozen=True)
class RestoreReport:
    """Why the restored text looks the way it does.

    ``sections`` maps each non-empty section to the tokens it takes of ``text``: with the
    bundled encodings (``cl100k_base``, ``o200k_base``), its text's exact count with the
    blank line after it (none after the last), so that they and the opening line add up to
    ``token_count`` exactly; with a counter of your own or an estimate, the count of the
    section's own text alone (BPE counts of pieces need not add up: a token or two may
    differ from ``token_count``). ``shares`` says what each section was offered
    and why. ``items`` lists every candidate event once, in the order the packer first
    considered them, with its final fate.

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
    shares: list[SectionShare] = field(default_factory=list)
    message_tokens: int = 0

    def included_ids(self, section: str | None = None) -> list[str]:
        """Ids of events that made it into the text (in full, by passages or summarised)."""
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
            for action in ("included", "passages", "summarised", "dropped")
        }
        return data


@dataclass(frozen=True)
class RestoredContext:
    """The packed memory as one ``text``, as chat ``messages``, and an explanation.

    ``text`` holds everything; ``messages`` is ``[{"role": "system", "content": system},
    *turns]``: the recent conversation as role messages in order, the rest in one system
    message. Both fit ``max_tokens``: ``token_count`` counts ``text`` exactly;
    ``report.message_tokens`` counts ``messages`` (contents, plus :data:`MESSAGE_OVERHEAD`
    per turn and any ``tool_calls`` JSON).

    >>> ctx = mgr.restore(session.id, max_tokens=4000, model="gpt-4o")  # doctest: +SKIP
    >>> messages = ctx.messages + [{"role": "user", "content": "Continue."}]  # doctest: +SKIP
    >>> anthropic.messages.create(system=ctx.system, messages=ctx.turns, ...)  # doctest: +SKIP
    """

    text: str
    messages: list[dict[str, Any]]
    token_count: int
    report: RestoreReport
    system: str = ""
    turns: list[dict[str, Any]] = field(default_factory=list)

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
    age_hours = max(0.0, (utc(now) - utc(event.created_at)).total_seconds() / 3600)
    recency = 0.5 ** (age_hours / half_life_hours) if half_life_hours > 0 else 0.0
    return 0.6 * event.importance + 0.25 * recall + 0.15 * recency
