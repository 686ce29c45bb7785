"""Named schema migrations of the SQLite store, applied in order on open.

Never edit a migration that has shipped: add a new one. Each name is recorded in the
``migrations`` table; a database that has a migration this version does not know was
written by a newer version, and opening it raises :class:`~memlane.errors.SchemaTooNew`.

Layout (see docs/architecture.md):
- ``sessions`` and ``events`` are the log, the only source of truth;
- ``outbox`` lists events still waiting for their embedding (written in the same transaction
  as the event, so a crash can never lose one);
- ``vectors`` (half-precision BLOBs since ``0013``) and ``events_fts`` (FTS5) are projections
  that ``reindex`` can rebuild from the log. Since ``0002_keyword_context`` the keyword index
  has two columns: ``content`` (the event's own text) and ``context`` (what surrounds it: the
  two events before and the two after it in the same session, cut to 1,000 / 500 characters,
  and the event's UTC date written out as "8 May 2023"). Since
  ``0016_keyword_text_from_the_log`` FTS5 stores no copy of them: it reads both from the view
  ``events_keyword_text`` (the events marked ``keyword_row``, their neighbours among those);
- ``large_payloads`` holds payloads over 32 KB (since ``0003_restore_reads``), so the rest of
  their event's row stays cheap to read; ``events.payload_preview`` is what restore reads of
  them;
- ``meta`` holds the embedder that made the vectors, a generation counter that tells
  in-memory caches (in any process) that rows were deleted, and (since
  ``0011_buffer_epoch``) the Redis working buffer's epoch (``buffer.py``).
"""

from __future__ import annotations

# The keyword index of an event also sees its context. Measured on LoCoMo
# (docs/decisions/2026-11-22-hybrid-ranking-defaults.md): the turn that holds an answer often shares
# few words with the question, while the turns around it (the question being asked, the reaction to
# the answer) do. The context is the two events recorded before and the two after it in the same
# session (by seq; the nearest cut to 1,000 characters, the second ones to 500) and its UTC date
# written out ("8 May 2023"), so "what did we decide on 3 June" also matches events of that day by
# keyword. It is weighted below the content at query time (ranking/keyword/terms.py). The insert
# trigger indexes a new event with the context it has (its predecessors and date); adding the new
# event to its two predecessors' context is left to the outbox worker
# (SqliteStore.refresh_previous_context), because rewriting those rows in record() would double its
# cost. Deleting an event refreshes its four neighbours at once, so deleted text never lingers in
# the index.
_KEYWORD_CONTEXT = """
        DROP TRIGGER events_fts_insert;
        DROP TRIGGER events_fts_delete;
        DROP TABLE events_fts;
        CREATE INDEX events_by_session_seq ON events (session_id, seq);
        CREATE VIEW events_search_text (seq, content, context) AS
        SELECT e.seq, e.content,
            coalesce((SELECT substr(p.content, 1, 500) FROM events p
                      WHERE p.session_id = e.session_id AND p.seq < e.seq
                      ORDER BY p.seq DESC LIMIT 1 OFFSET 1), '')
            || char(10)
            || coalesce((SELECT substr(p.content, 1, 1000) FROM events p
                         WHERE p.session_id = e.session_id AND p.seq < e.seq
                         ORDER BY p.seq DESC LIMIT 1), '')
            || char(10)
            || CAST(strftime('%d', e.created_us / 1000000, 'unixepoch') AS INTEGER) || ' '
            || CASE strftime('%m', e.created_us / 1000000, 'unixepoch')
                WHEN '01' THEN 'January' WHEN '02' THEN 'February' WHEN '03' THEN 'March'
                WHEN '04' THEN 'April' WHEN '05' THEN 'May' WHEN '06' THEN 'June'
                WHEN '07' THEN 'July' WHEN '08' THEN 'August' WHEN '09' THEN 'September'
                WHEN '10' THEN 'October' WHEN '11' THEN 'November' ELSE 'December' END
            || ' ' || strftime('%Y', e.created_us / 1000000, 'unixepoch')
            || char(10)
            || coalesce((SELECT substr(n.content, 1, 1000) FROM events n
                         WHERE n.session_id = e.session_id AND n.seq > e.seq
                         ORDER BY n.seq LIMIT 1), '')
            || char(10)
            || coalesce((SELECT substr(n.content, 1, 500) FROM events n
                         WHERE n.session_id = e.session_id AND n.seq > e.seq
                         ORDER BY n.seq LIMIT 1 OFFSET 1), '')
        FROM events e;
        CREATE VIRTUAL TABLE events_fts USING fts5 (
            content, context, tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER events_fts_insert AFTER INSERT ON events BEGIN
            INSERT INTO events_fts (rowid, content, context)
            SELECT t.seq, t.content, t.context FROM events_search_text t WHERE t.seq = new.seq;
        END;
        CREATE TRIGGER events_fts_delete AFTER DELETE ON events BEGIN
            DELETE FROM events_fts WHERE rowid = old.seq;
            UPDATE events_fts
            SET context = (SELECT t.context FROM events_search_text t
                           WHERE t.seq = events_fts.rowid)
            WHERE rowid IN (SELECT p.seq FROM events p
                            WHERE p.session_id = old.session_id AND p.seq < old.seq
                            ORDER BY p.seq DESC LIMIT 2);
            UPDATE events_fts
            SET context = (SELECT t.context FROM events_search_text t
                           WHERE t.seq = events_fts.rowid)
            WHERE rowid IN (SELECT n.seq FROM events n
                            WHERE n.session_id = old.session_id AND n.seq > old.seq
                            ORDER BY n.seq LIMIT 2);
        END;
        INSERT INTO events_fts (rowid, content, context)
        SELECT seq, content, context FROM events_search_text;
        """

