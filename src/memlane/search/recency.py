"""Episodic decay for search: recency as one more ranked list in the fusion.

``search(query, recency="default")`` (or ``recency=Recency(...)``) ranks the candidates the
semantic and keyword rankings found once more, by how fresh they are — ``0.5 ** (age /
half_life)``, the half-life depending on the event's kind (a chat turn fades in days, a
decision or a fact in months) — and fuses that list with the others (weighted reciprocal
rank fusion, ``weight`` — 1.0 by default — against the keyword list's 1.5 and the semantic
one's 1.0; equal relevance scores share a rank there, so freshness decides between them). Some
memories do not fade: the goal, open pending steps, events of importance 0.8 or more, and
keyed facts about a user (``remember(key=...)``). Recency only reorders what the query found;
it never brings in an event the query did not match. ``recency=None`` (the default) leaves
the ranking exactly as it was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from ..core.clock import to_us
from ..errors import InvalidInput, shown
from ..events import Event

__all__ = ["DEFAULT_HALF_LIVES", "Recency"]

#: how long each kind takes to lose half its freshness (others: ``OTHER_HALF_LIFE``)
DEFAULT_HALF_LIVES: Mapping[str, timedelta] = {
    "message": timedelta(days=3),
    "tool_output": timedelta(days=7),
    "step": timedelta(days=7),
    "error": timedelta(days=14),
    "summary": timedelta(days=30),
    "decision": timedelta(days=90),
    "fact": timedelta(days=180),
}
OTHER_HALF_LIFE = timedelta(days=14)
#: events of at least this importance do not fade
LASTING_IMPORTANCE = 0.8


@dataclass(frozen=True)
class Recency:
    """How search weighs freshness: ``half_life`` — one for every kind, or per kind (kinds
    not given keep :data:`DEFAULT_HALF_LIVES`) — and the recency list's ``weight`` in the
    fusion.

    >>> Recency(half_life=timedelta(days=1)).half_life_of("decision")
    datetime.timedelta(days=1)
    >>> Recency(half_life={"message": timedelta(hours=6)}).half_life_of("fact")
    datetime.timedelta(days=180)
    """

    half_life: timedelta | Mapping[str, timedelta] | None = None
    weight: float = 1.0
    _lives: dict[str, timedelta] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise InvalidInput(f"Recency weight must be a number, got {shown(weight)}.")
        if not math.isfinite(weight) or weight <= 0:
            raise InvalidInput(f"Recency weight must be a positive number, got {shown(weight)}.")
        lives = dict(DEFAULT_HALF_LIVES)
        if isinstance(self.half_life, timedelta):
            lives = {kind: self.half_life for kind in lives}
            lives[""] = self.half_life  # every other kind too
        elif isinstance(self.half_life, Mapping):
            lives.update(self.half_life)
        elif self.half_life is not None:
            raise InvalidInput(
                "Recency half_life must be a timedelta or a {kind: timedelta} dict, got "
                f"{shown(self.half_life)}."
            )
        for kind, life in lives.items():
            if not isinstance(life, timedelta) or life <= timedelta(0):
                raise InvalidInput(
                    f"Recency half_life of {kind or 'every kind'!r} must be a positive "
                    f"timedelta, got {shown(life)}."
                )
        self._lives.update(lives)

    def half_life_of(self, kind: str) -> timedelta:
        return self._lives.get(kind, self._lives.get("", OTHER_HALF_LIFE))

    def freshness(self, event: Event, now_us: int) -> float:
        """``0.5 ** (age / half_life)`` for the event's kind (1.0 for what does not fade,
        and for events dated in the future)."""
        if lasting(event):
            return 1.0
        age = max(0, now_us - to_us(event.created_at, "created_at"))
        life = self.half_life_of(event.kind).total_seconds() * 1_000_000
        return float(0.5 ** (age / life))


def lasting(event: Event) -> bool:
    """Whether an event never fades: the goal, an open pending step, an event of importance
    :data:`LASTING_IMPORTANCE` or more, a keyed fact about a user."""
    if event.kind == "goal" or event.importance >= LASTING_IMPORTANCE:
        return True
    if event.kind == "pending":
        return event.status in (None, "open")
    return event.kind == "fact" and bool(event.metadata.get("fact_key"))


def recency_of(value: Any) -> Recency | None:
    """``search(recency=...)``: None, ``"default"`` or a :class:`Recency`."""
    if value is None or isinstance(value, Recency):
        return value
    if isinstance(value, str) and value == "default":
        return Recency()
    raise InvalidInput(
        "recency must be None, 'default' or a Recency(half_life=..., weight=...), got "
        f"{shown(value)}."
    )
