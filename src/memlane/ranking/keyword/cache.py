"""BM25 keyword ranking over per-partition postings cached in memory, scored by numpy.

Why not FTS5's own ranking: ``bm25()`` is an auxiliary function FTS5 calls once for every row
that contains any query word, and the scope filter comes after it, so its cost follows the
whole store and how common the query's words are, not the agent's share or ``k``: 70 ms at the
median and 240 ms at p95 over 100k events (docs/decisions/2026-11-23-keyword-ranking-in-memory.md).
Here each partition (an agent's private sessions, or one pool: the vector cache's partitions) keeps
its postings as sorted numpy arrays; a query adds up, term by term, the same BM25 FTS5 computes,
over exactly the rows that hold a query term, in a few milliseconds at 100k events.

The formula is FTS5's (``fts5_aux.c``): ``idf = ln((N - n + 0.5) / (n + 0.5))`` (at least
1e-6), and for each query term ``idf · f · (k1 + 1) / (f + k1 · (1 - b + b · D / avgdl))``
with ``k1 = 1.2``, ``b = 0.75``, where ``f`` sums the term's occurrences weighted by column
(content 1, context 0.5: ``KEYWORD_WEIGHTS``) and ``D`` is the row's size in tokens over both
columns. Two differences, both deliberate: ``N``, ``n`` and ``avgdl`` are counted over the
partitions searched, not the whole file (another agent's events should not change how this
agent's words weigh); and an event's context (its two neighbours on either side in the
session, and its date: migration ``0002_keyword_context``) is composed at query time from the
neighbours' postings instead of being stored: the context of an event changes when the next
events arrive, and composing it costs one gather per neighbour. A neighbour counts with the
first 1,000 characters of its text one place away and 500 two places away, as FTS5 stores
it (long rows keep signed postings of what lies beyond those heads, taken back from their
neighbours' context); events recorded with ``index=False`` are
neither rows nor neighbours here. A flattened JSON output is ranked by its whole payload
flattened (``core/searchable.py``), as the worker indexes it in FTS5.

The rows come from the log (``events`` by ``partition`` and ``seq``) and are tokenized in
Python (:class:`~memlane.ranking.keyword.terms.Words`), so an event is searchable as soon as
it is committed, by any process: each search first reads the rows with a ``seq`` above the
last one seen. When rows are deleted anywhere, the store's generation counter moves and the
partitions are rebuilt, as the vector cache does.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ...core import canonical_json
from ...core.searchable import searchable_text
from ..budget import CacheBudget, process_budget
from ..partition_rows import PartitionRows, RowCodes, RowQuery
from .counts import common_terms, document_frequency
from .postings import Counts, IntArray, Postings, Triple, beyond, concat, postings_of
from .scoped import DocumentFrequencies
from .scoring import PassageTerms, Query, best_passages, rank
from .snapshots import REWRITE_GROWTH, KeywordSnapshots
from .terms import STOP_WORDS, Words, tokens

__all__ = ["KeywordCache"]

log = logging.getLogger("memlane.store.keywords")

#: every cache of this process: their background builds stop at interpreter exit (a daemon
#: thread still reading SQLite while the interpreter tears down can crash the process)
_CACHES: weakref.WeakSet[KeywordCache] = weakref.WeakSet()
#: how long close() and interpreter exit wait for a build to reach its next chunk
_STOP_TIMEOUT = 10.0
#: How long a search waits for a background build that starts from snapshot files, before
#: FTS5 answers instead. Loading is reading: at 1M events 0.4-0.5 s (310 MB, page cache
#: emptied or not), where FTS5's own ranking took 1.0-1.7 s — a fresh process's first search
#: after `drop_caches` went from 2.0-3.0 s to ~1 s (bench/cold_start.py). A build from the
#: log (seconds to minutes) is not waited for.
SNAPSHOT_WAIT = 1.5


@atexit.register
def _stop_builds_at_exit() -> None:
    for cache in list(_CACHES):
        cache.close()


FloatArray = npt.NDArray[np.float64]

# Tokens of the date an event's context holds ("8 May 2023"); see migration 0002.
_DATE_TOKENS = 3
_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
# The characters of a neighbour's text an event's context holds, one and two places away
# (migration 0002_keyword_context: FTS5 stores them so).
NEAR_CHARS = 1_000
FAR_CHARS = 500
# Rows read from the log per query while refreshing a partition.
_CHUNK = 8192
# A bulk load adds its postings as a segment every this many chunks (65k rows), so that
# its transient arrays stay bounded (building a segment sorts its postings: ~80 MB here).
_CHUNKS_PER_SEGMENT = 8
# Chunks a search reads itself before leaving the rest of a partition's first build to a
# background thread (~0.5 s of tokenizing at most).
_BUILT_IN_SEARCH = 2
# Common terms counted per hold of the lock in the background (KeywordCache._count_common):
# ~30 ms at 1M events, what a search may wait behind.
_COUNTED_TOGETHER = 16
# A row of fewer tokens is never scored by its passages (KeywordCache.passage_scores): the
# embedder's window (256 word pieces for MiniLM) holds ~190 of them, and a text so short is
# cut into passages only when its words split into many word pieces (which then decides).
LONG_TOKENS = 64
# (see KeywordCache._load)
_SETTLE_ALLOCATOR_BYTES = 32 * 1024 * 1024


def _located(part: _Partition, seqs: Sequence[int]) -> tuple[npt.NDArray[np.int64], IntArray]:
    """The seqs of ``seqs`` that are rows of ``part`` (ascending) and their rows."""
    wanted = np.unique(np.asarray(seqs, np.int64))
    held = part.seqs[: part.size]
    rows = np.searchsorted(held, wanted)
    inside = rows < part.size
    found = np.zeros(len(wanted), np.bool_)
    found[inside] = held[rows[inside]] == wanted[inside]
    return wanted[found], rows[found].astype(np.int32)


class _Source(Protocol):
    def keyword_rows(self, partition: str, after_seq: int, limit: int) -> list[Any]:
        """``(seq, session_id, agent_id, kind, created_us, content, whole)`` of the indexed
        events of ``partition`` with a ``seq`` above ``after_seq``, in ``seq`` order;
        ``whole`` is the payload JSON of a flattened output whose searchable text is the
        payload flattened whole (``_searchable.needs_whole_text``), else None."""
        ...

    def generation(self) -> int: ...
    def has_keyword_rows_beyond(self, partition: str, count: int) -> bool:
        """Whether ``partition`` holds more than ``count`` indexed events."""
        ...


@dataclass
class _NewPostings:
    """What appending rows adds: the postings of their whole text, and for long rows what
    their text holds beyond the heads the rows around them see in their context."""

    own: Triple
    near: Triple
    far: Triple


def _text(row: Sequence[Any]) -> str:
    """The searchable text of a keyword row (see ``_Source.keyword_rows``)."""
    if row[6] is None:
        return str(row[5])
    return searchable_text(row[5], canonical_json.loads(row[6]), derived=True)


class _Partition(PartitionRows):
    """One partition's rows: filter columns, token counts, session neighbours, postings."""

    def __init__(self) -> None:
        super().__init__()
        self.last_seq = 0
        self.lengths = np.zeros(0, np.int32)  # tokens of the event's text
        # tokens of the text's first NEAR_CHARS / FAR_CHARS: what the context of the event
        # one / two places away holds of it (as FTS5 stores it: migration 0002)
        self.near_lengths = np.zeros(0, np.int32)
        self.far_lengths = np.zeros(0, np.int32)
        self.sizes = np.zeros(0, np.float64)  # tokens of content and context: BM25's D
        # the rows of the two events before and after it in its session (-1: none)
        self.prev1 = np.zeros(0, np.int32)
        self.prev2 = np.zeros(0, np.int32)
        self.next1 = np.zeros(0, np.int32)
        self.next2 = np.zeros(0, np.int32)
        self.days = np.zeros(0, np.int16)
        self.months = np.zeros(0, np.int16)
        self.years = np.zeros(0, np.int16)
        self.total_tokens = 0  # over both columns: avgdl = total_tokens / size
        self.own = Postings()  # the whole text of every row
        # what long rows hold beyond their first NEAR_CHARS / FAR_CHARS (signed counts)
        self.near = Postings()
        self.far = Postings()
        self._tails: dict[int, tuple[int, int]] = {}  # session code -> its last two rows
        self.frequencies = DocumentFrequencies()  # BM25's n per term, with context
        # every row's BM25 length normalisation for one avgdl (``_keyword_ranking._norms``)
        self.norm_cache: tuple[float, int, FloatArray] | None = None
        self.snapshot_size = 0  # rows in its snapshot file, when loaded from one
        # Row-sized buffers for a query's per-row sums, all zeros between uses: allocating
        # them per term (8 MB at 1M rows) handed each query fresh pages from the kernel unless
        # the process had freed big arrays before (glibc's mmap threshold): a long query on
        # a partition loaded from a snapshot took 70 ms instead of 50.
        self._scratch: list[FloatArray] = []

    def _resize(self, capacity: int) -> None:
        super()._resize(capacity)
        for name in ("lengths", "near_lengths", "far_lengths"):
            self._grow(name, capacity, np.int32)
        self._grow("sizes", capacity, np.float64)
        for name in ("prev1", "prev2", "next1", "next2"):
            self._grow(name, capacity, np.int32, fill=-1)
        for name in ("days", "months", "years"):
            self._grow(name, capacity, np.int16)

    @contextmanager
    def scratch(self, count: int = 1) -> Iterator[list[FloatArray]]:
        """``count`` zeroed buffers, each at least one longer than the rows (the last slot
        takes what ``-1``, a missing neighbour, points at). The user sets back to 0 what it
        wrote; if it fails halfway, the buffers are cleared."""
        while len(self._scratch) < count:
            self._scratch.append(np.zeros(1, np.float64))
        for i in range(count):
            if len(self._scratch[i]) < self.size + 1:
                self._scratch[i] = np.zeros(self.capacity + 1, np.float64)
        buffers = self._scratch[:count]
        try:
            yield buffers
        except BaseException:
            for buffer in buffers:
                buffer[:] = 0
            raise
        for buffer in buffers:
            buffer[-1] = 0

    def neighbours(self) -> tuple[IntArray, ...]:
        n = self.size
        return self.prev1[:n], self.prev2[:n], self.next1[:n], self.next2[:n]

    def append(self, codes: RowCodes, words: Words, rows: list[Any]) -> _NewPostings:
        """Add ``rows`` (from :meth:`_Source.keyword_rows`) after the current ones; return
        their postings for :meth:`add_postings` (a bulk load adds many chunks' at once).
        Stop words are indexed too: FTS5 indexes them, and a query word like "one" stems to
        one ("on")."""
        self.reserve(len(rows), exact=len(rows) >= _CHUNK)
        self.append_columns(codes, rows)
        start, end = self.size, self.size + len(rows)
        texts = [_text(row) for row in rows]
        found = [tokens(text) for text in texts]
        lengths = np.fromiter(map(len, found), np.int32, len(found))
        self.lengths[start:end] = lengths
        self.near_lengths[start:end] = lengths
        self.far_lengths[start:end] = lengths
        long = [i for i, text in enumerate(texts) if len(text) > FAR_CHARS]
        heads: list[list[list[str]]] = [[], []]
        for i in long:
            for cut, lengths_of, head in (
                (NEAR_CHARS, self.near_lengths, heads[0]),
                (FAR_CHARS, self.far_lengths, heads[1]),
            ):
                head.append(tokens(texts[i][:cut]))
                lengths_of[start + i] = len(head[-1])
        self._link(start, end)
        self._dates(start, end)
        self.size = end
        self.last_seq = int(rows[-1][0])
        long_rows = np.asarray(long, np.int32) + start
        whole = postings_of(words, [found[i] for i in long], long_rows)
        return _NewPostings(
            own=postings_of(words, found, np.arange(start, end, dtype=np.int32)),
            near=beyond(whole, postings_of(words, heads[0], long_rows)),
            far=beyond(whole, postings_of(words, heads[1], long_rows)),
        )

    def _link(self, start: int, end: int) -> None:
        """Chain each new row to the two before it in its session; grow the row sizes (a
        neighbour's head is in the context of the rows it neighbours)."""
        sessions, sizes = self.sessions, self.sizes
        lengths, near, far = self.lengths, self.near_lengths, self.far_lengths
        added = 0
        for row in range(start, end):
            session = int(sessions[row])
            last, before = self._tails.get(session, (-1, -1))
            self._tails[session] = (row, last)
            own = int(lengths[row]) + _DATE_TOKENS
            for neighbour, heads, backward, forward in (
                (last, near, self.prev1, self.next1),
                (before, far, self.prev2, self.next2),
            ):
                if neighbour >= 0:
                    backward[row], forward[neighbour] = neighbour, row
                    own += int(heads[neighbour])
                    sizes[neighbour] += int(heads[row])
                    added += int(heads[row])
            sizes[row] = own
            added += own
        self.total_tokens += added

    def _dates(self, start: int, end: int) -> None:
        """The day, month and year (UTC) the context of each new row spells out."""
        at = self.times[start:end].astype("datetime64[us]")
        months = at.astype("datetime64[M]")
        self.years[start:end] = months.astype("datetime64[Y]").astype(np.int64) + 1970
        self.months[start:end] = months.astype(np.int64) % 12 + 1
        self.days[start:end] = (at.astype("datetime64[D]") - months).astype(np.int64) + 1

    def add_postings(self, added: Sequence[_NewPostings]) -> None:
        """Add the postings :meth:`append` returned (one or more chunks')."""
        for kind in ("own", "near", "far"):
            triples = [getattr(new, kind) for new in added]
            postings: Postings = getattr(self, kind)
            postings.add(*(concat(triples) if len(triples) > 1 else triples[0]))

    def postings(self, term: int) -> tuple[IntArray, Counts]:
        return self.own.get(term)

    def date_rows(self, stem: str) -> IntArray | None:
        """The rows whose date (in their context) contains the token ``stem``."""
        dated = self.date_match(stem, slice(0, self.size))
        return None if dated is None else np.flatnonzero(dated).astype(np.int32)

    def date_match(self, stem: str, rows: IntArray | slice) -> npt.NDArray[np.bool_] | None:
        """Which of ``rows`` have the token ``stem`` in their date; None when it is no
        date token."""
        column, value = None, 0
        if stem in _MONTH_STEMS:
            column, value = self.months, _MONTH_STEMS[stem]
        elif stem.isascii() and stem.isdigit() and len(stem) <= 4 and stem == str(int(stem)):
            value = int(stem)
            if 1 <= value <= 31:
                column = self.days
            elif len(stem) == 4:
                column = self.years
        if column is None:
            return None
        matched: npt.NDArray[np.bool_] = column[rows] == value
        return matched

    def nbytes(self) -> int:
        # seven int32 arrays, one float64, three int16
        per_row = self.lengths.nbytes * 9 + self.days.nbytes * 3
        postings = self.own.nbytes() + self.near.nbytes() + self.far.nbytes()
        return self.column_bytes() + per_row + postings


