"""The data model: sessions, events and search hits.

Plain frozen dataclasses with no I/O, shared by every backend, the restore packer and the
CLI. Timestamps are timezone-aware UTC ``datetime`` objects; payloads and metadata are the
decoded form of canonical JSON.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .errors import InvalidInput, SessionManagerError, shown

__all__ = [
    "DEFAULT_IMPORTANCE",
    "IMPORTANT_FROM",
    "KINDS",
    "MESSAGE_ROLES",
    "POOL_ACCESS",
    "SESSION_STATUSES",
    "Event",
    "EventRecord",
    "Hit",
    "Hits",
    "Passage",
    "PoolGrant",
    "Session",
    "SessionRecord",
    "is_message_role",
    "validate_kind",
    "validate_kinds",
]

#: Importance at or above which restore() shows an event as "important" (the store keeps
#: these events in a partial index of their own, ``events_important``: its condition is this
#: number, written out in the migration that made it, so it cannot change on its own).
IMPORTANT_FROM = 0.7

#: Built-in event kinds and the importance each gets when the caller gives none.
#: Importance is 0..1; restore() treats events at or above IMPORTANT_FROM as "important".
DEFAULT_IMPORTANCE: Mapping[str, float] = {
    "goal": 1.0,
    "decision": 0.8,
    "error": 0.7,
    "fact": 0.6,
    "pending": 0.6,
    "summary": 0.6,
    "step": 0.5,
    "tool_output": 0.4,
    "message": 0.3,
    "knowledge": 0.5,  # a chunk of a document (SessionManager.ingest)
}

KINDS: frozenset[str] = frozenset(DEFAULT_IMPORTANCE)

#: Importance given to custom kinds that have no default of their own.
CUSTOM_KIND_IMPORTANCE = 0.5

SESSION_STATUSES: tuple[str, ...] = ("active", "completed", "failed", "abandoned")
#: The roles of ``message`` events: the union of OpenAI's and LlamaIndex's (LangChain's message
#: types map onto them: human -> user, ai -> assistant). Any other role is namespaced like a
#: custom kind ("autogen:critic"), so a typo ("usr") is an error rather than a new role.
MESSAGE_ROLES: tuple[str, ...] = (
    "user",
    "assistant",
    "system",
    "developer",
    "tool",
    "function",
    "chatbot",
    "model",
)

# Custom kinds are namespaced so that a typo of a built-in kind ("decison") is an error
# rather than silently a new kind: "x:anything" or "custom:anything".
_CUSTOM_KIND = re.compile(r"^[a-z][a-z0-9_]*:[A-Za-z0-9_.\-]{1,64}$")


def is_message_role(role: object) -> bool:
    """A built-in role, or a namespaced one (``"autogen:critic"``).

    >>> is_message_role("developer"), is_message_role("crew:critic"), is_message_role("usr")
    (True, True, False)
    """
    return isinstance(role, str) and (role in MESSAGE_ROLES or bool(_CUSTOM_KIND.match(role)))


def validate_kind(kind: str) -> str:
    """Return ``kind`` if it is a built-in kind or a namespaced custom kind.

    >>> validate_kind("decision")
    'decision'
    >>> validate_kind("custom:plan")
    'custom:plan'
    """
    if not isinstance(kind, str) or not (kind in KINDS or _CUSTOM_KIND.match(kind)):
        known = ", ".join(sorted(KINDS))
        raise InvalidInput(
            f"Unknown event kind {shown(kind)}. Use one of {known}, "
            "or a namespaced custom kind such as 'custom:plan'."
        )
    return kind


def validate_kinds(kinds: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """``kinds`` as a checked tuple; a single kind may be given as a plain string.

    >>> validate_kinds("fact"), validate_kinds(["fact", "decision"]), validate_kinds(None)
    (('fact',), ('fact', 'decision'), None)
    """
    if kinds is None:
        return None
    if isinstance(kinds, str):
        kinds = (kinds,)
    elif isinstance(kinds, Mapping) or not isinstance(kinds, Iterable):
        raise InvalidInput(
            f"kinds must be a kind or a list of kinds (e.g. ['fact', 'decision']), got "
            f"{shown(kinds)}."
        )
    checked = tuple(validate_kind(kind) for kind in kinds)
    return checked or None


@dataclass(frozen=True)
class Session:
    """One run of one agent towards one goal.

    >>> session = mgr.start_session(goal="Survey 2026 sparse attention methods")  # doctest: +SKIP
    >>> session.status  # doctest: +SKIP
    'active'
    """

    id: str
    agent_id: str
    goal: str
    status: str
    created_at: datetime
    updated_at: datetime
    user_id: str | None = None
    shared_pool: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: the caller's own name for the session (a framework's thread id), unique per agent
    key: str | None = None

    @property
    def is_active(self) -> bool:
        return self.status == "active"


@dataclass(frozen=True)
class Event:
    """One entry of a session's log.

    ``content`` is the text that is searched and rendered; ``payload`` holds structured
    detail (tool input and output, the result of a step, ...). ``status`` is the mutable
    part of an otherwise immutable event: ``open``/``done``/``cancelled`` for pending steps,
    ``unresolved``/``resolved`` for errors, ``None`` for everything else.

    >>> event = mgr.record_fact(session.id, "The rate limit is 60/min")  # doctest: +SKIP
    >>> event.kind, event.importance  # doctest: +SKIP
    ('fact', 0.6)
    """

    id: str
    session_id: str
    agent_id: str
    kind: str
    content: str
    created_at: datetime
    payload: Any = None
    importance: float = 0.5
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str | None = None
    #: tokens of content and payload under the recording manager's model; for an event over
    #: 32,768 characters an estimate until the background worker counts it
    token_count: int = 0
    recall_count: int = 0
    seq: int = 0  # storage order in this database; not stable across export/import
    #: False: kept in the log, never embedded nor found by search (``index=False``)
    indexed: bool = True
    #: characters of the stored payload JSON, when the store knows it (None: not recorded)
    payload_chars: int | None = None
    #: True when ``payload`` is the bounded preview of a large payload (restore's reads),
    #: not the payload itself; ``get_event`` and ``events`` always give the payload in full
    preview: bool = False
    #: when the event stops being visible (``record(ttl=...)``); None: it never expires
    expires_at: datetime | None = None

    @property
    def role(self) -> str | None:
        """The speaker of a ``message`` event (user / assistant / system / tool)."""
        role = self.metadata.get("role")
        return role if isinstance(role, str) else None


_EVENT_FIELDS = frozenset(Event.__dataclass_fields__)


def stored_event(fields: dict[str, Any]) -> Event:
    """The :class:`Event` of a stored row, every field given (the store's reads). A frozen
    dataclass's ``__init__`` sets each of its 18 fields through ``object.__setattr__``: 9 µs
    an event, 7 ms of the ~800 events a restore of a 10k-event session reads; a row already
    passed validation when it was recorded, so its fields are placed directly."""
    if fields.keys() != _EVENT_FIELDS:
        raise SessionManagerError(  # (a store's read out of step with Event: a bug here)
            f"stored_event needs exactly Event's fields, got {sorted(fields)}; please report."
        )
    event = object.__new__(Event)
    event.__dict__.update(fields)
    return event


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One session as a store inserts it (``start_session`` and import build it)."""

    id: str
    agent_id: str
    user_id: str | None
    goal: str
    status: str
    shared_pool: str | None
    metadata_json: str
    created_us: int
    updated_us: int
    key: str | None = None


@dataclass(frozen=True, slots=True)
class EventRecord:
    """One event as a store inserts it: the row ``record()`` and import both build
    (``_validate.PreparedEvent.record``) and every backend writes by name."""

    id: str
    session_id: str
    agent_id: str
    kind: str
    content: str
    payload_json: str | None
    importance: float
    tags_json: str
    metadata_json: str
    status: str | None
    created_us: int
    token_count: int
    recall_count: int
    partition: str  # the vector partition: agent:<id> or pool:<name>
    #: a large payload's size and bounded preview (None for small payloads)
    payload_chars: int | None = None
    payload_preview: str | None = None
    #: False: kept in the log, never embedded nor keyword-indexed (``record(index=False)``)
    indexed: bool = True
    #: True: a large event whose exact token count, payload preview and keyword text the
    #: background worker still owes (``_validate.DIGEST_INLINE_CHARS``)
    deferred: bool = False
    #: when the event stops being visible, in microseconds since the epoch (None: never)
    expires_us: int | None = None


#: What a grant on a pool allows: ``owner`` (everything, and granting), ``write`` (start
#: sessions in the pool, and read it), ``read`` (subscribe to it).
POOL_ACCESS: tuple[str, ...] = ("owner", "write", "read")


@dataclass(frozen=True)
class PoolGrant:
    """One agent's access to a shared pool, as the pool's owner (or the operator) granted it.

    ``granted_by`` is the agent that granted it, ``"operator"`` (``StoreAdmin`` / ``memlane pool``)
    or ``"migration"`` (pools that existed before grants did: docs/privacy.md).
    """

    pool: str
    agent_id: str
    access: str  # one of POOL_ACCESS
    granted_at: datetime
    granted_by: str


@dataclass(frozen=True)
class Passage:
    """A part of a long event: ``text`` is ``event.content[start:stop]``.

    An event longer than the embedder's window is indexed as passages (about 200 word
    pieces each, cut at paragraphs, code blocks, lines and sentences: ``text/passages.py``):
    a search scores it by its best passage and says which (:attr:`Hit.passage`).

    >>> Passage("disk full on db-7", 120, 137).span
    (120, 137)
    """

    text: str
    start: int
    stop: int

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.stop)


