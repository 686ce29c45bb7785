"""Keyword queries: free text turned into a safe FTS5 or tsquery query, the BM25 weights,
and the tokenizer of the in-memory keyword index.

The log's persistent keyword index is the log's own (FTS5 in SQLite, a tsvector in PostgreSQL);
this is what both backends build their queries with. SQLite's searches are ranked by an
in-memory index (``_keyword_cache.py``) that must see the same words as FTS5: :class:`Words`
is FTS5's ``porter unicode61 remove_diacritics 2`` tokenizer, in Python.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from typing import Any

import numpy as np
import numpy.typing as npt
import Stemmer

from ..arrays import located

__all__ = [
    "KEYWORD_WEIGHTS",
    "STOP_WORDS",
    "Words",
    "fold",
    "fts_query",
    "query_tokens",
    "query_words",
    "tsquery",
]

#: BM25 weights of the keyword index's two columns: an event's own content, and its context
#: (the neighbouring events of its session and its date; store/_migrations.py). Context counts
#: half: it should lift the event that answers a question asked just before it, without letting
#: every neighbour of a matching event outrank the match itself. Measured: docs/decisions/
#: 2026-11-22-hybrid-ranking-defaults.md.
KEYWORD_WEIGHTS = (1.0, 0.5)

_WORD = re.compile(r"\w+", re.UNICODE)

# Distinct tokens Words keeps stemmed (a cache; ~100 bytes each), and how many new stems it
# gathers in a dict before moving them into its compact table.
TOKEN_CACHE = 65_536
FREEZE_FROM = 65_536
# A snapshot renumbered into the process freezes its dict first once it holds this many.
ADOPT_FREEZE_FROM = 1_024

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
    left. A word FTS5 splits into several tokens (``deploy_v2``, ``SESSION_EXPIRY_HOURS``)
    gives each token as a term of its own, as PostgreSQL's :func:`tsquery` does: quoted
    whole, FTS5 would read it as a phrase, which the in-memory index (no positions) cannot
    rank, and every such search went to FTS5 (at 100k events, hybrid p50 ~66 ms instead of
    ~4).

    >>> fts_query('did we turn off 2FA: "anywhere"?')
    '"turn" OR "off" OR "2fa" OR "anywhere"'
    >>> fts_query("deploy_v2 failed")
    '"deploy" OR "v2" OR "failed"'
    """
    words = query_tokens(text)
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)


def query_tokens(text: str) -> list[str]:
    """The distinct FTS5 tokens of ``text``'s query words (:func:`query_words`): what
    :func:`fts_query` asks FTS5 for and :meth:`Words.query_stems` stems.

    >>> query_tokens("Deploy_v2 of the deploy?")
    ['deploy', 'v2']
    """
    return list(dict.fromkeys(token for word in query_words(text) for token in tokens(word)))


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


# Bytes of the vocabulary's blob searched for NULs at a time (_Frozen.stems).
_SCAN_BYTES = 1 << 20
# Lookups in the compact table sorted first from this many (_Frozen.get).
_SORTED_FROM = 256