# What restore() reads, made cheap (docs/decisions/2026-11-23-restore-reads.md).
# - A large payload's size and a bounded JSON preview (``summarize.payload_digest``: keys,
#   unusual items, cut strings; at most ~8 KB), computed once when the event is written;
#   restore reads the preview instead of parsing megabytes it could never show. Rows written
#   before this migration have neither (NULL): restore reads their payload as before.
# - Payloads over that threshold are stored in ``large_payloads`` instead of the events row:
#   SQLite keeps a row's columns in one record, and the columns after ``payload``
#   (importance, metadata, status, times) sit behind its overflow pages, so a 1 MB payload in
#   place made every read or filter of its row walk ~250 pages (~0.3 ms). Payloads written
#   before stay in place; reads take ``coalesce(lp.payload, e.payload)``.
# - Indexes in log order. Reads order by (created_us, seq); the old (session_id, created_us,
#   id) index could not give that order, so every ordered read of a session sorted all of its
#   events (5 ms per read at 10k events). In SQLite the rowid (seq) ends every index, so
#   (session_id, created_us) is in log order; so is (session_id, kind, created_us), which
#   replaces (session_id, kind, status): a status is always read together with its kind.
_RESTORE_READS = """
        ALTER TABLE events ADD COLUMN payload_chars INTEGER;
        ALTER TABLE events ADD COLUMN payload_preview TEXT;
        CREATE TABLE large_payloads (
            seq     INTEGER PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
            payload TEXT NOT NULL
        );
        DROP INDEX events_by_session_time;
        CREATE INDEX events_by_session_time ON events (session_id, created_us);
        DROP INDEX events_by_session_kind;
        CREATE INDEX events_by_session_kind ON events (session_id, kind, created_us);
        """

# Caller-chosen session keys (a framework's thread / conversation id): unique per agent,
# so that a get-or-create (SessionManager.session_for) finds the one session of a key.
_SESSION_KEYS = """
ALTER TABLE sessions ADD COLUMN key TEXT;
CREATE UNIQUE INDEX sessions_by_key ON sessions (agent_id, key) WHERE key IS NOT NULL;
"""

# Events recorded with index=False: kept in the log, never embedded and never in the keyword
# index (no outbox row; the FTS insert trigger skips them).
_UNINDEXED_EVENTS = """
ALTER TABLE events ADD COLUMN indexed INTEGER NOT NULL DEFAULT 1;
DROP TRIGGER events_fts_insert;
CREATE TRIGGER events_fts_insert AFTER INSERT ON events WHEN new.indexed BEGIN
    INSERT INTO events_fts (rowid, content, context)
    SELECT t.seq, t.content, t.context FROM events_search_text t WHERE t.seq = new.seq;
END;
"""

# The in-memory keyword index (_keyword_cache.py) reads a partition's events in seq order,
# from the last one it has: (partition, seq) — the rowid ends every index.
_EVENTS_BY_PARTITION = """
CREATE INDEX events_by_partition ON events (partition);
"""