@dataclass(frozen=True)
class Hit:
    """One search result: the full event, its score (higher is better), and for a long event
    found by one of its passages, that passage (``None`` when the event was found whole); in
    a hybrid search, the passage of the half that placed it higher (the semantic one on a
    tie) — or, where one of the event's lines holds more of the query's words together than
    any line of that passage (a table's row, a log line), the passage holding that line.

    ``ranks`` says what made it come up: its place (from 1) in each ranking the search ran
    and found it in, ``"semantic"`` and ``"keyword"`` (a hybrid search's two halves; a
    one-mode search has one). A ranking that is missing did not find it among its best
    candidates. ``None`` when the hit was not made by a search.

    ``records``: for a JSON tool output (a payload, or a text that is JSON) of 1,000
    characters or more, the records the query's words point at, best first, at most three,
    each as its path and its JSON — ``'data.invoices[23]: {"id": 23, "status": "overdue"}'``
    (a record too big for one line is its members' lines). The event's content flattens the
    payload, so its passage no longer says which fields belong to one record. Empty for any
    other event, or when no record holds a word of the query.

    >>> from datetime import timezone
    >>> when = datetime(2026, 11, 27, tzinfo=timezone.utc)
    >>> hit = Hit(Event("01J", "s", "a", "fact", "uses Postgres", when), 0.21,
    ...           ranks={"semantic": 3, "keyword": 1})
    >>> hit.ranks["keyword"]
    1
    """

    event: Event
    score: float
    passage: Passage | None = None
    ranks: Mapping[str, int] | None = None
    records: tuple[str, ...] = ()


class Hits(list[Hit]):
    """What ``search()`` returns: the hits, best first (a list), and :attr:`waiting`.

    ``waiting`` counts the events of the searched scope that had no vector yet when the
    search ran: a search embeds the newest ones itself but never waits long for the rest
    (the background worker embeds them within seconds), so those were found by their words
    only. 0 means the semantic ranking saw everything.

    >>> hits = Hits([], waiting=3)
    >>> hits == [], hits.waiting
    (True, 3)
    """

    def __init__(self, hits: Iterable[Hit] = (), *, waiting: int = 0) -> None:
        super().__init__(hits)
        self.waiting = waiting
