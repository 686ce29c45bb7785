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

__all__ = ["speaker_named"]

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