# Events too large to digest on the caller's path (_validate.DIGEST_INLINE_CHARS), and flattened
# JSON outputs whose whole text is more than their content (core/searchable.py), are written with
# ``deferred`` set: an estimated token count, no payload preview, and a keyword row of the first
# 32,768 characters of the content only (tokenizing megabytes inside record()'s transaction
# held the write lock for the caller's whole wait). The worker digests them
# (SqliteStore.finish_deferred: the whole text replaces the head) and clears the flag; the
# partial index is its queue. Outputs recorded before are queued too, to be searched whole.
_DEFERRED_DIGESTS = """
ALTER TABLE events ADD COLUMN deferred INTEGER NOT NULL DEFAULT 0;
CREATE INDEX events_deferred ON events (seq) WHERE deferred;
DROP TRIGGER events_fts_insert;
CREATE TRIGGER events_fts_insert AFTER INSERT ON events WHEN new.indexed BEGIN
    INSERT INTO events_fts (rowid, content, context)
    SELECT t.seq, CASE WHEN new.deferred THEN substr(t.content, 1, 32768) ELSE t.content END,
           t.context
    FROM events_search_text t WHERE t.seq = new.seq;
END;
UPDATE events SET deferred = 1
WHERE indexed AND length(content) >= 4000 AND json_extract(metadata, '$.derived_content') = 1;
"""

# Deletes reach the in-memory vector caches row by row instead of rebuilding them
# (_vector_cache.py): every vector deleted (a cascade from its event, prune, an upsert's
# replace=) is logged here by the trigger, and the caches of every process mark those rows
# dead at their next search. ``vectors_cleared`` moves when the whole index is dropped
# (reindex), which the caches answer with a rebuild. The worker keeps the log's newest
# DELETION_LOG_KEEP rows; a cache that saw fewer rebuilds too (meta ``deletions_pruned_to``).
_DELETION_LOG = """
INSERT OR IGNORE INTO meta (key, value) VALUES ('vectors_cleared', '0');
INSERT OR IGNORE INTO meta (key, value) VALUES ('deletions_pruned_to', '0');
CREATE TABLE deleted_vectors (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    seq       INTEGER NOT NULL,
    partition TEXT NOT NULL
);
CREATE TRIGGER vectors_deleted AFTER DELETE ON vectors BEGIN
    INSERT INTO deleted_vectors (seq, partition) VALUES (old.seq, old.partition);
END;
"""

# Short-term memory (``record(ttl=...)``): the moment an event stops being visible, NULL for
# events that never expire. Reads filter on it (``SqlStore.event_where``); the partial index
# holds only the expiring rows, so finding the expired ones (the searches' exclusion, the
# background sweep) reads only those.
_EXPIRY = """
        ALTER TABLE events ADD COLUMN expires_us INTEGER;
        CREATE INDEX events_expiring ON events (expires_us, partition)
            WHERE expires_us IS NOT NULL;
        """

# Who may read and write a pool (docs/decisions/2026-11-24-pool-grants-and-row-security.md): a pool
# has one owner, who grants ``read`` or ``write`` to named agents. This table is the current state,
# read by every scoped query (a subquery of ``Scope.sql``), so a revocation is seen by the next read
# of every process; the grants and revocations themselves are events in the owner's pool log
# (``sharing/pools.py``). Pools that exist when the migration runs keep working for the agents that
# wrote into them: the agent of a pool's first session becomes its owner and every other agent with
# a session in it gets ``write``. Agents that only read a pool (nothing records who subscribed) must
# be granted ``read`` by the owner (``memlane pool grant``).
POOL_GRANTS = """
        CREATE TABLE pool_grants (
            pool        TEXT NOT NULL,
            agent_id    TEXT NOT NULL,
            access      TEXT NOT NULL CHECK (access IN ('owner', 'write', 'read')),
            granted_us  BIGINT NOT NULL,
            granted_by  TEXT NOT NULL,
            PRIMARY KEY (pool, agent_id)
        );
        CREATE UNIQUE INDEX pool_owners ON pool_grants (pool) WHERE access = 'owner';
        CREATE INDEX pool_grants_by_agent ON pool_grants (agent_id);
        INSERT INTO pool_grants (pool, agent_id, access, granted_us, granted_by)
        SELECT g.shared_pool, g.agent_id,
            CASE WHEN g.agent_id = (SELECT f.agent_id FROM sessions f
                                    WHERE f.shared_pool = g.shared_pool
                                    ORDER BY f.created_us, f.id LIMIT 1)
                 THEN 'owner' ELSE 'write' END,
            min(g.created_us), 'migration'
        FROM sessions g WHERE g.shared_pool IS NOT NULL
        GROUP BY g.shared_pool, g.agent_id;
        """

