"""The bytes this process's in-memory indexes may hold, least recently used partitions first
to go.

A process that serves many agents reads each agent's partition into the keyword and the
vector cache the first time it searches it, and kept every one: 1,000 agents of 1,000 events
held all of them for the life of the process. Every cache of the process (both kinds, every
store) now reports each partition's size when a search uses it; past the limit, the partitions
used longest ago are dropped and read again (from the log, or a snapshot) when next searched.

Two rules keep that from costing more than it saves:

- The :data:`KEEP_RECENT` partitions used last are never dropped: the partitions of the
  searches running now (a hybrid search uses one of each kind, over an agent's private
  partition and its pools) would otherwise push each other out at every search. The limit
  can be exceeded by what those hold.
- A cache is never reached into from outside its own lock: the budget queues a drop for its
  owner (:meth:`CacheBudget.take_dropped`), which lets go of it at its next use; its bytes
  leave the count at once.

The limit is :func:`set_cache_limit` (``memlane.set_cache_limit``), or the environment's
``MEMLANE_CACHE_LIMIT`` (bytes, or with a unit: ``512MB``, ``2GB``) read when the first cache
is made; 1 GiB by default, ``none`` for no limit.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import InvalidInput, shown

__all__ = [
    "DEFAULT_LIMIT",
    "KEEP_RECENT",
    "CacheBudget",
    "CacheUsage",
    "cache_usage",
    "process_budget",
    "set_cache_limit",
]

#: the default limit: a million events of one agent fit (~570 MB of caches, measured in
#: docs/decisions/2026-11-26-memory-at-1m-events.md), a server of many agents stays bounded
DEFAULT_LIMIT = 1 << 30
#: the partitions used last stay, over the limit if need be (a few searches at once, each
#: over a keyword and a vector partition of an agent and of its pools)
KEEP_RECENT = 16
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


@dataclass(frozen=True)
class CacheUsage:
    """What the in-memory indexes of this process hold (:func:`cache_usage`): ``used``
    bytes in ``partitions`` partitions against ``limit`` (None: no limit), and how many
    partitions were dropped to stay within it since the process started."""

    limit: int | None
    used: int
    partitions: int
    dropped: int


@dataclass
class _Entry:
    owner: int
    name: str
    nbytes: int


class CacheBudget:
    """One limit over every cache that charges it (see the module docstring)."""

    def __init__(self, limit: int | None, *, keep: int = KEEP_RECENT) -> None:
        self.limit = limit
        self.keep = keep
        # A leaf (nothing else is called while it is held), reentrant: a garbage collection
        # inside charge() may run an owner's finalizer, which takes it again.
        self._lock = threading.RLock()
        self._entries: OrderedDict[tuple[int, str], _Entry] = OrderedDict()
        self._used = 0
        self._dropped: dict[int, set[str]] = {}
        self._drops = 0

    def charge(self, owner: object, name: str, nbytes: int) -> None:
        """``owner``'s partition ``name`` holds ``nbytes`` and was just used; drop what the
        limit asks (queued for each owner: :meth:`take_dropped`)."""
        key = (id(owner), name)
        with self._lock:
            if key[0] not in self._dropped:  # first charge of this owner
                self._dropped[key[0]] = set()
                weakref.finalize(owner, self._forget_owner, key[0])
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = _Entry(key[0], name, 0)
            else:
                self._entries.move_to_end(key)
            self._used += nbytes - entry.nbytes
            entry.nbytes = nbytes
            self._dropped[key[0]].discard(name)
            if self.limit is not None and self._used > self.limit:
                self._shed()

    def _shed(self) -> None:
        assert self.limit is not None
        for key, entry in list(self._entries.items()):  # least recently used first
            if self._used <= self.limit or len(self._entries) <= self.keep:
                return
            del self._entries[key]
            self._used -= entry.nbytes
            self._dropped[entry.owner].add(entry.name)
            self._drops += 1

    def take_dropped(self, owner: object) -> set[str]:
        """The partitions ``owner`` is to let go of now (asked once)."""
        with self._lock:
            names = self._dropped.get(id(owner))
            if not names:
                return set()
            self._dropped[id(owner)] = set()
            return names

    def forget(self, owner: object, name: str | None = None) -> None:
        """``owner`` let go of ``name`` (every partition: None) by itself."""
        with self._lock:
            if name is not None:
                entry = self._entries.pop((id(owner), name), None)
                if entry is not None:
                    self._used -= entry.nbytes
                return
        self._forget_owner(id(owner))

    def _forget_owner(self, owner: int) -> None:
        with self._lock:
            for key in [key for key in self._entries if key[0] == owner]:
                self._used -= self._entries.pop(key).nbytes
            self._dropped.get(owner, set()).clear()

    def usage(self) -> CacheUsage:
        with self._lock:
            return CacheUsage(self.limit, self._used, len(self._entries), self._drops)


_PROCESS: CacheBudget | None = None
_PROCESS_LOCK = threading.Lock()


def process_budget() -> CacheBudget:
    """This process's budget, made with ``MEMLANE_CACHE_LIMIT`` (or the default) on first
    use."""
    global _PROCESS
    with _PROCESS_LOCK:
        if _PROCESS is None:
            setting = os.environ.get("MEMLANE_CACHE_LIMIT")
            limit = DEFAULT_LIMIT if setting is None else _parse(setting, "MEMLANE_CACHE_LIMIT")
            _PROCESS = CacheBudget(limit)
        return _PROCESS


def set_cache_limit(limit: int | str | None) -> None:
    """Set how many bytes the in-memory indexes of this process may hold (every store and
    agent together): an int, a size such as ``"512MB"``, or None for no limit. Partitions
    used longest ago are dropped at the next search to get within it.

    >>> import memlane
    >>> before = memlane.cache_usage().limit
    >>> memlane.set_cache_limit("512MB")
    >>> memlane.cache_usage().limit
    536870912
    >>> memlane.set_cache_limit(before)
    """
    if isinstance(limit, str):
        limit = _parse(limit, "set_cache_limit()")
    elif limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidInput(
            f"The cache limit must be a positive number of bytes, a size such as '512MB', or "
            f"None for no limit; got {shown(limit)}."
        )
    budget = process_budget()
    with budget._lock:
        budget.limit = limit
        if limit is not None and budget._used > limit:
            budget._shed()


def cache_usage() -> CacheUsage:
    """What the in-memory indexes of this process hold now, against the limit.

    >>> import memlane
    >>> memlane.cache_usage().used >= 0
    True
    """
    return process_budget().usage()


def _parse(text: str, where: str) -> int | None:
    if text.strip().lower() in ("none", "off", "unlimited"):
        return None
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?b?)\s*", text.lower())
    if found is None or float(found.group(1)) <= 0:
        raise InvalidInput(
            f"{where}: {shown(text)} is not a size; write bytes (1073741824), a size with a "
            "unit (512MB, 2GB) or 'none' for no limit."
        )
    return int(float(found.group(1)) * _UNITS[found.group(2).rstrip("b") or ""])
