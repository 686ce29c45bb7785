"""A thread-safe least-recently-used cache bounded by the size of what it holds.

Restore and search keep what they derive from an event (its passages' word counts, a JSON
output's records, a summary) by event: an agent reads the same events every turn, and
events never change once recorded. Several restores run at once, so the cache locks; what
it holds is weighed by ``size_of`` (bytes, characters, or 1 an entry) and the entries used
longest ago go first.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Final, Generic, Literal, TypeVar

__all__ = ["MISSING", "SizedLru"]

V = TypeVar("V")


class _Missing(enum.Enum):
    MISSING = "missing"


#: what :meth:`SizedLru.get` returns for a key it does not hold (None may be a value)
MISSING: Final = _Missing.MISSING


class SizedLru(Generic[V]):
    """At most ``limit`` of ``size_of(value)`` summed over the entries (at least one entry is
    kept, however large).

    >>> cache = SizedLru(limit=5, size_of=len)
    >>> cache.put("a", "abc"); cache.put("b", "de"); "a" in cache
    True
    >>> cache.put("c", "f"); "a" in cache, cache.get("b"), cache.get("z") is MISSING
    (False, 'de', True)
    """

    def __init__(self, limit: int, size_of: Callable[[V], int] = lambda _: 1) -> None:
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self.limit = limit
        self._size_of = size_of
        self._size = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | Literal[_Missing.MISSING]:
        """The value kept for ``key`` (now the most recently used), or :data:`MISSING`."""
        with self._lock:
            if key not in self._items:
                return MISSING
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: V) -> None:
        """Keep ``value`` for ``key`` (a key already held keeps its first value: two threads
        that made the same thing at once made equal things), then drop the oldest entries
        while over the limit."""
        with self._lock:
            if key not in self._items:
                self._items[key] = value
                self._size += self._size_of(value)
            self._items.move_to_end(key)
            while self._size > self.limit and len(self._items) > 1:
                self._size -= self._size_of(self._items.popitem(last=False)[1])

    @property
    def size(self) -> int:
        """The summed ``size_of`` of what is kept."""
        return self._size

    def values(self) -> list[V]:
        """What is kept, oldest used first (a copy)."""
        with self._lock:
            return list(self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._size = 0

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items
