"""What the user asked the agent to keep doing: standing instructions and preferences stated
in the session's messages, which restore pins whatever the query.

"From now on, always add type hints" is what an agent must obey three hundred messages
later, when the user asks about something else entirely: no search for that later question
finds it (on long technical chats, questions that test an instruction or a preference found
their evidence 33% and 46% of the time by search; issue 31). Restore therefore reads the
user's messages of the session that hold an instruction's words (by the keyword index:
:data:`INSTRUCTION_WORDS`) and keeps the sentences that state a standing instruction or a
preference, by a small set of first-person patterns (no model, nothing recorded):

- **instructions**: a command opening a clause with ``always`` / ``never`` / ``don't ever``
  and a verb an agent acts on (``Always use …``, ``…, never suggest …``), ``you should /
  must always …``, a sentence opening with ``from now on`` / ``going forward`` / ``in
  future`` / ``whenever you …,`` / ``when you`` *say or make something* ``…,`` followed by
  a command (``when you get a chance, check …`` is a one-off request), ``make sure to …`` /
  ``remember to …`` opening a clause, ``please don't …``, ``I want you to …``, ``keep your
  answers / code examples …`` (what the agent writes: "keep the old config" is no rule);
- **preferences**: ``I prefer …``, ``I'd rather …``, ``my preference is …``. Likes and
  loves ("I love hiking") are not pinned: in conversations they are chat, not rules (on
  LoCoMo's dialogues they were 4% of a speaker's turns, and pinning them cost restore up to
  1.5 points of evidence); they are facts about the user, for ``remember()``.

A question ("should I always use …?") is no instruction, nor a sentence that reports what
someone else said. The newest statement of each is shown first; restore/plan.py gives them
a small share of the budget (``BudgetShares.instructions``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable

from ..events import Event

__all__ = [
    "INSTRUCTION_CANDIDATES",
    "INSTRUCTION_WORDS",
    "USER_MESSAGES",
    "sentences",
    "standing",
    "statements",
]

#: The words every instruction or preference holds one of (besides the commands' verbs):
#: restore asks the keyword index for the session's messages holding them, best first
INSTRUCTION_WORDS = (
    "always never ever prefer rather preference now forward future whenever sure remember "
    "want please"
)
#: The messages it reads so (each then matched against the patterns): past these, an
#: instruction is found only by search like any event. (40 until the tech chats, whose
#: users' asides — "I want to be sure", "here is what I have now" — took a rule's place.)
INSTRUCTION_CANDIDATES = 60
#: The metadata filter of that query: the user's messages (an assistant's "make sure" and
#: "prefer" would take the candidates' places)
USER_MESSAGES = {"role": "user"}
_MAX_SENTENCE = 400  # characters of one sentence kept (a pasted paragraph is not a rule)
_CACHED = 8_192  # events whose statements are kept (events never change)

_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
#: what an instruction tells the agent to do (a command's verb): "never give up" and "always
#: here to help" are no rules for an agent
_VERB = (
    r"(?:use|add|include|write|put|show|answer|reply|respond|format|keep|mention|suggest|"
    r"recommend|explain|ask|assume|return|print|call|run|check|double-check|avoid|commit|"
    r"push|delete|remove|restart|deploy|touch|change|modify|edit|rename|cite|quote|round|"
    r"convert|send|prefix|wrap|log|test|document|comment|name|sort|list|confirm|tell|let|"
    r"give(?!\s+up\b)|answer|capitali[sz]e|indent|merge|rebase|hard-?code|store|save|expose|share|"
    r"lint|paste|copy|overwrite|skip|drop|reuse|cache|retry|label|tag|translate|start|end|"
    r"begin|stick|refer|link|spell|make|do|be|go|read|open|close|install|upgrade|pin|type|"
    r"say|state|mark|note|flag|warn|report|describe|summari[sz]e|highlight|number|apologi[sz]e)"
)
_CLAUSE = r"(?:^|[,;:]\s+(?:and\s+|but\s+|also\s+)?|\bplease\s+)"  # where a command begins
#: what the agent says or makes: "when you show shell commands, add a comment …" sets a
#: rule about it, where "when you get a chance, check the logs" asks for one thing once
_OUTPUT = (
    r"(?:show|suggest|write|give|recommend|answer|reply|respond|quote|explain|propose|share|"
    r"send|list|describe|mention|generate|return|format|summari[sz]e|report|paste|review|"
    r"talk\s+about)\b"
)
#: what the agent writes for the user: "keep your answers short", "please keep code examples
#: under thirty lines" sets a rule about it, where "keep the old config for now" does not
_WHAT_YOU_WRITE = (
    r"(?:(?:code\s+)?examples|answers|responses|replies|explanations|snippets|summaries|"
    r"commit\s+messages)\b"
)
_INSTRUCTION = re.compile(
    r"(?:"
    rf"{_CLAUSE}(?:always|never|don'?t\s+ever|do\s+not\s+ever)\s+{_VERB}\b"
    r"|\byou\s+(?:should|must|need\s+to|have\s+to)\s+(?:always|never)\b"
    r"|^(?:from\s+now\s+on|going\s+forward|in\s+(?:the\s+)?future|for\s+the\s+rest\s+of\s+"
    r"(?:this|our|the)\s+\w+)\s*,?\s*(?:please\s+)?"
    rf"(?:you\b|always\b|never\b|don'?t\b|do\s+not\b|{_VERB}\b)"
    rf"|^(?:(?:every\s+time|whenever)\s+you\b|when\s+you\s+{_OUTPUT})[^,]*,\s*(?:please\s+)?"
    rf"(?:always\b|never\b|don'?t\b|do\s+not\b|{_VERB}\b)"
    rf"|{_CLAUSE}(?:make\s+sure\s+(?:to|you|that)|remember\s+to)\b"
    rf"|{_CLAUSE}keep\s+(?:your\s+|all\s+|the\s+)?{_WHAT_YOU_WRITE}"
    r"|\bplease\s+(?:don'?t|do\s+not)\b"
    r"|\bi\s+(?:want|need|would\s+like|'d\s+like)\s+you\s+to\b"
    r")",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:"
    r"i\s+(?:really\s+|generally\s+|usually\s+|strongly\s+|much\s+)?prefer\b"
    r"|i'?d\s+rather\b|i\s+would\s+rather\b"
    r"|my\s+(?:preference|preferred\s+\w+)\s+is\b"
    r")",
    re.IGNORECASE,
)
# what makes a sentence a question or reported speech, not a rule for the agent
_NOT_A_RULE = re.compile(
    r"\?\s*$|^\s*(?:should|do|does|did|can|could|would|will|is|are|why|how|what)\b"
    rf"|^\s*when\b(?!\s+you\s+{_OUTPUT})"
    r"|\b(?:he|she|they|someone|my\s+\w+)\s+(?:said|says|told|asked)\b",
    re.IGNORECASE,
)
_STATEMENTS: OrderedDict[tuple[str, int], tuple[str, ...]] = OrderedDict()
_LOCK = threading.Lock()


def sentences(text: str) -> list[str]:
    """``text`` split into sentences as its rules are read (restore finds what it shows of
    a message by these, so every reader splits alike).

    >>> sentences("Thanks! Always add type hints.\\nWhat is a monad?")
    ['Thanks!', 'Always add type hints.', 'What is a monad?']
    """
    return _SENTENCES.split(text)


def statements(text: str) -> tuple[str, ...]:
    """The sentences of ``text`` that state a standing instruction or a preference.

    >>> statements("Thanks! From now on, always add type hints. What is a monad?")
    ('From now on, always add type hints.',)
    >>> statements("I prefer small libraries over frameworks.")
    ('I prefer small libraries over frameworks.',)
    >>> statements("Should I always use async here?")
    ()
    """
    found: list[str] = []
    for sentence in sentences(text):
        sentence = sentence.strip()
        if not sentence or len(sentence) > _MAX_SENTENCE or _NOT_A_RULE.search(sentence):
            continue
        if _INSTRUCTION.search(sentence) or _PREFERENCE.search(sentence):
            found.append(sentence)
    return tuple(found)


def standing(messages: Iterable[Event]) -> list[tuple[Event, tuple[str, ...]]]:
    """The user's ``messages`` (newest first) that state instructions or preferences, each
    with those sentences, newest first; a sentence said again later is kept once, where it
    was said last."""
    seen: set[str] = set()
    out: list[tuple[Event, tuple[str, ...]]] = []
    for event in messages:
        said = _cached(event)
        fresh = tuple(s for s in said if _key(s) not in seen)
        seen.update(_key(s) for s in fresh)
        if fresh:
            out.append((event, fresh))
    return out


def _cached(event: Event) -> tuple[str, ...]:
    if not event.id:
        return statements(event.content)
    key = (event.id, len(event.content))
    with _LOCK:
        found = _STATEMENTS.get(key)
        if found is not None:
            _STATEMENTS.move_to_end(key)
            return found
    made = statements(event.content)
    with _LOCK:
        _STATEMENTS[key] = made
        while len(_STATEMENTS) > _CACHED:
            _STATEMENTS.popitem(last=False)
    return made


def _key(sentence: str) -> str:
    return " ".join(sentence.lower().split())