# The Redis working buffer's epoch (buffer.py): a buffered entry is served only
# while it carries the epoch the log holds; a manager that could not pass a write or a delete
# on to Redis, saw Redis fail, or erased a user moves it, so the buffer is never the only
# witness of what the log no longer has (or has more of). A counter, as text like the rest
# of ``meta``.
_BUFFER_EPOCH = """
        INSERT OR IGNORE INTO meta (key, value) VALUES ('buffer_epoch', '0');
        """

# Facts that are no longer current (a user's fact superseded or retracted: longterm/users.py):
# what a search leaves out unless asked for the history. A partial index holds only them, so
# looking them up costs nothing while there are none.
STALE_FACTS = """
        CREATE INDEX events_stale ON events (partition)
            WHERE status IN ('superseded', 'retracted');
        """

# A long event is embedded as passages (text/passages.py), one vector each: ``vectors`` holds
# one row per passage, ``part`` its number and ``start``/``stop`` its span of the event's
# content (``stop`` 0: the event embedded whole, as every event was before). SQLite cannot
# drop the column's UNIQUE (seq), so the table is rebuilt, its vids kept (the caches and
# their snapshots point at them). Events embedded before keep their one vector until
# ``reindex``.
_PASSAGES = """
CREATE TABLE vectors_passages (
    vid       INTEGER PRIMARY KEY AUTOINCREMENT,
    seq       INTEGER NOT NULL REFERENCES events (seq) ON DELETE CASCADE,
    partition TEXT NOT NULL,
    vector    BLOB NOT NULL,
    part      INTEGER NOT NULL DEFAULT 0,
    start     INTEGER NOT NULL DEFAULT 0,
    stop      INTEGER NOT NULL DEFAULT 0,
    UNIQUE (seq, part)
);
INSERT INTO vectors_passages (vid, seq, partition, vector)
    SELECT vid, seq, partition, vector FROM vectors ORDER BY vid;
DROP TABLE vectors;
ALTER TABLE vectors_passages RENAME TO vectors;
CREATE INDEX vectors_by_partition ON vectors (partition, vid);
CREATE TRIGGER vectors_deleted AFTER DELETE ON vectors BEGIN
    INSERT INTO deleted_vectors (seq, partition) VALUES (old.seq, old.partition);
END;
"""

# Sessions by last activity across agents (StoreAdmin.sessions, `memlane sessions`, the
# inspector's list): a page is read from the index's end instead of sorting every session
# (100k sessions: a scan and a sort of ~80 ms for the first 50 before; bench/ui_pages.py).
_SESSIONS_BY_ACTIVITY = """
CREATE INDEX sessions_by_activity ON sessions (updated_us, id);
"""

# An event's keyword row is written by the outbox worker, with the batch it embeds
# (SqliteStore.index_new_events), not by a trigger in record()'s transaction: the row (the
# event's context read from its neighbours, its text tokenized) was a third of record()'s
# time, and FTS5 wrote a segment a transaction and merged them in some commits (record() p99
# 5.6 → 1.3 ms; docs/decisions/2026-11-27-keyword-rows-by-the-worker.md). Keyword search
# ranks in memory from the log (ranking/keyword/), so it finds an event at once; a search that
# falls back to FTS5 (while that index builds) first writes the rows of the newest pending
# events (SqliteKeywordIndex._index_pending). Rows of events recorded before stay as written.
_KEYWORD_ROWS_BY_WORKER = """
DROP TRIGGER events_fts_insert;
"""


