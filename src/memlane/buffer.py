"""A working buffer in Redis: the newest messages of active sessions, shared by every host.

``SessionManager(..., buffer="redis://host:6379/0")`` (the ``[redis]`` extra) keeps, per
session, its newest ``size`` messages in Redis for ``ttl`` after the session's entry was last
written (filled from the log or appended to; reads never extend it):
:meth:`~memlane.SessionManager.recent_messages` — what a chat agent reads on every turn — is
answered from there. The log stays the truth: a message is written to the log first and
reaches the buffer only after its commit; a session not in the buffer, or a buffer that cannot
answer (Redis down, slow, or emptied), is read from the log, and the buffer is filled again
from it.

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

The buffer is never the only witness of a change
(docs/decisions/2026-11-24-redis-working-buffer.md). Every entry is stamped with
two things a stale entry cannot fake:

- the **store's buffer epoch** (``meta.buffer_epoch`` in the log, migration
  ``0011_buffer_epoch`` / PostgreSQL ``0012_buffer_epoch``) that its filler read before it read
  the log. A manager moves the epoch when an append or a delete could not reach Redis, when a
  Redis call of its fails (Redis may have restarted, or be failing for this host only), and
  every erasure moves it in its own transaction, whether or not it was given the buffer. A
  manager re-reads the epoch at least every :attr:`RedisBuffer.epoch_check` seconds (1 s by
  default; 0: before every read) and at once after a Redis error of its own; an entry stamped
  with an older epoch is dropped, not served;
- the **Redis server's run id** (``INFO server``), read inside the scripts: a Redis that
  restarts — even from its append-only file or a snapshot, which can be older than what it
  acknowledged — or a replica promoted in its place has another run id, so every entry it
  brought back is dropped and filled again from the log. (Where ``INFO`` is refused to the
  buffer's Redis user, this check is skipped and the epoch alone holds.)

So after a Redis outage, a partition between one host and Redis, or a restart with
persistence, no manager serves a message that was deleted, erased, or is missing a write,
beyond ``epoch_check`` seconds after the failure. While Redis cannot be reached the manager
reads the log, retrying Redis after :attr:`RedisBuffer.retry_after` seconds.

Writers that do not go through a manager with the same buffer (``memlane import``, a process
opened without ``buffer=``) are seen by buffered readers when the session's entry expires, at
most ``ttl`` after that entry was last written.

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

from .core import canonical_json
from .core.clock import from_us, now_us, to_us
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

# The run id of the Redis server a script runs on: another process (a restart, even one that
# loaded its append-only file or snapshot back) or another server (a promoted replica) has
# another. '' where INFO is refused to this user: the store's epoch alone then holds.
_SERVER = """
local ok, info = pcall(redis.call, 'INFO', 'server')
local server = ok and type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
"""

# Fill a session from the log (ARGV: the version read before the log was, ttl in ms, owner,
# pool, complete, last_us, last_seq, the store's buffer epoch read before the log was, then
# the entries oldest first); refused (0) when a writer moved the version meanwhile, or when
# the entry there was filled by a reader that knew a newer epoch on this same server.
_FILL = (
    _SERVER
    + """
local version = redis.call('GET', KEYS[3]) or '0'
if version ~= ARGV[1] then return 0 end
local held = redis.call('HMGET', KEYS[2], 'epoch', 'server')
if held[2] == server and tonumber(held[1] or '-1') > tonumber(ARGV[8]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
for i = 9, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
redis.call('HSET', KEYS[2], 'owner', ARGV[3], 'pool', ARGV[4], 'complete', ARGV[5],
           'last_us', ARGV[6], 'last_seq', ARGV[7], 'epoch', ARGV[8], 'server', server)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
)

