"""A working buffer in Redis: the newest messages of active sessions, shared by every host.

``SessionManager(..., buffer="redis://host:6379/0")`` (the ``[redis]`` extra) keeps, per
session, its newest ``size`` messages in Redis for ``ttl`` after the last write or read:
:meth:`~memlane.SessionManager.recent_messages` — what a chat agent reads on every
turn — is answered from there. The log stays the truth: a message is written to the log
first and reaches the buffer only after its commit; a session not in the buffer, or a buffer
that cannot answer (Redis down, slow, or emptied), is read from the log, and the buffer is
filled again from it.

Coherence, with several writers on several hosts:

- **Appends** go through one Lua script that adds the message only when the session is
  buffered and the message is newer (``(created_us, seq)``) than the newest one there;
  anything else — two writers' appends arriving out of order, a message dated in the past —
  drops the session's entry, and the next read fills it from the log.
- **Fills** race with writers: a reader reads the log, a writer commits a message the reader
  did not see, and the reader writes its older list. Every append first bumps the session's
  version (buffered or not); a reader takes the version before it reads the log, and its fill
  is refused if the version moved meanwhile.
- **Deletes** through a manager that has the buffer (a session deleted or cleared, an event
  deleted, an upsert's ``replace=``) drop the session's entry once they commit; an expired
  message (``record(ttl=...)``) is left out of every answer by its ``expires_at``.
- **Outages**: while Redis cannot be reached the manager reads the log, retrying Redis after
  :attr:`RedisBuffer.retry_after` seconds; sessions written meanwhile are dropped from the
  buffer before it answers again. Another host that could reach Redis while this one could
  not may serve a message list missing this host's writes for at most ``ttl``.

Writers that do not go through a manager with the same buffer (``memlane import``, a process
opened without ``buffer=``) are seen by buffered readers when the session's entry expires.

Not a cache of whole sessions: restore, search and export read the log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from . import _json
from ._time import from_us, now_us, to_us
from .errors import InvalidInput
from .events import Event

__all__ = ["Buffered", "RedisBuffer", "live", "open_buffer"]

log = logging.getLogger("memlane.buffer")

# Append one message (ARGV: its seq, its created_us, its entry, size, ttl in ms) to a buffered
# session (KEYS: the list, the head, the version). The version moves whether or not the
# session is buffered: a fill that began before this commit must not land (see above).
_APPEND = """
redis.call('INCR', KEYS[3])
redis.call('PEXPIRE', KEYS[3], ARGV[5])
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local last_us = tonumber(redis.call('HGET', KEYS[2], 'last_us'))
local last_seq = tonumber(redis.call('HGET', KEYS[2], 'last_seq'))
local us, seq = tonumber(ARGV[2]), tonumber(ARGV[1])
if us < last_us or (us == last_us and seq <= last_seq) then
    redis.call('DEL', KEYS[1], KEYS[2])
    return -1
end
redis.call('RPUSH', KEYS[1], ARGV[3])
if redis.call('LLEN', KEYS[1]) > tonumber(ARGV[4]) then
    redis.call('LTRIM', KEYS[1], -tonumber(ARGV[4]), -1)
    redis.call('HSET', KEYS[2], 'complete', '0')
