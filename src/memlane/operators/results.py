"""What :class:`~memlane.admin.StoreAdmin` reports: a session with its size
(:class:`SessionInfo`), a store's statistics (:class:`StoreStats`), what a prune removed
(:class:`PruneResult`); and cutoffs given as an age or a time (:func:`parse_cutoff`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..core.clock import age, format_time, now_us, to_us
from ..errors import InvalidInput
from ..events import Session
from ..transfer.jsonl import session_to_dict

__all__ = ["PruneResult", "SessionInfo", "StoreStats", "parse_cutoff"]


def parse_cutoff(value: datetime | timedelta | str, what: str = "older_than") -> int:
    """A point in time, as microseconds since the epoch, from an age or a timestamp.

    An age is a :class:`~datetime.timedelta` or a string such as ``"90d"``, ``"12h"``,
    ``"30min"``, ``"2w"`` (s, m/min, h, d, w), counted back from now; anything else is an
    ISO-8601 timestamp or a datetime (naive means UTC).

    >>> parse_cutoff("1970-01-02T00:00:00Z")
    86400000000
    """
    if isinstance(value, timedelta):
        return now_us() - int(value.total_seconds() * 1_000_000)
    if isinstance(value, str):
        written = age(value)
        if written is not None:
            return now_us() - int(written.total_seconds() * 1_000_000)
        try:
            return to_us(value, what)
        except InvalidInput:
            raise InvalidInput(
                f"{what} {value!r} is neither an age nor a timestamp; use e.g. '90d', '12h', "
                "'30min' or '2026-05-01T12:00:00Z'."
            ) from None
    return to_us(value, what)


@dataclass(frozen=True)
class SessionInfo:
    """A session with its size: what ``memlane sessions`` lists.

    ``last_activity`` is when the session last changed (an event recorded, the session
    ended).
    """

    session: Session
    events: int
    tokens: int

    @property
    def last_activity(self) -> datetime:
        return self.session.updated_at

    def to_dict(self) -> dict[str, Any]:
        data = session_to_dict(self.session)
        data["last_activity"] = data.pop("updated_at")
        data["events"] = self.events
        data["tokens"] = self.tokens
        return data


@dataclass(frozen=True)
class StoreStats:
    """What is in a store: counts, size, the embedder behind its vectors, the backlog."""

    path: str
    size_bytes: int
    sessions: int
    events: int
    sessions_by_status: dict[str, int]
    events_by_agent: dict[str, dict[str, int]]  # agent -> kind -> count
    vectors: int  # stored vectors: one per event, or one per passage of a long event
    pending_embeddings: int
    embedder_name: str | None  # the embedder that made the stored vectors, if any
    embedder_dim: int | None
    migrations: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "size_bytes": self.size_bytes,
            "sessions": self.sessions,
            "events": self.events,
            "sessions_by_status": self.sessions_by_status,
            "events_by_agent": self.events_by_agent,
            "vectors": self.vectors,
            "pending_embeddings": self.pending_embeddings,
            "embedder": {"name": self.embedder_name, "dim": self.embedder_dim},
            "migrations": self.migrations,
        }


@dataclass(frozen=True)
class PruneResult:
    """What :meth:`StoreAdmin.prune` removed (or, with ``dry_run``, would remove).

    Without a kind, whole sessions go (``sessions`` lists them, ``events`` counts their
    events); with a kind, only events of that kind go and ``sessions`` stays empty
    (``sessions_touched`` says how many sessions they came from).
    """

    cutoff: datetime
    sessions: list[SessionInfo]
    events: int
    events_by_kind: dict[str, int]
    sessions_touched: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "cutoff": format_time(self.cutoff),
            "dry_run": self.dry_run,
            "sessions": [info.to_dict() for info in self.sessions],
            "events": self.events,
            "events_by_kind": self.events_by_kind,
            "sessions_touched": self.sessions_touched,
        }
