"""Validation shared by every write path: ``record()`` and ``StoreAdmin.import_records()``.

Everything here checks its input and returns the stored form; nothing does I/O. A rejected
value raises :class:`~memlane.errors.InvalidInput` (or a subclass) naming the value
and the fix, before any transaction opens, so bad input writes nothing.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeGuard

from ..core import canonical_json
from ..core.clock import from_us, now_us, to_us
from ..core.scope import partition_of
from ..core.searchable import needs_whole_text
from ..errors import InvalidInput, InvalidPayload, shown
from ..events import CUSTOM_KIND_IMPORTANCE, DEFAULT_IMPORTANCE, EventRecord, validate_kind
from ..text.shrink import PREVIEW_THRESHOLD, payload_digest
from .redacting import RecordRedaction

__all__ = [
    "DIGEST_INLINE_CHARS",
    "EVENT_STATUSES",
    "MAX_EVENT_CHARS",
    "MAX_TTL",
    "PreparedEvent",
    "estimate_tokens",
    "expiry_us",
    "identifier",
    "path_of",
    "prepare_event",
    "storable_key",
    "text",
]

#: The largest event the write path takes, in characters of content and payload JSON: one of
#: 16 Mi characters costs the caller about a second (measured: a 20 MB string 0.65 s, a 24 MB
#: JSON payload 2.3 s). Bigger data belongs in a file or object store; record its reference
#: and a summary.
MAX_EVENT_CHARS = 16 * 1024 * 1024

#: Events up to this size (characters of content and payload JSON) are counted and
#: previewed before their transaction; a larger one is stored with an estimated token count
#: and no preview, and the background worker digests it (``_deferred.digest_deferred``): a
#: 1 MB payload's exact count (~40 ms) and preview (~50 ms) are not the caller's wait.
DIGEST_INLINE_CHARS = PREVIEW_THRESHOLD

#: A deferred event's token count is estimated from three slices of its text this long (its
#: start, middle and end: ~1 ms), scaled by its length. Characters per token vary too much
#: for one ratio (measured with o200k: 3.9 in English prose, 3.2 in JSON rows, 2.0 in a list
#: of floats, 1.7 in hex ids, 1.5 in Chinese).
_SAMPLE_CHARS = 4_096

#: The statuses an event of each kind may have; kinds not listed have none (``None``).
EVENT_STATUSES: Mapping[str, tuple[str | None, ...]] = {
    "pending": ("open", "done", "cancelled"),
    "error": ("unresolved", "resolved"),
    # an ordinary fact has none; a user's (SessionManager.remember) has one of these
    "fact": (None, "current", "superseded", "retracted"),
}


@dataclass(frozen=True, slots=True)
class PreparedEvent:
    """One event's fields, validated and in their stored form — everything that can be
    worked out before a transaction opens (the payload's JSON and preview, the token count),
    so a transaction only checks ownership and inserts."""

    kind: str
    content: str
    payload_json: str | None
    importance: float
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    created_us: int
    token_count: int = 0
    #: the payload's size and bounded preview when it is large (summarize.payload_digest)
    payload_chars: int | None = None
    payload_preview: str | None = None
    #: the payload decoded from ``payload_json`` (what the returned Event carries)
    payload_value: Any = None
    #: the background worker still owes this event its exact token count, its payload
    #: preview and its keyword text (see :data:`DIGEST_INLINE_CHARS`)
    deferred: bool = False
    #: when the event stops being visible (:func:`expiry_us`); None: never
    expires_us: int | None = None

    def record(
        self,
        event_id: str,
        session_id: str,
        agent_id: str,
        pool: str | None,
        status: str | None,
        *,
        recall_count: int = 0,
        indexed: bool = True,
    ) -> EventRecord:
        """The row a store inserts for this event in ``session_id`` (of ``agent_id``, in
        ``pool``)."""
        return EventRecord(
            id=event_id,
            session_id=session_id,
            agent_id=agent_id,
            kind=self.kind,
            content=self.content,
            payload_json=self.payload_json,
            importance=self.importance,
            tags_json=canonical_json.dumps(list(self.tags)),
            metadata_json=canonical_json.dumps(self.metadata),
            status=status,
            created_us=self.created_us,
            token_count=self.token_count,
            recall_count=recall_count,
            partition=partition_of(agent_id, pool),
            payload_chars=self.payload_chars,
            payload_preview=self.payload_preview,
            indexed=indexed,
            deferred=self.deferred,
            expires_us=self.expires_us,
        )


# What to say when a text argument is empty: each message names the argument it is about.
_EMPTY_HINTS = {
    "content": "give the text to store (e.g. what the agent did)",
    "query": "give the words or question to search for",
    "goal": "give the session's goal (what the agent is trying to do)",
    "agent_id": "give the agent's name (e.g. 'researcher')",
}


def text(value: Any, what: str) -> str:
    """A non-empty string that UTF-8 can store.

    >>> text("ran the tests", "content")
    'ran the tests'
    """
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string, got {type(value).__name__} {shown(value)}.")
    canonical_json.check_text(value, what)
    if not value.strip():
        hint = _EMPTY_HINTS.get(what, f"give a non-empty {what}")
        raise InvalidInput(f"{what} is empty; {hint}.")
    return value


def storable_key(value: object) -> TypeGuard[str]:
    """Whether ``value`` can name a stored row (an id, a session key): a string that a store
    can keep. Anything else names nothing: a lookup by it finds nothing, without asking the
    store (which would refuse a lone surrogate, or an integer past 64 bits, with an error of
    its driver).

    >>> storable_key("01J9Z"), storable_key(5), storable_key("a\\ud800")
    (True, False, False)
    """
    if not isinstance(value, str):
        return False
    if value.isascii():
        return "\x00" not in value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in value


def path_of(value: Any, what: str) -> Path:
    """A file or folder the caller named: a ``str`` or ``os.PathLike`` of one (``~``
    expanded); not bytes, not a name holding a NUL, which no file system takes.

    >>> path_of("notes/runbook.md", "source")
    PosixPath('notes/runbook.md')
    """
    name = os.fspath(value) if isinstance(value, str | os.PathLike) else None
    if not isinstance(name, str):
        raise InvalidInput(f"{what} must be a path (a str or pathlib.Path), got {shown(value)}.")
    if "\x00" in name:
        raise InvalidInput(f"{what} {shown(name)} holds a NUL character; no file name can.")
    return Path(name).expanduser()


def identifier(value: Any, what: str) -> str:
    """A name (agent, user, pool, tag): at most 200 characters, no outer spaces.

    >>> identifier("researcher", "agent_id")
    'researcher'
    """
    name = text(value, what)
    if len(name) > 200 or name != name.strip():
        raise InvalidInput(f"{what} {name!r:.60} must be ≤ 200 characters with no outer spaces.")
    return name


def prepare_event(
    kind: str,
    content: str,
    payload: Any,
    importance: float | None,
    tags: Sequence[str] | None,
    metadata: Mapping[str, Any] | None,
    created_at: datetime | str | None,
    count: Callable[[str], int] | None = None,
    *,
    redaction: RecordRedaction | None = None,
) -> PreparedEvent:
    """Validate one event's fields and return their stored form (:class:`PreparedEvent`);
    ``count`` (a token counter) gives its token count, content and payload JSON together.
    ``redaction`` replaces what the manager's redactor finds in the content, payload, tags
    and metadata values (``redaction.py``), before anything is counted or stored.

    >>> e = prepare_event("fact", "x", {"b": 1}, None, ["t"], None, "2026-01-01T00:00:00Z")
    >>> e.kind, e.payload_json, e.importance, e.tags, e.created_us
    ('fact', '{"b":1}', 0.6, ('t',), 1767225600000000)
    """
    validate_kind(kind)
    content = text(content, "content")
    _check_size(len(content), "its content")
    if redaction is not None:
        content = redaction.text(content)
    serialized = None if payload is None else canonical_json.serialize(payload, "payload")
    if redaction is not None and serialized is not None:
        serialized = canonical_json.serialize(redaction.json(serialized.value), "payload")
    payload_json = None if serialized is None else serialized.text
    if payload_json is not None:
        _check_size(len(content) + len(payload_json), "its content and payload JSON")
    if importance is None:
        importance = DEFAULT_IMPORTANCE.get(kind, CUSTOM_KIND_IMPORTANCE)
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not 0 <= importance <= 1  # (False for NaN; math.isfinite overflows on 10**400)
    ):
        raise InvalidInput(f"importance must be a number from 0 to 1, got {shown(importance)}.")
    if isinstance(tags, str):
        raise InvalidInput(f"tags must be a list of strings, got the string {shown(tags)}.")
    if tags is not None and (isinstance(tags, Mapping) or not isinstance(tags, Iterable)):
        raise InvalidInput(f"tags must be a list of strings, got {shown(tags)}.")
    tag_tuple = tuple(identifier(tag, "tag") for tag in (tags or ()))
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
    meta = dict(metadata or {})
    meta_json = canonical_json.dumps(meta, "metadata")
    if redaction is not None:
        tag_tuple = tuple(redaction.text(tag) for tag in tag_tuple)
        meta = redaction.with_counts(redaction.json(canonical_json.loads(meta_json)))
    when = now_us() if created_at is None else to_us(created_at)
    size = len(content) + (0 if payload_json is None else len(payload_json))
    heavy = size > DIGEST_INLINE_CHARS
    tokens = 0
    if heavy:  # estimated now, counted by the worker; the preview is the worker's too
        if count is not None:
            tokens = estimate_tokens(content, count) + (
                0 if payload_json is None else estimate_tokens(payload_json, count)
            )
        chars, preview = (None if payload_json is None else len(payload_json)), None
    else:
        if count is not None:
            tokens = int(count(content) + (0 if payload_json is None else count(payload_json)))
        chars, preview = payload_digest(payload_json)
    deferred = heavy or needs_whole_text(content, meta.get("derived_content") is True)
    return PreparedEvent(
        kind, content, payload_json, float(importance), tag_tuple, meta, when, tokens,
        chars, preview, None if serialized is None else serialized.value, deferred,
    )  # fmt: skip


#: The longest time to live an event may have. Short-term memory is meant to go; a longer
#: ``ttl`` is almost certainly a unit mistake (milliseconds given as seconds).
MAX_TTL = timedelta(days=3653)

#: Kinds that never expire: a session needs its goal, and a to-do must not silently vanish.
_LASTING_KINDS = ("goal", "pending")


def expiry_us(
    kind: str,
    ttl: timedelta | float | None,
    expires_at: datetime | str | None,
    now: int | None = None,
) -> int | None:
    """When an event recorded ``now`` with this ``ttl`` (a timedelta or seconds) or
    ``expires_at`` stops being visible, in microseconds; None: never. A TTL counts from
    now, not from the event's ``created_at``.

    >>> expiry_us("message", timedelta(seconds=2), None, now=1_000_000)
    3000000
    >>> expiry_us("message", None, None) is None
    True
    """
    if ttl is None and expires_at is None:
        return None
    if ttl is not None and expires_at is not None:
        raise InvalidInput("Give ttl or expires_at, not both: ttl counts from now.")
    if kind in _LASTING_KINDS:
        raise InvalidInput(
            f"A {kind} event cannot expire: a session needs its goal, and an open to-do must "
            "not silently vanish. Leave out ttl/expires_at (cancel_pending when it is moot)."
        )
    now = now_us() if now is None else now
    limit = now + _micros(MAX_TTL)
    if ttl is not None:
        if isinstance(ttl, timedelta):
            micros = _micros(ttl)
        elif isinstance(ttl, int) and not isinstance(ttl, bool):
            micros = ttl * 1_000_000  # (exact: math.isfinite() overflows on 10**400)
        elif isinstance(ttl, float) and math.isfinite(ttl):
            micros = round(ttl * 1_000_000)
        else:
            raise InvalidInput(
                f"ttl must be a timedelta or a number of seconds, got {shown(ttl)}; e.g. "
                "ttl=timedelta(hours=1)."
            )
        if micros <= 0 or micros > _micros(MAX_TTL):
            raise InvalidInput(
                f"ttl must be more than zero and at most {MAX_TTL.days} days, got {shown(ttl)}."
            )
        return now + micros
    when = to_us(expires_at, "expires_at")  # type: ignore[arg-type]
    if when <= now:
        raise InvalidInput(
            f"expires_at {from_us(when).isoformat()} has already passed (now is "
            f"{from_us(now).isoformat()}); give a future time, or do not record the event."
        )
    if when > limit:
        raise InvalidInput(
            f"expires_at {from_us(when).isoformat()} is more than {MAX_TTL.days} days away; "
            "an event that should stay needs no expiry."
        )
    return when


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def estimate_tokens(text: str, count: Callable[[str], int]) -> int:
    """``count(text)``, estimated from three slices of a long ``text`` (see
    :data:`_SAMPLE_CHARS`); exact for a short one.

    >>> estimate_tokens("abc " * 10_000, lambda t: len(t) // 4)
    10000
    """
    if len(text) <= 3 * _SAMPLE_CHARS:
        return count(text)
    middle = (len(text) - _SAMPLE_CHARS) // 2
    slices = (text[:_SAMPLE_CHARS], text[middle : middle + _SAMPLE_CHARS], text[-_SAMPLE_CHARS:])
    counted = sum(count(part) for part in slices)
    return round(counted * len(text) / (3 * _SAMPLE_CHARS))


def _check_size(chars: int, what: str) -> None:
    """Refuse an event larger than :data:`MAX_EVENT_CHARS`, before anything is written.

    >>> _check_size(MAX_EVENT_CHARS + 1, "its content")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    memlane.errors.InvalidPayload: The event is too large: its content holds ...
    """
    if chars > MAX_EVENT_CHARS:
        raise InvalidPayload(
            f"The event is too large: {what} holds {chars:,} characters, more than the "
            f"{MAX_EVENT_CHARS:,} one event may hold. Keep the data in a file or object store "
            "and record its location with a summary (record_tool_output of the summary, "
            "metadata={'uri': ...})."
        )
