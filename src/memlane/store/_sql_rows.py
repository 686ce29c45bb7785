"""The SQL backends' rows: the columns an event or a session is read with, rows turned into
:class:`~memlane.events.Event` and :class:`~memlane.events.Session`, and the transaction
handle statements run in. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core import canonical_json
from ..core.clock import from_us
from ..core.seams import Cursor
from ..events import Event, Session, stored_event

__all__ = [
    "EVENTS_JOIN",
    "EVENT_COLUMNS",
    "EXPIRED_ROWS",
    "SESSION_COLUMNS",
    "STALE_ROWS",
    "SqlTx",
    "row_to_event",
    "row_to_session",
]

_EVENT_COLUMNS = (
    "e.seq, e.id, e.session_id, e.agent_id, e.kind, e.content, {payload}, e.importance, "
    "e.tags, e.metadata, e.status, e.created_us, e.token_count, e.recall_count, e.indexed, "
    "e.expires_us"
)
# The same columns for reads that take a large payload's preview instead of the payload
# (restore): the preview stands in for it, and the last two columns say so. CASE evaluates
# lazily, so a payload with a preview is never read.
_PREVIEW_COLUMNS = (
    "e.seq, e.id, e.session_id, e.agent_id, e.kind, e.content, "
    "CASE WHEN e.payload_preview IS NULL THEN {payload} ELSE e.payload_preview END, "
    "e.importance, e.tags, e.metadata, e.status, e.created_us, e.token_count, e.recall_count, "
    "e.indexed, e.expires_us, e.payload_chars, "
    "CASE WHEN e.payload_preview IS NULL THEN 0 ELSE 1 END"
)
#: every column of an event, the payload read in place (see SqlStore.payload_sql)
EVENT_COLUMNS = _EVENT_COLUMNS.format(payload="e.payload")
SESSION_COLUMNS = (
    "s.id, s.agent_id, s.user_id, s.goal, s.status, s.shared_pool, s.metadata, "
    "s.created_us, s.updated_us, s.key"
)
#: the expired events still stored (one parameter: now), read through the partial index
EXPIRED_ROWS = "SELECT seq, partition FROM events WHERE expires_us IS NOT NULL AND expires_us <= ?"
#: facts no longer current (superseded or retracted), by the partial index events_stale
STALE_ROWS = "SELECT seq, partition FROM events WHERE status IN ('superseded', 'retracted')"
#: an event that has not expired (one parameter: now, in microseconds)
#: the FROM of an event read that filters on its session (aliases ``e`` and ``s``)
EVENTS_JOIN = "FROM events e JOIN sessions s ON s.id = e.session_id"
_INSERT_EVENT = (
    "INSERT INTO events (id, session_id, agent_id, kind, content, payload, importance, tags, "
    "metadata, status, created_us, token_count, recall_count, partition, payload_chars, "
    "payload_preview, indexed, deferred, expires_us) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING RETURNING seq"
)


def row_to_event(row: Sequence[Any]) -> Event:
    return stored_event(
        {
            "seq": int(row[0]),
            "id": row[1],
            "session_id": row[2],
            "agent_id": row[3],
            "kind": row[4],
            "content": row[5],
            "payload": canonical_json.loads(row[6]),
            "importance": float(row[7]),
            "tags": tuple(canonical_json.loads(row[8])),
            "metadata": canonical_json.loads(row[9]),
            "status": row[10],
            "created_at": from_us(row[11]),
            "token_count": int(row[12]),
            "recall_count": int(row[13]),
            "indexed": bool(row[14]),
            "expires_at": None if row[15] is None else from_us(row[15]),
            "payload_chars": None if len(row) < 17 or row[16] is None else int(row[16]),
            "preview": len(row) > 17 and bool(row[17]),
        }
    )


def row_to_session(row: Sequence[Any]) -> Session:
    return Session(
        id=row[0],
        agent_id=row[1],
        user_id=row[2],
        goal=row[3],
        status=row[4],
        shared_pool=row[5],
        metadata=canonical_json.loads(row[6]),
        created_at=from_us(row[7]),
        updated_at=from_us(row[8]),
        key=row[9],
    )


class SqlTx:
    """One open transaction on a DB-API connection (``?`` placeholders)."""

    __slots__ = ("_hooks", "conn")

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._hooks: list[Callable[[], None]] | None = None

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cursor: Cursor = self.conn.execute(sql, params)
        return cursor

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.conn.executemany(sql, rows)

    def on_commit(self, callback: Callable[[], None]) -> None:
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(callback)

    def hand_hooks_to(self, outer: SqlTx) -> None:
        """A nested transaction was released: its callbacks now wait for ``outer``'s commit
        (and are dropped if ``outer`` rolls back)."""
        for hook in self._hooks or ():
            outer.on_commit(hook)
        self._hooks = None

    def committed(self) -> None:
        hooks, self._hooks = self._hooks, None
        for hook in hooks or ():
            hook()
