"""What an extractor is given and what it answers, and the strict check of an answer.

An extractor reads an :class:`ExtractionBatch` (a window of a session's messages, with the
user's current facts) and answers an :class:`Extraction`: facts and preferences about that
user, and entities and tags of the messages. Any callable ``batch -> Extraction`` is one; it
may also answer a dict of the same shape (:func:`extraction_of` reads and checks it), which
is what an LLM's JSON becomes. An answer is taken whole or not at all: one wrong field
rejects the batch (:class:`Rejected`), and nothing of it is written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from ..errors import ExtractionFailed
from ..memory import FACT_KINDS, Fact

__all__ = [
    "MARK",
    "Entity",
    "ExtractedFact",
    "Extraction",
    "ExtractionBatch",
    "Extractor",
    "Rejected",
    "Turn",
    "extraction_of",
    "extractor_identity",
]

#: the message metadata key the stage writes: ``{"by", "version", "at", "entities", "tags"}``
#: (``where={"memlane_extracted.tags.email": True}`` finds the messages naming an e-mail)
MARK = "memlane_extracted"
#: a key an extractor may give a fact: lower case, digits and ``_`` (what a program's keys
#: look like: "city", "diet", "favourite_color")
KEY_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
#: a tag or entity type: usable in a ``where`` filter as a key (``memlane_extracted.tags.x``)
TAG_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,39}$")
#: at most this many characters of a fact, an entity's text
MAX_FACT_CHARS = 1_000
MAX_ENTITY_CHARS = 300
#: at most this many facts in one answer, entities and tags for one message
MAX_FACTS = 64
MAX_PER_TURN = 64


class Rejected(ExtractionFailed):
    """An extractor's answer that cannot be written: why, in a sentence (the batch is
    retried later; nothing of it is written)."""


@dataclass(frozen=True)
class Turn:
    """One message as an extractor sees it."""

    id: str
    role: str | None
    content: str
    created_at: datetime
    seq: int


@dataclass(frozen=True)
class ExtractionBatch:
    """A window of one session's new messages, oldest first, and what the agent knows about
    the session's user now (``facts``: current facts, keyed ones first). ``user_id`` is None
    for a session without a user that opted in (``metadata={"memlane_extract": True}``): its
    entities and tags are kept, facts are not (no one to hold them)."""

    user_id: str | None
    session_id: str
    turns: tuple[Turn, ...]
    facts: tuple[Fact, ...] = ()


@dataclass(frozen=True)
class ExtractedFact:
    """A fact or preference about the batch's user. ``key``: what it is the value of
    ("city"); a keyed fact supersedes the key's current value (never one a program wrote).
    ``sources``: the ids of the turns it comes from (default: the batch's user turns; the
    newest one's time is the fact's ``valid_from``). ``user_id``, when given, must be the
    batch's user."""

    text: str
    key: str | None = None
    kind: Literal["fact", "preference"] = "fact"
    sources: tuple[str, ...] = ()
    user_id: str | None = None


@dataclass(frozen=True)
class Entity:
    """Something a message names: ``type`` ("date", "email", "url", "money", "quantity",
    "path", "code", "name", or an extractor's own), the ``text`` as written and, where it has
    one, a normalised ``value`` (an ISO date, a number with its unit)."""

    type: str
    text: str
    value: str | None = None


@dataclass(frozen=True)
class Extraction:
    """An extractor's answer for a batch: ``facts``, and by turn id the ``entities`` and
    ``tags`` to note on those messages; ``tokens``: what it cost (an LLM's usage)."""

    facts: tuple[ExtractedFact, ...] = ()
    entities: Mapping[str, tuple[Entity, ...]] = field(default_factory=dict)
    tags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tokens: int = 0


@runtime_checkable
class Extractor(Protocol):
    """What ``SessionManager(extractor=...)`` takes besides ``"rules"``: a callable
    ``batch -> Extraction`` (or a dict of its shape). Optional attributes: ``name`` and
    ``version`` (marked on everything it writes; default: the callable's name and "0"),
    ``window`` (turns per batch, default 6), ``quiet_seconds`` (a window not full is read
    once its session was quiet this long, default 30), ``timeout`` (seconds before a call
    counts as hung, default 60)."""

    def __call__(self, batch: ExtractionBatch) -> Extraction | Mapping[str, Any]: ...


def extractor_identity(extractor: Callable[..., Any]) -> tuple[str, str]:
    """``(name, version)`` an extractor's writes are marked with."""
    name = getattr(extractor, "name", None) or getattr(extractor, "__name__", None)
    name = name if isinstance(name, str) and name else type(extractor).__name__
    version = getattr(extractor, "version", None)
    return name[:100], str(version)[:40] if version is not None else "0"


# -- checking an answer ----------------------------------------------------------------------


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Rejected(f"{what} must be a non-empty string, got {value!r:.60}")
    if len(value) > limit:
        raise Rejected(f"{what} is longer than {limit} characters")
    return value.strip()


def _known(item: Mapping[str, Any], allowed: set[str], what: str) -> None:
    unknown = sorted(str(key) for key in item if key not in allowed)
    if unknown:
        raise Rejected(f"{what} has unknown fields {unknown}; allowed: {sorted(allowed)}")