def _keyword_row_triggers() -> str:
    """0016's triggers: before a delete or an update of what the view reads, the event's row
    and its four neighbours' rows out; after it, back in (the same subqueries four times)."""

    def near(ev: str, side: str, offset: int) -> str:
        op, order = ("<", " DESC") if side == "before" else (">", "")
        return (
            f"(SELECT p.seq FROM events p\n"
            f"            WHERE p.session_id = {ev}.session_id AND p.seq {op} {ev}.seq "
            f"AND p.keyword_row\n"
            f"            ORDER BY p.seq{order} LIMIT 1 OFFSET {offset})"
        )

    def neighbours(ev: str) -> list[str]:
        return [near(ev, side, offset) for side in ("before", "after") for offset in (0, 1)]

    def take_out(ev: str) -> str:
        rows = [f"{ev}.seq", *neighbours(ev)]
        return "\n".join(f"    DELETE FROM events_fts WHERE rowid = {row};" for row in rows)

    def put_back(ev: str, own: bool) -> str:
        rows = ([f"{ev}.seq"] if own else []) + neighbours(ev)
        listed = ",\n        ".join(rows)
        return (
            "    INSERT INTO events_fts (rowid, content, context)\n"
            f"    SELECT seq, content, context FROM events_keyword_text WHERE seq IN (\n"
            f"        {listed}\n    );"
        )

    watched = "UPDATE OF content, deferred, created_us\nON events"
    return (
        "CREATE TRIGGER events_fts_before_delete BEFORE DELETE ON events WHEN old.keyword_row "
        f"BEGIN\n{take_out('old')}\nEND;\n"
        "CREATE TRIGGER events_fts_after_delete AFTER DELETE ON events WHEN old.keyword_row "
        f"BEGIN\n{put_back('old', own=False)}\nEND;\n"
        f"CREATE TRIGGER events_fts_before_update BEFORE {watched} WHEN old.keyword_row BEGIN\n"
        f"{take_out('old')}\nEND;\n"
        f"CREATE TRIGGER events_fts_after_update AFTER {watched} WHEN new.keyword_row BEGIN\n"
        f"{put_back('new', own=True)}\nEND;"
    )


# The keyword index stores no copy of its text (issue 34: its content table was the biggest
# thing in the store, ~920 B of ~3.3 KB an event at 100k events). ``events_fts`` is an
# external-content FTS5 table over the view ``events_keyword_text``, which computes an event's
# text and context from the log when FTS5 needs them: to delete a row (it must remove exactly
# the tokens it added), to ``rebuild``. That holds only if the view gives, for every row in
# the index, the text it was indexed with, and no row that is not in it. So:
# - ``events.keyword_row`` says which events have their row (the worker sets it when it writes
#   them: SqliteKeywordIndex.index_new_events), and the view holds only those; an event's
#   context is read from its neighbours *that have a row* (two before, two after, in its
#   session), so recording an event changes no indexed context until the worker indexes it,
#   and then the worker re-indexes the neighbours whose context it joins, in that transaction;
# - deleting an event, or changing its content, its date or whether it is deferred, takes its
#   row and its four neighbours' rows out before the change (while the view still gives their
#   indexed text) and puts them back after (the triggers below);
# - the whole text of a flattened output that is more than its content (core/searchable.py,
#   the worker's digest) is kept in ``keyword_text``, the one text the log cannot give back;
# - an event never moves to another session (the guard below; nothing in the library does).
# tests/test_keyword_rows.py checks the index against the view (FTS5's integrity-check) after
# every kind of write.
_KEYWORD_TEXT_FROM_THE_LOG = f"""
ALTER TABLE events ADD COLUMN keyword_row INTEGER NOT NULL DEFAULT 0;
UPDATE events SET keyword_row = 1 WHERE seq IN (SELECT rowid FROM events_fts);
CREATE TABLE keyword_text (
    seq  INTEGER PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
    text TEXT NOT NULL
);
INSERT INTO keyword_text (seq, text)
SELECT f.rowid, f.content FROM events_fts f JOIN events e ON e.seq = f.rowid
WHERE NOT e.deferred AND f.content IS NOT e.content;
DROP TRIGGER events_fts_delete;
DROP TABLE events_fts;
DROP VIEW events_search_text;
CREATE VIEW events_keyword_text (seq, content, context) AS
SELECT e.seq,
    CASE WHEN e.deferred THEN substr(e.content, 1, 32768)
         ELSE coalesce((SELECT k.text FROM keyword_text k WHERE k.seq = e.seq), e.content) END,
    coalesce((SELECT substr(p.content, 1, 500) FROM events p
                  WHERE p.session_id = e.session_id AND p.seq < e.seq AND p.keyword_row
                  ORDER BY p.seq DESC LIMIT 1 OFFSET 1), '')
    || char(10)
    || coalesce((SELECT substr(p.content, 1, 1000) FROM events p
                  WHERE p.session_id = e.session_id AND p.seq < e.seq AND p.keyword_row
                  ORDER BY p.seq DESC LIMIT 1 OFFSET 0), '')
    || char(10)
    || CAST(strftime('%d', e.created_us / 1000000, 'unixepoch') AS INTEGER) || ' '
    || CASE strftime('%m', e.created_us / 1000000, 'unixepoch')
        WHEN '01' THEN 'January' WHEN '02' THEN 'February' WHEN '03' THEN 'March'
        WHEN '04' THEN 'April' WHEN '05' THEN 'May' WHEN '06' THEN 'June'
        WHEN '07' THEN 'July' WHEN '08' THEN 'August' WHEN '09' THEN 'September'
        WHEN '10' THEN 'October' WHEN '11' THEN 'November' ELSE 'December' END
    || ' ' || strftime('%Y', e.created_us / 1000000, 'unixepoch')
    || char(10)
    || coalesce((SELECT substr(p.content, 1, 1000) FROM events p
                  WHERE p.session_id = e.session_id AND p.seq > e.seq AND p.keyword_row
                  ORDER BY p.seq LIMIT 1 OFFSET 0), '')
    || char(10)
    || coalesce((SELECT substr(p.content, 1, 500) FROM events p
                  WHERE p.session_id = e.session_id AND p.seq > e.seq AND p.keyword_row
                  ORDER BY p.seq LIMIT 1 OFFSET 1), '')
FROM events e WHERE e.keyword_row;
CREATE VIRTUAL TABLE events_fts USING fts5 (
    content, context, content='events_keyword_text', content_rowid='seq',
    tokenize='porter unicode61 remove_diacritics 2'
);
{_keyword_row_triggers()}
CREATE TRIGGER events_stay_in_their_session BEFORE UPDATE OF session_id, seq ON events
WHEN new.session_id IS NOT old.session_id OR new.seq IS NOT old.seq BEGIN
    SELECT RAISE(ABORT, 'an event never moves to another session or position');
END;
INSERT INTO events_fts (events_fts) VALUES ('rebuild');
"""

