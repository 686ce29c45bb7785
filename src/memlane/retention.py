"""Retention: how long a store keeps what, stated once (:class:`RetentionPolicy`) and applied
by ``StoreAdmin.apply_retention`` / ``memlane retention``, or by an agent's background worker
(``SessionManager(retention=...)``).

Two forms, as ``memlane prune``'s:

- without ``kinds``: whole task sessions whose last activity is older than ``max_age`` (a
  session someone still records into is never cut in half);
- with ``kinds``: the events of those kinds created before the cutoff, in sessions of any
  age; the sessions stay.

``statuses`` limits either to sessions with those statuses; ``keep`` keeps the newest that
many sessions of each agent (first form) or events of each session (second form), however
old. Some memory is never a retention policy's to delete: a session's goal, an open pending
step (a to-do must not vanish), a user's *current* facts (superseded and retracted ones are
history a policy may drop), knowledge documents (``delete_document``), and the memory
sessions that hold users' facts and the knowledge (the first form leaves them; their facts
obey the second). Expired short-term memory needs no policy: it goes on its own.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .core.clock import age
from .errors import InvalidInput, shown
from .events import SESSION_STATUSES, validate_kind

__all__ = ["NEVER_EXPIRED_STATUSES", "RetentionPolicy"]

#: event statuses a policy never deletes: open pending steps, a user's current facts
NEVER_EXPIRED_STATUSES = ("open", "current")
_UNTOUCHABLE_KINDS = {
    "goal": "a session needs its goal; let the sessions go instead (leave out kinds)",
    "knowledge": "knowledge documents are versioned wholes; use delete_document",
}


@dataclass(frozen=True)
class RetentionPolicy:
    """What to delete once it is older than ``max_age`` (see the module docstring).

    >>> RetentionPolicy("30d", kinds=["tool_output"], keep=20).max_age
    datetime.timedelta(days=30)
    """

    max_age: timedelta
    kinds: tuple[str, ...] | None = None
    statuses: tuple[str, ...] | None = None
    keep: int = 0

    def __init__(
        self,
        max_age: timedelta | str,
        kinds: Iterable[str] | None = None,
        statuses: Iterable[str] | None = None,
        keep: int = 0,
    ) -> None:
        if isinstance(max_age, str):
            parsed = age(max_age)
            if parsed is None:
                raise InvalidInput(
                    f"max_age {shown(max_age)} is not an age; use e.g. '90d', '12h' or '2w'."
                )
            max_age = parsed
        if not isinstance(max_age, timedelta) or max_age <= timedelta(0):
            raise InvalidInput(
                f"max_age must be a positive timedelta or age, got {shown(max_age)}."
            )
        if isinstance(kinds, str):
            kinds = (kinds,)
        for name, given in (("kinds", kinds), ("statuses", statuses)):
            if given is not None and not isinstance(given, Iterable):
                raise InvalidInput(f"{name} must be a list of names, got {shown(given)}.")
        chosen = None if kinds is None else tuple(validate_kind(kind) for kind in kinds)
        if chosen is not None and not chosen:
            raise InvalidInput("kinds is empty; leave it out to let whole sessions go.")
        for kind in chosen or ():
            if kind in _UNTOUCHABLE_KINDS:
                raise InvalidInput(
                    f"{kind} events cannot be retained away: {_UNTOUCHABLE_KINDS[kind]}."
                )
        if isinstance(statuses, str):
            statuses = (statuses,)
        status_tuple = None if statuses is None else tuple(statuses)
        for status in status_tuple or ():
            if status not in SESSION_STATUSES:
                raise InvalidInput(
                    f"Unknown session status {shown(status)}; use {', '.join(SESSION_STATUSES)}."
                )
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
            raise InvalidInput(f"keep must be a whole number of at least 0, got {shown(keep)}.")
        object.__setattr__(self, "max_age", max_age)
        object.__setattr__(self, "kinds", chosen)
        object.__setattr__(self, "statuses", status_tuple)
        object.__setattr__(self, "keep", keep)

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_age_seconds": self.max_age.total_seconds(),
            "kinds": None if self.kinds is None else list(self.kinds),
            "statuses": None if self.statuses is None else list(self.statuses),
            "keep": self.keep,
        }