class _Frozen:
    """Stems with ids ``0 .. count - 1`` held compactly: the stems as one NUL-separated UTF-8
    blob (in id order, as a snapshot stores them) and a sorted table of their 64-bit hashes
    with the id of each. ~22 bytes a stem, against ~80 in a dict of str to int (a million
    distinct stems — logs are full of identifiers — took 82 MB that way)."""

    def __init__(self, blob: bytes, hashes: npt.NDArray[np.uint64]) -> None:
        self.blob = blob
        self.count = len(hashes)
        order = np.argsort(hashes, kind="stable")
        self.hashes = hashes[order]
        self.ids = order.astype(np.int32)

    @classmethod
    def of(cls, blob: bytes, hashes: npt.NDArray[np.uint64] | None = None) -> _Frozen:
        if hashes is None:
            hashes = stem_hashes(blob)
        return cls(blob, hashes)

    def get(
        self, stems: list[str] | None, hashes: npt.NDArray[np.uint64] | None = None
    ) -> npt.NDArray[np.int32]:
        """The id of each of ``stems`` (or of the stems of ``hashes``, their :func:`stem_hash`
        es, when known), -1 for those it does not hold (one binary search for all: ~1 µs a
        stem, against ~3 one by one)."""
        if hashes is None:
            assert stems is not None
            hashes = np.fromiter(map(stem_hash, stems), np.uint64, len(stems))
        if not self.count:
            return np.full(len(hashes), -1, np.int32)
        if len(hashes) < _SORTED_FROM:
            at, there = located(self.hashes, hashes)
            return np.where(there, self.ids[at], -1).astype(np.int32)
        # many at once (a snapshot's stems): looked up in order, 1.0 -> 0.6 ms for 6,600
        order = np.argsort(hashes)
        at, there = located(self.hashes, hashes[order])
        found = np.empty(len(hashes), np.int32)
        found[order] = np.where(there, self.ids[at], -1)
        return found

    def stems(self, ids: npt.NDArray[np.integer[Any]]) -> list[str]:
        """The stems of ``ids`` (all below :attr:`count`): :func:`stems_at` of the blob."""
        return stems_at(self.blob, ids)

    def hashes_by_id(self) -> npt.NDArray[np.uint64]:
        by_id = np.empty(self.count, np.uint64)
        by_id[self.ids] = self.hashes
        return by_id


def stem_hash(stem: str) -> int:
    """A stable 64-bit hash of ``stem`` (Python's own ``hash`` differs from process to
    process). Two of a million stems share one with a chance of ~3e-8; they would then
    share postings, as two spellings of one word do."""
    return int.from_bytes(hashlib.blake2b(stem.encode(), digest_size=8).digest(), "little")


def stems_at(blob: bytes, ids: npt.NDArray[np.integer[Any]]) -> list[str]:
    """The stems at positions ``ids`` of a NUL-separated ``blob``, cut out at its NULs, found
    a chunk at a time (the NULs of a million stems at once took ~30 MB).

    >>> stems_at(b"run\\0dog\\0cat", np.array([2, 0]))
    ['cat', 'run']
    """
    if not len(ids):
        return []
    view = np.frombuffer(blob, np.uint8)
    ids = np.asarray(ids, np.int64)
    # the NUL after each stem wanted and after the one before it (-1: before the first)
    wanted = np.unique(np.concatenate((ids, ids - 1)))
    ends = np.full(len(wanted), len(blob), np.int64)  # (the last stem ends the blob)
    ends[wanted < 0] = -1
    before = 0  # NULs in the chunks before
    for offset in range(0, len(view), _SCAN_BYTES):
        nuls = np.flatnonzero(view[offset : offset + _SCAN_BYTES] == 0)
        low, high = np.searchsorted(wanted, (before, before + len(nuls)))
        ends[low:high] = offset + nuls[wanted[low:high] - before]
        before += len(nuls)
        if high == len(wanted):
            break
    stops = ends[np.searchsorted(wanted, ids)].tolist()
    starts = ends[np.searchsorted(wanted, ids - 1)].tolist()
    return [blob[a + 1 : b].decode() for a, b in zip(starts, stops, strict=True)]


def stem_hashes(blob: bytes) -> npt.NDArray[np.uint64]:
    """:func:`stem_hash` of every stem of a NUL-separated blob, in order."""
    stems = blob.decode().split("\0") if blob else []
    return np.fromiter(map(stem_hash, stems), np.uint64, len(stems))


