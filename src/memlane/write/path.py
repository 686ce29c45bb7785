"""The write path under :class:`~memlane.SessionManager`: the ownership check, the
single ``record`` and its batch ``record_many``, and the reads every other part builds on.

The manager holds one :class:`Writer`; its sessions, conveniences, user memory, knowledge
and pools are built on it. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ..buffer import RedisBuffer, live
from ..core.clock import from_us, now_us
from ..core.ids import new_id
from ..core.observed import Observer, observed
from ..core.scope import Scope
from ..engine.engine import session_not_found
from ..engine.indexer import Indexer
from ..engine.storage import Storage
from ..errors import (
    EventNotFound,
    InvalidInput,
    PermissionDenied,
    SessionClosed,
    StoreReadOnly,
    shown,
)
from ..events import (
    MESSAGE_ROLES,
    Event,
    EventRecord,
    Session,
    is_message_role,
)
from ..privacy.pool_access import check_write
from ..protocols import TokenCounter
from ..records.redacting import RecordRedaction
from ..records.validate import PreparedEvent, expiry_us, prepare_event, storable_key
from ..redaction import Redactor
from ..search.searcher import Searcher
from ..store.base import EventFilter, Log, SessionFilter
from ..text.tokens import tokenizer_for
from .buffer_epoch import BufferEpoch

__all__ = ["DEFAULT_STATUS", "Inserted", "Writer"]

# (record()'s ``replace`` argument shadows dataclasses.replace inside it)
_replace = replace

#: the status an event of these kinds starts with
DEFAULT_STATUS = {"pending": "open", "error": "unresolved"}


class Writer:
    """What every part of the manager writes and reads through: the session checks, the
    single ``record`` and its batch, and the helpers the other parts build on (a
    transaction, an insert, redaction, token counts). It holds the engine's parts it needs;
    the log's deletes reach it only through ``storage`` (the vector index with them)."""

    def __init__(
        self,
        *,
        agent_id: str,
        scope: Scope,
        url: str,
        model: str | TokenCounter,
        read_only: bool,
        storage: Storage,
        indexer: Indexer,
        searcher: Searcher,
        observer: Observer,
        buffer: RedisBuffer | None = None,
        buffer_epoch: BufferEpoch | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.scope = scope
        self.url = url
        self.model = model
        self.read_only = read_only
        self.storage = storage
        #: the log's reads and writes; its deletes go through ``storage``
        self.log: Log = storage.log
        self.indexer = indexer
        self.searcher = searcher
        self.observer = observer
        self._observer = observer  # (what @observed reads)
        self.buffer = buffer
        self.buffer_epoch = buffer_epoch
        self.redactor = redactor

    def get_session(self, session_id: str) -> Session:
        """The session, if this agent owns it or subscribed to its pool. ``session_id`` may
        also be one of this agent's session keys (:meth:`start_session`'s ``key``)."""
        session = self.log.session(session_id, self.scope) if storable_key(session_id) else None
        if session is None:
            session = self.keyed(session_id)
        if session is None:
            raise session_not_found(session_id, agent=self.agent_id, where=self.url)
        return session

    def keyed(self, key: object) -> Session | None:
        """This agent's session with that key, if any."""
        if not storable_key(key):
            return None
        found = self.log.sessions(
            SessionFilter(self.scope, agent_id=self.agent_id, key=key), limit=1
        )
        return found[0] if found else None

    def owned(
        self, tx: Any, session_id: str, *, allow_closed: bool = False, adds: bool | None = None
    ) -> tuple[str, str, str | None]:
        """Check this agent may write the session (an id, or one of its keys); return
        ``(session id, status, shared_pool)``. A write that ``adds`` to a pooled session
        (by default: every one that needs it active) also needs the pool's ``write`` grant
        now; closing or deleting one's own sessions never does."""
        found = self.log.owner_of(tx, session_id) if storable_key(session_id) else None
        if found is None and storable_key(session_id):
            keyed = self.log.sessions(
                SessionFilter(None, agent_id=self.agent_id, key=session_id), limit=1, tx=tx
            )
            if keyed:
                session_id = keyed[0].id
                found = self.log.owner_of(tx, session_id)
        if found is None or (
            found[0] != self.agent_id
            and not self.scope.can_read(found[0], found[2], self.granted(tx))
        ):
            raise session_not_found(session_id, agent=self.agent_id, where=self.url)
        owner, status, pool = found
        if owner != self.agent_id:
            raise PermissionDenied(
                f"Session {session_id!r} belongs to agent {owner!r}; agent {self.agent_id!r} "
                f"can read it through pool {pool!r} but never write it. Record into a session "
                "of your own (start_session)."
            )
        if status != "active" and not allow_closed:
            raise SessionClosed(
                f"Session {session_id!r} is {status}; it takes no new events. "
                "Start a new session for further work."
            )
        if pool is not None and (not allow_closed if adds is None else adds):
            check_write(self.log, tx, pool, self.agent_id, create=False)
        return session_id, status, pool

    def granted(self, tx: Any = None) -> set[str]:
        """The pools this agent holds a grant on now (read at each call: revocations hold
        at once)."""
        return {g.pool for g in self.log.pool_grants(agent_id=self.agent_id, tx=tx)}

    @observed("record")
    def record(
        self,
        session_id: str,
        kind: str,
        content: str,
        payload: Any = None,
        importance: float | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | str | None = None,
        index: bool = True,
        replace: Mapping[str, Any] | None = None,
        ttl: timedelta | float | None = None,
        expires_at: datetime | str | None = None,
    ) -> Event:
        """Append one event to a session's log: the single write path.

        The event is durable when this returns; its embedding is computed in the background
        (searches still see it at once). ``kind`` is a built-in kind or a namespaced custom
        kind ("custom:plan"); ``importance`` defaults per kind; ``created_at`` may be a past
        time (UTC) when importing history. ``index=False`` keeps the event in the log (events,
        restore, export) but out of search: never embedded, never keyword-indexed — for
        bulky items nobody should search. ``replace`` (a ``where`` filter, as in
        :meth:`search`) makes the write an upsert: the session's events of this kind whose
        metadata match it are deleted in the same transaction, from every index. An event
        over 32,768 characters (content and payload JSON) costs the caller little more than
        a small one: its exact ``token_count`` (an estimate from a sample until then), its
        payload preview and its keyword text are made by the background worker or
        ``flush()``; at most 16 Mi characters (``InvalidPayload`` beyond).

        Short-term memory: ``ttl`` (a ``timedelta`` or seconds, counted from now, not from
        ``created_at``) or ``expires_at`` makes the event invisible to every read from that
        moment (search, restore, events, export); the background worker or ``memlane prune
        --expired`` then deletes it with its vectors and keyword rows. A goal or pending step
        cannot expire.

        >>> mgr.record(session.id, "fact", "Staging is read-only on Sundays")  # doctest: +SKIP
        """
        # Validated, serialised, counted and previewed before the write lock is taken.
        redaction = self.redaction()
        prepared = prepare_event(
            kind, content, payload, importance, tags, metadata, created_at, self.count_tokens,
            redaction=redaction,
        )  # fmt: skip
        expires = expiry_us(prepared.kind, ttl, expires_at)
        if expires is not None:
            prepared = _replace(prepared, expires_us=expires)
        if not isinstance(index, bool):
            raise InvalidInput(f"index must be True or False, got {shown(index)}.")
        if replace is not None and (not isinstance(replace, Mapping) or not replace):
            raise InvalidInput(
                f"replace must be a non-empty where filter such as {{'key': 'k1'}}, got "
                f"{shown(replace)}; to delete every event of a kind use clear_session(kinds=...)."
            )
        with self.write() as tx:
            session_id, _, pool = self.owned(tx, session_id)
            if replace is not None:
                gone = EventFilter(
                    None, session_id=session_id, kinds=(prepared.kind,), where=replace
                )
                self.storage.delete_events(tx, gone)
            inserted = self.insert(
                tx, session_id, pool, prepared, DEFAULT_STATUS.get(kind), indexed=index
            )
            if replace is not None:
                self.unbuffer(tx, session_id)
        if index:
            self.indexer.notify()
        self.count_redactions(redaction)
        event = inserted.event()
        self._pass_on(session_id, [event])
        return event

    @observed("record_many")
    def record_many(self, session_id: str, events: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events to a session in one transaction: all or none.

        Each item holds :meth:`record`'s arguments by name (``kind`` and ``content``
        required; ``payload``, ``importance``, ``tags``, ``metadata``, ``created_at``,
        ``index``, ``ttl``, ``expires_at``), and a ``message`` may give its ``role`` as
        :meth:`add_message` does. Every
        item is validated before anything is written; a bad one raises naming its position.

        >>> mgr.record_many(sid, [{"kind": "message", "role": "user", "content": "Hi"},
        ...                       {"kind": "fact", "content": "They said hi"}])  # doctest: +SKIP
        """
        if isinstance(events, Mapping | str | bytes):
            raise InvalidInput("record_many takes a list of events (dicts), not a single one.")
        if not isinstance(events, Iterable):
            raise InvalidInput(f"record_many takes a list of events (dicts), got {shown(events)}.")
        prepared: list[tuple[PreparedEvent, str, bool]] = []
        redactions: list[RecordRedaction | None] = []
        for position, item in enumerate(events):
            try:
                redactions.append(self.redaction())
                prepared.append(self._prepared_item(item, redactions[-1]))
            except InvalidInput as exc:
                raise type(exc)(f"Event {position} of record_many: {exc}") from None
        if not prepared:
            return []
        with self.write() as tx:
            session_id, _, pool = self.owned(tx, session_id)
            inserted = [
                self.insert(tx, session_id, pool, item, DEFAULT_STATUS.get(kind), indexed=index)
                for item, kind, index in prepared
            ]
        self.indexer.notify()
        self.count_redactions(*redactions)
        written = [each.event() for each in inserted]
        self._pass_on(session_id, written)
        return written

    def _prepared_item(
        self, item: Any, redaction: RecordRedaction | None
    ) -> tuple[PreparedEvent, str, bool]:
        """One record_many item, validated: its prepared event, kind and index flag."""
        if not isinstance(item, Mapping):
            raise InvalidInput(f"each event must be a dict, got {type(item).__name__}.")
        unknown = sorted(set(item) - _RECORD_FIELDS)
        if unknown:
            raise InvalidInput(
                f"unknown fields {unknown}; use {', '.join(sorted(_RECORD_FIELDS))}."
            )
        if "kind" not in item or "content" not in item:
            raise InvalidInput("each event needs a kind and a content.")
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise InvalidInput(f"metadata must be a dict, got {type(metadata).__name__}.")
        if "role" in item:
            if item["kind"] != "message" or not is_message_role(item["role"]):
                raise InvalidInput(
                    f"role {shown(item['role'])} needs kind 'message' and one of "
                    f"{', '.join(MESSAGE_ROLES)} (or a namespaced role)."
                )
            metadata = {**(metadata or {}), "role": item["role"]}
        index = item.get("index", True)
        if not isinstance(index, bool):
            raise InvalidInput(f"index must be True or False, got {shown(index)}.")
        prepared = prepare_event(
            item["kind"],
            item["content"],
            item.get("payload"),
            item.get("importance"),
            item.get("tags"),
            metadata,
            item.get("created_at"),
            self.count_tokens,
            redaction=redaction,
        )
        expires = expiry_us(prepared.kind, item.get("ttl"), item.get("expires_at"))
        if expires is not None:
            prepared = _replace(prepared, expires_us=expires)
        return prepared, prepared.kind, index

    def insert(
        self,
        tx: Any,
        session_id: str,
        pool: str | None,
        prepared: PreparedEvent,
        status: str | None,
        *,
        touch: bool = True,
        indexed: bool = True,
    ) -> Inserted:
        record = prepared.record(new_id(), session_id, self.agent_id, pool, status, indexed=indexed)
        seq = self.log.insert_event(tx, record, touch_us=now_us() if touch else None)
        if seq and indexed:  # (if the transaction rolls back, the seq is never pending)
            self.indexer.recorded(seq, len(record.content))
        return Inserted(record, seq or 0, prepared)

    # -- the working buffer (buffer.py) ---------------------------------------------------

    def recent_messages(self, session_id: str, limit: int = 20) -> list[Event]:
        """The session's newest ``limit`` messages (at most 10,000), oldest first: what a
        chat agent puts before its next turn. With ``SessionManager(buffer=...)`` they come
        from Redis when it holds them, else from the log, which then fills the buffer. The
        buffer is keyed by session id: a session key is resolved through the log each call.

        >>> [m.content for m in mgr.recent_messages(session.id, limit=2)]  # doctest: +SKIP
        ['What changed?', 'The staging key was rotated.']
        """
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise InvalidInput(
                f"limit must be a whole number from 1 to 10,000, got {shown(limit)}."
            )
        buffer, epoch = self.buffer, None
        if buffer is not None and self.buffer_epoch is not None:
            # (None: this manager could not record that the buffer is stale; the log answers)
            epoch = self.buffer_epoch.current()
        if (
            buffer is not None
            and epoch is not None
            and limit <= buffer.size
            and storable_key(session_id)
        ):
            found = buffer.read(session_id, limit, epoch=epoch)
            if found is not None and (
                found.owner == self.agent_id
                or self.scope.can_read(found.owner, found.pool, self.granted())
            ):
                messages = live(found.messages)
                # (some expired and the buffer holds older ones: the log answers instead)
                if len(messages) == limit or (found.complete and found.held <= limit):
                    return messages
        session = self.get_session(session_id)  # (isolation, and a key becomes the id)
        # the version before the log is read: a writer that commits meanwhile moves it, and
        # this fill, which may miss that write, is refused (buffer.py); the epoch was read
        # before the log too, so a fill that misses a change the buffer could not take is
        # stamped older than the move that change made
        version = None if buffer is None or epoch is None else buffer.version(session.id)
        window = limit if buffer is None else max(limit, buffer.size)
        flt = EventFilter(self.scope, session_id=session.id, kinds=("message",))
        newest = self.log.events(flt, newest_first=True, limit=window)
        newest.reverse()
        if buffer is not None and epoch is not None and version is not None:
            buffer.fill(
                session.id,
                version,
                session.agent_id,
                session.shared_pool,
                newest,
                complete=len(newest) < window,
                epoch=epoch,
            )
        return newest[-limit:]

    def _pass_on(self, session_id: str, events: Sequence[Event]) -> None:
        """Committed messages go on to the working buffer (after the log: it is the truth);
        if Redis does not take them, the store's buffer epoch moves (``write/buffer_epoch.py``)."""
        if self.buffer is not None:
            messages = [event for event in events if event.kind == "message"]
            if messages and not self.buffer.append(session_id, messages):
                self._buffer_moved()

    def unbuffer(self, tx: Any, session_id: str) -> None:
        """The session loses events in ``tx``: drop its buffered messages once it commits
        (or, if Redis cannot be told, move the store's buffer epoch)."""
        buffer = self.buffer
        if buffer is not None:

            def forget() -> None:
                if not buffer.forget(session_id):
                    self._buffer_moved()

            tx.on_commit(forget)

    def _buffer_moved(self) -> None:
        if self.buffer_epoch is not None:
            self.buffer_epoch.moved()

    def redaction(self) -> RecordRedaction | None:
        """A fresh numbering of placeholders for one record, if this manager redacts."""
        return None if self.redactor is None else RecordRedaction(self.redactor)

    def count_redactions(self, *redactions: RecordRedaction | None) -> None:
        """What written records had replaced, for the metrics (kinds and counts only)."""
        if self._observer.metrics is not None:
            for redaction in redactions:
                if redaction is not None:
                    self._observer.metrics.redacted(redaction.counts)

    def write(self) -> Any:
        """A write transaction, unless this manager is read-only (then nothing is touched)."""
        self.check_writable()
        return self.log.atomic()

    def check_writable(self) -> None:
        if self.read_only:
            raise StoreReadOnly(
                f"This SessionManager on {self.url!r} was opened with read_only=True; it "
                "reads, never writes. Open another without read_only to record."
            )

    def tokenizer(self) -> Any:
        return tokenizer_for(self.model)

    def count_tokens(self, text: str) -> int:
        """Counts an event's stored tokens (prepare_event calls it before a transaction
        starts: the first count loads a BPE file, ~0.3 s, and a user's counter may be slow;
        other writers would wait on the write lock meanwhile)."""
        return int(self.tokenizer().count(text))

    def get_event(self, event_id: str) -> Event:
        """One event by id, if this agent may see it."""
        event = self.log.event(event_id, self.scope) if storable_key(event_id) else None
        if event is None:
            raise EventNotFound(
                f"Event {shown(event_id)} does not exist for agent {self.agent_id!r}."
            )
        return event


#: what a record_many item may hold: record()'s arguments, and a message's role
_RECORD_FIELDS = frozenset(
    {
        "kind", "content", "payload", "importance", "tags", "metadata", "created_at", "index",
        "role", "ttl", "expires_at",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Inserted:
    """What ``_insert`` wrote; :meth:`event` builds the returned Event after the commit (a
    large payload is parsed back outside the write lock)."""

    record: EventRecord
    seq: int
    prepared: PreparedEvent

    def event(self) -> Event:
        record = self.record
        return Event(
            id=record.id,
            session_id=record.session_id,
            agent_id=record.agent_id,
            kind=record.kind,
            content=record.content,
            payload=self.prepared.payload_value,
            importance=record.importance,
            tags=self.prepared.tags,
            metadata=self.prepared.metadata,
            status=record.status,
            created_at=from_us(record.created_us),
            token_count=record.token_count,
            seq=self.seq,
            indexed=record.indexed,
            payload_chars=record.payload_chars,
            expires_at=None if record.expires_us is None else from_us(record.expires_us),
        )