def _fact(item: Any, batch: ExtractionBatch, ids: set[str]) -> ExtractedFact:
    if isinstance(item, ExtractedFact):
        item = {
            "text": item.text,
            "key": item.key,
            "kind": item.kind,
            "sources": list(item.sources),
            "user_id": item.user_id,
        }
    if not isinstance(item, Mapping):
        raise Rejected(f"a fact must be an object, got {type(item).__name__}")
    _known(item, {"text", "key", "kind", "sources", "user_id"}, "a fact")
    text = _text(item.get("text"), "a fact's text", MAX_FACT_CHARS)
    user = item.get("user_id")
    if user is not None and user != batch.user_id:
        raise Rejected(
            f"a fact names user {user!r:.60}, but the batch is about user {batch.user_id!r}"
        )
    key = item.get("key")
    if key is not None and (not isinstance(key, str) or not KEY_PATTERN.match(key)):
        raise Rejected(f"a fact's key must match {KEY_PATTERN.pattern}, got {key!r:.60}")
    kind = item.get("kind", "fact")
    if kind not in FACT_KINDS:
        raise Rejected(f"a fact's kind must be one of {', '.join(FACT_KINDS)}, got {kind!r:.60}")
    sources = item.get("sources") or []
    if isinstance(sources, str) or not isinstance(sources, Sequence):
        raise Rejected(f"a fact's sources must be a list of turn ids, got {sources!r:.60}")
    strange = [s for s in sources if s not in ids]
    if strange:
        raise Rejected(f"a fact names turns {strange!r:.80} that are not in the batch")
    return ExtractedFact(text, key, kind, tuple(dict.fromkeys(sources)), batch.user_id)


def _entity(item: Any) -> Entity:
    if isinstance(item, Entity):
        item = {"type": item.type, "text": item.text, "value": item.value}
    if not isinstance(item, Mapping):
        raise Rejected(f"an entity must be an object, got {type(item).__name__}")
    _known(item, {"type", "text", "value"}, "an entity")
    kind = item.get("type")
    if not isinstance(kind, str) or not TAG_PATTERN.match(kind):
        raise Rejected(f"an entity's type must match {TAG_PATTERN.pattern}, got {kind!r:.60}")
    value = item.get("value")
    if value is not None:
        value = _text(value, "an entity's value", MAX_ENTITY_CHARS)
    return Entity(kind, _text(item.get("text"), "an entity's text", MAX_ENTITY_CHARS), value)


def _by_turn(value: Any, ids: set[str], what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Rejected(f"{what} must be an object keyed by turn id, got {type(value).__name__}")
    strange = [key for key in value if key not in ids]
    if strange:
        raise Rejected(f"{what} names turns {strange!r:.80} that are not in the batch")
    for key, items in value.items():
        if isinstance(items, str) or not isinstance(items, Sequence):
            raise Rejected(f"{what} of turn {key!r} must be a list")
        if len(items) > MAX_PER_TURN:
            raise Rejected(f"{what} of turn {key!r} has more than {MAX_PER_TURN} items")
    return value


def extraction_of(answer: Any, batch: ExtractionBatch) -> Extraction:
    """An extractor's answer, checked against the batch: an :class:`Extraction`, or a dict
    ``{"facts": [...], "entities": {turn_id: [...]}, "tags": {turn_id: [...]}}`` (and
    ``tokens``). Unknown fields, wrong types, turns not in the batch, facts about another
    user or of another kind raise :class:`Rejected`.

    >>> from datetime import datetime, timezone
    >>> turn = Turn("m1", "user", "I live in Porto", datetime.now(timezone.utc), 1)
    >>> batch = ExtractionBatch("u1", "s1", (turn,))
    >>> extraction_of({"facts": [{"text": "Lives in Porto", "key": "city"}]}, batch).facts[0].key
    'city'
    >>> extraction_of({"facts": [{"text": "x", "action": "delete"}]}, batch)
    Traceback (most recent call last):
    ...
    memlane.extraction.types.Rejected: a fact has unknown fields ['action']; allowed: ...
    """
    if isinstance(answer, Extraction):
        answer = {
            "facts": list(answer.facts),
            "entities": dict(answer.entities),
            "tags": dict(answer.tags),
            "tokens": answer.tokens,
        }
    if not isinstance(answer, Mapping):
        raise Rejected(f"expected an Extraction or a dict, got {type(answer).__name__}")
    _known(answer, {"facts", "entities", "tags", "tokens"}, "the answer")
    ids = {turn.id for turn in batch.turns}
    facts = answer.get("facts") or []
    if isinstance(facts, str) or not isinstance(facts, Sequence):
        raise Rejected(f"facts must be a list, got {type(facts).__name__}")
    if len(facts) > MAX_FACTS:
        raise Rejected(f"more than {MAX_FACTS} facts in one answer")
    checked = tuple(_fact(item, batch, ids) for item in facts)
    entities = {
        turn: tuple(dict.fromkeys(_entity(item) for item in items))
        for turn, items in _by_turn(answer.get("entities"), ids, "entities").items()
    }
    tags: dict[str, tuple[str, ...]] = {}
    for turn, items in _by_turn(answer.get("tags"), ids, "tags").items():
        for tag in items:
            if not isinstance(tag, str) or not TAG_PATTERN.match(tag):
                raise Rejected(f"a tag must match {TAG_PATTERN.pattern}, got {tag!r:.60}")
        tags[turn] = tuple(dict.fromkeys(items))
    tokens = answer.get("tokens", 0)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise Rejected(f"tokens must be a count, got {tokens!r:.40}")
    return Extraction(
        checked,
        {turn: found for turn, found in entities.items() if found},
        {turn: found for turn, found in tags.items() if found},
        tokens,
    )