_MONTH_STEMS = {Words().stem(month): number for number, month in enumerate(_MONTHS, 1)}


class KeywordCache:
    """In-memory BM25 over the keyword rows of one database, refreshed from the log.

    A partition is built the first time a search reads it: by that search if it is small, in
    a background thread if not (unless ``background=False``). Until it is ready
    (:meth:`ready`), the store ranks with FTS5, so a process's first search does not wait
    while a whole partition is tokenized (3 s at 100k events, the time a command-line search
    would otherwise take).
    """

    def __init__(
        self,
        source: _Source,
        *,
        background: bool = True,
        snapshots: KeywordSnapshots | None = None,
        budget: CacheBudget | None = None,
    ) -> None:
        self._source = source
        self.background = background
        self._snapshots = snapshots
        self._lock = threading.Lock()
        self._partitions: dict[str, _Partition] = {}
        #: the process's byte limit over every cache (ranking/budget.py)
        self._budget = budget or process_budget()
        self._generation = -1
        self._codes = RowCodes()
        self._words = Words()
        #: the generation each partition was last built whole at (what ready() checks)
        self._built: dict[str, int] = {}
        self._builder: threading.Thread | None = None
        self._builder_lock = threading.Lock()  # one decision to build at a time
        self._stop = threading.Event()
        _CACHES.add(self)

    def invalidate(self) -> None:
        with self._lock:
            self._partitions.clear()
            self._budget.forget(self)
            self._built.clear()
            self._generation = -1

    def _drop_evicted(self) -> None:
        """Let go of the partitions the process's byte limit dropped (under the lock); they
        are read again when next searched — from a snapshot written now, when the partition
        was built whole and has none of about its size (:meth:`_keep_on_disk`)."""
        for name in self._budget.take_dropped(self):
            part = self._partitions.pop(name, None)
            if part is not None and self._built.pop(name, None) == self._generation:
                self._keep_on_disk(name, part)

    def _keep_on_disk(self, name: str, part: _Partition) -> None:
        """Save a partition the byte limit drops, of any size, unless its snapshot is less than
        :data:`REWRITE_GROWTH` behind it: reading it again then costs a file's load (~2 ms at
        1,000 events) instead of tokenizing every event again (~23 ms), and a process
        serving more agents than its limit holds reads them again at most searches
        (docs/decisions/2026-11-29-dropped-partitions-kept-on-disk.md). Saved as any
        snapshot is: only while the store's generation is the partition's (an erasure
        since leaves no file)."""
        if self._snapshots is None or not part.size:
            return
        if part.snapshot_size and part.size < part.snapshot_size * (1 + REWRITE_GROWTH):
            return
        self._snapshots.save(name, part, self._codes, self._words, self._generation)

    def close(self) -> None:
        """Stop a background build (between two chunks) and forget everything."""
        self._stop.set()
        builder = self._builder
        if builder is not None:
            builder.join(_STOP_TIMEOUT)
        self.invalidate()

    def ready(self, partitions: Sequence[str]) -> bool:
        """Whether a search of ``partitions`` ranks in memory now. A partition not built for
        the current generation is built here if it is small (:data:`_BUILT_IN_SEARCH` chunks
        of rows at most); a bigger one goes on building in the background, and until it is
        done the answer is no."""
        if not self.background:
            return True
        generation = self._source.generation()
        # Never waiting for the lock: a background build holds it for seconds, and this
        # answer is what lets the search go to FTS5 meanwhile (the drops wait for the search).
        if self._lock.acquire(blocking=False):
            try:
                self._drop_evicted()
                for name in partitions:  # in use: the search that follows must find them
                    part = self._partitions.get(name)
                    if part is not None and self._built.get(name) == generation:
                        self._budget.charge(self, name, part.nbytes())
            finally:
                self._lock.release()
        missing = [name for name in partitions if self._built.get(name) != generation]
        if not missing:
            return True
        with self._builder_lock:
            if self._stop.is_set() or (self._builder is not None and self._builder.is_alive()):
                return False
            # A partition too big to build here is not started here either (tokenizing its
            # first chunks took 0.6 s of a first search at 1M events): one probe tells.
            small = [
                name
                for name in missing
                if name in self._partitions
                or not self._source.has_keyword_rows_beyond(name, _BUILT_IN_SEARCH * _CHUNK)
            ]
            if len(small) == len(missing):
                with self._lock:
                    for name in missing:
                        self._refresh(name, chunks=_BUILT_IN_SEARCH)
                    if all(self._built.get(name) == self._generation for name in missing):
                        return True
            # (decided before the thread starts: it puts a partition it builds from the log
            # in _partitions at once)
            loading = self._snapshots is not None and all(
                name in self._partitions or self._snapshots.path(name).exists() for name in missing
            )
            built = threading.Event()  # (set once the partitions are, before counting)
            self._builder = threading.Thread(
                target=self._build, args=(missing, built), name="asm-keyword-index", daemon=True
            )
            self._builder.start()
        if loading and built.wait(SNAPSHOT_WAIT):
            return all(self._built.get(name) == generation for name in missing)
        return False

    def wait_ready(self, partitions: Sequence[str], timeout: float) -> bool:
        """:meth:`ready`, waiting up to ``timeout`` seconds for a background build."""
        deadline = time.monotonic() + timeout
        while not self.ready(partitions):
            builder, left = self._builder, deadline - time.monotonic()
            if builder is None or left <= 0:
                return False
            builder.join(left)
        return True

    def _build(self, names: list[str], built: threading.Event) -> None:
        """Build partitions in the background: from their snapshot and the rows added since,
        or from the log (and then save a snapshot, for the next processes); ``built`` is set
        once they are (or the build gave up)."""
        try:
            with self._lock:
                for name in names:
                    if self._stop.is_set():
                        return
                    part = self._refresh(name)  # (from its snapshot, if it has one)
                    self._budget.charge(self, name, part.nbytes())
                    complete = self._built.get(name) == self._generation
                    # saved after a build from the log, or once the events added since the
                    # snapshot are a quarter of it (each process would tokenize them again)
                    grown = part.size >= part.snapshot_size * (1 + REWRITE_GROWTH)
                    if complete and grown and self._snapshots is not None:
                        self._snapshots.save(name, part, self._codes, self._words, self._generation)
                        part.snapshot_size = part.size
            built.set()
            for name in names:
                self._count_common(name)
        except Exception as exc:  # the next search tries again; FTS5 answers meanwhile
            log.warning("building the in-memory keyword index failed: %s", exc)
        finally:
            built.set()

    def _count_common(self, name: str) -> None:
        """Count BM25's ``n`` of the partition's common terms now, in the background, a few
        at a time (searches go between): the first search with such a word would have
        counted it (~2 ms a word at 1M events, most of a fresh process's slowest searches).
        Stop words are left out: queries drop them."""
        with self._lock:
            part = self._partitions.get(name)
            if part is None or self._built.get(name) != self._generation:
                return
            terms = common_terms(part)
            stems = self._words.stems_of(terms)
            stop = {self._words.stem(word) for word in STOP_WORDS}
        wanted = [(int(t), stem) for t, stem in zip(terms, stems, strict=True) if stem not in stop]
        for start in range(0, len(wanted), _COUNTED_TOGETHER):
            with self._lock:
                if self._stop.is_set() or self._partitions.get(name) is not part:
                    return
                for term, stem in wanted[start : start + _COUNTED_TOGETHER]:
                    document_frequency(part, term, stem, content_only=False)

    def _load(self, name: str) -> bool:
        """Start ``name`` from its snapshot (``_keyword_snapshots.py``), if it has a usable
        one."""
        if self._snapshots is None or not self._snapshots.path(name).exists():
            return False
        generation = self._source.generation()
        if generation != self._generation:
            self._partitions.clear()
            self._budget.forget(self)
            self._generation = generation

        def last_row(seq: int) -> Any:
            rows = self._source.keyword_rows(name, seq - 1, 1)
            return rows[0] if rows and rows[0][0] == seq else None

        part = self._snapshots.load(
            name, generation, self._codes, self._words, _Partition, last_row
        )
        if part is None:
            return False
        self._partitions[name] = part
        if part.size < _BUILT_IN_SEARCH * _CHUNK:
            return True  # (a small partition's temporaries are small: see below)
        # A query's per-term temporaries (hundreds of KB to MB at 1M rows) come from fresh
        # kernel pages while glibc's mmap threshold is at its start (128 KB); it rises when a
        # big mmapped block is freed, which a build from the log does many times and a load
        # does not: long queries on a loaded partition took 64 ms instead of 50. One 32 MB
        # block, freed at once, puts the process where a build would have.
        np.empty(_SETTLE_ALLOCATOR_BYTES // 8)
        return True

    def query_stems(self, text: str) -> list[str] | None:
        """See :meth:`~memlane.ranking.keyword.terms.Words.query_stems`."""
        with self._lock:
            return self._words.query_stems(text)

    def search(
        self,
        stems: Sequence[str],
        partitions: Sequence[tuple[str, bool]],
        agent_id: str,
        k: int,
        filters: RowQuery,
        *,
        content_only: bool,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(seq, bm25)`` over ``(partition, owner_only)`` pairs for the query
        ``stems`` (from :meth:`query_stems`)."""
        with self._lock:
            self._drop_evicted()
            parts = [(self._refresh(name), owner_only) for name, owner_only in partitions]
            for (name, _), (part, _) in zip(partitions, parts, strict=True):
                self._budget.charge(self, name, part.nbytes())
            parts = [(part, owner_only) for part, owner_only in parts if part.size]
            if not parts:
                return []
            query, matching = self._query(stems, [part for part, _ in parts], k, content_only)
            best = [
                rank(
                    part,
                    query,
                    part.mask(self._codes, owner_only, agent_id, filters),
                    [counts[p] for counts in matching],
                )
                for p, (part, owner_only) in enumerate(parts)
            ]
        seqs = np.concatenate([seqs for seqs, _ in best])
        scores = np.concatenate([scores for _, scores in best])
        order = np.lexsort((seqs, -scores))[:k]  # ties broken by storage order
        return [(int(seqs[i]), float(scores[i])) for i in order]

    def passage_scores(
        self,
        stems: Sequence[str],
        partitions: Sequence[tuple[str, bool]],
        candidates: Sequence[int],
        passages_of: Callable[[list[int]], Mapping[int, PassageTerms]],
        *,
        content_only: bool,
    ) -> dict[int, tuple[float, int]]:
        """The score of each long event among ``candidates`` (seqs a search of
        ``partitions`` found) by its best passage (:func:`~.scoring.best_passages`), on the
        scale of :meth:`search`'s scores for the same ``stems``, with that passage's index
        among those ``passages_of`` gave. ``passages_of`` gives the
        passages of the events asked (those of :data:`LONG_TOKENS` tokens or more; an event
        it leaves out is not scored); it is called without the lock (it reads the log)."""
        with self._lock:
            parts = self._searched(partitions)
            long = [
                int(seq)
                for part in parts
                for seq, row in zip(*_located(part, candidates), strict=True)
                if part.lengths[row] >= LONG_TOKENS
            ]
        if not long:
            return {}
        passages = passages_of(long)
        if not passages:
            return {}
        scores: dict[int, tuple[float, int]] = {}
        with self._lock:
            parts = self._searched(partitions)
            if not parts:
                return {}
            query, _ = self._query(stems, parts, len(passages), content_only)
            for part in parts:
                seqs, rows = _located(part, sorted(passages))
                if len(rows):
                    best, which = best_passages(part, query, rows, [passages[int(s)] for s in seqs])
                    found = zip(best.tolist(), which.tolist(), strict=True)
                    scores.update(zip(seqs.tolist(), found, strict=True))
        return scores

    def _searched(self, partitions: Sequence[tuple[str, bool]]) -> list[_Partition]:
        """The partitions of ``partitions`` that hold rows now (under the lock), as a search
        just read them (not refreshed again)."""
        found = (self._partitions.get(name) for name, _ in partitions)
        return [part for part in found if part is not None and part.size]

    def _query(
        self, stems: Sequence[str], parts: Sequence[_Partition], k: int, content_only: bool
    ) -> tuple[Query, list[list[int]]]:
        """The :class:`Query` of ``stems`` over ``parts`` (under the lock), with how many rows
        of each part each of its terms (strongest first) matches."""
        terms = self._words.terms(list(stems))
        # BM25's n of each term: its matching rows over all the partitions searched
        matching = [
            [document_frequency(part, term, stem, content_only) for part in parts]
            for term, stem in zip(terms, stems, strict=True)
        ]
        rows = sum(part.size for part in parts)
        hits = [sum(counts) for counts in matching]
        idf = [max(float(np.log((rows - n + 0.5) / (n + 0.5))), 1e-6) for n in hits]
        strongest = sorted(range(len(terms)), key=lambda i: -idf[i])  # (stable)
        query = Query(
            terms=[terms[i] for i in strongest],
            stems=[stems[i] for i in strongest],
            idf=[idf[i] for i in strongest],
            avgdl=sum(part.total_tokens for part in parts) / rows,
            k=k,
            content_only=content_only,
        )
        return query, [matching[i] for i in strongest]

    def _refresh(self, name: str, chunks: int | None = None) -> _Partition:
        """Read ``name``'s rows past the last one seen (at most ``chunks`` chunks of them:
        the rest is for a later call) and index them."""
        generation = self._source.generation()
        if generation != self._generation:
            self._partitions.clear()
            self._budget.forget(self)
            self._generation = generation
        part = self._partitions.get(name)
        if part is None and self._load(name):
            part = self._partitions.get(name)
        if part is None:
            part = self._partitions[name] = _Partition()
        added: list[_NewPostings] = []
        complete = False
        read = 0
        while chunks is None or read < chunks:
            read += 1
            if self._stop.is_set():  # closing: a half-read partition is dropped, not kept
                self._partitions.pop(name, None)
                return part
            rows = self._source.keyword_rows(name, part.last_seq, _CHUNK)
            if rows:
                added.append(part.append(self._codes, self._words, rows))
            if len(added) == _CHUNKS_PER_SEGMENT:  # a bulk load's transient memory stays bounded
                part.add_postings(added)
                added = []
            if len(rows) < _CHUNK:
                complete = True
                break
        if added:
            part.add_postings(added)
        if complete:
            self._built[name] = generation
        return part

    def memory_bytes(self) -> int:
        with self._lock:
            return sum(part.nbytes() for part in self._partitions.values())
