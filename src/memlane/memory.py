"""What an agent knows about the people it works for: the types of long-term user memory.

:meth:`SessionManager.remember <memlane.SessionManager.remember>` stores a
:class:`Fact` about a user; ``facts``, ``fact_history`` and ``retract_fact`` read and correct
them. A fact is an event of kind ``fact`` in the user's memory session (one per agent, user
and pool), so it is searchable, exported, imported and migrated like every other event; what
makes it a user fact lives in its metadata (the ``fact_*`` and ``valid_*`` names below, which
a caller's metadata cannot use).

The rules, deterministic and model-free:

- a fact with a ``key`` ("city", "diet") **supersedes** the current value of that key: the
  old fact stays, marked ``superseded``, valid until the new one's ``valid_from``; never
  deleted, never overwritten;
- a fact identical to a current one (after NFKC, case folding and collapsing whitespace) is
  ``unchanged``: it counts one more sighting (``seen``);
- anything else is ``added``; near-duplicates found by meaning are returned as ``similar``
  and left alone, unless a ``fact_resolver`` says otherwise (it may add, supersede or skip,
  never delete);
- a retracted fact (``retract_fact``) was wrong: kept for audit, it is never current and
  never true ``as_of`` any time, and it does not bring back the value it superseded.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from .core.clock import from_us
from .events import Event

__all__ = [
    "DOC_USER",
    "FACT_KINDS",
    "KNOWLEDGE_SESSION",
    "MEMORY_SESSION",
    "Fact",
    "FactResolver",
    "RememberResult",
    "Resolution",
    "normalized_fact",
]

#: what ``remember(kind=...)`` accepts
FACT_KINDS = ("fact", "preference")
#: the ``memlane`` metadata value that marks a session as a user's memory
MEMORY_SESSION = "user-memory"
#: the metadata key of a knowledge document's chunks naming the user it came from
#: (``ingest(user_id=)``): erasing the user deletes them
DOC_USER = "doc_user"
#: ... and the one that marks an agent's knowledge documents (``SessionManager.ingest``)
KNOWLEDGE_SESSION = "knowledge"

FactStatus = Literal["current", "superseded", "retracted"]

# The metadata a user fact keeps beside the caller's (names a caller's metadata cannot use).
USER = "fact_user"
KEY = "fact_key"
KIND = "fact_kind"
SOURCE = "fact_source"
NORMALIZED = "fact_normalized"  # a digest of the normalised text: what "identical" compares
SEEN = "fact_seen"
VALID_FROM = "valid_from"  # microseconds since the epoch, UTC
VALID_UNTIL = "valid_until"
SUPERSEDED_BY = "superseded_by"
RETRACTED_AT = "retracted_at"
RETRACTED_REASON = "retracted_reason"
#: the metadata of a fact an extractor drew from a conversation (``SessionManager(extractor=)``):
#: its name, its version and the message ids it came from; a fact without ``extracted_by`` was
#: written by a program (``remember``), which an extracted fact never overrides
EXTRACTED_BY = "extracted_by"
EXTRACTOR_VERSION = "extractor_version"
EXTRACTED_FROM = "extracted_from"
#: the store ``meta`` key prefix of a session's extraction watermark (the ``seq`` of the last
#: message extracted): :func:`watermark_key`; deleting the session deletes it (store/_sql.py)
WATERMARK = "extraction_seq:"


def watermark_key(agent_id: str, session_id: str) -> str:
    """The ``meta`` key of the extraction watermark of ``agent_id``'s session ``session_id``.

    >>> watermark_key("assistant", "01J9")
    'extraction_seq:assistant:01J9'
    """
    return f"{WATERMARK}{agent_id}:{session_id}"


RESERVED = frozenset(
    {
        USER,
        KEY,
        KIND,
        SOURCE,
        NORMALIZED,
        SEEN,
        VALID_FROM,
        VALID_UNTIL,
        SUPERSEDED_BY,
        RETRACTED_AT,
        RETRACTED_REASON,
    }
)

_SPACES = re.compile(r"\s+")


def normalized_fact(text: str) -> str:
    """The form two facts are compared in: NFKC, case-folded, whitespace collapsed.

    >>> normalized_fact("  Lives in   ZÜRICH ")
    'lives in zürich'
    >>> normalized_fact("ﬁne") == normalized_fact("FINE")
    True
    """
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def fact_label(kind: str, metadata: Mapping[str, Any]) -> str | None:
    """How restore labels a user fact (None: not one): its kind, key and since when.

    >>> fact_label("fact", {USER: "u1", KIND: "preference", KEY: "diet", VALID_FROM: 0})
    'preference (diet, since 1970-01-01)'
    """
    if kind != "fact" or USER not in metadata or VALID_FROM not in metadata:
        return None
    since = from_us(int(metadata[VALID_FROM])).strftime("%Y-%m-%d")
    key = metadata.get(KEY)
    return f"{metadata.get(KIND, 'fact')} ({f'{key}, ' if key else ''}since {since})"


def fact_digest(text: str) -> str:
    """A short digest of :func:`normalized_fact` (what the log keeps to compare)."""
    return hashlib.sha256(normalized_fact(text).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Fact:
    """One thing an agent knows about a user, with its history.

    ``valid_from`` / ``valid_until``: when it is (or was) true — ``valid_until`` is set when a
    newer value of its key supersedes it. ``recorded_at``: when the agent learnt it.
    ``seen``: how many times it was remembered (identical restatements count).
    """

    id: str
    user_id: str
    text: str
    kind: str
    key: str | None
    status: FactStatus
    valid_from: datetime
    valid_until: datetime | None
    recorded_at: datetime
    importance: float
    seen: int = 1
    source: str | None = None
    superseded_by: str | None = None
    retracted_reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    session_id: str = ""
    agent_id: str = ""

    @classmethod
    def from_event(cls, event: Event) -> Fact:
        """The fact an event of a user's memory session holds."""
        meta = event.metadata
        until = meta.get(VALID_UNTIL)
        status = event.status if event.status in ("superseded", "retracted") else "current"
        return cls(
            id=event.id,
            user_id=str(meta[USER]),
            text=event.content,
            kind=str(meta.get(KIND, "fact")),
            key=meta.get(KEY),
            status=status,  # type: ignore[arg-type]
            valid_from=from_us(int(meta[VALID_FROM])),
            valid_until=None if until is None else from_us(int(until)),
            recorded_at=event.created_at,
            importance=event.importance,
            seen=int(meta.get(SEEN, 1)),
            source=meta.get(SOURCE),
            superseded_by=meta.get(SUPERSEDED_BY),
            retracted_reason=meta.get(RETRACTED_REASON),
            metadata={k: v for k, v in meta.items() if k not in RESERVED},
            session_id=event.session_id,
            agent_id=event.agent_id,
        )

    def true_at(self, when_us: int) -> bool:
        """Whether the fact held at ``when_us`` (microseconds, UTC): not retracted, and
        ``valid_from <= when < valid_until``."""
        if self.status == "retracted":
            return False
        start = int(self.valid_from.timestamp() * 1_000_000)
        end = None if self.valid_until is None else int(self.valid_until.timestamp() * 1e6)
        return start <= when_us and (end is None or when_us < end)


