"""The per-row columns both in-memory indexes of a SQLite log keep, and the filters over them.

The vector cache (``_vector_cache.py``) and the keyword cache (``_keyword_cache.py``) each hold
one partition's rows in numpy arrays (an agent's private sessions, or one shared pool). Beside
the matrix or the postings, every row carries what a search filters on without asking the log:
its event's ``seq``, session, agent, kind and time. Strings are interned as small ints so a
filter is one vectorised comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ..core.seams import EventFilter
from .arrays import member

__all__ = ["Codes", "PartitionRows", "RowCodes", "RowQuery"]

Mask = npt.NDArray[np.bool_]
Index = npt.NDArray[np.intp]


class Codes:
    """Interns strings (session ids, agent ids, kinds) as small ints for fast numpy masks."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, value: str) -> int:
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.index)
        return found

    def lookup(self, value: str) -> int:
        return self.index.get(value, -1)


class RowCodes:
    """The interned sessions, agents and kinds of one cache (shared by its partitions)."""

    def __init__(self) -> None:
        self.sessions = Codes()
        self.agents = Codes()
        self.kinds = Codes()


@dataclass(frozen=True)
class RowQuery:
    """Filters applied to the cached rows before ranking."""

    session_id: str | None = None
    kinds: frozenset[str] | None = None
    since_us: int | None = None
    until_us: int | None = None
    allowed_seqs: npt.NDArray[np.int64] | None = None  # from a SQL `where` filter

    @classmethod
    def of(cls, flt: EventFilter, allowed: Callable[[], Sequence[int]]) -> RowQuery:
        """``flt`` as masks over the cached columns; what only the log can answer
        (:attr:`EventFilter.needs_log`) comes as the seqs ``allowed()`` lists."""
        return cls(
            session_id=flt.session_id,
            kinds=frozenset(flt.kinds) if flt.kinds else None,
            since_us=flt.since_us,
            until_us=flt.until_us,
            allowed_seqs=np.asarray(allowed(), np.int64) if flt.needs_log else None,
        )


_COLUMNS = (
    ("seqs", np.int64),
    ("sessions", np.int32),
    ("agents", np.int32),
    ("kinds", np.int32),
    ("times", np.int64),
)


class PartitionRows:
    """Growable per-row columns of one partition; subclasses add their own per-row arrays
    by extending :meth:`_resize`."""

    def __init__(self) -> None:
        self.size = 0
        self.seqs = np.zeros(0, np.int64)
        self.sessions = np.zeros(0, np.int32)
        self.agents = np.zeros(0, np.int32)
        self.kinds = np.zeros(0, np.int32)
        self.times = np.zeros(0, np.int64)

    @property
    def capacity(self) -> int:
        return len(self.seqs)

    def reserve(self, extra: int, *, exact: bool = False) -> None:
        needed = self.size + extra
        if needed <= self.capacity:
            return
        # Grow geometrically so that a stream of small refreshes stays amortised O(n); a bulk
        # load reserves what it needs plus a little, so a 100k-event index is not doubled.
        grown = needed + max(256, needed // 16) if exact else max(needed, self.capacity * 2, 256)
        self._resize(grown)

    def _resize(self, capacity: int) -> None:
        for name, dtype in _COLUMNS:
            self._grow(name, capacity, dtype)

    def _grow(self, name: str, capacity: int, dtype: Any, fill: int = 0) -> None:
        old = getattr(self, name)
        # zeros, not full(): a big array of zeros gets pages from the kernel as it is written,
        # so capacity reserved for later rows costs no memory until then (a 1M-row partition
        # that grows by one row would otherwise hold twice its size at once)
        shape = (capacity, *old.shape[1:])
        grown = np.zeros(shape, dtype) if fill == 0 else np.full(shape, fill, dtype)
        grown[: self.size] = old[: self.size]
        setattr(self, name, grown)

    def append_columns(self, codes: RowCodes, rows: list[Any], first: int = 0) -> None:
        """Write the columns of ``rows`` (``(seq, session_id, agent_id, kind, created_us)`` at
        positions ``first`` … ``first + 4`` of each row) after the current rows. Capacity must
        be reserved; :attr:`size` is the caller's to advance."""
        start, end = self.size, self.size + len(rows)
        self.seqs[start:end] = [row[first] for row in rows]
        self.sessions[start:end] = [codes.sessions.code(row[first + 1]) for row in rows]
        self.agents[start:end] = [codes.agents.code(row[first + 2]) for row in rows]
        self.kinds[start:end] = [codes.kinds.code(row[first + 3]) for row in rows]
        self.times[start:end] = [row[first + 4] for row in rows]

    def mask(
        self,
        codes: RowCodes,
        owner_only: bool,
        agent_id: str,
        filters: RowQuery,
        rows: Index | None = None,
    ) -> Mask | None:
        """Which rows (all of them, or those at ``rows``) pass the filters; None when all do."""
        picked = slice(0, self.size) if rows is None else rows
        mask: Mask | None = None

        def narrow(condition: Mask) -> None:
            nonlocal mask
            mask = condition if mask is None else (mask & condition)

        if owner_only:
            narrow(self.agents[picked] == codes.agents.lookup(agent_id))
        if filters.session_id is not None:
            narrow(self.sessions[picked] == codes.sessions.lookup(filters.session_id))
        if filters.kinds is not None:
            wanted = [codes.kinds.lookup(kind) for kind in filters.kinds]
            narrow(member(self.kinds[picked], wanted))
        if filters.since_us is not None:
            narrow(self.times[picked] >= filters.since_us)
        if filters.until_us is not None:
            narrow(self.times[picked] < filters.until_us)
        if filters.allowed_seqs is not None:
            narrow(np.isin(self.seqs[picked], filters.allowed_seqs))
        return mask

    def column_bytes(self) -> int:
        return sum(getattr(self, name).nbytes for name, _ in _COLUMNS)
