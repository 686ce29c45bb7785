"""What the SQL backends share: the log's tables, read and written with the same statements.

SQLite and PostgreSQL hold the same tables (``sessions``, ``events``, ``outbox``, ``vectors``,
``meta``, ``migrations``) and accept the same SQL for everything but keyword search, vector
search, the outbox claim and schema management, which each backend writes itself. Statements
here use ``?`` placeholders; the PostgreSQL backend rewrites them for psycopg. Isolation comes
from :meth:`Scope.sql <memlane.core.scope.Scope.sql>` and ``where`` filters from
:func:`~memlane.store.filters.compile_where` with the backend's dialect — never from SQL
written by callers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import Any

from ..core.clock import from_us, now_us
from ..core.scope import Scope
from ..events import Event, EventRecord, PoolGrant, Session, SessionRecord
from ..memory import watermark_key
from ..text.shrink import PREVIEW_THRESHOLD
from ._sql_rows import (
    _EVENT_COLUMNS,
    _INSERT_EVENT,
    _PREVIEW_COLUMNS,
    EVENTS_JOIN,
    EXPIRED_ROWS,
    SESSION_COLUMNS,
    STALE_ROWS,
    row_to_event,
    row_to_session,
)
from .base import DeferredEvent, EventFilter, SessionFilter, Tx, batched
from .filters import LIVE, event_where, marks, session_text, session_where

__all__ = ["SqlStore"]


class SqlStore:
    """The statements both SQL backends share; subclasses add connections and schema."""

    #: the ``where`` dialect (``_filters.compile_where``)
    dialect = "sqlite"
    #: the column ``where`` filters read (PostgreSQL: a generated ``jsonb`` column)
    metadata_column = "e.metadata"
    session_metadata = "s.metadata"  # (as compile_where reads it)
    #: appended to the write check's read: PostgreSQL locks the session row
    lock_suffix = ""
    #: where a payload is read from, and the join that brings it (SQLite keeps payloads over
    #: PREVIEW_THRESHOLD out of the events row: a row's later columns sit behind its payload,
    #: so a 1 MB payload in place costs every read of that row ~0.3 ms)
    payload_sql = "e.payload"
    payload_join = ""
    large_payloads_apart = False
    #: how a count of the expired events among a filter's reaches them: SQLite's planner,
    #: without statistics, would walk the filter's index (a session's every row) rather
    #: than the partial index of the expiring ones (PostgreSQL's has statistics)
    expiring_events = "events e INDEXED BY events_expiring"

    # -- provided by the backend -----------------------------------------------------------

    #: the agent a database role confines this connection to (PostgreSQL row-level
    #: security: store/_pg_row_security.py); None when the store sees every row
    confined_agent: str | None = None

    def _confined(self, table: str) -> tuple[str, list[Any]]:
        """``AND <table>.agent_id = ?`` when the connection is confined to one agent: the
        work done for every agent (the expiry sweep, deferred digests) then selects only
        the rows this role may change, so it never returns to rows it cannot."""
        if self.confined_agent is None:
            return "", []
        return f" AND {table}.agent_id = ?", [self.confined_agent]

    def _read(self, sql: str, params: Sequence[Any] = (), tx: Tx | None = None) -> list[Any]:
        raise NotImplementedError

    def atomic(self) -> AbstractContextManager[Tx]:
        raise NotImplementedError

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read statement (``?`` placeholders), outside any transaction."""
        return self._read(sql, params)

    @contextmanager
    def within(self, tx: Tx | None) -> Iterator[Tx]:
        """``tx``, or a transaction of its own when there is none."""
        if tx is not None:
            yield tx
        else:
            with self.atomic() as own:
                yield own

    def _deleted(self, tx: Tx) -> None:
        """Called in the transaction that deleted events (SQLite: vector caches rebuild)."""

    def _deleting_session(self, tx: Tx, session_id: str) -> None:
        """Called before a session's rows go (SQLite: drop its keyword rows first)."""

    def columns(self, *, previews: bool = False) -> str:
        """The columns of an event read (``row_to_event``); ``previews`` as in ``events``."""
        return (_PREVIEW_COLUMNS if previews else _EVENT_COLUMNS).format(payload=self.payload_sql)

    # -- filters ---------------------------------------------------------------------------

    def event_where(self, flt: EventFilter, *, live: bool = True) -> tuple[str, list[Any]]:
        """The ``WHERE`` of a filtered event read (aliases ``e`` and ``s``): never an expired
        event, unless the filter asks for exactly those (the sweep), or ``live=False`` (a
        ranking whose caller leaves the expired out itself: ``Searcher``)."""
        return event_where(
            flt, live=live, dialect=self.dialect, metadata=self.metadata_column,
            confined=self._confined,
        )  # fmt: skip

    def session_where(self, flt: SessionFilter) -> tuple[str, list[Any]]:
        return session_where(flt, dialect=self.dialect, metadata=self.session_metadata)

    # -- writes ----------------------------------------------------------------------------

    def owner_of(self, tx: Tx, session_id: str) -> tuple[str, str, str | None] | None:
        row = tx.execute(
            "SELECT agent_id, status, shared_pool FROM sessions WHERE id = ?" + self.lock_suffix,
            (session_id,),
        ).fetchone()
        return (row[0], row[1], row[2]) if row else None

    def insert_session(self, tx: Tx, record: SessionRecord) -> bool:
        cursor = tx.execute(
            "INSERT INTO sessions (id, agent_id, user_id, goal, status, shared_pool, metadata, "
            "created_us, updated_us, key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (
                record.id,
                record.agent_id,
                record.user_id,
                record.goal,
                record.status,
                record.shared_pool,
                record.metadata_json,
                record.created_us,
                record.updated_us,
                record.key,
            ),
        )
        return bool(cursor.rowcount)

    def insert_event(self, tx: Tx, record: EventRecord, *, touch_us: int | None) -> int | None:
        # The preview was made before the transaction (PreparedEvent) or is the worker's
        # (a deferred event): nothing slow here.
        apart = (
            self.large_payloads_apart
            and record.payload_chars is not None
            and record.payload_chars > PREVIEW_THRESHOLD
        )
        values = (
            record.id,
            record.session_id,
            record.agent_id,
            record.kind,
            record.content,
            None if apart else record.payload_json,
            record.importance,
            record.tags_json,
            record.metadata_json,
            record.status,
            record.created_us,
            record.token_count,
            record.recall_count,
            record.partition,
            record.payload_chars,
            record.payload_preview,
            record.indexed,
            record.deferred,
            record.expires_us,
        )
        found = tx.execute(_INSERT_EVENT, values).fetchone()
        if found is None:
            return None
        seq = int(found[0])
        if apart:
            tx.execute(
                "INSERT INTO large_payloads (seq, payload) VALUES (?, ?)",
                (seq, record.payload_json),
            )
        if record.indexed:  # index=False: stored, never embedded
            tx.execute("INSERT INTO outbox (seq, partition) VALUES (?, ?)", (seq, record.partition))
        if touch_us is not None:
            tx.execute(
                "UPDATE sessions SET updated_us = ? WHERE id = ?", (touch_us, record.session_id)
            )
        return seq

    def set_session_status(self, tx: Tx, session_id: str, status: str, now: int) -> None:
        tx.execute(
            "UPDATE sessions SET status = ?, updated_us = ? WHERE id = ?",
            (status, now, session_id),
        )

    def claim_event_status(self, tx: Tx, event_id: str, before: str | None, after: str) -> bool:
        cursor = tx.execute(
            "UPDATE events SET status = ? WHERE id = ? AND status = ?", (after, event_id, before)
        )
        return bool(cursor.rowcount)

    def set_event_metadata(self, tx: Tx, event_id: str, metadata_json: str) -> None:
        tx.execute("UPDATE events SET metadata = ? WHERE id = ?", (metadata_json, event_id))

    def delete_session_rows(self, tx: Tx, session_id: str) -> int:
        count = tx.execute(
            "SELECT count(*) FROM events WHERE session_id = ?", (session_id,)
        ).fetchone()[0]
        self._deleting_session(tx, session_id)
        owner = tx.execute("SELECT agent_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if owner is not None:  # (its extraction watermark goes with it: nothing left to read)
            tx.execute("DELETE FROM meta WHERE key = ?", (watermark_key(owner[0], session_id),))
        tx.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        self._deleted(tx)
        return int(count)

    def delete_event_rows(self, tx: Tx, flt: EventFilter) -> int:
        where, params = self.event_where(flt, live=False)
        cursor = tx.execute(
            f"DELETE FROM events WHERE seq IN (SELECT e.seq {EVENTS_JOIN} WHERE {where})",
            params,
        )
        self._deleted(tx)
        return int(cursor.rowcount)

    def get_meta(self, key: str, tx: Tx | None = None) -> str | None:
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,), tx)
        return rows[0][0] if rows else None

    def set_meta(self, tx: Tx, key: str, value: str) -> None:
        tx.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def buffer_epoch(self) -> int:
        """The Redis working buffer's epoch (``buffer.py``): entries filled under an older
        one are never served."""
        value = self.get_meta("buffer_epoch")
        return int(value) if value else 0

    def bump_buffer_epoch(self, tx: Tx) -> int:
        """Move the buffer's epoch in ``tx`` (one atomic increment: two concurrent moves are
        two); return the new one."""
        tx.execute(
            "INSERT INTO meta (key, value) VALUES ('buffer_epoch', '1') ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(CAST(meta.value AS BIGINT) + 1 AS TEXT)"
        )
        row = tx.execute("SELECT value FROM meta WHERE key = 'buffer_epoch'").fetchone()
        return int(row[0])

    # -- reads -----------------------------------------------------------------------------

    def session(self, session_id: str, scope: Scope | None) -> Session | None:
        found = self.sessions(SessionFilter(scope, session_id=session_id), limit=1)
        return found[0] if found else None

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
        """``lock`` (inside ``atomic``): the rows stay locked until the transaction ends, so
        a decision made on them (prune) holds when it is carried out."""
        order = "s.created_us, s.id" if oldest_first else "s.updated_us DESC, s.id DESC"
        if flt.text and flt.text_scan is not None:
            # the text looked for in a window: the text_scan first sessions the other
            # conditions select (from the index on activity), then the text among them
            where, params = self.session_where(replace(flt, text=None, text_scan=None))
            text_where, text_params = session_text(flt.text, self.dialect)
            window = f"SELECT * FROM sessions s WHERE {where} ORDER BY {order} LIMIT ?"
            sql = f"SELECT {SESSION_COLUMNS} FROM ({window}) s WHERE {text_where} ORDER BY {order}"
            params = [*params, max(0, int(flt.text_scan)), *text_params]
        else:
            where, params = self.session_where(flt)
            sql = f"SELECT {SESSION_COLUMNS} FROM sessions s WHERE {where} ORDER BY {order}"
        if limit is not None or offset:
            sql += " LIMIT ?"
            params.append(max(0, int(limit)) if limit is not None else 2**62)
        if offset:
            sql += " OFFSET ?"
            params.append(max(0, int(offset)))
        if lock:
            sql += self.lock_suffix
        return [row_to_session(row) for row in self._read(sql, params, tx)]

    def session_sizes(
        self, session_ids: Sequence[str], tx: Tx | None = None
    ) -> dict[str, tuple[int, int]]:
        sizes = {session_id: (0, 0) for session_id in session_ids}
        for chunk in batched(list(session_ids)):
            for session_id, count, tokens in self._read(
                "SELECT session_id, count(*), coalesce(sum(token_count), 0) FROM events "
                f"WHERE session_id IN ({marks(chunk)}) GROUP BY session_id",
                chunk,
                tx,
            ):
                sizes[session_id] = (int(count), int(tokens))
        return sizes

    def agents(self) -> list[str]:
        return [row[0] for row in self._read("SELECT DISTINCT agent_id FROM sessions")]

    # -- pools: who may read and write them (sharing/pools.py) -----------------------------------

    def pool_view(self, agent_id: str) -> tuple[set[str], set[str]]:
        # one round trip per search: the pools the agent has sessions in, and its grants now
        rows = self._read(
            "SELECT DISTINCT shared_pool, 0 FROM sessions "
            "WHERE agent_id = ? AND shared_pool IS NOT NULL "
            "UNION ALL SELECT pool, 1 FROM pool_grants WHERE agent_id = ?",
            (agent_id, agent_id),
        )
        own = {row[0] for row in rows if not row[1]}
        return own, {row[0] for row in rows if row[1]}

    def pool_grants(
        self, *, pool: str | None = None, agent_id: str | None = None, tx: Tx | None = None
    ) -> list[PoolGrant]:
        parts, params = ["TRUE"], []
        for column, value in (("pool", pool), ("agent_id", agent_id)):
            if value is not None:
                parts.append(f"{column} = ?")
                params.append(value)
        rows = self._read(
            "SELECT pool, agent_id, access, granted_us, granted_by FROM pool_grants "
            f"WHERE {' AND '.join(parts)} ORDER BY pool, "
            "CASE access WHEN 'owner' THEN 0 WHEN 'write' THEN 1 ELSE 2 END, agent_id",
            params,
            tx,
        )
        return [PoolGrant(r[0], r[1], r[2], from_us(int(r[3])), r[4]) for r in rows]

    def set_pool_access(
        self, tx: Tx, pool: str, agent_id: str, access: str | None, at_us: int, by: str
    ) -> bool:
        if access is None:
            return bool(
                tx.execute(
                    "DELETE FROM pool_grants WHERE pool = ? AND agent_id = ?", (pool, agent_id)
                ).rowcount
            )
        if access == "owner":  # (the unique index of owners turns a second one into a no-op)
            cursor = tx.execute(
                "INSERT INTO pool_grants (pool, agent_id, access, granted_us, granted_by) "
                "VALUES (?, ?, 'owner', ?, ?) ON CONFLICT DO NOTHING",
                (pool, agent_id, at_us, by),
            )
            return bool(cursor.rowcount)
        cursor = tx.execute(
            "INSERT INTO pool_grants (pool, agent_id, access, granted_us, granted_by) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (pool, agent_id) DO UPDATE "
            "SET access = excluded.access, granted_us = excluded.granted_us, "
            "granted_by = excluded.granted_by WHERE pool_grants.access <> 'owner'",
            (pool, agent_id, access, at_us, by),
        )
        return bool(cursor.rowcount)

    def event(self, event_id: str, scope: Scope | None) -> Event | None:
        params: list[Any] = [event_id, now_us()]
        clause = "TRUE"
        if scope is not None:
            clause, scope_params = scope.sql("s")
            params.extend(scope_params)
        rows = self._read(
            f"SELECT {self.columns()} {EVENTS_JOIN}{self.payload_join} "
            f"WHERE e.id = ? AND {LIVE} AND {clause}",
            params,
        )
        return row_to_event(rows[0]) if rows else None

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
        where, params = self.event_where(flt)
        columns = self.columns(previews=previews)
        if after is not None:
            where += " AND (e.created_us, e.seq) > (?, ?)"
            params.extend(after)
        order = "e.created_us DESC, e.seq DESC" if newest_first else "e.created_us, e.seq"
        sql = f"SELECT {columns} {EVENTS_JOIN}{self.payload_join} WHERE {where} ORDER BY {order}"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"  # LIMIT -1 / ALL: SQLite and PostgreSQL differ, so a
            params.extend((max(0, int(limit)) if limit is not None else 2**62, max(0, offset)))
        return [row_to_event(row) for row in self._read(sql, params, tx)]

    def count_events(self, flt: EventFilter) -> int:
        if flt.expired_by_us is not None:  # (the sweep's own filter: no live condition)
            where, params = self.event_where(flt)
            return int(self._read(f"SELECT count(*) {EVENTS_JOIN} WHERE {where}", params)[0][0])
        # The live ones as all minus the expired, in one statement (one snapshot): the
        # live condition reads every row's expiry from the table, where counting all is
        # answered by an index alone and the expired are few (the sweep deletes them) and
        # indexed apart — 100k events of a session: ~100 ms -> ~11 ms on SQLite.
        where, params = self.event_where(flt, live=False)
        expired_join = EVENTS_JOIN.replace("events e", self.expiring_events, 1)
        sql = (
            f"SELECT (SELECT count(*) {EVENTS_JOIN} WHERE {where}) - "
            f"(SELECT count(*) {expired_join} WHERE {where} AND e.expires_us <= ?)"
        )
        return int(self._read(sql, [*params, *params, now_us()])[0][0])

    def kind_counts(self, flt: EventFilter, tx: Tx | None = None) -> dict[str, int]:
        where, params = self.event_where(flt)
        rows = self._read(
            f"SELECT e.kind, count(*) {EVENTS_JOIN} WHERE {where} GROUP BY e.kind ORDER BY e.kind",
            params,
            tx,
        )
        return {kind: int(count) for kind, count in rows}

    def event_sessions(self, flt: EventFilter, tx: Tx | None = None) -> list[str]:
        """The sessions holding events that ``flt`` selects."""
        where, params = self.event_where(flt)
        rows = self._read(f"SELECT DISTINCT e.session_id {EVENTS_JOIN} WHERE {where}", params, tx)
        return sorted(str(row[0]) for row in rows)

    def sessions_touched(self, flt: EventFilter, tx: Tx | None = None) -> int:
        where, params = self.event_where(flt)
        rows = self._read(
            f"SELECT count(DISTINCT e.session_id) {EVENTS_JOIN} WHERE {where}", params, tx
        )
        return int(rows[0][0])

    def select_seqs(self, flt: EventFilter, *, live: bool = True) -> list[int]:
        where, params = self.event_where(flt, live=live)
        return [
            int(row[0]) for row in self._read(f"SELECT e.seq {EVENTS_JOIN} WHERE {where}", params)
        ]

    def events_by_seq(self, seqs: Sequence[int], *, previews: bool = False) -> dict[int, Event]:
        out: dict[int, Event] = {}
        columns = self.columns(previews=previews)
        now = now_us()
        for chunk in batched(list(seqs)):
            for row in self._read(
                f"SELECT {columns} FROM events e{self.payload_join} "
                f"WHERE e.seq IN ({marks(chunk)}) AND {LIVE}",
                [*chunk, now],
            ):
                event = row_to_event(row)
                out[event.seq] = event
        return out

    def event_contents(self, seqs: Sequence[int]) -> dict[int, tuple[str, str]]:
        out: dict[int, tuple[str, str]] = {}
        now = now_us()
        for chunk in batched(list(seqs)):
            for seq, event_id, content in self._read(
                f"SELECT e.seq, e.id, e.content FROM events e "
                f"WHERE e.seq IN ({marks(chunk)}) AND {LIVE}",
                [*chunk, now],
            ):
                out[int(seq)] = (str(event_id), str(content))
        return out

    def event_times(self, seqs: Sequence[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        for chunk in batched(list(seqs)):
            for seq, created in self._read(
                f"SELECT e.seq, e.created_us FROM events e WHERE e.seq IN ({marks(chunk)})",
                chunk,
            ):
                out[int(seq)] = int(created)
        return out

    def expired_seqs(self, partitions: Sequence[str], now: int) -> list[int]:
        """The events of these partitions that have expired but are still stored (the sweep
        has not reached them): what a search leaves out of its rankings."""
        if not partitions:
            return []
        # The partitions are filtered here, not in SQL: with ``partition IN (...)`` SQLite's
        # planner walked the partition's index (every row of it: 17 ms at 100k events)
        # instead of the partial index, which holds only the expiring rows (~0.01 ms).
        wanted = set(partitions)
        return [
            int(seq) for seq, partition in self._read(EXPIRED_ROWS, (now,)) if partition in wanted
        ]

    def stale_seqs(self, partitions: Sequence[str]) -> list[int]:
        """The events of these partitions that are no longer current (a user's facts,
        superseded or retracted): what a search leaves out unless asked for the history.
        Partitions are filtered here, not in SQL, for the reason ``expired_seqs`` gives."""
        if not partitions:
            return []
        wanted = set(partitions)
        return [int(seq) for seq, partition in self._read(STALE_ROWS, ()) if partition in wanted]

    def expiry_cutoff(self, now: int, batch: int) -> int | None:
        """An expiry time at or before ``now`` up to which about ``batch`` expired events lie
        (the sweep deletes them a batch per transaction); None when none has expired."""
        mine, params = self._confined("events")
        rows = self._read(
            "SELECT max(expires_us) FROM (SELECT expires_us FROM events "
            f"WHERE expires_us IS NOT NULL AND expires_us <= ?{mine} ORDER BY expires_us "
            "LIMIT ?) b",
            (now, *params, batch),
        )
        return None if not rows or rows[0][0] is None else int(rows[0][0])

    def bump_recall(self, seqs: Sequence[int] | Mapping[int, int]) -> None:
        counts = seqs if isinstance(seqs, Mapping) else dict.fromkeys(seqs, 1)
        if not counts:
            return
        by_count: dict[int, list[int]] = {}
        for seq, count in counts.items():
            by_count.setdefault(count, []).append(seq)
        # In batches, like every IN list here: a statement may carry only so many variables
        # (999 in SQLite builds before 3.32, 65,535 in PostgreSQL's protocol).
        with self.atomic() as tx:
            for count, seqs_of in sorted(by_count.items()):
                for chunk in batched(sorted(seqs_of)):
                    tx.execute(
                        "UPDATE events SET recall_count = recall_count + ? "
                        f"WHERE seq IN ({marks(chunk)})",
                        [count, *chunk],
                    )

    def vector_partitions(self) -> list[str]:
        """Every partition that holds events (an external index audits each)."""
        return [row[0] for row in self._read("SELECT DISTINCT partition FROM events")]

    def embedded_seqs(self, partition: str) -> list[int]:
        """The events of ``partition`` that should have a vector: all but those waiting in
        the outbox."""
        rows = self._read(
            "SELECT e.seq FROM events e WHERE e.partition = ? AND e.indexed "
            "AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.seq = e.seq)",
            (partition,),
        )
        return [int(row[0]) for row in rows]

    def requeue(self, seqs: Sequence[int]) -> int:
        """Queue these events for embedding again (their vectors were lost); return how
        many were queued (events deleted meanwhile, or already queued, are skipped)."""
        queued = 0
        with self.atomic() as tx:
            for chunk in batched(list(seqs)):
                cursor = tx.execute(
                    "INSERT INTO outbox (seq, partition) SELECT seq, partition FROM events "
                    f"WHERE indexed AND seq IN ({marks(chunk)}) ON CONFLICT DO NOTHING",
                    chunk,
                )
                queued += max(0, cursor.rowcount)
        return queued

    def pending_count(self, partitions: Sequence[str] | None = None) -> int:
        if partitions is None:
            return int(self._read("SELECT count(*) FROM outbox")[0][0])
        if not partitions:
            return 0
        rows = self._read(
            f"SELECT count(*) FROM outbox WHERE partition IN ({marks(partitions)})",
            list(partitions),
        )
        return int(rows[0][0])

    def oldest_pending_us(self) -> int | None:
        """When the event that has waited longest for its embedding was recorded (the
        outbox row with the lowest seq: one step of its primary key); None if none waits."""
        rows = self._read(
            "SELECT e.created_us FROM outbox o JOIN events e ON e.seq = o.seq "
            "ORDER BY o.seq LIMIT 1"
        )
        return int(rows[0][0]) if rows else None

    # -- deferred digests ------------------------------------------------------------------

    def deferred_events(self, limit: int) -> list[DeferredEvent]:
        """See :meth:`Store.deferred_events <memlane.store.base.Store.deferred_events>`
        (a partial index holds exactly these rows)."""
        mine, params = self._confined("e")
        rows = self._read(
            f"SELECT e.seq, e.content, {self.payload_sql}, e.metadata, e.indexed "
            f"FROM events e{self.payload_join} WHERE e.deferred{mine} ORDER BY e.seq LIMIT ?",
            (*params, limit),
        )
        return [
            DeferredEvent(int(seq), content, payload, metadata, bool(indexed))
            for seq, content, payload, metadata, indexed in rows
        ]

    # -- operators -------------------------------------------------------------------------

    def schema_version(self) -> str | None:
        """The newest migration applied (``0011_buffer_epoch``): the schema's version."""
        rows = self._read("SELECT max(name) FROM migrations")
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def base_stats(self) -> dict[str, Any]:
        by_agent: dict[str, dict[str, int]] = {}
        for agent, kind, count in self._read(
            "SELECT agent_id, kind, count(*) FROM events GROUP BY agent_id, kind "
            "ORDER BY agent_id, kind"
        ):
            by_agent.setdefault(agent, {})[kind] = int(count)
        by_status = {
            status: int(count)
            for status, count in self._read(
                "SELECT status, count(*) FROM sessions GROUP BY status ORDER BY status"
            )
        }
        return {
            "events_by_agent": by_agent,
            "sessions_by_status": by_status,
            "migrations": [
                row[0] for row in self._read("SELECT name FROM migrations ORDER BY name")
            ],
        }

    def session_owner(self, session_id: str) -> tuple[str, str | None] | None:
        rows = self._read("SELECT agent_id, shared_pool FROM sessions WHERE id = ?", (session_id,))
        return (rows[0][0], rows[0][1]) if rows else None

    def event_exists(self, event_id: str) -> bool:
        return bool(self._read("SELECT 1 FROM events WHERE id = ?", (event_id,)))