@dataclass(frozen=True)
class Resolution:
    """A ``fact_resolver``'s answer: ``action`` is ``"add"``, ``"supersede"`` (the facts of
    ``ids``, which must be among the candidates it was shown) or ``"skip"`` (store nothing)."""

    action: Literal["add", "supersede", "skip"]
    ids: tuple[str, ...] = ()


#: ``(text, candidates) -> Resolution`` (or a dict with ``action`` and ``ids``): decides what
#: a new fact does to its near-duplicates, e.g. by asking an LLM. It can never delete.
FactResolver = Any


@dataclass(frozen=True)
class RememberResult:
    """What :meth:`~memlane.SessionManager.remember` did.

    ``status``: ``added``, ``superseded`` (the new fact replaced ``superseded``),
    ``unchanged`` (an identical fact is current: ``fact`` is it, seen once more) or
    ``skipped`` (the resolver chose to store nothing). ``similar``: current facts close in
    meaning, for the caller to judge (never acted on without a resolver). ``note``: why, when
    something was not as asked (a malformed resolver answer, say).
    """

    status: Literal["added", "superseded", "unchanged", "skipped"]
    fact: Fact | None
    superseded: list[Fact] = field(default_factory=list)
    similar: list[Fact] = field(default_factory=list)
    note: str | None = None


def resolution_of(answer: Any, candidates: Mapping[str, Fact]) -> tuple[Resolution, str | None]:
    """A resolver's answer, validated: anything malformed is an ``add``, with a note saying
    why; ids that are not among ``candidates`` make it malformed too.

    >>> resolution_of({"action": "skip"}, {})
    (Resolution(action='skip', ids=()), None)
    >>> resolution_of({"action": "delete", "ids": ["x"]}, {})[1]
    "the fact resolver's answer was not used (unknown action 'delete'); the fact was added"
    """

    def malformed(why: str) -> tuple[Resolution, str]:
        return Resolution(
            "add"
        ), f"the fact resolver's answer was not used ({why}); the fact was added"

    action: Any
    ids: Any
    if isinstance(answer, Resolution):
        action, ids = answer.action, answer.ids
    elif isinstance(answer, Mapping):
        action, ids = answer.get("action"), answer.get("ids", ())
    else:
        return malformed(f"expected a Resolution or a dict, got {type(answer).__name__}")
    if action not in ("add", "supersede", "skip"):
        return malformed(f"unknown action {action!r}")
    if isinstance(ids, str) or not isinstance(ids, list | tuple):
        return malformed(f"ids must be a list of fact ids, got {ids!r:.60}")
    unknown = [i for i in ids if i not in candidates]
    if unknown:
        return malformed(f"ids {unknown!r:.80} are not among the candidates it was shown")
    if action == "supersede" and not ids:
        return malformed("supersede names no fact")
    return Resolution(action, tuple(ids)), None
