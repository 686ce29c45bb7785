"""Time expressions in a search query, resolved to windows of event time.

"What did we decide on 3 June, 2025?", "the errors in March 2026", "what failed yesterday":
hybrid search gives the events inside the window a boost (see ``search/searcher.py``). Only
expressions that name a time unambiguously are read — a full date, a month with its year, a
preposition before a bare month or year ("in June", "during 2025"), and a few relative phrases
resolved against ``now`` ("yesterday", "last week", "3 days ago"). English only; anything else
yields no window and leaves the ranking as it was.

A day named by its month's name ("the dump from March 5") is also a thing to *match*: tool
outputs write it ``2026-03-05`` (a file listing, a log line), whose words ``03`` and ``05``
the question does not hold. :func:`with_days_as_written` adds them to the keyword query's
text (and to the words restore and search choose a long event's passage by).

>>> from datetime import datetime, timezone
>>> now = datetime(2026, 5, 20, 15, 0, tzinfo=timezone.utc)
>>> [w.describe() for w in time_windows("what did Ana say on 3 June, 2025?", now)]
['2025-06-02T12:00 .. 2025-06-04T12:00']
>>> [w.describe() for w in time_windows("errors in March", now)]
['any March']
>>> [w.describe() for w in time_windows("what broke yesterday", now)]
['2026-05-19T00:00 .. 2026-05-20T00:00']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ..core.clock import to_us

__all__ = [
    "TimeMention",
    "TimeWindow",
    "days_as_written",
    "time_mentions",
    "time_windows",
    "with_days_as_written",
]

_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_NUMBER = {name: i for i, name in enumerate(_MONTHS, start=1)}
_MONTH_NUMBER.update({name[:3]: i for i, name in enumerate(_MONTHS, start=1)})
_MONTH_NUMBER["sept"] = 9
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

# Full names before their abbreviations, so that "June" is not read as "Jun" + "e".
_MON = "(" + "|".join([*_MONTHS, "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sept"]) + "|"
_MON += r"sep|oct|nov|dec)\.?"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d\d)"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.IGNORECASE))
    for name, pattern in (
        ("iso_day", r"\b" + _YEAR + r"-(\d\d)-(\d\d)\b"),
        ("day_month_year", rf"\b{_DAY}\s+(?:of\s+)?{_MON},?\s+{_YEAR}\b"),
        ("month_day_year", rf"\b{_MON}\s+{_DAY},?\s+{_YEAR}\b"),
        ("month_year", rf"\b{_MON},?\s+{_YEAR}\b"),
        ("day_month", rf"\b(?:on|since|from|by|before|after|until)\s+{_DAY}\s+(?:of\s+)?{_MON}\b"),
        ("month_day", rf"\b(?:on|since|from|by|before|after|until)\s+{_MON}\s+{_DAY}\b"),
        ("in_month", rf"\b(?:in|during|since|early|mid|late|throughout)\s+{_MON}\b"),
        ("in_year", r"\b(?:in|during|since|throughout)\s+" + _YEAR + r"\b"),
        ("today", r"\b(today|this morning|this afternoon|this evening|tonight)\b"),
        ("yesterday", r"\b(yesterday|last night)\b"),
        (
            "ago",
            r"\b(\d+|a|an|one|two|three|four|five|six|seven)\s+(day|week|month|year)s?\s+ago\b",
        ),
        ("last_unit", r"\b(?:last|past|previous)\s+(week|weekend|month|year)\b"),
        ("this_unit", r"\bthis\s+(week|month|year)\b"),
        ("last_weekday", r"\blast\s+(" + "|".join(_WEEKDAYS) + r")\b"),
    )
)
_NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5}
_NUMBER_WORDS.update({"six": 6, "seven": 7})
# The earliest moment a window can start at (datetime's own limit).
_FIRST_DAY = datetime.min.replace(tzinfo=timezone.utc)
# "123456 days ago" is read; a count longer than this reaches past _FIRST_DAY in any unit.
_MAX_COUNT_DIGITS = 7
# A named day is widened by half a day on each side: event times are UTC, the person asking
# may not be.
_DAY_SLACK = timedelta(hours=12)


@dataclass(frozen=True)
class TimeWindow:
    """A span of event time: ``[start, end)`` in microseconds, or a month (and day) of any
    year when the query named no year ("in June")."""

    start_us: int | None = None
    end_us: int | None = None
    month: int | None = None
    day: int | None = None

    def contains(self, created_us: int) -> bool:
        if self.month is not None:
            moment = datetime.fromtimestamp(created_us / 1e6, timezone.utc)
            return moment.month == self.month and (self.day is None or moment.day == self.day)
        return (self.start_us is None or created_us >= self.start_us) and (
            self.end_us is None or created_us < self.end_us
        )

    def describe(self) -> str:
        if self.month is not None:
            name = _MONTHS[self.month - 1].capitalize()
            return f"any {name}" + (f" {self.day}" if self.day else "")
        fmt = "%Y-%m-%dT%H:%M"
        start = "" if self.start_us is None else _from_us(self.start_us).strftime(fmt)
        end = "" if self.end_us is None else _from_us(self.end_us).strftime(fmt)
        return f"{start} .. {end}"


def _from_us(value: int) -> datetime:
    return datetime.fromtimestamp(value / 1e6, timezone.utc)


def _span(start: datetime, end: datetime) -> TimeWindow:
    return TimeWindow(to_us(start), to_us(end))


def _day(year: int, month: int, day: int) -> TimeWindow | None:
    try:
        start = datetime(year, month, day, tzinfo=timezone.utc)
    except ValueError:
        return None  # "31 February"
    return _span(start - _DAY_SLACK, start + timedelta(days=1) + _DAY_SLACK)


def _month(year: int, month: int) -> TimeWindow:
    start = datetime(year, month, 1, tzinfo=timezone.utc)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=timezone.utc)
    return _span(start, end)


def _year(year: int) -> TimeWindow:
    return _span(
        datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    )


def _midnight(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _relative(kind: str, match: re.Match[str], now: datetime) -> TimeWindow | None:
    today = _midnight(now)
    if kind == "today":
        return _span(today, today + timedelta(days=1))
    if kind == "yesterday":
        return _span(today - timedelta(days=1), today)
    if kind == "ago":
        return _ago(match.group(1).lower(), match.group(2).lower(), today)
    if kind in ("last_unit", "this_unit"):
        unit = match.group(1).lower()
        last = kind == "last_unit"
        if unit == "weekend":
            saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7)
            return _span(saturday, saturday + timedelta(days=2))
        if unit == "week":
            monday = today - timedelta(days=today.weekday())
            start = monday - timedelta(days=7) if last else monday
            return _span(start, start + timedelta(days=7))
        if unit == "month":
            first = today.replace(day=1)
            if last:
                first = (first - timedelta(days=1)).replace(day=1)
            return _month(first.year, first.month)
        year = today.year - 1 if last else today.year
        return _span(
            datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
        )
    if kind == "last_weekday":
        wanted = _WEEKDAYS.index(match.group(1).lower())
        back = (today.weekday() - wanted) % 7 or 7
        day = today - timedelta(days=back)
        return _span(day, day + timedelta(days=1))
    return None


def _ago(count_text: str, unit: str, today: datetime) -> TimeWindow | None:
    """ "3 days ago": the day that many units before ``today``, widened by a slack that
    grows with the unit. A count that reaches past the first representable day ("3000
    years ago", "99999999999 days ago") names no time an event can have: no window, as for
    any phrase this module does not read. A window whose slack alone crosses that edge is
    cut there."""
    if count_text.isdigit():
        if len(count_text) > _MAX_COUNT_DIGITS:  # (int() of thousands of digits is refused)
            return None
        count = int(count_text)
    else:
        count = _NUMBER_WORDS[count_text]
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * count
    if days > (today - _FIRST_DAY).days:
        return None
    centre = today - timedelta(days=days)
    slack = timedelta(days={"day": 1, "week": 3, "month": 10, "year": 60}[unit])
    start = _FIRST_DAY if (centre - _FIRST_DAY) < slack else centre - slack
    return _span(start, centre + timedelta(days=1) + slack)


def time_windows(text: str, now: datetime | None = None) -> list[TimeWindow]:
    """The time windows ``text`` names, most specific expressions first; ``[]`` if none.

    A span of text is read once: "on 3 June, 2025" is a day, not also a month and a year.
    Relative phrases are resolved against ``now`` (default: the current UTC time).
    """
    windows: list[TimeWindow] = []
    for mention in time_mentions(text, now):
        if mention.window not in windows:
            windows.append(mention.window)
    return windows


@dataclass(frozen=True)
class TimeMention:
    """Where ``text`` names a time: the span (``start``, ``end``), its words, its window."""

    start: int
    end: int
    text: str
    window: TimeWindow


def time_mentions(text: str, now: datetime | None = None) -> list[TimeMention]:
    """Each time expression of ``text`` with its span, most specific expressions first (the
    extraction stage's date entities; :func:`time_windows` reads the same).

    >>> [m.text for m in time_mentions("I moved on 3 June 2025, not last week")]
    ['3 June 2025', 'last week']
    """
    now = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    taken: list[tuple[int, int]] = []
    mentions: list[TimeMention] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            window = _read(kind, match, now)
            if window is not None:
                taken.append(match.span())
                mentions.append(TimeMention(match.start(), match.end(), match.group(0), window))
    return mentions


def _read(kind: str, match: re.Match[str], now: datetime) -> TimeWindow | None:
    groups = match.groups()
    if kind == "iso_day":
        return _day(int(groups[0]), int(groups[1]), int(groups[2]))
    if kind == "day_month_year":
        return _day(int(groups[2]), _MONTH_NUMBER[groups[1].lower()], int(groups[0]))
    if kind == "month_day_year":
        return _day(int(groups[2]), _MONTH_NUMBER[groups[0].lower()], int(groups[1]))
    if kind == "month_year":
        return _month(int(groups[1]), _MONTH_NUMBER[groups[0].lower()])
    if kind in ("day_month", "month_day"):
        day_text, month_text = (groups[0], groups[1]) if kind == "day_month" else groups[::-1]
        day = int(day_text)
        return TimeWindow(month=_MONTH_NUMBER[month_text.lower()], day=day) if day <= 31 else None
    if kind == "in_month":
        return TimeWindow(month=_MONTH_NUMBER[groups[0].lower()])
    if kind == "in_year":
        year = int(groups[0])
        return _span(
            datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
        )
    return _relative(kind, match, now)


# A calendar day as a question names it, with or without its year: "March 5", "5th of March",
# "Mar 5, 2026" (no preposition needed: this reads words to match, not a window to filter by)
_NAMED_DAYS = (
    re.compile(rf"\b{_MON}\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON}(?:,?\s+{_YEAR}\b)?", re.IGNORECASE),
)


def days_as_written(text: str) -> list[str]:
    """The calendar days ``text`` names by a month's name, as the words the same day's ISO
    date in an event splits into ("2026-03-05": ``2026``, ``03``, ``05``): a question asks
    about "the dump from March 5", a file listing or a log line says ``2026-03-05``.

    >>> days_as_written("How big was the billing dump from March 5?")
    ['03 05']
    >>> days_as_written("the backup of 5th of March, 2026 and May 2023")
    ['2026 03 05']
    >>> days_as_written("on 31 February") == []
    True
    """
    found: list[str] = []
    taken: list[tuple[int, int]] = []
    for number, pattern in enumerate(_NAMED_DAYS):
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            month_text, day_text = match.group(1), match.group(2)
            if number == 1:
                day_text, month_text = month_text, day_text
            month, day, year = (
                _MONTH_NUMBER[month_text.lower().rstrip(".")],
                int(day_text),
                match.group(3),
            )
            try:
                datetime(int(year) if year else 2000, month, day)  # (2000: a leap year)
            except ValueError:
                continue
            taken.append(match.span())
            words = f"{month:02d} {day:02d}"
            found.append(f"{year} {words}" if year else words)
    return list(dict.fromkeys(found))


def with_days_as_written(text: str) -> str:
    """``text`` and the words of the days it names as an ISO date writes them (a keyword
    query's text: :func:`days_as_written`).

    >>> with_days_as_written("the dump from March 5")
    'the dump from March 5 03 05'
    """
    return " ".join([text, *days_as_written(text)])
