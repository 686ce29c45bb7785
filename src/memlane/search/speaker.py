"""Who said it: a query that asks what the user said ("the questions I asked", "when did I
bring up …") or what the agent said ("what did you recommend …") names the role whose
messages answer it.

Hybrid search then gives the fused candidates of that role one more ranked list, in fused
order (as it does the candidates inside a time the query names: ``search/when.py``), so that
among messages about the same thing, the ones the named speaker wrote come first. On long
technical chats an assistant's answer repeats a topic's words many times, where the user's
message that raised it names them once: asked "in what order did I bring up the security
topics?", the user's messages lost to the answers around them.

English only, first person for the user ("I", not "we": "what did we decide" names both),
second person for the agent; anything else names no one and leaves the ranking as it was.

A query may also name a speaker **by name**, in a transcript whose messages say who wrote
them (metadata ``speaker`` or ``name``: ``record(..., metadata={"speaker": "Caroline"})``):
"What did Caroline research?" lifts Caroline's messages among the candidates, at half the
weight (a name is a weaker cue than "I asked": the answer is sometimes the other side's
reply). Only when exactly one speaker of the candidates is named: "What did Caroline and
Melanie do?" names two and changes nothing. On LoCoMo's development conversations
(``bench/locomo.py``) this moved any@1 / @5 / @10 0.411 / 0.747 / 0.853 → 0.442 / 0.780 /
0.855 (weight 1: 0.442 / 0.786 / 0.849).

>>> speaker_named("In what order did I bring up the security topics?")
'user'
>>> speaker_named("What did you recommend for the cache?")
'assistant'
>>> speaker_named("What did we decide about the cache?") is None
True
>>> speaker_named("Can you show me how to cache it?") is None
True
"""

from __future__ import annotations

import re

__all__ = ["SPEAKER_KEYS", "mentions_a_name", "named_in", "speaker_named", "speaker_of"]

#: the metadata keys that say who wrote a message, by name (a transcript's speaker)
SPEAKER_KEYS = ("speaker", "name")

# what someone said, as "I ..." / "you ..." tell it (past tense: "can you show me" is a request)
_PAST = (
    r"(?:asked|brought\s+up|raised|mentioned|said|told|shared|wrote|described|explained|"
    r"talked\s+about|requested|suggested|recommended|proposed|advised|pointed\s+out|gave\s+me|"
    r"showed\s+me|noted|stated|expressed|listed)"
)
# ... and as "did I ..." / "did you ..." ask it
_BASE = (
    r"(?:ask|bring\s+up|raise|mention|say|tell|share|write|describe|explain|talk\s+about|"
    r"request|suggest|recommend|propose|advise|point\s+out|give\s+me|show\s+me|note|state|"
    r"express|list)"
)
_USER = re.compile(
    rf"\b(?:i\s+(?:have\s+|had\s+|first\s+|ever\s+|later\s+)?{_PAST}"
    rf"|did\s+i\s+(?:first\s+|ever\s+)?{_BASE}"
    r"|my\s+(?:questions|requests|messages|instructions))\b",
    re.IGNORECASE,
)
_AGENT = re.compile(
    rf"\b(?:you\s+(?:have\s+|had\s+|first\s+)?{_PAST}|did\s+you\s+(?:first\s+|ever\s+)?{_BASE}"
    r"|your\s+(?:answers|suggestions|recommendations|advice))\b",
    re.IGNORECASE,
)


def speaker_named(query: str) -> str | None:
    """``"user"`` or ``"assistant"`` when the query asks what that role said, else None
    (both, or neither)."""
    user = _USER.search(query) is not None
    agent = _AGENT.search(query) is not None
    if user == agent:
        return None
    return "user" if user else "assistant"


_WORDS = re.compile(r"[^\W\d_]+")  # ("Caroline's" holds "caroline")
# a name in a query: a capitalised word after the first (the first is capitalised anyway),
# not "I" ("did I", "I'm")
_NAME_AFTER_START = re.compile(r"\S\s+(?!I\b)[A-Z]")


def mentions_a_name(query: str) -> bool:
    """Whether ``query`` holds a capitalised word past its first (cheap: decides whether
    the candidates' speakers are read at all)."""
    return _NAME_AFTER_START.search(query) is not None


def speaker_of(metadata: object) -> str | None:
    """Who wrote a message, by name (:data:`SPEAKER_KEYS`), or None."""
    if not isinstance(metadata, dict):
        return None
    for key in SPEAKER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def named_in(query: str, speaker: str) -> bool:
    """Whether ``query`` names ``speaker``: their whole name or its first word, as words,
    any case ("Caroline" names "Caroline Smith").

    >>> named_in("What did Caroline research?", "Caroline")
    True
    >>> named_in("What did Caroline research?", "Caroline Smith")
    True
    >>> named_in("What did Carol research?", "Caroline")
    False
    >>> named_in("What is Caroline's job?", "Caroline")
    True
    """
    words = [w.casefold() for w in _WORDS.findall(query)]
    name = [w.casefold() for w in _WORDS.findall(speaker)]
    if not name:
        return False
    n = len(name)
    whole = any(words[i : i + n] == name for i in range(len(words) - n + 1))
    return whole or name[0] in words
