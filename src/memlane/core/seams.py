"""The types on both sides of the storage seams: the log store and the vector index.

The engine composes two interfaces (``engine/storage.py``): a **log store**
(:class:`~memlane.store.base.Store`: sessions, events, the outbox, keyword search) and
a **vector index** (:class:`VectorIndex` here: upsert, delete, search, clear, count). Neither
package imports the other; what they exchange — filters, transactions, outbox rows, vectors —
is defined here, below both (docs/architecture.md, "Storage seams").

Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from .scope import Scope

__all__ = [
    "Cursor",
    "EventFilter",
    "OutboxRow",
    "SessionFilter",
    "Tx",
    "VectorIndex",
    "VectorMatch",
    "Vectors",
]

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EventFilter:
    """A restriction of event reads. ``scope=None`` is the operator's unscoped view."""

    scope: Scope | None
    include_shared: bool = True
    session_id: str | None = None
    event_id: str | None = None
    kinds: tuple[str, ...] | None = None
    exclude_kinds: tuple[str, ...] | None = None
    status: str | None = None
    #: events with none of these statuses (events without a status pass)
    exclude_statuses: tuple[str, ...] | None = None
    min_importance: float | None = None
    since_us: int | None = None
    until_us: int | None = None
    where: Mapping[str, Any] | None = None
    # operator filters (prune): the event's session
    session_status: str | None = None
    session_before_us: int | None = None  # the session's last activity is before this
    #: only the events expired at this moment (the sweep); otherwise reads never see them
    expired_by_us: int | None = None
    #: only events that never expire (summaries do not carry short-term memory on)
    lasting: bool = False
    #: only events stored after this ``seq`` (the extraction stage's watermark)
    after_seq: int | None = None

    @property
    def needs_log(self) -> bool:
        """Whether the filter reads more than a vector index keeps beside each vector
        (session, kind, time): metadata, status or importance are the log's to answer.

        >>> EventFilter(scope=None, kinds=("fact",)).needs_log
        False
        >>> EventFilter(scope=None, where={"tool": "grep"}).needs_log
        True
        """
        return bool(
            self.where
            or self.exclude_kinds
            or self.status
            or self.exclude_statuses
            or self.min_importance is not None
            or self.session_status
            or self.session_before_us is not None
            or self.expired_by_us is not None
            or self.lasting
            or self.after_seq is not None
        )


@dataclass(frozen=True)
class SessionFilter:
    """A restriction of session reads. ``scope=None`` is the operator's unscoped view."""

    scope: Scope | None
    include_shared: bool = True
    session_id: str | None = None
    agent_id: str | None = None
    status: str | None = None
    user_id: str | None = None
    key: str | None = None
    #: ids that start with this (the command line takes a unique prefix of an id)
    id_prefix: str | None = None
    #: the session's ``asm`` metadata value: what the library keeps in it ("user-memory",
    #: "knowledge")
    marked: str | None = None
    #: only the agents' own sessions: none the library keeps for itself (marked ones)
    unmarked: bool = False
    since_us: int | None = None  # updated at or after
    before_us: int | None = None  # updated before (prune)
    #: sessions whose goal, id or key contains this, ignoring case (the inspector's filter)
    text: str | None = None
    #: ``text`` looks only at this many sessions, the most recently active of those the
    #: other conditions select (a substring has no index: this bounds the scan)
    text_scan: int | None = None


class Cursor(Protocol):
    """What a statement returns (``sqlite3.Cursor``, psycopg's ``Cursor``)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class Tx(Protocol):
    """An open write transaction of the log (:meth:`Store.atomic
    <memlane.store.base.Store.atomic>`), typed so that ``mypy --strict`` checks every
    statement written across the seam."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement (``?`` placeholders) in the transaction."""
        ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def on_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` after the transaction commits (never if it rolls back)."""
        ...


class OutboxRow(NamedTuple):
    """An event claimed for embedding, with what a vector index keeps beside its vector.

    A long event is embedded as passages (``text/passages.py``): one row per passage, the
    event's fields repeated, ``part`` its number (0, 1, ...) and ``start``/``stop`` its span
    of ``content``. An event embedded whole has one row, ``part`` 0 and ``stop`` 0."""

    seq: int
    partition: str
    content: str
    session_id: str
    agent_id: str
    kind: str
    created_us: int
    part: int = 0
    start: int = 0
    stop: int = 0

    @property
    def text(self) -> str:
        """What is embedded: the passage, or the whole content."""
        return self.content[self.start : self.stop] if self.stop else self.content


class VectorMatch(NamedTuple):
    """A vector search's answer for one event: its best vector's cosine, and which vector
    that was (``part``; ``start``/``stop`` its passage's span, ``stop`` 0: the whole
    event)."""

    seq: int
    score: float
    part: int = 0
    start: int = 0
    stop: int = 0


class VectorIndex(Protocol):
    """Where vectors live and are searched: five operations, keyed by the event's ``seq``.

    Implementations: the log's own tables (SQLite BLOBs ranked by numpy, pgvector), which
    commit in the log's transactions (``transactional``), and Chroma, which is written after
    the log commits and audited against it (``index/chroma.py``). ``tx`` is the log's
    transaction for a transactional index and ``None`` for an external one.
    """

    #: vectors commit in the log's own transactions (a crash never splits them)
    transactional: bool
    #: search is exact (brute force); otherwise approximate (HNSW)
    exact: bool
    #: several processes (and hosts) may use the index at once
    multi_process: bool
    multi_host: bool
    #: what the index is ("numpy", "pgvector", "chroma-server", ...), for capabilities
    name: str
    #: where the index lives, for messages; "" when it is the log's own
    location: str

    def upsert(self, tx: Tx | None, rows: Sequence[OutboxRow], vectors: Vectors) -> None:
        """Store one vector per row: per event, one whole or one per passage (``part``)."""
        ...

    def delete(self, tx: Tx | None, seqs: Sequence[int]) -> None:
        """Forget the vectors of these events."""
        ...

    def search(
        self,
        query: Vectors,
        flt: EventFilter,
        partitions: Sequence[tuple[str, bool]],
        k: int,
        allowed: Callable[[], Sequence[int]],
    ) -> list[VectorMatch]:
        """The best ``k`` events among those of ``partitions`` (``(partition, owner_only)``
        pairs from :meth:`Scope.partitions <memlane.core.scope.Scope.partitions>`) that
        ``flt`` admits, best first, each once, scored by its best vector (its best passage).
        When :attr:`EventFilter.needs_log`, ``allowed()`` lists the events the log admits."""
        ...

    def clear(self, tx: Tx | None) -> None:
        """Forget every vector (a reindex embeds the log again)."""
        ...

    def count(self, partition: str | None = None) -> int:
        """Vectors held (in one partition, or in all; a long event's passages count one
        each)."""
        ...

    def seqs(self, partition: str) -> set[int]:
        """The events of ``partition`` that have a vector (an audit against the log)."""
        ...

    def size_bytes(self) -> int:
        """Bytes the index takes outside the log's own database (0 when it is inside)."""
        ...

    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """The ``(start, stop)`` spans each of ``seqs`` was indexed by, for the events cut
        into passages (restore shows a long event by the passages the index holds); an
        index that cannot say cheaply answers ``{}``, and restore cuts them again."""
        ...

    def close(self) -> None: ...
