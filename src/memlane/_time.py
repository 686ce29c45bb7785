"""UTC timestamps, stored as integer microseconds since the Unix epoch (sortable, compact)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from .errors import InvalidInput

__all__ = ["age", "from_us", "now_us", "to_us"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def now_us() -> int:
    return int((datetime.now(timezone.utc) - _EPOCH).total_seconds() * 1_000_000)


def to_us(value: datetime | str, what: str = "created_at") -> int:
    """Microseconds since the epoch for an aware datetime or ISO-8601 string.

    Naive datetimes are taken to be UTC (the library never guesses a local zone).

    >>> to_us("1970-01-01T00:00:01Z")
    1000000
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInput(
                f"{what} {value!r} is not an ISO-8601 timestamp; use e.g. '2026-05-01T12:00:00Z'."
            ) from None
    if not isinstance(value, datetime):
        raise InvalidInput(f"{what} must be a datetime or ISO-8601 string, got {value!r}.")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    """The aware UTC datetime for microseconds since the epoch."""
    seconds, micros = divmod(int(value), 1_000_000)
    return datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=micros)


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|min|h|d|w)\s*$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86_400, "w": 604_800}


def age(value: str) -> timedelta | None:
    """An age written as ``"90d"``, ``"12h"``, ``"30min"``, ``"2w"`` (s, m/min, h, d, w); None
    when ``value`` is not one.

    >>> age("2w"), age("soon")
    (datetime.timedelta(days=14), None)
    """
    match = _DURATION.match(value)
    if not match:
        return None
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])