# Read a session (KEYS: the list, the head; ARGV: the store's buffer epoch as the reader knows
# it, how many of the newest entries): its owner, pool and completeness, those entries and the
# list's length. Reads never renew the TTL: an entry lives ``ttl`` after its last write. An
# entry filled on another server (Redis restarted, or failed over) or under an older epoch is
# dropped (an entry stamped with a newer epoch than the reader's is left for readers that know
# it; this one reads the log).
_READ = (
    _SERVER
    + """
local head = redis.call('HMGET', KEYS[2], 'owner', 'pool', 'complete', 'epoch', 'server')
if not head[1] then return {} end
local epoch, mine = tonumber(head[4] or '-1'), tonumber(ARGV[1])
if head[5] ~= server or epoch < mine then
    redis.call('DEL', KEYS[1], KEYS[2])
    return {}
end
if epoch > mine then return {} end
return {{head[1], head[2] or '', head[3] or '0'},
        redis.call('LRANGE', KEYS[1], -tonumber(ARGV[2]), -1), redis.call('LLEN', KEYS[1])}
"""
)


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
    session's entry was last written (see the module docstring for what it guarantees).

    ``timeout`` bounds each Redis call: the buffer is a shortcut, so a slow Redis is treated
    as a missing one and the log answers. ``prefix`` separates several stores sharing one
    Redis database. ``epoch_check``: how many seconds a manager trusts the store's buffer
    epoch it last read (0: it reads it before every buffered read; one small query, which on
    PostgreSQL is a round trip).
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
        epoch_check: float = 1.0,
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
        if (
            isinstance(epoch_check, bool)
            or not isinstance(epoch_check, int | float)
            or not 0 <= epoch_check <= 3600
        ):
            raise InvalidInput(
                f"epoch_check must be a number of seconds from 0 to 3600, got {epoch_check!r}."
            )
        self.url = url
        self.size = size
        self.prefix = prefix
        self.retry_after = retry_after
        self.epoch_check = float(epoch_check)
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
        #: how many Redis calls have failed so far: a manager that sees it move re-reads (and
        #: moves) the store's buffer epoch before it trusts the buffer again
        self.failures = 0

    # -- keys ------------------------------------------------------------------------------

    def _keys(self, session_id: str) -> list[str]:
        # one hash tag per session: its keys share a Redis Cluster slot, as scripts require
        base = f"{self.prefix}:{{{session_id}}}"
        return [f"{base}:messages", f"{base}:head", f"{base}:version"]

    # -- what the manager calls ------------------------------------------------------------

    def read(self, session_id: str, newest: int, *, epoch: int = 0) -> Buffered | None:
        """The session's entry with its ``newest`` messages, or None (not buffered, filled
        under another epoch than the store's ``epoch`` or by another Redis server, or Redis
        cannot answer now). Never renews the entry's TTL."""
        args = [epoch, newest]
        found = self._call(lambda: self._read(self._keys(session_id), args))
        if found is _FAILED or not found:
            return None
        owner, pool, complete = found[0]
        return Buffered(
            owner=owner,
            pool=pool or None,
            complete=complete == "1",
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
        epoch: int = 0,
    ) -> bool:
        """Put the log's newest messages of a session (oldest first) in the buffer, stamped
        with the store's buffer ``epoch`` read before the log was, unless a writer moved its
        ``version`` since it was taken."""
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
            epoch,
            *(_entry(event) for event in messages[-self.size :]),
        ]
        return bool(self._call(lambda: self._fill(self._keys(session_id), args)) == 1)

    def append(self, session_id: str, messages: Sequence[Event]) -> bool:
        """Pass on messages the log has committed (oldest first); False if Redis did not
        take them all (the caller moves the store's buffer epoch)."""
        for event in messages:
            args = [event.seq, to_us(event.created_at), _entry(event), self.size, self._ttl_ms]
            if self._call(lambda a=args: self._append(self._keys(session_id), a)) is _FAILED:
                self._dirty.add(session_id)
                return False
        return True

    def forget(self, session_id: str) -> bool:
        """Drop a session's entry (its events were deleted); the version moves too. False if
        Redis could not be told (the caller moves the store's buffer epoch)."""

        def drop() -> Any:
            keys = self._keys(session_id)
            pipe = self._client.pipeline()
            pipe.delete(keys[0], keys[1])
            pipe.incr(keys[2])
            pipe.pexpire(keys[2], self._ttl_ms)
            return pipe.execute()

        if self._call(drop) is _FAILED:
            self._dirty.add(session_id)
            return False
        return True

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
                self.failures += 1
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
    return canonical_json.dumps(
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
    data: Mapping[str, Any] = canonical_json.loads(entry)
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
