"""Standing rules in hybrid search: a request for work ("Which library should I use to
generate PDF reports?") also ranks the rules the user set in the searched messages ("Please
always give version numbers when you recommend a library"), best matching first.

A rule applies to later work whatever words that work is asked in, so no ranking of the
request's words finds the message that set it: on long technical chats (issue 31), questions
that test an instruction or a preference found that message among the first ten hits 22%
and 31% of the time (`python bench/long_events.py --dataset tech`). Restore pins rules
whatever the query (``restore/gather.py``); search, which an agent calls before it acts,
gives them one more ranked list in its fusion, as it does the events inside a time the query
names:

- only for a **request for work** (:func:`is_task_request`): an imperative or a question
  asking how, which or what should be done, and not one about the conversation's past
  ("summarise what we discussed", "in what order did I …"), whose answer is events, not rules;
- only in a search of one session (``session_id=``): rules are a session's, as restore
  pins them, and finding them there is one keyword query over the session (over a whole
  agent of 100k events it cost a request ~3-4 ms);
- the rules are the sentences :mod:`memlane.text.instructions` reads as a standing
  instruction or a preference, in the user's messages among the searched events that hold
  an instruction's words (the same keyword query restore makes), each sentence once, where it
  was said last;
- they are ordered by the cosine of each sentence's embedding with the query's (a message's
  own vector mixes the rule with what else the message says), and the best
  :data:`RULES_RANKED` join the fusion.

>>> is_task_request("Which library should I use to generate PDF reports?")
True
>>> is_task_request("Can you summarise how the security work developed?")
False
>>> is_task_request("What's the current cache expiry?")
False
>>> is_task_request("How many workers do I run?")
False
>>> is_task_request("How did Melanie celebrate?")
False
>>> is_task_request("The totals are off by a cent, how do I fix it?")
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from ..events import Event
from ..text.instructions import standing

__all__ = ["RULES_RANKED", "is_task_request", "newest_first", "ranked_rules"]

#: rules that join a request's fusion at most: the ones matching it best
RULES_RANKED = 3

_REQUEST = re.compile(
    r"(?:^|[.?!,;:]\s+)\s*(?:please\s+)?(?:"
    r"(?:can|could|would|will)\s+(?:you|i|we)\b"
    r"|how\s+(?:do|does|can|should|would|could|might|shall)\s+(?:i|we|you)\b|how\s+to\b"
    r"|(?:write|show|give|make|build|create|help|add|fix|implement|set\s+up|suggest|recommend|"
    r"sketch|draft|generate|explain|walk\s+me)\b"
    r"|(?:which|what)\s+(?:\w+\s+){0,3}(?:should|would|could|do|can)\s+(?:i|we|you)\s+"
    r"(?:use|pick|choose|include|add|try|recommend|suggest|go\s+with|start|do)\b"
    r"|i\s+(?:need|want|would\s+like|'d\s+like)\s+(?:some\s+)?(?:help|you\s+to|advice)\b"
    r"|what(?:'s|\s+is|\s+are)\s+(?:a|an|the)\s+(?:good|best|quickest|simplest|right|neat|"
    r"cleanest|easiest)\b|what(?:'s|\s+is)\s+the\s+(?:fix|way)\b|what\s+(?:are\s+)?"
    r"(?:the\s+)?steps\b|where\s+(?:should|would|could)\b|should\s+(?:i|we)\b"
    r")",
    re.IGNORECASE,
)
# what makes a question one about the conversation's past, answered by events, not rules
_ABOUT_THE_PAST = re.compile(
    r"summari[sz]|summary\s+of|recap|overview|\border\b|sequence|\bdid\s+(?:i|we|you)\b"
    r"|\b(?:i|we|you)\s+(?:discussed|talked|worked|asked|said|mentioned|decided|raised)\b"
    r"|conversations?\b",
    re.IGNORECASE,
)

Vector = npt.NDArray[np.float32]


def is_task_request(query: str) -> bool:
    """Whether ``query`` asks for work to be done (module docstring), not for a memory."""
    return _REQUEST.search(query) is not None and _ABOUT_THE_PAST.search(query) is None


def ranked_rules(
    query: Vector,
    messages: Iterable[Event],
    embed: Callable[[Sequence[str]], Sequence[Vector]],
) -> list[int]:
    """The seqs of the ``messages`` (the user's, newest first) that state a rule, by the best
    cosine of their rule sentences with ``query`` (unit vectors; ``embed`` gives the
    sentences' in one call), at most :data:`RULES_RANKED`."""
    stated = standing(messages)
    sentences = list(dict.fromkeys(s for _, said in stated for s in said))
    vectors = dict(zip(sentences, embed(sentences), strict=True)) if sentences else {}
    scored: list[tuple[float, int]] = []
    for event, said in stated:
        best = max(float(np.dot(query, vectors[sentence])) for sentence in said)
        scored.append((best, event.seq))
    scored.sort(key=lambda pair: -pair[0])  # stable: the newer first on a tie
    return [seq for _, seq in scored[:RULES_RANKED]]


def newest_first(events: Sequence[Event]) -> list[Event]:
    """``events`` newest first (the order :func:`ranked_rules` reads them in)."""
    return sorted(events, key=lambda e: (e.created_at, e.seq), reverse=True)
