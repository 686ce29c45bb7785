"""Keyword queries: free text turned into a safe FTS5 or tsquery query, and the BM25 weights.

The log's keyword index is the log's own (FTS5 in SQLite, a tsvector in PostgreSQL); this is
what both backends build their queries with.
"""

from __future__ import annotations

import re

__all__ = ["KEYWORD_WEIGHTS", "STOP_WORDS", "fts_query", "query_words", "tsquery"]

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
