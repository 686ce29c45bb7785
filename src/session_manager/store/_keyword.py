"""Keyword queries: free text turned into a safe FTS5 or tsquery query, the BM25 weights,
and the tokenizer of the in-memory keyword index.

The log's persistent keyword index is the log's own (FTS5 in SQLite, a tsvector in PostgreSQL);
this is what both backends build their queries with. SQLite's searches are ranked by an
in-memory index (``_keyword_cache.py``) that must see the same words as FTS5: :class:`Words`
is FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer, in Python.
"""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import numpy.typing as npt
import Stemmer

__all__ = [
    "KEYWORD_WEIGHTS",
    "STOP_WORDS",
    "Words",
    "fold",
    "fts_query",
    "query_words",
    "tsquery",
]

#: BM25 weights of the keyword index's two columns: an event's own content, and its context
#: (the neighbouring events of its session and its date; store/_migrations.py). Context counts
#: half: it should lift the event that answers a question asked just before it, without letting
#: every neighbour of a matching event outrank the match itself. Measured: docs/benchmarks.md.
KEYWORD_WEIGHTS = (1.0, 0.5)

_WORD = re.compile(r"\w+", re.UNICODE)

# Function words that match nearly every event: dropping them from the query keeps BM25 from
# scoring (and SQLite from visiting) most of the index for no ranking gain. Morphology is
# handled by the index's porter tokenizer.
STOP_WORDS = frozenset(
    """a about after again all am an and any are as at be been before being but by can could
    did do does doing done for from had has have having he her here hers him his how i if in
    into is it its just me my no nor not of on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this those
    through to too under until up very was we were what when where which while who whom why
    will with would you your yours""".split()  # noqa: SIM905 (a word list reads better as prose)
)


def query_words(text: str) -> list[str]:
    """The distinct lower-case words of ``text``, stop words dropped unless nothing else is left.

    >>> query_words("Did we turn OFF the 2FA?")
    ['turn', 'off', '2fa']
    """
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))
    return [word for word in words if word not in STOP_WORDS] or words


def tsquery(text: str, *, content_only: bool = False) -> str | None:
    """A PostgreSQL ``to_tsquery`` text matching any content word of ``text``.

    Words are runs of ``\\w`` characters, so no tsquery syntax (``&|!():*<>'``) can get in.
    ``content_only`` restricts each word to the content's weight (``A``; the context is ``B``).

    >>> tsquery("turn off 2FA: 'anywhere'?", content_only=True)
    'turn:A | off:A | 2fa:A | anywhere:A'
    """
    # "_" is a word character but not a lexeme one: split on it
    words = list(dict.fromkeys(part for word in query_words(text) for part in word.split("_")))
    words = [word for word in words if word]
    if not words:
        return None
    suffix = ":A" if content_only else ""
    return " | ".join(word + suffix for word in words)


def fts_query(text: str) -> str | None:
    """An FTS5 query matching any content word of ``text`` (BM25 ranks by how many and how rare).

    Every word is quoted, so FTS5 syntax in user text (``AND``, ``*``, ``"``, ``:``) is
    matched literally instead of being parsed. Stop words are dropped unless nothing else is
    left.

    >>> fts_query('did we turn off 2FA: "anywhere"?')
    '"turn" OR "off" OR "2fa" OR "anywhere"'
    """
    words = query_words(text)
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)


# FTS5's unicode61 tokenizer: runs of letters and digits; everything else (``_`` included)
# separates tokens.
_TOKEN = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    """``text`` as unicode61 with ``remove_diacritics 2`` compares it: lower case, accents off.

    >>> fold("Crème Brûlée")
    'creme brulee'
    """
    text = text.lower()
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def tokens(text: str) -> list[str]:
    """The unstemmed tokens of ``text``, as FTS5 splits it.

    >>> tokens("Deploy_v2 failed: café's DB!")
    ['deploy', 'v2', 'failed', 'cafe', 's', 'db']
    """
    return _TOKEN.findall(fold(text))


class Words:
    """Term ids of stemmed tokens: porter stems, as FTS5's ``porter`` tokenizer makes them.

    Each distinct token is stemmed once (a dict maps tokens to term ids), which is what makes
    indexing 100k events take seconds rather than minutes. Numbers (ASCII digits) are their
    own stems and stay out of that map: logs hold many distinct ones (an id per event: at 1M
    events the map held a million of them, ~100 MB). Not thread-safe (neither is the
    stemmer): the keyword cache calls it under its lock.

    >>> words = Words()
    >>> ids = words.ids(["running", "runs", "the"]).tolist()
    >>> ids == [words.term("run"), words.term("run"), words.term("the")]
    True
    """

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._by_token: dict[str, int] = {}
        self._by_stem: dict[str, int] = {}

    def ids(self, found: list[str]) -> npt.NDArray[np.int32]:
        """The term id of every token in ``found`` (new tokens are stemmed and registered)."""
        by_token = self._by_token
        unseen = [token for token in dict.fromkeys(found) if token not in by_token]
        numbers = [token for token in unseen if token.isdigit() and token.isascii()]
        if unseen:
            words = [token for token in unseen if not (token.isdigit() and token.isascii())]
            for token, stem in zip(words, self._stemmer.stemWords(words), strict=True):
                by_token[token] = self.term(stem)
            for number in numbers:  # (for this call only: see the class docstring)
                by_token[number] = self.term(number)
        try:
            return np.fromiter(map(by_token.__getitem__, found), np.int32, len(found))
        finally:
            for number in numbers:
                del by_token[number]

    def term(self, stem: str) -> int:
        """The id of ``stem`` (registered if new)."""
        found = self._by_stem.get(stem)
        if found is None:
            found = self._by_stem[stem] = len(self._by_stem)
        return found

    def stem(self, token: str) -> str:
        return str(self._stemmer.stemWord(token))

    def stems(self) -> list[str]:
        """Every stem registered, in term id order (a snapshot's vocabulary)."""
        return list(self._by_stem)

    def adopt(self, stems: list[str]) -> bool:
        """Take ``stems`` (a snapshot's :meth:`stems`) as the first term ids, if the ids given
        out so far agree with them; False (and nothing changed) otherwise."""
        known = list(self._by_stem)
        shared = min(len(known), len(stems))
        if known[:shared] != stems[:shared]:
            return False
        for stem in stems[shared:]:
            self._by_stem[stem] = len(self._by_stem)
        return True

    def query_stems(self, text: str) -> list[str] | None:
        """The distinct stems an FTS5 query of ``text`` (:func:`fts_query`) would match, or
        None when the in-memory index cannot answer it exactly as FTS5 would: a query word
        FTS5 reads as a phrase of several tokens (``deploy_v2``).

        >>> Words().query_stems("Which cities did Caroline visit?")
        ['citi', 'carolin', 'visit']
        >>> Words().query_stems("the deploy_v2 rollout") is None
        True
        """
        stems: list[str] = []
        for word in query_words(text):
            split = tokens(word)
            if len(split) != 1:
                return None
            stems.append(self.stem(split[0]))
        return list(dict.fromkeys(stems)) or None