# An event's keyword context is read from its session's neighbours *that have a row*: the
# worker looks them up for each event it indexes, and FTS5 reads the view's four subqueries
# for each row it writes. With only ``events_by_session_seq`` each lookup walked the
# session's events until it met two with a row, so events recorded faster than the worker
# indexed them (a bulk import, ``background=False`` until ``flush()``, a starved worker) made
# indexing quadratic in the backlog: one session of 16,000 facts flushed in 14.9 s, of 64,000
# in 256 s; a 1M-event store did not finish in 20 minutes. This partial index holds only the
# events with a row, so each lookup is one seek (2.4 s for the 64,000;
# docs/decisions/2026-11-28-keyword-neighbours-by-index.md).
# A session's important events (importance >= IMPORTANT_FROM, events.py), newest first, are
# one of restore's reads: over the (session_id, created_us) index it visited every newer
# event to keep the ~5% that are important (a 10k-event session: ~4,000 rows for 200, 6.2 ms).
# A partial index holds only them (0.6 ms); the filter writes the number out to match it.
IMPORTANT_EVENTS = """
CREATE INDEX events_important ON events (session_id, created_us) WHERE importance >= 0.7;
"""

_KEYWORD_NEIGHBOURS = """
CREATE INDEX events_keyword_rows ON events (session_id, seq) WHERE keyword_row;
"""

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
    ("0002_keyword_context", _KEYWORD_CONTEXT),
    ("0003_restore_reads", _RESTORE_READS),
    ("0004_session_keys", _SESSION_KEYS),
    ("0005_unindexed_events", _UNINDEXED_EVENTS),
    ("0006_events_by_partition", _EVENTS_BY_PARTITION),
    ("0007_deferred_digests", _DEFERRED_DIGESTS),
    ("0008_deletion_log", _DELETION_LOG),
    ("0009_expiry", _EXPIRY),
    ("0010_pool_grants", POOL_GRANTS),
    ("0011_buffer_epoch", _BUFFER_EPOCH),
    ("0012_stale_facts", STALE_FACTS),
    ("0013_passages", _PASSAGES),
    ("0014_sessions_by_activity", _SESSIONS_BY_ACTIVITY),
    ("0015_keyword_rows_by_worker", _KEYWORD_ROWS_BY_WORKER),
    ("0016_keyword_text_from_the_log", _KEYWORD_TEXT_FROM_THE_LOG),
    ("0017_keyword_neighbours", _KEYWORD_NEIGHBOURS),
    ("0018_important_events", IMPORTANT_EVENTS),
)
