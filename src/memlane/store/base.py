"""The log store's interface: the primitive operations every log backend implements.

The façade (:class:`~memlane.SessionManager`), the operator's
:class:`~memlane.admin.StoreAdmin`, search, restore and export/import are written once,
on top of :class:`Store` and a :class:`~memlane.core.seams.VectorIndex`, which
``engine/storage.py`` composes. A log store holds sessions, events, the embedding outbox, ``meta``
and the keyword index over the events:

* :class:`~memlane.store.sqlite.SqliteStore` — one SQLite file (the default);
* :class:`~memlane.store.postgres.PostgresStore` — PostgreSQL.

Each also offers the vector index in its own database (:meth:`Store.vector_index`: float32
BLOBs ranked by numpy, or pgvector), whose vectors commit in the log's transactions; the
alternative is an external index (``index/chroma.py``) fed by the same outbox.

Isolation is never built by callers: reads take a :class:`~memlane.core.scope.Scope` (or
``None`` for the operator's unscoped view) inside an :class:`EventFilter` /
:class:`SessionFilter`, and each backend turns it into its own clause in one place.

What a backend cannot do it declares in :class:`Capabilities`; the conformance suite
(``memlane.testing``) checks each declaration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ..core.scope import Scope
from ..core.seams import EventFilter, OutboxRow, SessionFilter, Tx, VectorIndex, Vectors
from ..errors import SchemaTooNew
from ..events import Event, EventRecord, PoolGrant, Session, SessionRecord
from ..ranking.keyword.scoring import PassageTerms

__all__ = [
    "Capabilities",
    "DeferredEvent",
    "EventFilter",
    "KeywordSearch",
    "Log",
    "LogReader",
    "LogWriter",
    "Outbox",
    "OutboxBatch",
    "SearchedLog",
    "SessionFilter",
    "Store",
    "Transactions",
    "Tx",
    "Upkeep",
    "Vectors",
]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the conformance suite checks every ``False`` as well.

    Attributes:
        multi_process: several processes may open the store at once (SQLite: on one machine;
            PostgreSQL and a Chroma server: from many hosts). Chroma's embedded client cannot:
            a second process is refused with a clear error.
        multi_host: processes on different machines may share the store.
        keyword_context: the keyword index also sees each event's neighbours and date
            (docs/decisions/2026-11-22-hybrid-ranking-defaults.md).
        exact_vectors: semantic search is exact (brute force over the vectors as stored: in
            half precision on SQLite); otherwise approximate (HNSW).
        transactional_vectors: vectors commit in the log's own transactions.
    """

    name: str
    multi_process: bool
    multi_host: bool
    keyword_context: bool
    exact_vectors: bool
    transactional_vectors: bool


@dataclass(frozen=True, slots=True)
class DeferredEvent:
    """What the worker reads of an event it owes a digest (``Store.deferred_events``)."""

    seq: int
    content: str
    payload_json: str | None
    metadata_json: str
    indexed: bool


class OutboxBatch(Protocol):
    """Outbox rows claimed for embedding (from :meth:`Store.claim_outbox`)."""

    #: in seq order, each with what a vector index keeps beside its vector
    rows: list[OutboxRow]

    def finish(self, write: Callable[[Tx, list[OutboxRow]], None]) -> None:
        """Clear the rows from the outbox; in the same transaction, ``write(tx, kept)``
        stores what was made of them (the embedder's identity, a transactional index's
        vectors). ``kept``: the rows still this batch's — events deleted or queued again
        meanwhile are left out."""