class Words:
    """Term ids of stemmed tokens: porter stems, as FTS5's ``porter`` tokenizer makes them.

    Each distinct token is stemmed once while it stays in a bounded cache (a dict of tokens
    to term ids), which is what makes indexing 100k events take seconds rather than minutes.
    Numbers (ASCII digits) are their own stems and stay out of that cache: logs hold many
    distinct ones (an id per event: at 1M events it held a million of them, ~100 MB). The
    stems themselves are kept compactly (:class:`_Frozen`) once there are many; the newest
    ones in a dict until then. Not thread-safe (neither is the stemmer): the keyword cache
    calls it under its lock.

    >>> words = Words()
    >>> ids = words.ids(["running", "runs", "the"]).tolist()
    >>> ids == [words.term("run"), words.term("run"), words.term("the")]
    True
    """

    def __init__(self) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._by_token: dict[str, int] = {}
        self._frozen = _Frozen(b"", np.zeros(0, np.uint64))
        self._by_stem: dict[str, int] = {}  # stems since the frozen ones: ids from its count
        # the stem_hash of the first of those (in id order), computed once each: a snapshot
        # of a dropped partition hashed every newer stem of the process at each save (~16k
        # stems of a 1,000-event agent, ~50 ms a save on a 2-core machine)
        self._newer_hashes: list[int] = []

    def ids(self, found: list[str]) -> npt.NDArray[np.int32]:
        """The term id of every token in ``found`` (new tokens are stemmed and registered)."""
        by_token = self._by_token
        if len(by_token) > TOKEN_CACHE:
            by_token.clear()  # (a bound: a big build sees millions of distinct tokens)
        unseen = [token for token in dict.fromkeys(found) if token not in by_token]
        numbers = [token for token in unseen if token.isdigit() and token.isascii()]
        if unseen:
            words = [token for token in unseen if not (token.isdigit() and token.isascii())]
            stems = self._stemmer.stemWords(words)
            # (numbers for this call only: see the class docstring)
            for token, term in zip(words + numbers, self.terms(stems + numbers), strict=True):
                by_token[token] = term
        try:
            return np.fromiter(map(by_token.__getitem__, found), np.int32, len(found))
        finally:
            for number in numbers:
                del by_token[number]

    def term(self, stem: str) -> int:
        """The id of ``stem`` (registered if new)."""
        return self.terms([stem])[0]

    def terms(self, stems: list[str], hashes: npt.NDArray[np.uint64] | None = None) -> list[int]:
        """The id of each of ``stems`` (new ones registered, in order). ``hashes``: their
        :func:`stem_hash` es when the caller has them (a snapshot stores them)."""
        by_stem = self._by_stem
        known = [by_stem.get(stem, -1) for stem in stems]
        missing = [i for i, term in enumerate(known) if term < 0]
        if missing:
            wanted = None if hashes is None else hashes[missing]
            frozen = self._frozen.get([stems[i] for i in missing], wanted).tolist()
            # the new stems' hashes are kept for the next save when known and in step
            newer_hashes = self._newer_hashes
            keep = wanted is not None and len(newer_hashes) == len(by_stem)
            for at, (i, term) in enumerate(zip(missing, frozen, strict=True)):
                if term < 0:  # new, or registered just now for an earlier one of the list
                    term = by_stem.get(stems[i], -1)
                    if term < 0:
                        term = by_stem[stems[i]] = len(self)
                        if keep:
                            newer_hashes.append(int(wanted[at]))  # type: ignore[index]
                known[i] = term
            # (after the ids are given: a freeze renumbers nothing, it only moves stems)
            if len(by_stem) >= max(FREEZE_FROM, self._frozen.count // 4):
                self._freeze()
        return known

    def _freeze(self) -> None:
        """Move the dict's stems into the compact table (amortised: the dict reaches a
        quarter of the table before it is merged again)."""
        self._frozen = _Frozen(*self.vocabulary())
        self._by_stem = {}
        self._newer_hashes = []

    def __len__(self) -> int:
        return self._frozen.count + len(self._by_stem)

    def stems_of(self, ids: npt.NDArray[np.integer[Any]]) -> list[str]:
        """The stem of each term id of ``ids`` (ids :meth:`terms` gave out)."""
        frozen = self._frozen.count
        wanted = np.asarray(ids, np.int64)
        old = self._frozen.stems(wanted[wanted < frozen])
        if len(old) == len(wanted):
            return old
        newer = list(self._by_stem)
        found = iter(old)
        return [next(found) if i < frozen else newer[i - frozen] for i in wanted.tolist()]

    def stem(self, token: str) -> str:
        return str(self._stemmer.stemWord(token))

    def vocabulary(
        self, ids: npt.NDArray[np.integer[Any]] | None = None
    ) -> tuple[bytes, npt.NDArray[np.uint64]]:
        """Every stem registered (or those of ``ids``: ascending, distinct), in term id
        order, NUL-separated (a snapshot's vocabulary; a stem holds no NUL), and their
        :func:`stem_hash` es."""
        known = self._newer_hashes
        if len(known) < len(self._by_stem):
            known.extend(map(stem_hash, itertools.islice(self._by_stem, len(known), None)))
        newer = np.asarray(known, np.uint64)
        if ids is None or len(ids) == len(self):  # (all of them)
            words = self._newer_blob()
            blob = b"\0".join(part for part in (self._frozen.blob, words) if part)
            return blob, np.concatenate((self._frozen.hashes_by_id(), newer))
        ids = np.asarray(ids, np.int64)
        frozen = self._frozen.count
        old = ids < frozen
        hashes = np.empty(len(ids), np.uint64)
        hashes[old] = self._frozen.hashes_by_id()[ids[old]] if old.any() else 0
        hashes[~old] = newer[ids[~old] - frozen]
        return "\0".join(self.stems_of(ids)).encode(), hashes

    def adopt(
        self, blob: bytes, hashes: npt.NDArray[np.uint64] | None = None
    ) -> npt.NDArray[np.int32] | None:
        """Take the stems of ``blob`` (a snapshot's :meth:`vocabulary`; ``hashes`` theirs,
        computed if not given) as term ids: as the first ones if none was given out yet, or
        if those given out are the same stems in the same order (None: the snapshot's ids
        are this process's); otherwise as ids of this process (new stems registered),
        returned by the snapshot's id."""
        if not len(self):
            self._frozen = _Frozen.of(blob, hashes)
            return None
        if not blob:
            return None
        if hashes is None:
            hashes = stem_hashes(blob)
        if self._may_begin_alike(blob):
            known = b"\0".join(part for part in (self._frozen.blob, self._newer_blob()) if part)
            if len(blob) <= len(known):
                if known == blob or known.startswith(blob + b"\0"):
                    return None
            elif blob.startswith(known + b"\0"):
                self.terms(blob[len(known) + 1 :].decode().split("\0"), hashes[len(self) :])
                return None
        # Renumbered: one binary search in the compact table by the stored hashes, then the
        # dict for the stems it lacks, cut out of the blob (every stem through the dict and
        # the stemmer's hash took 12-19 ms a 6,600-stem snapshot, most of the reload of a
        # dropped partition; this ~1 ms)
        if len(self._by_stem) >= max(ADOPT_FREEZE_FROM, self._frozen.count // 16):
            self._freeze()  # (amortised as in terms(): the dict grows by a sixteenth first)
        ids = self._frozen.get(None, hashes)
        new = np.flatnonzero(ids < 0)
        if len(new):
            ids[new] = self.terms(stems_at(blob, new), hashes[new])
        return ids

    def _may_begin_alike(self, blob: bytes) -> bool:
        """Whether ``blob`` could begin the process's stems, or they it: their bytes agree as
        far as both the blob and the compact table go (a comparison in place, where joining
        all the stems at every snapshot loaded cost as much as renumbering)."""
        frozen = self._frozen.blob
        if frozen:
            return frozen.startswith(blob) if len(blob) <= len(frozen) else blob.startswith(frozen)
        return next(iter(self._by_stem)).encode() == blob.split(b"\0", 1)[0]

    def _newer_blob(self) -> bytes:
        return "\0".join(self._by_stem).encode()

    def query_stems(self, text: str) -> list[str] | None:
        """The distinct stems an FTS5 query of ``text`` (:func:`fts_query`) would match (a
        word of several tokens gives each), or None when it has none.

        >>> Words().query_stems("Which cities did Caroline visit?")
        ['citi', 'carolin', 'visit']
        >>> Words().query_stems("the deploy_v2 rollout")
        ['deploi', 'v2', 'rollout']
        """
        return list(dict.fromkeys(map(self.stem, query_tokens(text)))) or None
