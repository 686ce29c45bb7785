"""The offline extractor: entities by pattern, and a few first-person statements as facts.

:class:`RuleExtractor` needs no model and no network; it is ``extractor="rules"``. What it
reads is deliberately small and precise rather than greedy (docs/memory.md lists it, and
``docs/decisions/2026-11-27-extraction-off-the-write-path.md`` its measured precision):

- **entities** of every message: dates and times (the library's own reading of time phrases,
  ``search/when.py``, relative to the message's time), e-mail addresses, URLs, amounts of
  money, numbers with units, file paths, code identifiers and capitalised names;
- **facts** from the user's own messages only, one sentence at a time: "my name is X" and
  "call me X" (key ``name``), "I live in X" / "I moved to X" (``city``: a move supersedes),
  "I'm allergic to X" (unkeyed: a person has several allergies), "I'm vegan / vegetarian"
  (``diet``), "I prefer / like / love / enjoy X" and "I don't like / dislike / hate X"
  (unkeyed preferences), "my <thing> is X" (key ``<thing>``: "my favourite colour is
  green" → ``favourite_colour``).

A sentence that is a question, negated ("I don't live in Paris", "my car is not red"),
hypothetical ("if I moved to Rome", "I'd love to live in Rome"), reported ("she said she
lives in Oslo") or hedged ("I think my name is...") gives no fact; nor does a statement in
the past ("I lived in Paris"). What it misses: anything said another way ("Porto has been
home since May"), facts about other people, and every fact that needs understanding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

from ..search.when import TimeWindow, time_mentions
from .types import Entity, ExtractedFact, Extraction, ExtractionBatch, Turn

__all__ = ["RuleExtractor"]

# -- entities ----------------------------------------------------------------------------------

_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>\"'`]+", re.IGNORECASE)
_MONEY = re.compile(
    r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion|thousand)\b)?"
    r"|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP|CHF|JPY|dollars?|euros?|pounds?|bucks)\b)",
    re.IGNORECASE,
)
_UNITS = (
    "kg|g|mg|lbs?|pounds|oz|km|m|cm|mm|mi|miles?|ft|feet|inch(?:es)?|kilometers?|kilometres?|"
    "meters?|metres?|l|ml|liters?|litres?|gallons?|kb|mb|gb|tb|ms|seconds?|secs?|minutes?|"
    "mins?|hours?|hrs?|days?|weeks?|months?|years?|°c|°f|%|percent|kwh|mph|km/h|rpm|ghz|mhz"
)
_QUANTITY = re.compile(rf"\b\d+(?:[.,]\d+)?\s?(?:{_UNITS})(?![\w/])", re.IGNORECASE)
_PATH = re.compile(
    r"(?<![\w/.])(?:~|\.{1,2})?(?:/[\w.\-]+){2,}/?"  # /etc/nginx/nginx.conf, ~/x/y
    r"|(?<![\w/])[A-Za-z]:\\(?:[\w.\- ]+\\)*[\w.\-]+"  # C:\Users\me\file.txt
    r"|(?<![\w/.])[\w\-]+(?:/[\w.\-]+)+\.[A-Za-z0-9]{1,6}\b"  # src/memlane/manager.py
)
_CODE = re.compile(
    r"`([^`\n]{1,80})`"  # anything in backticks
    r"|\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(\)"  # call()
    r"|\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b"  # snake_case
    r"|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b"  # camelCase
    r"|\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b"  # PascalCase (CamelCase)
)
_NAME = re.compile(r"\b[A-Z][a-zà-ÿ'\-]+(?:\s+(?:[A-Z][a-zà-ÿ'\-]+|de|da|van|von|del))*")
#: capitalised words that are not names (sentence starters, days, pronouns, greetings)
_NOT_NAMES = frozenset(
    [
        "i",
        "i'm",
        "i've",
        "i'd",
        "i'll",
        "im",
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "it",
        "its",
        "it's",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "he",
        "she",
        "we",
        "they",
        "you",
        "me",
        "us",
        "them",
        "what",
        "when",
        "where",
        "why",
        "how",
        "who",
        "which",
        "whose",
        "if",
        "then",
        "so",
        "but",
        "and",
        "or",
        "also",
        "just",
        "yes",
        "no",
        "not",
        "oh",
        "ok",
        "okay",
        "hey",
        "hi",
        "hello",
        "thanks",
        "thank",
        "sure",
        "well",
        "wow",
        "yeah",
        "great",
        "good",
        "nice",
        "cool",
        "awesome",
        "please",
        "sorry",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "today",
        "tomorrow",
        "yesterday",
        "mr",
        "mrs",
        "ms",
        "dr",
        "there",
        "here",
        "do",
        "does",
        "did",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "can",
        "could",
        "should",
        "would",
        "will",
        "let",
        "lol",
        "haha",
        "anyway",
        "actually",
        "btw",
        "by",
        "for",
        "from",
        "in",
        "on",
        "at",
        "to",
        "of",
        "with",
        "as",
        "after",
        "before",
        "since",
        "until",
        "during",
        "all",
        "any",
        "some",
        "every",
        "each",
        "both",
        "many",
        "much",
        "more",
        "most",
    ]
)


def _window_value(window: TimeWindow) -> str | None:
    """A date window as ISO text: a day, a month, a year, or a span."""
    if window.month is not None:
        return f"--{window.month:02d}" + (f"-{window.day:02d}" if window.day else "")
    if window.start_us is None or window.end_us is None:
        return None
    start = datetime.fromtimestamp(window.start_us / 1e6, timezone.utc)
    end = datetime.fromtimestamp(window.end_us / 1e6, timezone.utc)
    days = (end - start).days
    if days <= 2:  # a named day, widened by half a day each side
        return (start + timedelta(hours=12)).date().isoformat()
    if 28 <= days <= 31 and start.day == 1:
        return start.strftime("%Y-%m")
    if days in (365, 366) and start.month == 1 and start.day == 1:
        return str(start.year)
    return f"{start.date().isoformat()}..{end.date().isoformat()}"


def entities(text: str, now: datetime) -> list[Entity]:
    """The entities of one message (see the module docstring), in order of kind.

    >>> [(e.type, e.text) for e in entities("Mail ann@x.org about $40", datetime.now())]
    [('email', 'ann@x.org'), ('money', '$40')]
    """
    found: list[Entity] = []
    taken: list[tuple[int, int]] = []

    def add(kind: str, start: int, end: int, value: str | None = None) -> None:
        if any(start < e and s < end for s, e in taken):
            return
        taken.append((start, end))
        found.append(Entity(kind, text[start:end], value))

    for match in _EMAIL.finditer(text):
        add("email", *match.span())
    for match in _URL.finditer(text):
        start, end = match.span()
        while end > start and text[end - 1] in ".,;:!?)]}'\"":
            end -= 1
        add("url", start, end)
    for mention in time_mentions(text, now):
        add("date", mention.start, mention.end, _window_value(mention.window))
    for match in _MONEY.finditer(text):
        add("money", *match.span())
    for match in _QUANTITY.finditer(text):
        add("quantity", *match.span())
    for match in _PATH.finditer(text):
        add("path", *match.span())
    for match in _CODE.finditer(text):
        if match.group(1) is not None:
            add("code", match.start(1), match.end(1))
        else:
            add("code", *match.span())
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        start = match.start()
        while words and words[0].casefold() in _NOT_NAMES:  # "Thanks Anna" → "Anna"
            start = text.index(words[1], start + len(words[0])) if len(words) > 1 else -1
            words = words[1:]
        if not words or start < 0:
            continue
        end = match.end()
        if _sentence_start(text, start) and len(words) == 1:
            continue  # "Great", "Sounds": one capitalised word opening a sentence
        add("name", start, end)
    return found


def _sentence_start(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before[-1] in ".!?\n\"'“:"


# -- facts -------------------------------------------------------------------------------------

_SENTENCES = re.compile(r"[^.!?\n;]+[.!?]*")
#: what may come before a statement in its sentence: interjections, "and", "but", "so"
_LEAD = (
    r"^(?:\s*(?:hi|hey|hello|well|oh|so|and|but|also|btw|actually|yeah|yes|ok|okay|"
    r"by the way|anyway|fyi|just so you know|for the record|for what it'?s worth)"
    r"\s*[,!:\-–—]?\s*|\s*[A-Z][a-z]+(?: [a-z]+){0,2}\s*[,!:]\s*)*"
)
#: words that make a sentence a question when they open it
_QUESTION = re.compile(
    r"^\s*(?:do|does|did|am|is|are|was|were|can|could|should|would|will|have|has|"
    r"what|where|when|why|how|who|which|whose|shall)\b",
    re.IGNORECASE,
)
#: words before a statement that make it hypothetical, reported, hedged or negated
_UNSURE = re.compile(
    r"\b(?:if|unless|suppose|supposing|imagine|maybe|perhaps|wish|hope|hoping|think|thought|"
    r"guess|believe|assume|pretend|said|says|say|told|tells|tell|claims?|claimed|according|"
    r"not|never|no|don'?t|doesn'?t|didn'?t|won'?t|wouldn'?t|isn'?t|wasn'?t|ain'?t|"
    r"would|could|might|should|may|whether|when|once|before|after)\b",
    re.IGNORECASE,
)
_PLACE = (
    r"(?-i:((?:[A-Z][\w'\-]+|São|St\.)"
    r"(?:[ \-](?:[A-Z][\w'\-]+|(?:de|do|da|del|la|le)(?= [A-Z])))*))"
)
_NAME_VALUE = r"([A-Z][\w'\-]+(?: [A-Z][\w'\-]+){0,2})"
_OBJECT = (
    r"([^,.;!?]{2,60}?)(?=\s*(?:[,.;!?]|$)|\s+(?:but|because|since|so|which|too|as well|"
    r"a lot|very much|so much)\b)"
)
_I_AM = r"I(?:'m| am)"
_FACT_PATTERNS: tuple[tuple[str, str | None, str, re.Pattern[str]], ...] = tuple(
    (name, key, kind, re.compile(_LEAD + pattern, re.IGNORECASE if name != "name" else 0))
    for name, key, kind, pattern in (
        ("name", "name", "fact", r"(?:[Mm]y name is|[Cc]all me|[Mm]y name's) " + _NAME_VALUE),
        (
            "lives",
            "city",
            "fact",
            r"I (?:currently |now |still )?(?:live|am living|'m living|reside) in " + _PLACE,
        ),
        (
            "moved",
            "city",
            "fact",
            r"(?:I|I've|I have) (?:just |recently |finally )?(?:moved|relocated) to " + _PLACE,
        ),
        ("allergy", None, "fact", rf"{_I_AM} (?:very |severely |really )?allergic to {_OBJECT}"),
        ("diet", "diet", "preference", rf"{_I_AM} (?:a )?(vegan|vegetarian|pescatarian)\b"),
        (
            "likes",
            None,
            "preference",
            r"I (?:really |also |absolutely |do )?(prefer|like|love|enjoy|adore) " + _OBJECT,
        ),
        (
            "dislikes",
            None,
            "preference",
            r"I (?:really )?(don'?t like|do not like|dislike|hate|can'?t stand) " + _OBJECT,
        ),
        ("my", None, "fact", r"[Mm]y ((?:[a-z]+ )?[a-z]+)(?:'s name)? is " + _OBJECT),
    )
)
#: what "my <thing> is" may not be about: figures of speech, not facts ("my point is")
_NOT_THINGS = frozenset(
    [
        "point",
        "question",
        "guess",
        "concern",
        "problem",
        "issue",
        "idea",
        "plan",
        "hope",
        "goal",
        "understanding",
        "answer",
        "worry",
        "fear",
        "thought",
        "opinion",
        "advice",
        "suggestion",
        "feeling",
        "take",
        "turn",
        "bad",
        "pleasure",
        "fault",
        "guess",
        "mind",
        "head",
        "heart",
        "life",
        "day",
        "week",
        "weekend",
        "morning",
        "night",
        "evening",
        "dream",
        "wish",
        "bet",
        "excuse",
        "impression",
        "experience",
        "reason",
        "recommendation",
        "only",
        "main",
        "biggest",
        "first",
        "last",
        "sense",
        "gut",
        "instinct",
        "view",
        "position",
        "theory",
        "hunch",
        "understanding",
        "philosophy",
        "motto",
        "name",
        # relations and efforts, whose "is" is an evaluation ("my family is awesome", "my
        # team is like a second family", "my hard work is paying off"): LoCoMo's sample
        "family",
        "team",
        "friends",
        "kids",
        "parents",
        "work",
        "hard",
        "art",
    ]
)
#: objects of "I like" that are no preference ("I like that", "I like it when")
_NOT_OBJECTS = re.compile(
    r"^(?:it|that|this|them|those|these|you|him|her|us|what|how|when|where|the|all the|"
    r"your|his|their|our|to think|to believe|to say|a lot|so much|very much|too)\b",
    re.IGNORECASE,
)
#: an object that points at something only the conversation shows ("seeing them eat",
#: "making this cake", "the freedom it brings"): no fact on its own
_POINTING = re.compile(r"\b(?:it|this|that|these|those|them|they|here|there)\b", re.IGNORECASE)
#: a value that is not one ("my car is not red", "my name is Not Important")
_NOT_VALUES = re.compile(r"^(?:not|no|n't|never|a bit|kind of|sort of|that|to|so|very|too)\b", re.I)
_VERBS = {
    "prefer": "Prefers",
    "like": "Likes",
    "love": "Loves",
    "enjoy": "Enjoys",
    "adore": "Loves",
}


def _clean(value: str) -> str:
    return re.sub(r"\s+", " ", value).strip(" \"'“”‘’-–—")


def _sentences(text: str) -> Iterator[str]:
    for match in _SENTENCES.finditer(text):
        sentence = match.group(0).strip()
        if sentence:
            yield sentence


def _fact_of(name: str, key: str | None, kind: str, match: re.Match[str]) -> ExtractedFact | None:
    value = _clean(match.group(match.lastindex or 1))
    if name == "name":
        return ExtractedFact(f"Name is {value}", "name", "fact")
    if name in ("lives", "moved"):
        return ExtractedFact(f"Lives in {value}", "city", "fact")
    if name == "allergy":
        if _NOT_VALUES.match(value):
            return None
        return ExtractedFact(f"Is allergic to {value}", None, "fact")  # (split by the caller)
    if name == "diet":
        return ExtractedFact(f"Is {value.lower()}", "diet", "preference")
    if name in ("likes", "dislikes"):
        verb, thing = match.group(1).lower(), _clean(match.group(2))
        if _NOT_OBJECTS.match(thing) or _NOT_VALUES.match(thing) or _POINTING.search(thing):
            return None
        if name == "dislikes":
            return ExtractedFact(f"Dislikes {thing}", None, "preference")
        return ExtractedFact(f"{_VERBS.get(verb, 'Likes')} {thing}", None, "preference")
    thing = match.group(1).lower()
    if any(word in _NOT_THINGS for word in thing.split()) or thing in ("favorite", "favourite"):
        return None
    if _NOT_VALUES.match(value) or len(value.split()) > 6 or _POINTING.search(value):
        return None
    named = "'s name is" in match.group(0)
    slug = re.sub(r"[^a-z0-9]+", "_", thing).strip("_") + ("_name" if named else "")
    if not slug or not slug[0].isalpha():
        return None
    label = thing + ("'s name" if named else "")
    return ExtractedFact(f"{label[0].upper()}{label[1:]} is {value}", slug[:64], "fact")


def _each(fact: ExtractedFact | None) -> list[ExtractedFact]:
    """An allergy to several things is one fact each ("peanuts and shellfish")."""
    if fact is None:
        return []
    prefix = "Is allergic to "
    if not fact.text.startswith(prefix):
        return [fact]
    things = re.split(r",\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+", fact.text[len(prefix) :])
    return [ExtractedFact(prefix + thing, None, fact.kind) for thing in things if thing.strip()]


def statements(text: str) -> list[ExtractedFact]:
    """The facts one of the user's messages states (see the module docstring).

    >>> [f.text for f in statements("Hi! My name is Ana and I moved to Porto last month.")]
    ['Name is Ana', 'Lives in Porto']
    >>> statements("Do I live in Paris?") + statements("If I moved to Rome, I'd be happy")
    []
    """
    found: list[ExtractedFact] = []
    for sentence in _sentences(text):
        if sentence.endswith("?") or _QUESTION.match(sentence):
            continue
        if '"' in sentence or "“" in sentence:
            continue  # quoted speech: someone else's words
        for clause in re.split(r",\s*(?:and|but)\s+|\s+(?:and|but)\s+(?=I\b|my\b|My\b)", sentence):
            for name, key, kind, pattern in _FACT_PATTERNS:
                match = pattern.match(clause)
                if match is None or _UNSURE.search(clause[: match.start(1)]):
                    continue
                fact = _fact_of(name, key, kind, match)
                for one in _each(fact):
                    if one not in found:
                        found.append(one)
    return found


class RuleExtractor:
    """The offline extractor (``SessionManager(extractor="rules")``): see the module
    docstring for what it reads. ``window``: turns per batch; ``quiet_seconds``: how long a
    session must be quiet before a window that is not full is read.

    >>> from datetime import datetime, timezone
    >>> turn = Turn("m1", "user", "I'm allergic to peanuts. Mail me at ann@example.org",
    ...             datetime(2026, 5, 1, tzinfo=timezone.utc), 1)
    >>> found = RuleExtractor()(ExtractionBatch("u1", "s1", (turn,)))
    >>> [f.text for f in found.facts], [e.type for e in found.entities["m1"]]
    (['Is allergic to peanuts'], ['email'])
    """

    name = "rules"
    version = "1"

    def __init__(self, *, window: int = 6, quiet_seconds: float = 30.0) -> None:
        self.window = window
        self.quiet_seconds = quiet_seconds

    def __call__(self, batch: ExtractionBatch) -> Extraction:
        facts: list[ExtractedFact] = []
        found: dict[str, tuple[Entity, ...]] = {}
        tags: dict[str, tuple[str, ...]] = {}
        for turn in batch.turns:
            mentioned = entities(turn.content, turn.created_at)
            if mentioned:
                found[turn.id] = tuple(dict.fromkeys(mentioned))
                tags[turn.id] = tuple(dict.fromkeys(e.type for e in mentioned))
            if _from_user(turn):
                for fact in statements(turn.content):
                    facts.append(
                        ExtractedFact(fact.text, fact.key, fact.kind, (turn.id,), batch.user_id)
                    )
        return Extraction(tuple(facts), found, tags)


def _from_user(turn: Turn) -> bool:
    """Whether the user said it: facts come only from the user's own messages."""
    return turn.role in (None, "user", "human")