class LogReader(Protocol):
    """What reads the log: sessions, events, pools and grants, scoped or by seq. A
    ``snapshot()`` gives several reads one consistent state."""

    #: the agent a database role confines this store's connections to (PostgreSQL
    #: row-level security); None when the connection sees every row
    confined_agent: str | None

    def snapshot(self) -> AbstractContextManager[Tx]:
        """A read transaction: every read given this ``tx`` sees one consistent state."""
        ...

    def session(self, session_id: str, scope: Scope | None) -> Session | None: ...

    def sessions(
        self,
        flt: SessionFilter,
        *,
        limit: int | None = None,
        oldest_first: bool = False,
        tx: Tx | None = None,
        lock: bool = False,
        offset: int = 0,
    ) -> list[Session]:
        """Sessions, most recently active first (or oldest first); ``offset`` skips that
        many first (pages)."""
        ...

    def session_sizes(
        self, session_ids: Sequence[str], tx: Tx | None = None
    ) -> dict[str, tuple[int, int]]:
        """``session id -> (events, tokens)``."""
        ...

    def pool_view(self, agent_id: str) -> tuple[set[str], set[str]]:
        """``(pools the agent has sessions in, pools it holds a grant on)``, read now."""
        ...

    def pool_grants(
        self, *, pool: str | None = None, agent_id: str | None = None, tx: Tx | None = None
    ) -> list[PoolGrant]:
        """The grants on ``pool`` / of ``agent_id`` (both None: all), by pool, owner first."""
        ...

    def agents(self) -> list[str]: ...

    def event(self, event_id: str, scope: Scope | None) -> Event | None: ...

    def events(
        self,
        flt: EventFilter,
        *,
        newest_first: bool = False,
        limit: int | None = None,
        after: tuple[int, int] | None = None,
        tx: Tx | None = None,
        previews: bool = False,
        offset: int = 0,
    ) -> list[Event]:
        """Events in log order (``created_us, seq``); ``after`` continues a keyset page,
        ``offset`` skips that many first.

        ``previews``: a large payload comes as its bounded preview (``Event.preview``), as
        restore() reads it, instead of in full."""
        ...

    def count_events(self, flt: EventFilter) -> int: ...

    def select_seqs(self, flt: EventFilter, *, live: bool = True) -> list[int]:
        """The seqs of the events ``flt`` selects (``live=False``: expired ones too)."""
        ...

    def stale_seqs(self, partitions: Sequence[str]) -> list[int]:
        """Events of these partitions no longer current (superseded or retracted facts)."""
        ...

    def expired_seqs(self, partitions: Sequence[str], now: int) -> list[int]:
        """Events of these partitions expired at ``now`` but not swept yet."""
        ...

    def kind_counts(self, flt: EventFilter, tx: Tx | None = None) -> dict[str, int]: ...

    def sessions_touched(self, flt: EventFilter, tx: Tx | None = None) -> int: ...

    def event_sessions(self, flt: EventFilter, tx: Tx | None = None) -> list[str]:
        """The ids of the sessions holding events that ``flt`` selects."""
        ...

    def events_by_seq(self, seqs: Sequence[int], *, previews: bool = False) -> dict[int, Event]: ...

    def event_times(self, seqs: Sequence[int]) -> dict[int, int]: ...

    def event_contents(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        """The id and content of each live event of ``seqs`` (what cutting a long event into
        passages reads: a full read of its row cost search ~4 ms a restore)."""
        ...

    def get_meta(self, key: str, tx: Tx | None = None) -> str | None: ...

    def buffer_epoch(self) -> int:
        """The Redis working buffer's epoch (``meta.buffer_epoch``, 0 if never moved)."""
        ...


class Transactions(Protocol):
    """Write transactions: committed on success, rolled back on any exception."""

    def atomic(self) -> AbstractContextManager[Tx]:
        """A write transaction: committed on success, rolled back on any exception."""
        ...


class LogWriter(Transactions, Protocol):
    """What writes the log, inside ``atomic()``: the ownership check, sessions and events
    (each event with its outbox row), statuses, metadata, grants, ``meta``, recall counts."""

    def owner_of(self, tx: Tx, session_id: str) -> tuple[str, str, str | None] | None:
        """``(agent_id, status, shared_pool)`` of a session, unscoped and locked for the rest
        of the transaction: what write checks are made from."""
        ...

    def insert_session(self, tx: Tx, record: SessionRecord) -> bool:
        """Insert a session; False if one with that id exists (left as it is)."""
        ...

    def insert_event(self, tx: Tx, record: EventRecord, *, touch_us: int | None) -> int | None:
        """Append an event and its outbox row; return its seq, or None if the id exists.
        ``touch_us`` also sets the session's ``updated_us``."""
        ...

    def set_session_status(self, tx: Tx, session_id: str, status: str, now: int) -> None: ...

    def claim_event_status(self, tx: Tx, event_id: str, before: str | None, after: str) -> bool:
        """Compare-and-set an event's status; True if it was ``before``."""
        ...

    def set_event_metadata(self, tx: Tx, event_id: str, metadata_json: str) -> None: ...

    def set_pool_access(
        self, tx: Tx, pool: str, agent_id: str, access: str | None, at_us: int, by: str
    ) -> bool:
        """Grant ``access`` ("owner", "write", "read"; None revokes); False when nothing
        changed (a second owner, a grant on the owner, revoking what was not granted)."""
        ...

    def set_meta(self, tx: Tx, key: str, value: str) -> None: ...

    def bump_buffer_epoch(self, tx: Tx) -> int:
        """Atomically add one to the buffer's epoch in ``tx``; return the new value."""
        ...

    def bump_recall(self, seqs: Sequence[int] | Mapping[int, int]) -> None:
        """Add one recall to each of ``seqs`` (once, however often it is listed), or
        ``count`` to each ``seq`` of a ``{seq: count}`` mapping: one transaction."""
        ...


class KeywordSearch(Protocol):
    """The log's keyword index, ranked (FTS5 / tsvector, or the in-memory BM25 over them)."""

    def keyword_search(
        self,
        text: str,
        flt: EventFilter,
        limit: int,
        *,
        content_only: bool,
        partitions: Sequence[tuple[str, bool]] | None = None,
    ) -> list[tuple[int, float]]:
        """``(seq, score)`` best first; ``content_only`` matches the event's own text only,
        otherwise its keyword context too. ``partitions`` (``(partition, owner_only)`` pairs,
        as for vector searches) are those ``flt``'s scope may read; a store may rank within
        them instead of filtering the whole index by scope."""
        ...

    def keyword_passage_scores(
        self,
        text: str,
        partitions: Sequence[tuple[str, bool]],
        candidates: Sequence[int],
        passages_of: Callable[[list[int]], Mapping[int, PassageTerms]],
    ) -> dict[int, tuple[float, int]]:
        """The hybrid keyword score of each long event among ``candidates`` (found by a
        search of ``partitions`` for ``text``) by its best passage, on the scale of
        :meth:`keyword_search`'s scores (``ranking/keyword/scoring.py``'s
        ``best_passages``), with that passage's index; ``passages_of(seqs)`` gives the
        passages of the events it asks for. Empty when the store ranks in SQL now (FTS5,
        ``ts_rank``): events are then scored whole."""
        ...

    def keyword_index_ready(self, partitions: Sequence[str], wait: float = 0.0) -> bool:
        """Whether keyword searches of ``partitions`` rank in memory now (a store without an
        in-memory index: always). One not built yet starts building in the background;
        wait up to ``wait`` seconds for it."""
        ...


class Outbox(Transactions, Protocol):
    """The embedding outbox and the work the background worker owes the log: claims,
    deferred digests, requeues, and the log's own vector index."""

    def pending_count(self, partitions: Sequence[str] | None = None) -> int: ...

    def oldest_pending_us(self) -> int | None:
        """When the event waiting longest for its embedding was recorded; None if none."""
        ...

    def claim_outbox(
        self,
        limit: int,
        partitions: Sequence[str] | None = None,
        *,
        force: bool = False,
        seqs: Sequence[int] | None = None,
    ) -> AbstractContextManager[OutboxBatch]:
        """Claim up to ``limit`` pending events for embedding.

        The background worker (no ``partitions``, no ``force``) skips rows another worker
        holds, so any number of workers share the outbox without double work. A search
        catching up on its partitions, or ``force`` (flush), takes every pending row; ``seqs``
        restricts a claim to those events (a search's own recent writes).
        """
        ...

    def deferred_events(self, limit: int) -> list[DeferredEvent]:
        """Up to ``limit`` events the worker still owes a digest, oldest first."""
        ...

    def finish_deferred(
        self, tx: Tx, seq: int, token_count: int, preview: str | None, text: str | None
    ) -> bool:
        """Store an event's digest: its exact ``token_count``, its payload ``preview`` and
        (unless it is not indexed: None) the ``text`` keyword search indexes; False when
        another worker got there first (nothing written)."""
        ...

    def vector_partitions(self) -> list[str]:
        """Every partition that holds events."""
        ...

    def embedded_seqs(self, partition: str) -> list[int]:
        """The events of ``partition`` that should have a vector (not waiting in the outbox)."""
        ...

    def requeue(self, seqs: Sequence[int]) -> int:
        """Queue these events for embedding again; return how many were queued."""
        ...

    def requeue_all(self, tx: Tx) -> int:
        """Drop the embedder identity, queue every event again and rebuild the keyword
        index, in ``tx``. Returns the number of events queued."""
        ...

    def vector_index(self) -> VectorIndex:
        """The vector index in the log's own database (vectors that commit with the log)."""
        ...


class Upkeep(Protocol):
    """What keeps the store: its own rows' deletes (only through
    :class:`~memlane.engine.storage.Storage`), expiry sweeps, physical scrubs, footprint,
    statistics and the import's existence checks."""

    def delete_session_rows(self, tx: Tx, session_id: str) -> int:
        """Delete a session, its events and the projections the log itself holds; return
        the count. Only :meth:`memlane.engine.storage.Storage.delete_session` calls it: an
        external vector index loses the events' vectors there (which is why the log's method
        has another name than the one everything else calls)."""
        ...

    def delete_event_rows(self, tx: Tx, flt: EventFilter) -> int:
        """Delete the events matching ``flt``, expired or not (and the projections the log
        holds); return the count. Only :meth:`memlane.engine.storage.Storage.delete_events`
        calls it, for the same reason as :meth:`delete_session_rows`."""
        ...

    def expiry_cutoff(self, now: int, batch: int) -> int | None:
        """An expiry time ``<= now`` below which about ``batch`` expired events lie (None:
        none has expired): the sweep's batches."""
        ...

    def secure_deletes(self) -> AbstractContextManager[None]:
        """Deletes by this thread meanwhile overwrite the data they free, where the backend
        can (SQLite's ``secure_delete``)."""
        ...

    def scrub(self, partitions: Sequence[str]) -> list[str]:
        """Make committed deletes physical: what lingers after a delete (index segments, the
        write-ahead log, dead rows, snapshot files of ``partitions``) is merged, truncated,
        vacuumed or removed; return notes on what could not be reached."""
        ...

    def footprint(self) -> tuple[int, int | None, str | None]:
        """``(bytes stored, bytes of its write-ahead log or None, schema version)``."""
        ...

    def maintenance(self) -> None:
        """Housekeeping the background worker runs between batches (a WAL checkpoint)."""
        ...

    def settle(self) -> None:
        """The application is done writing for now (``SessionManager.flush()``): leave
        everything in the store's own file(s) — a SQLite store copies its WAL back and
        empties it when no other connection is reading it — without waiting for anyone."""
        ...

    def stats(self) -> dict[str, Any]:
        """``size_bytes``, ``vectors``, ``migrations``, ``events_by_agent`` (agent -> kind ->
        count) and ``sessions_by_status``."""
        ...

    def session_owner(self, session_id: str) -> tuple[str, str | None] | None:
        """``(agent_id, shared_pool)`` of any session (import's check)."""
        ...

    def event_exists(self, event_id: str) -> bool: ...

    def close(self) -> None: ...


class Store(LogReader, LogWriter, KeywordSearch, Outbox, Upkeep, Protocol):
    """A log store: sessions, events, the outbox, ``meta`` and the keyword index — every
    role above. A caller names the smallest role it uses (a search reads and ranks, the
    worker drains the outbox), so what it can reach is what its type says."""

    capabilities: Capabilities
    #: where the store lives, for messages (a path or a URL without its password)
    location: str


class Log(LogReader, LogWriter, Protocol):
    """Reads and writes of the log, without its upkeep or its outbox: what the write path,
    pools and user memory use."""


class SearchedLog(LogReader, KeywordSearch, Protocol):
    """What a search reads: the log and its keyword index."""


def batched(values: Sequence[Any], size: int = 500) -> Iterator[list[Any]]:
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


def refuse_unknown_migrations(applied: set[str], known: set[str], location: str) -> None:
    """Raise :class:`SchemaTooNew` when a store holds migrations this version does not know."""
    unknown = sorted(applied - known)
    if unknown:
        raise SchemaTooNew(
            f"The store {location} has schema migrations this version does not know "
            f"({', '.join(unknown)}); it was written by a newer memlane. "
            "Upgrade: pip install -U memlane."
        )
