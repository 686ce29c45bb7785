"""Named schema migrations of the SQLite store, applied in order on open.

Never edit a migration that has shipped: add a new one. Each name is recorded in the
``migrations`` table; a database that has a migration this version does not know was
written by a newer version, and opening it raises :class:`~session_manager.errors.SchemaTooNew`.

Layout (see docs/architecture.md):
- ``sessions`` and ``events`` are the log, the only source of truth;
- ``outbox`` lists events still waiting for their embedding (written in the same transaction
  as the event, so a crash can never lose one);
- ``vectors`` (float32 little-endian BLOBs) and ``events_fts`` (FTS5) are projections that
  ``reindex`` can rebuild from the log;
- ``meta`` holds the embedder that made the vectors and a generation counter that tells
  in-memory caches (in any process) that rows were deleted.
"""

from __future__ import annotations

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "0001_initial",
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE sessions (
            id          TEXT PRIMARY KEY,
            agent_id    TEXT NOT NULL,
            user_id     TEXT,
            goal        TEXT NOT NULL,
            status      TEXT NOT NULL
                        CHECK (status IN ('active', 'completed', 'failed', 'abandoned')),
            shared_pool TEXT,
            metadata    TEXT NOT NULL DEFAULT '{}',
            created_us  INTEGER NOT NULL,
            updated_us  INTEGER NOT NULL
        );
        CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_us);
        CREATE INDEX sessions_by_pool ON sessions (shared_pool) WHERE shared_pool IS NOT NULL;
        CREATE TABLE events (
            seq          INTEGER PRIMARY KEY AUTOINCREMENT,
            id           TEXT NOT NULL UNIQUE,
            session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            agent_id     TEXT NOT NULL,
            kind         TEXT NOT NULL,
            content      TEXT NOT NULL,
            payload      TEXT,
            importance   REAL NOT NULL CHECK (importance BETWEEN 0 AND 1),
            tags         TEXT NOT NULL DEFAULT '[]',
            metadata     TEXT NOT NULL DEFAULT '{}',
            status       TEXT,
            created_us   INTEGER NOT NULL,
            token_count  INTEGER NOT NULL,
            recall_count INTEGER NOT NULL DEFAULT 0,
            partition    TEXT NOT NULL
        );
        CREATE INDEX events_by_session_time ON events (session_id, created_us, id);
        CREATE INDEX events_by_session_kind ON events (session_id, kind, status);
        CREATE INDEX events_by_agent_kind ON events (agent_id, kind);
        CREATE TABLE outbox (
            seq           INTEGER PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
            partition     TEXT NOT NULL,
            claimed_until REAL NOT NULL DEFAULT 0
        );
        CREATE INDEX outbox_by_partition ON outbox (partition);
        CREATE TABLE vectors (
            vid       INTEGER PRIMARY KEY AUTOINCREMENT,
            seq       INTEGER NOT NULL UNIQUE REFERENCES events (seq) ON DELETE CASCADE,
            partition TEXT NOT NULL,
            vector    BLOB NOT NULL
        );
        CREATE INDEX vectors_by_partition ON vectors (partition, vid);
        CREATE VIRTUAL TABLE events_fts USING fts5 (
            content, content='events', content_rowid='seq',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER events_fts_insert AFTER INSERT ON events BEGIN
            INSERT INTO events_fts (rowid, content) VALUES (new.seq, new.content);
        END;
        CREATE TRIGGER events_fts_delete AFTER DELETE ON events BEGIN
            INSERT INTO events_fts (events_fts, rowid, content)
            VALUES ('delete', old.seq, old.content);
        END;
        INSERT INTO meta (key, value) VALUES ('generation', '0');
        """,
    ),
)
