"""Search over one agent's scope: semantic (cosine), keyword (BM25 / full text), or hybrid.

Written once for every backend: the store answers the two primitive rankings
(:meth:`~memlane.store.base.Store.keyword_search` and
:meth:`~memlane.engine.storage.Storage.search_vectors`); fusion, time windows,
read-your-writes and recall counting happen here.

Keyword search matches words in an event's own text. Hybrid also matches them in the event's
context (its neighbours in the session and its date; migration 0002_keyword_context) and fuses
that keyword ranking with the semantic one by weighted reciprocal rank fusion; when the query
names a time ("on 3 June, 2025", "in March", "yesterday"; see ``search/when.py``) a third
ranking — the fused candidates that fall inside that time, in fused order — joins the fusion.
Two more lists join when the query asks for them: the candidates written by the speaker it
names ("the questions I asked", "what did Caroline say": ``search/speaker.py``), and for a
request for work in one session, the user's standing rules (``search/rules.py``).
A long event in hybrid's keyword ranking scores the better of its whole text and its best
passage (with its context), and a hybrid hit shows the passage of the half that placed it
higher, or one whose line holds more of the query's words together (``search/long_hits.py``).
Each search first embeds what it needs of what is still pending in the partitions it reads
(read-your-writes, bounded: ``Indexer.catch_up``), and counts one recall for every event it
returns (restore ranks frequently recalled events higher).

The fusion settings below were measured on the development half of LoCoMo (bench/locomo.py;
docs/decisions/2026-11-22-hybrid-ranking-defaults.md has the ablation). They are general choices,
not fitted per dataset: the keyword ranking (porter-stemmed BM25 over an event and its context) is
the stronger of the two on conversational memory, and a small RRF constant lets the top of each
ranking decide.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, Protocol

import numpy as np

from ..core.clock import now_us, to_us
from ..core.scope import Scope, partition_of
from ..core.seams import VectorMatch, Vectors
from ..errors import InvalidInput, StoreFull, StoreReadOnly, StoreUnavailable, shown
from ..events import Event, Hit, Hits, Passage, validate_kinds
from ..store.base import EventFilter, SearchedLog
from ..text.instructions import INSTRUCTION_CANDIDATES, INSTRUCTION_WORDS, USER_MESSAGES
from ..text.passages import Cutter
from .fusion import reciprocal_rank_fusion, tied_ranks
from .long_hits import LongHits
from .recalls import RecallCounts
from .recency import Recency
from .records import best_records
from .rules import is_task_request, newest_first, ranked_rules
from .speaker import mentions_a_name, named_in, speaker_named, speaker_of
from .when import time_windows, with_days_as_written

__all__ = ["QueryEmbedding", "Searcher", "VectorSearch"]


class VectorSearch(Protocol):
    """What a search needs of the engine's storage (:class:`~memlane.engine.storage.Storage`):
    the log, and vector search that reaches whichever index holds the vectors."""

    @property
    def log(self) -> SearchedLog: ...

    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]: ...

    def search_vectors(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
    ) -> list[VectorMatch]: ...


class QueryEmbedding(Protocol):
    """What a search needs of the engine's indexer (:class:`~memlane.engine.indexer.Indexer`):
    queries' vectors, the bounded catch-up of events still waiting for theirs, and how it
    cuts long events into passages."""

    def catch_up(self, partitions: Sequence[str]) -> int: ...

    @property
    def cutter(self) -> Cutter: ...

    def query_vectors(self, texts: Sequence[str]) -> list[Vectors]: ...


log = logging.getLogger("memlane.search")

#: What a read may meet when the store cannot take writes: it answers anyway (reads must
#: not depend on writing), without its two side writes — recall counts and the catch-up of
#: pending embeddings.
_CANNOT_WRITE = (StoreReadOnly, StoreFull)

_MODES = ("hybrid", "semantic", "keyword")
# How deep each ranking goes before fusion: fusion needs more than k candidates per list to
# reward events that both rankings like, and 50 costs nothing at these sizes.
_FUSION_DEPTH = 50
# RRF constant: 60 (Cormack et al.) flattens the top of each list; 10 lets a first place count.
_FUSION_CONSTANT = 10
# Weights of the semantic and the keyword ranking in the fusion.
_SEMANTIC_WEIGHT = 1.0
_KEYWORD_WEIGHT = 1.5
# Weight of the ranking of candidates inside the time the query names (0 turns it off).
_TIME_WEIGHT = 1.0
# Weight of the ranking of candidates written by the speaker the query names ("the questions
# I asked": search/speaker.py; 0 turns it off), and by the person it names ("what did
# Caroline say": LoCoMo any@1 / @10 +3.1 / +0.2 at 0.5, +3.1 / -0.4 at 1.0).
_SPEAKER_WEIGHT = 1.0
_NAMED_WEIGHT = 0.5
# Weight of the ranking of the user's standing rules, for a request for work
# (search/rules.py; 0 turns it off). Above the other lists': a rule said in passing is in
# neither the semantic nor the keyword top 50 of the request it bears on, so at 1.0 its
# first place alone ranked it ~15th (tech chats any@10 0.699 -> 0.831 at 1.5).
_RULE_WEIGHT = 1.5
_QUERY_CACHE_SIZE = 256
# A long hit shows a passage whose one line holds more of the query's words together than
# the passage its ranking chose (False: the ranking's passage; for measurement).
_LINES_FIRST = True


_HELPERS: ThreadPoolExecutor | None = None
_HELPERS_LOCK = threading.Lock()


def _helpers() -> ThreadPoolExecutor:
    """This process's helper threads for the keyword half of hybrid searches, started on
    first use (idle ones cost nothing; the interpreter joins them at exit)."""
    global _HELPERS
    with _HELPERS_LOCK:
        if _HELPERS is None:
            _HELPERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="asm-search")
        return _HELPERS


class Searcher:
    def __init__(
        self,
        storage: VectorSearch,
        indexer: QueryEmbedding,
        scope: Scope,
        *,
        writes: bool = True,
        recalls: RecallCounts,
    ) -> None:
        self.storage = storage
        self.recalls = recalls
        self.store: SearchedLog = storage.log
        self.indexer = indexer
        self.scope = scope
        self.long_hits = LongHits(self.store, storage, lambda: indexer.cutter)
        #: False on a read-only store: searches skip their side writes (recall counts, the
        #: catch-up of pending embeddings) instead of trying them
        self.writes = writes
        #: why the last hybrid search went without its semantic half (the vector index could
        #: not be reached), or None; health() reports it
        self.index_error: str | None = None
        self._query_cache: OrderedDict[str, np.ndarray[Any, np.dtype[np.float32]]] = OrderedDict()
        # A manager is shared by threads (and by the async twin's pool): the LRU's
        # move_to_end/popitem pairs must not interleave. Embedding happens outside the lock.
        self._cache_lock = threading.Lock()

    def search(
        self,
        query: str,
        k: int,
        *,
        mode: str = "hybrid",
        session_id: str | None = None,
        kinds: str | Sequence[str] | None = None,
        where: Mapping[str, Any] | None = None,
        since: datetime | str | None = None,
        until: datetime | str | None = None,
        include_shared: bool = True,
        count_recall: bool = True,
        exclude: frozenset[int] = frozenset(),
        previews: bool = False,
        recency: Recency | None = None,
        current_only: bool = True,
        by_passages: bool | Literal["lines"] = True,
        shown_by_lines: bool = True,
        rule_candidates: Sequence[Event] | None = None,
    ) -> Hits:
        """The best ``k`` events for ``query`` (module docstring). ``by_passages=False``
        ranks long events whole in the keyword half; ``"lines"`` scores by their best
        passage only those made of short lines (:func:`~memlane.search.passage_terms.
        made_of_lines`: a log, a table, a config block: restore's choice, which ranks
        conversations whole); ``shown_by_lines=False`` leaves each
        long hit the passage its ranking chose (restore, which chooses what it shows of an
        event itself: re-choosing for its ~60 candidates cost it ~7-9 ms);
        ``rule_candidates``: :meth:`rule_messages` of the searched session, already read by
        the caller, for a search with no filter but the session (restore reads them once)."""
        if mode not in _MODES:
            raise InvalidInput(
                f"Unknown search mode {shown(mode)}; use one of {', '.join(_MODES)}."
            )
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidInput(f"k must be a positive integer, got {shown(k)}.")
        flt = EventFilter(
            self.scope,
            include_shared=include_shared,
            session_id=session_id,
            kinds=validate_kinds(kinds),
            since_us=None if since is None else to_us(since, "since"),
            until_us=None if until is None else to_us(until, "until"),
            where=where,
        )
        partitions = self._partitions(flt)
        # Expired short-term memory is invisible at once, though the sweep deletes it later:
        # every ranking (the caches, pgvector, Chroma) leaves it out here, with the depth to
        # still fill k (the partial index makes this read cost nothing while none waits).
        names = [name for name, _ in partitions]
        expired = self.store.expired_seqs(names, now_us())
        if expired:
            exclude = exclude | frozenset(expired)
        if current_only:  # a user's superseded or retracted facts are history, not answers
            stale = self.store.stale_seqs(names)
            if stale:
                exclude = exclude | frozenset(stale)
        depth = k + len(exclude) if mode != "hybrid" else max(_FUSION_DEPTH, k) + len(exclude)
        rankings: list[list[tuple[int, float]]] = []
        waiting: list[int] = []  # events the catch-up left without vectors
        spans: dict[int, tuple[int, int]] = {}  # the best passage of long events found
        keyword_spans: dict[int, tuple[int, int]] = {}  # ... by the keyword half
        if mode == "semantic":  # asked for vectors: an index that is down is an error
            rankings.append(self._semantic(query, depth, flt, partitions, waiting, spans))
        elif mode == "keyword":
            # Keyword mode matches the words in the event's own text, as a user of that mode
            # expects; the context (neighbours, date) only helps the hybrid ranking.
            rankings.append(self._keyword(query, depth, flt, partitions, content_only=True))
        else:
            # The halves are independent, and the semantic one spends its time outside the GIL
            # (onnxruntime, BLAS): the keyword ranking runs beside it in a helper thread
            # (measured at 100k events: docs/decisions/2026-11-23-keyword-ranking-in-memory.md).
            keyword = _helpers().submit(
                self._hybrid_keyword, query, depth, flt, partitions, by_passages=by_passages
            )
            try:
                rankings.append(
                    self._semantic_or_nothing(query, depth, flt, partitions, waiting, spans)
                )
            finally:
                ranking, keyword_spans = keyword.result()
                rankings.append(ranking)
        rankings = [[pair for pair in ranking if pair[0] not in exclude] for ranking in rankings]
        # each hit's place in each ranking (Hit.ranks): what made it come up, as ranked here
        named = ("keyword",) if mode == "keyword" else ("semantic", "keyword")
        places = {
            name: {seq: place for place, (seq, _) in enumerate(ranking, start=1)}
            for name, ranking in zip(named, rankings, strict=False)
        }
        # a long event shows the passage of the ranking that placed it higher (semantic on a tie)
        semantic_places = places.get("semantic", {})
        for seq, span in keyword_spans.items():
            keyword_place = places["keyword"].get(seq)
            if keyword_place is not None and (
                seq not in spans or keyword_place < semantic_places.get(seq, keyword_place + 1)
            ):
                spans[seq] = span
        rules = (
            self._rules(query, flt, partitions, exclude, rule_candidates)
            if mode == "hybrid"
            else []
        )
        if rules:  # (Hit.ranks: a rule may come up by this list alone)
            places["rule"] = {seq: place for place, seq in enumerate(rules, start=1)}
        if recency is not None:
            ranked = self._fuse_fresh(
                query, rankings, k, recency, hybrid=mode == "hybrid", rules=rules
            )
        elif mode == "hybrid":
            ranked = self._fuse(query, [[seq for seq, _ in r] for r in rankings], k, rules)
        else:
            ranked = rankings[0][:k]
        events = self.store.events_by_seq([seq for seq, _ in ranked], previews=previews)
        cutter = self.indexer.cutter
        if spans and shown_by_lines and _LINES_FIRST:
            spans = self.long_hits.shown_spans(query, events, spans)
        hits = Hits(
            (
                Hit(
                    events[seq],
                    score,
                    _passage(events[seq], spans.get(seq)),
                    {name: found[seq] for name, found in places.items() if seq in found},
                    # (restore reads a JSON output's records itself)
                    best_records(events[seq], query, cutter) if shown_by_lines else (),
                )
                for seq, score in ranked
                if seq in events
            ),
            waiting=sum(waiting),
        )
        if count_recall:
            self.count_recalls([hit.event.seq for hit in hits])
        return hits

    def count_recalls(self, seqs: Sequence[int]) -> None:
        """One more recall for each event: counted in memory, written in batches
        (``search/recalls.py``); never a reason for a read to fail."""
        if self.writes:
            self.recalls.add(seqs)

    def _keyword(
        self,
        query: str,
        depth: int,
        flt: EventFilter,
        partitions: list[tuple[str, bool]],
        *,
        content_only: bool,
    ) -> list[tuple[int, float]]:
        if not partitions:
            return []
        # "the dump from March 5" also asks for the 03 and 05 of a listing's 2026-03-05
        return self.store.keyword_search(
            with_days_as_written(query),
            flt,
            depth,
            content_only=content_only,
            partitions=partitions,
        )

    def _hybrid_keyword(
        self,
        query: str,
        depth: int,
        flt: EventFilter,
        partitions: list[tuple[str, bool]],
        *,
        by_passages: bool | Literal["lines"],
    ) -> tuple[list[tuple[int, float]], dict[int, tuple[int, int]]]:
        """Hybrid search's keyword half (with context), long events also scored by their
        best passage unless ``by_passages`` is false (``"lines"``: those made of short lines
        only), and the span of each one's best passage; run beside the semantic half."""
        ranked = self._keyword(query, depth, flt, partitions, content_only=False)
        if not by_passages:
            return ranked, {}
        lines_only = by_passages == "lines"
        return self.long_hits.by_passages(query, partitions, ranked, lines_only=lines_only)

    def _semantic_or_nothing(
        self,
        query: str,
        depth: int,
        flt: EventFilter,
        partitions: list[tuple[str, bool]],
        waiting: list[int],
        spans: dict[int, tuple[int, int]],
    ) -> list[tuple[int, float]]:
        """Hybrid search's semantic half. While the vector index cannot be reached (a Chroma
        server down), the keyword half answers alone — an agent's turn should not fail for
        want of vectors — and the outage is logged and reported by health()."""
        try:
            ranking = self._semantic(query, depth, flt, partitions, waiting, spans)
        except StoreUnavailable as exc:
            if self.index_error is None:
                log.warning("hybrid search answers by keyword only: %s", exc)
            self.index_error = str(exc)
            return []
        return ranking

    def _fuse_fresh(
        self,
        query: str,
        rankings: list[list[tuple[int, float]]],
        k: int,
        recency: Recency,
        *,
        hybrid: bool,
        rules: list[int],
    ) -> list[tuple[int, float]]:
        """The fusion of ``rankings`` (one mode's, or the hybrid pair, with their in-time
        list) and their best ``2k`` candidates ranked by freshness (``search/recency.py``). Equal
        scores share a rank here, so that freshness decides between memories the query finds
        alike."""
        lists = [[seq for seq, _ in ranking] for ranking in rankings]
        ranks = [tied_ranks([score for _, score in ranking]) for ranking in rankings]
        weights = [_SEMANTIC_WEIGHT, _KEYWORD_WEIGHT] if hybrid else [1.0]
        for more, weight in self._more_lists(query, lists, weights, rules) if hybrid else []:
            lists.append(more)
            ranks.append(list(range(1, len(more) + 1)))
            weights.append(weight)
        # Freshness reorders the best candidates only (twice k of them): over all of them, a
        # fresh event the query barely matched would climb past the ones it is about.
        best = reciprocal_rank_fusion(
            lists, 2 * k, constant=_FUSION_CONSTANT, weights=weights, ranks=ranks
        )
        events = self.store.events_by_seq([seq for seq, _ in best], previews=True)
        now = now_us()
        freshness = {seq: recency.freshness(events[seq], now) for seq, _ in best if seq in events}
        fresh = sorted(freshness, key=lambda seq: -freshness[seq])  # (stable: fused order)
        if fresh:
            lists.append(fresh)
            ranks.append(tied_ranks([freshness[seq] for seq in fresh]))
            weights.append(recency.weight)
        return reciprocal_rank_fusion(
            lists, k, constant=_FUSION_CONSTANT, weights=weights, ranks=ranks
        )

    def _in_time(self, query: str, lists: list[list[int]], weights: list[float]) -> list[int]:
        """The fused candidates inside the time the query names ("in May 2023"), in fused
        order (none when it names none)."""
        windows = time_windows(query) if _TIME_WEIGHT else []
        if not windows:
            return []
        fused = _fused_order(lists, weights)
        times = self.store.event_times(fused)
        return [
            seq
            for seq in fused
            if seq in times and any(window.contains(times[seq]) for window in windows)
        ]

    def _rules(
        self,
        query: str,
        flt: EventFilter,
        partitions: list[tuple[str, bool]],
        exclude: frozenset[int],
        candidates: Sequence[Event] | None = None,
    ) -> list[int]:
        """The user's messages in the searched session that set a standing rule, best
        matching first, when ``query`` asks for work (``search/rules.py``), else none (and
        none for a search over more than one session); ``candidates``: the session's rule
        candidates when the caller has read them."""
        if not _RULE_WEIGHT or flt.session_id is None or not is_task_request(query):
            return []  # rules are a session's, as restore pins them (and cheap to find there)
        if flt.kinds is not None and "message" not in flt.kinds:
            return []
        if candidates is None:
            candidates = self._rule_candidates(flt, partitions)
        users = [e for e in candidates if e.seq not in exclude]
        return self.rules_bearing_on(query, newest_first(users))

    def rules_bearing_on(self, query: str, messages: list[Event]) -> list[int]:
        """The seqs of the user's ``messages`` (newest first) that state the rules bearing
        most on ``query``, best first (``search/rules.py``: at most ``RULES_RANKED``), when
        it asks for work; none for a query that does not."""
        if not messages or not is_task_request(query):
            return []
        return ranked_rules(self.query_vector(query), messages, self._vectors)

    def rule_messages(self, session_id: str) -> list[Event]:
        """The user's messages of a session that best match an instruction's words, best
        first (at most ``INSTRUCTION_CANDIDATES``, read without payloads): where restore,
        and a request's rules list, look for standing rules (``text/instructions.py``)."""
        flt = EventFilter(self.scope, session_id=session_id)
        return self._rule_candidates(flt, self._partitions(flt))

    def _rule_candidates(self, flt: EventFilter, partitions: list[tuple[str, bool]]) -> list[Event]:
        """:meth:`rule_messages` within ``flt`` (its session, kinds aside, and filters)."""
        if not partitions:
            return []
        messages = replace(flt, kinds=("message",))
        hidden = frozenset(self.store.expired_seqs([name for name, _ in partitions], now_us()))
        wide = INSTRUCTION_CANDIDATES * 3

        def users_among(found: list[tuple[int, float]]) -> tuple[int, list[Event]]:
            seqs = [seq for seq, _ in found if seq not in hidden]
            events = self.store.events_by_seq(seqs, previews=True)
            said = [events[seq] for seq in seqs if seq in events]
            return len(seqs), [e for e in said if e.metadata.get("role") == "user"]

        # the best of both roles first, the users kept in order: the same as asking for the
        # users alone while the list holds enough of them or all there are (the scores do
        # not depend on the filter); a role filter costs ~3 ms more at 10k events (SQL)
        read, users = users_among(
            self._keyword(
                INSTRUCTION_WORDS, wide + len(hidden), messages, partitions, content_only=True
            )
        )
        if len(users) < INSTRUCTION_CANDIDATES and read >= wide:
            # the other side's words crowd them out (an assistant's "make sure", "prefer")
            where = USER_MESSAGES if flt.where is None else {"$and": [flt.where, USER_MESSAGES]}
            _, users = users_among(
                self._keyword(
                    INSTRUCTION_WORDS,
                    INSTRUCTION_CANDIDATES + len(hidden),
                    replace(messages, where=where),
                    partitions,
                    content_only=True,
                )
            )
        return users[:INSTRUCTION_CANDIDATES]

    def _vectors(self, texts: Sequence[str]) -> list[Vectors]:
        """The texts' embeddings from the query LRU (agents repeat their queries; a session's
        rule sentences recur in every request), the missing ones embedded in one call of
        the model (a session's first request embeds its rules together, not ~3-5 ms each)."""
        found: dict[str, Vectors] = {}
        with self._cache_lock:
            for text in texts:
                cached = self._query_cache.get(text)
                if cached is not None:
                    self._query_cache.move_to_end(text)
                    found[text] = cached
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            made = self.indexer.query_vectors(missing)
            with self._cache_lock:
                for text, vector in zip(missing, made, strict=True):
                    found[text] = self._query_cache[text] = vector
                    self._query_cache.move_to_end(text)
                while len(self._query_cache) > _QUERY_CACHE_SIZE:
                    self._query_cache.popitem(last=False)
        return [found[text] for text in texts]

    def _fuse(
        self, query: str, lists: list[list[int]], k: int, rules: list[int]
    ) -> list[tuple[int, float]]:
        """Weighted RRF of the semantic and keyword lists, and of the lists the query adds."""
        weights = [_SEMANTIC_WEIGHT, _KEYWORD_WEIGHT]
        for more, weight in self._more_lists(query, lists, weights, rules):
            lists = [*lists, more]
            weights = [*weights, weight]
        return reciprocal_rank_fusion(lists, k, constant=_FUSION_CONSTANT, weights=weights)

    def _more_lists(
        self, query: str, lists: list[list[int]], weights: list[float], rules: list[int]
    ) -> list[tuple[list[int], float]]:
        """The ranked lists hybrid search adds to the semantic and keyword ones, with their
        weights: the candidates inside the time the query names, those written by the speaker
        it names, and the standing rules of a request (``rules``), each when there are any."""
        more = [
            (self._in_time(query, lists, weights), _TIME_WEIGHT),
            self._by_speaker(query, lists, weights),
            (rules, _RULE_WEIGHT),
        ]
        return [(ranking, weight) for ranking, weight in more if ranking]

    def _by_speaker(
        self, query: str, lists: list[list[int]], weights: list[float]
    ) -> tuple[list[int], float]:
        """The fused candidates written by the speaker the query names — a role ("the
        questions I asked") or a person by name ("what did Caroline say") — in fused order,
        with the list's weight (none when it names no one: ``search/speaker.py``)."""
        role = speaker_named(query) if _SPEAKER_WEIGHT else None
        if role is None and not (_NAMED_WEIGHT and mentions_a_name(query)):
            return [], 0.0
        fused = _fused_order(lists, weights)
        events = self.store.events_by_seq(fused, previews=True)
        messages = [
            (seq, events[seq]) for seq in fused if seq in events and events[seq].kind == "message"
        ]
        if role is not None:
            said = [seq for seq, e in messages if e.metadata.get("role") == role]
            return said, _SPEAKER_WEIGHT
        speakers = {seq: speaker_of(e.metadata) for seq, e in messages}
        named = {name for name in set(speakers.values()) if name and named_in(query, name)}
        if len(named) != 1:  # no one, or several: the query is not about one speaker
            return [], 0.0
        return [seq for seq, _ in messages if speakers[seq] in named], _NAMED_WEIGHT

    def warm_up(self, wait: float) -> bool:
        """Load what this scope's searches read (the model, by embedding a query; every
        partition's vectors; the keyword index, built in the background) with one search
        that counts no recall; wait up to ``wait`` seconds for the keyword index."""
        self.search("warm up", 1, count_recall=False)
        partitions = self._partitions(EventFilter(self.scope))
        return self.store.keyword_index_ready([name for name, _ in partitions], wait)

    def _partitions(self, flt: EventFilter) -> list[tuple[str, bool]]:
        """The ``(partition, owner_only)`` pairs a search with ``flt`` reads (none: a session
        this agent cannot see)."""
        if flt.session_id is not None:
            session = self.store.session(flt.session_id, self.scope)
            if session is None:
                return []
            return [(partition_of(session.agent_id, session.shared_pool), False)]
        # the grants are read at every search, so a revocation holds from the next one
        own_pools, granted = self.store.pool_view(self.scope.agent_id)
        return self.scope.partitions(own_pools, granted, include_shared=flt.include_shared)

    def _semantic(
        self,
        query: str,
        depth: int,
        flt: EventFilter,
        partitions: list[tuple[str, bool]],
        waiting: list[int],
        spans: dict[int, tuple[int, int]],
    ) -> list[tuple[int, float]]:
        """The vector ranking, after a bounded catch-up of pending embeddings (how many it
        left waiting is appended to ``waiting``; the span of each long event's best passage
        goes into ``spans``)."""
        if not partitions:
            return []
        try:
            if self.writes:
                waiting.append(self.indexer.catch_up([name for name, _ in partitions]))
        except _CANNOT_WRITE as exc:
            # Vectors cannot be stored now: events still waiting for theirs are found by
            # the keyword ranking only, until the store takes writes again.
            log.warning("search without catching up pending embeddings (%s)", exc)
        matches = self.storage.search_vectors(self.query_vector(query), flt, partitions, depth)
        self.index_error = None  # the index answered
        spans.update((m.seq, (m.start, m.stop)) for m in matches if m.stop)
        return [(m.seq, m.score) for m in matches]

    def query_vector(self, query: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        """The query's embedding, from a small LRU cache (agents repeat their queries)."""
        return self._vectors([query])[0]


def _fused_order(lists: list[list[int]], weights: list[float]) -> list[int]:
    """Every candidate of ``lists``, in the order their weighted fusion ranks them: the order
    the lists a query adds (its time, its speaker) keep."""
    candidates = len({seq for ranking in lists for seq in ranking})
    fused = reciprocal_rank_fusion(lists, candidates, constant=_FUSION_CONSTANT, weights=weights)
    return [seq for seq, _ in fused]


def _passage(event: Event, span: tuple[int, int] | None) -> Passage | None:
    """The passage of ``event`` at ``span`` (None: found whole, or a span its content no
    longer holds)."""
    if span is None or span[1] > len(event.content):
        return None
    start, stop = span
    return Passage(event.content[start:stop], start, stop)
