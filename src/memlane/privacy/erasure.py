"""Erasing a user: every session with that user, gone from the log, every index, the
working buffer and the snapshot files, physically
(docs/decisions/2026-11-24-erasure-scrubs-physically.md), with a receipt.

One transaction deletes the sessions — their events, vectors, keyword rows, outbox rows,
summaries, and the user's facts (the memory sessions carry the user too) — with SQLite's
``secure_delete`` on, so freed pages are overwritten: reads stop seeing the user at its
commit. Then the store is scrubbed (``Store.scrub``): SQLite merges FTS5's segments (deleted
terms otherwise survive in them), checkpoints and truncates the write-ahead log, marks the
touched partitions erased (no process then writes or uses a search-cache snapshot of them
built before) and removes the snapshot files that may hold the user's words; PostgreSQL
vacuums the touched tables. Every step can run again: a crash anywhere is completed by erasing
the same user again, and a journal row in ``meta`` (the user's digest, never the id) says an
erasure began and has not ended, and which partitions its deletes touched (a second run finds
nothing left to delete, but scrubs them). The deleting transaction also moves the Redis
working buffer's epoch (``buffer.py``): no manager serves a buffered copy of the erased
sessions once it has read the epoch again (``RedisBuffer.epoch_check``), even where the
entries could not be dropped (Redis down, or the erasure not given the buffer).

Not part of the public API (``SessionManager.erase_user``, ``StoreAdmin.erase_user``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..buffer import RedisBuffer
from ..core.clock import format_time, from_us, now_us
from ..core.scope import Scope, partition_of
from ..engine.storage import Storage
from ..memory import DOC_USER, MEMORY_SESSION
from ..search.passage_terms import forget_analyses
from ..search.records import forget_record_views
from ..store.base import EventFilter, SessionFilter

__all__ = ["ErasureReceipt", "erase_user"]

#: what no erasure reaches, whatever the backend
_ALWAYS_UNREACHED = (
    "backups and copies of the database made before the erasure",
    "export files written before it (memlane export, memlane export-md, export_markdown)",
    "events in sessions without this user that mention them, and knowledge documents ingested "
    "without ingest(user_id=) (erasure finds data by user id)",
)


@dataclass(frozen=True)
class ErasureReceipt:
    """What :meth:`~memlane.SessionManager.erase_user` (or the store-wide
    :meth:`~memlane.admin.StoreAdmin.erase_user`) erased, and what it could not."""

    user_id: str
    #: the agent whose sessions were erased; None: every agent's
    agent_id: str | None
    sessions: int
    #: events deleted, by kind (goals, messages, steps, summaries, facts, ...)
    events: dict[str, int]
    #: of those, facts about the user (remember())
    facts: int
    #: sessions whose messages were dropped from the Redis working buffer
    buffered_sessions: int
    started_at: datetime
    finished_at: datetime
    #: copies this erasure cannot reach, and steps that could not be completed now
    unreachable: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "sessions": self.sessions,
            "events": self.events,
            "facts": self.facts,
            "buffered_sessions": self.buffered_sessions,
            "started_at": format_time(self.started_at),
            "finished_at": format_time(self.finished_at),
            "unreachable": self.unreachable,
        }


def journal_key(user_id: str) -> str:
    """The ``meta`` key that says an erasure of this user began and has not ended (a digest:
    the journal must not keep the id it erases)."""
    return "erasure:" + hashlib.sha256(user_id.encode()).hexdigest()[:32]


def erase_user(
    storage: Storage, user_id: str, *, agent_id: str | None, buffer: RedisBuffer | None = None
) -> ErasureReceipt:
    """Erase every session with ``user_id`` (of ``agent_id``, or of every agent): see the
    module docstring. Safe to run again after a crash: it completes what was left."""
    store = storage.log
    started = now_us()
    journal = journal_key(user_id)
    begun = store.get_meta(journal)  # an erasure of this user a crash cut short
    earlier: list[str] = json.loads(begun).get("partitions", []) if begun else []
    with store.atomic() as tx:
        store.set_meta(
            tx,
            journal,
            json.dumps({"agent": agent_id, "started_us": started, "partitions": earlier}),
        )
    events: Counter[str] = Counter()
    facts = 0
    with store.secure_deletes(), store.atomic() as tx:
        doomed = store.sessions(
            SessionFilter(None, user_id=user_id, agent_id=agent_id), tx=tx, lock=True
        )
        for session in doomed:
            kinds = store.kind_counts(EventFilter(None, session_id=session.id), tx)
            events.update(kinds)
            if session.metadata.get("asm") == MEMORY_SESSION:
                facts += kinds.get("fact", 0)
            storage.delete_session(tx, session.id)
        # documents ingested for the user (ingest(user_id=)) live in the knowledge sessions
        documents = EventFilter(
            None if agent_id is None else Scope(agent_id, frozenset()),
            include_shared=False,
            kinds=("knowledge",),
            where={DOC_USER: user_id},
        )
        holders = [store.session(sid, None) for sid in store.event_sessions(documents, tx)]
        events.update(store.kind_counts(documents, tx))
        storage.delete_events(tx, documents)
        if doomed:
            # every Redis working buffer stops serving entries filled before this commit,
            # whether or not this erasure was given it and can reach it (buffer.py)
            store.bump_buffer_epoch(tx)
        touched = [*doomed, *(s for s in holders if s is not None)]
        partitions = sorted({*earlier, *(partition_of(s.agent_id, s.shared_pool) for s in touched)})
        store.set_meta(
            tx,
            journal,
            json.dumps({"agent": agent_id, "started_us": started, "partitions": partitions}),
        )
    # the long events' passages and word counts this process keeps for search and restore
    # (search/passage_terms.py) and the JSON outputs' records (search/records.py) are let
    # go of too: they are derived from erased text
    forget_analyses()
    forget_record_views()
    unreachable = list(_ALWAYS_UNREACHED)
    unreachable += store.scrub(partitions)
    if buffer is not None:
        dropped = [buffer.forget(session.id) for session in doomed]
        if not all(dropped):
            unreachable.append(
                f"the Redis working buffer ({buffer.error or 'unavailable'}): "
                f"the copies of {dropped.count(False)} erased session(s) stay in Redis until "
                "their TTL "
                "(the buffer's ttl after they were last written), but no manager serves them "
                "once it has read the store's buffer epoch again, which moved with the erasure "
                "(RedisBuffer.epoch_check: within a second by default)"
            )
    with store.atomic() as tx:
        tx.execute("DELETE FROM meta WHERE key = ?", (journal,))
    return ErasureReceipt(
        user_id=user_id,
        agent_id=agent_id,
        sessions=len(doomed),
        events=dict(sorted(events.items())),
        facts=facts,
        buffered_sessions=len(doomed) if buffer is not None else 0,
        started_at=from_us(started),
        finished_at=from_us(now_us()),
        unreachable=unreachable,
    )