end
redis.call('HSET', KEYS[2], 'last_us', ARGV[2], 'last_seq', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
"""

# Fill a session from the log (ARGV: the version read before the log was, ttl in ms, owner,
# pool, complete, last_us, last_seq, then the entries oldest first); refused (0) when a writer
# moved the version meanwhile.
_FILL = """
local version = redis.call('GET', KEYS[3]) or '0'
if version ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
for i = 8, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('HSET', KEYS[2], 'owner', ARGV[3], 'pool', ARGV[4], 'complete', ARGV[5],
           'last_us', ARGV[6], 'last_seq', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""

# Read a session (KEYS: the list, the head; ARGV: ttl in ms, how many of the newest entries):
# its head, those entries and the list's length, and keep it alive.
_READ = """
local head = redis.call('HGETALL', KEYS[2])
if #head == 0 then return {} end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {head, redis.call('LRANGE', KEYS[1], -tonumber(ARGV[2]), -1), redis.call('LLEN', KEYS[1])}
"""


@dataclass(frozen=True)
class Buffered:
    """A session's entry in the buffer: who owns it (for the reader's isolation check),
    whether it holds every message of the session, the newest of its messages that were
    asked for (oldest first), and how many it holds."""

    owner: str
    pool: str | None
    complete: bool
    messages: list[Event]
    held: int


def open_buffer(spec: str | RedisBuffer | None) -> RedisBuffer | None:
    """The buffer ``SessionManager(buffer=...)`` names: a ``redis://`` / ``rediss://`` /
    ``unix://`` URL, a :class:`RedisBuffer`, or None."""
    if spec is None or isinstance(spec, RedisBuffer):
        return spec
    if isinstance(spec, str) and spec.split("://", 1)[0] in ("redis", "rediss", "unix"):
        return RedisBuffer(spec)
    raise InvalidInput(
        f"buffer must be a redis:// URL or a RedisBuffer, got {spec!r}; e.g. "
        "buffer='redis://localhost:6379/0'."
    )


class RedisBuffer:
    """The newest ``size`` messages of each active session, in Redis for ``ttl`` after the
    session's last write or read (see the module docstring for what it guarantees).

    ``timeout`` bounds each Redis call: the buffer is a shortcut, so a slow Redis is treated
    as a missing one and the log answers. ``prefix`` separates several stores sharing one
    Redis database.
    """

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        ttl: timedelta = timedelta(hours=24),
        size: int = 100,
        prefix: str = "asm",
        timeout: float = 0.25,
        retry_after: float = 5.0,
    ) -> None:
        try:
            import redis
        except ImportError:
            raise InvalidInput(
                "The Redis working buffer needs its extra (redis is missing): pip install "
                "'memlane[redis]'."
            ) from None
        if not isinstance(ttl, timedelta) or ttl.total_seconds() < 1:
            raise InvalidInput(f"ttl must be a timedelta of at least a second, got {ttl!r}.")
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 10_000:
            raise InvalidInput(f"size must be a whole number from 1 to 10,000, got {size!r}.")
        if not isinstance(prefix, str) or not prefix or "{" in prefix or "}" in prefix:
            raise InvalidInput(f"prefix must be a non-empty string without braces, got {prefix!r}.")
        self.url = url
        self.size = size
        self.prefix = prefix
        self.retry_after = retry_after
        self._ttl_ms = int(ttl.total_seconds() * 1000)
        self._errors = (redis.RedisError, OSError)
        self._client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True
        )
        self._append = self._client.register_script(_APPEND)
        self._fill = self._client.register_script(_FILL)
        self._read = self._client.register_script(_READ)
        self._lock = threading.Lock()
        self._down_until = 0.0
        #: sessions whose entry may be stale: a write or delete this process could not pass on
        self._dirty: set[str] = set()
        #: why Redis last failed, while it is failing (health() reports it)
        self.error: str | None = None

    # -- keys ------------------------------------------------------------------------------

    def _keys(self, session_id: str) -> list[str]:
        # one hash tag per session: its keys share a Redis Cluster slot, as scripts require
        base = f"{self.prefix}:{{{session_id}}}"
        return [f"{base}:messages", f"{base}:head", f"{base}:version"]

    # -- what the manager calls ------------------------------------------------------------

    def read(self, session_id: str, newest: int) -> Buffered | None:
        """The session's entry with its ``newest`` messages, or None (not buffered, or
        Redis cannot answer now)."""
        args = [self._ttl_ms, newest]
        found = self._call(lambda: self._read(self._keys(session_id), args))
        if found is _FAILED or not found:
            return None
        head = found[0]
        if isinstance(head, list):  # (RESP2 gives a hash as a flat list)
            head = dict(zip(head[::2], head[1::2], strict=True))
        return Buffered(
            owner=head["owner"],
            pool=head["pool"] or None,
            complete=head["complete"] == "1",
            messages=[_event(entry) for entry in found[1]],
            held=int(found[2]),
        )

    def version(self, session_id: str) -> str | None:
        """The session's version, taken before reading the log for a :meth:`fill`."""
        found = self._call(lambda: self._client.get(self._keys(session_id)[2]))
        if found is _FAILED:
            return None
        return str(found or "0")

    def fill(
        self,
        session_id: str,
        version: str,
        owner: str,
        pool: str | None,
        messages: Sequence[Event],
        *,
        complete: bool,
    ) -> bool:
        """Put the log's newest messages of a session (oldest first) in the buffer, unless a
        writer moved its ``version`` since it was taken."""
        last = messages[-1] if messages else None
        args = [
            version,
            self._ttl_ms,
            owner,
            pool or "",
            # (whole only if it all fits: a longer read fills the newest ``size`` of it)
            "1" if complete and len(messages) <= self.size else "0",
            to_us(last.created_at) if last else 0,
            last.seq if last else 0,
            *(_entry(event) for event in messages[-self.size :]),
        ]
        return bool(self._call(lambda: self._fill(self._keys(session_id), args)) == 1)

    def append(self, session_id: str, messages: Sequence[Event]) -> None:
        """Pass on messages the log has committed (oldest first)."""
        for event in messages:
            args = [event.seq, to_us(event.created_at), _entry(event), self.size, self._ttl_ms]
            if self._call(lambda a=args: self._append(self._keys(session_id), a)) is (_FAILED):
                self._dirty.add(session_id)
                return

    def forget(self, session_id: str) -> None:
        """Drop a session's entry (its events were deleted); the version moves too."""

        def drop() -> Any:
            keys = self._keys(session_id)
            pipe = self._client.pipeline()
            pipe.delete(keys[0], keys[1])
            pipe.incr(keys[2])
            pipe.pexpire(keys[2], self._ttl_ms)
            return pipe.execute()

        if self._call(drop) is _FAILED:
            self._dirty.add(session_id)

    def close(self) -> None:
        self._client.close()

    # -- failures --------------------------------------------------------------------------

    def _call(self, action: Any) -> Any:
        """``action()``, or :data:`_FAILED` while Redis cannot answer. Once it answers again,
        the entries this process could not keep current are dropped first."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return _FAILED
            dirty, self._dirty = self._dirty, set()
        try:
            for stale in dirty:
                keys = self._keys(stale)
                self._client.delete(keys[0], keys[1])
            found = action()
        except self._errors as exc:
            with self._lock:
                self._dirty |= dirty
                self._down_until = time.monotonic() + self.retry_after
            if self.error is None:
                log.warning("the Redis working buffer is unavailable (%s); reading the log", exc)
            self.error = f"{type(exc).__name__}: {exc}"
            return _FAILED
        if self.error is not None:
            log.info("the Redis working buffer answers again")
            self.error = None
        return found


_FAILED: Any = object()


def _entry(event: Event) -> str:
    """An event as the buffer keeps it (every field, so it comes back equal)."""
    return _json.dumps(
        {
            "id": event.id,
            "session_id": event.session_id,
            "agent_id": event.agent_id,
            "kind": event.kind,
            "content": event.content,
            "created_us": to_us(event.created_at),
            "payload": event.payload,
            "importance": event.importance,
            "tags": list(event.tags),
            "metadata": event.metadata,
            "status": event.status,
            "token_count": event.token_count,
            "recall_count": event.recall_count,
            "seq": event.seq,
            "indexed": event.indexed,
            "payload_chars": event.payload_chars,
            "expires_us": None if event.expires_at is None else to_us(event.expires_at),
        }
    )


def _event(entry: str) -> Event:
    data: Mapping[str, Any] = _json.loads(entry)
    expires = data["expires_us"]
    return Event(
        id=data["id"],
        session_id=data["session_id"],
        agent_id=data["agent_id"],
        kind=data["kind"],
        content=data["content"],
        created_at=from_us(data["created_us"]),
        payload=data["payload"],
        importance=data["importance"],
        tags=tuple(data["tags"]),
        metadata=data["metadata"],
        status=data["status"],
        token_count=data["token_count"],
        recall_count=data["recall_count"],
        seq=data["seq"],
        indexed=data["indexed"],
        payload_chars=data["payload_chars"],
        expires_at=None if expires is None else from_us(expires),
    )


def live(messages: Sequence[Event], now: int | None = None) -> list[Event]:
    """The messages that have not expired (``record(ttl=...)``)."""
    now = now_us() if now is None else now
    return [e for e in messages if e.expires_at is None or to_us(e.expires_at) > now]
