"""Named schema migrations of the PostgreSQL store, applied in order on open.

Never edit a migration that has shipped: add a new one. They run in one transaction while the
opening process holds an advisory lock, so any number of processes may open a new database at
once; each name is recorded in the ``migrations`` table of the store's schema.

The layout mirrors the SQLite store (``store/_migrations.py``) so that both share their
statements (``store/_sql.py``): ``sessions`` and ``events`` are the log, ``outbox`` the
embedding queue, ``vectors`` (pgvector) and ``events.search_text`` (a ``tsvector`` with a GIN
index) the projections. Differences:

- ``events.metadata`` is the canonical JSON text (so export is byte-identical across
  backends); ``metadata_j`` is the same as ``jsonb``, generated, for ``where`` filters.
- The keyword context of 0002_keyword_context (the two events before and after in the
  session, cut to 1,000 / 500 characters, and the UTC date written out) is computed by
  ``asm_context()``; the content is weighted ``A`` and the context ``B`` in one tsvector.
  New events are indexed by a ``BEFORE INSERT`` trigger with their predecessors; the outbox
  worker refreshes the predecessors (as in SQLite); a statement-level ``AFTER DELETE``
  trigger refreshes the neighbours of deleted events.
- ``outbox`` rows carry their claim (``claimed_by``, ``claimed_until``): a lease, as in
  SQLite, renewed while the worker embeds (0003_outbox_lease).
- ``vectors`` repeats each event's partition and agent, so a search of a scope reads that
  table alone (``Scope.partition_sql``). ``vectors.embedding`` is an unsized ``halfvec``
  (``vector`` before 0016_half_vectors, or with a pgvector older than 0.7): the dimension is
  the embedder's (recorded in ``meta``); an HNSW index, when chosen, is an expression index
  on the sized cast to ``vector``.
"""

from __future__ import annotations

from ._migrations import POOL_GRANTS, STALE_FACTS

__all__ = ["MIGRATIONS"]

_INITIAL = r"""
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
    created_us  BIGINT NOT NULL,
    updated_us  BIGINT NOT NULL
);
CREATE INDEX sessions_by_agent ON sessions (agent_id, updated_us);
CREATE INDEX sessions_by_pool ON sessions (shared_pool) WHERE shared_pool IS NOT NULL;
CREATE TABLE events (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    session_id   TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    agent_id     TEXT NOT NULL,
    kind         TEXT NOT NULL,
    content      TEXT NOT NULL,
    payload      TEXT,
    importance   DOUBLE PRECISION NOT NULL CHECK (importance BETWEEN 0 AND 1),
    tags         TEXT NOT NULL DEFAULT '[]',
    metadata     TEXT NOT NULL DEFAULT '{}',
    metadata_j   JSONB GENERATED ALWAYS AS (metadata::jsonb) STORED,
    status       TEXT,
    created_us   BIGINT NOT NULL,
    token_count  INTEGER NOT NULL,
    recall_count INTEGER NOT NULL DEFAULT 0,
    partition    TEXT NOT NULL,
    search_text  TSVECTOR
);
CREATE INDEX events_by_session_time ON events (session_id, created_us, seq);
CREATE INDEX events_by_session_seq ON events (session_id, seq);
CREATE INDEX events_by_agent_kind ON events (agent_id, kind);
CREATE INDEX events_search ON events USING gin (search_text);
CREATE TABLE outbox (
    seq       BIGINT PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
    partition TEXT NOT NULL
);
CREATE INDEX outbox_by_partition ON outbox (partition, seq);
CREATE TABLE vectors (
    seq       BIGINT PRIMARY KEY REFERENCES events (seq) ON DELETE CASCADE,
    partition TEXT NOT NULL,
    agent_id  TEXT NOT NULL,
    embedding vector NOT NULL
);
CREATE INDEX vectors_by_partition ON vectors (partition, agent_id);

CREATE FUNCTION asm_context(p_session TEXT, p_seq BIGINT, p_created BIGINT) RETURNS TEXT
LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT coalesce((SELECT substr(p.content, 1, 500) FROM events p
                     WHERE p.session_id = p_session AND p.seq < p_seq
                     ORDER BY p.seq DESC LIMIT 1 OFFSET 1), '')
        || E'\n'
        || coalesce((SELECT substr(p.content, 1, 1000) FROM events p
                     WHERE p.session_id = p_session AND p.seq < p_seq
                     ORDER BY p.seq DESC LIMIT 1), '')
        || E'\n'
        || to_char(to_timestamp(p_created / 1000000.0) AT TIME ZONE 'UTC', 'FMDD FMMonth YYYY')
        || E'\n'
        || coalesce((SELECT substr(n.content, 1, 1000) FROM events n
                     WHERE n.session_id = p_session AND n.seq > p_seq
                     ORDER BY n.seq LIMIT 1), '')
        || E'\n'
        || coalesce((SELECT substr(n.content, 1, 500) FROM events n
                     WHERE n.session_id = p_session AND n.seq > p_seq
                     ORDER BY n.seq LIMIT 1 OFFSET 1), '')
$$;

CREATE FUNCTION asm_search_text(p_session TEXT, p_seq BIGINT, p_created BIGINT, p_content TEXT)
RETURNS TSVECTOR LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
    SELECT setweight(to_tsvector('english', p_content), 'A')
        || setweight(to_tsvector('english', asm_context(p_session, p_seq, p_created)), 'B')
$$;

CREATE FUNCTION asm_events_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    NEW.search_text := asm_search_text(NEW.session_id, NEW.seq, NEW.created_us, NEW.content);
    RETURN NEW;
END $$;
CREATE TRIGGER events_insert BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION asm_events_insert();

CREATE FUNCTION asm_events_deleted() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE events e
    SET search_text = asm_search_text(e.session_id, e.seq, e.created_us, e.content)
    WHERE e.seq IN (
        SELECT n.seq FROM gone g CROSS JOIN LATERAL (
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq < g.seq
             ORDER BY p.seq DESC LIMIT 2)
            UNION ALL
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq > g.seq
             ORDER BY p.seq LIMIT 2)
        ) n
    );
    RETURN NULL;
END $$;
CREATE TRIGGER events_deleted AFTER DELETE ON events
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION asm_events_deleted();

INSERT INTO meta (key, value) VALUES ('generation', '0');
"""

# Size and bounded preview of large payloads, and a kind index in log order, as in the
# SQLite store's 0003_restore_reads.
_RESTORE_READS = """
ALTER TABLE events ADD COLUMN payload_chars INTEGER;
ALTER TABLE events ADD COLUMN payload_preview TEXT;
CREATE INDEX events_by_session_kind ON events (session_id, kind, created_us, seq);
"""

# The outbox claim as a lease (PostgresStore.claim_outbox): a worker stamps the rows it takes
# with its claim and an expiry instead of holding their row locks, and so a connection, while
# its model runs. '-infinity' is "never claimed"; the expiry is the server's clock, the one
# clock every host shares.
_OUTBOX_LEASE = """
ALTER TABLE outbox ADD COLUMN claimed_until TIMESTAMPTZ NOT NULL DEFAULT '-infinity';
ALTER TABLE outbox ADD COLUMN claimed_by TEXT;
"""

# Caller-chosen session keys (a framework's thread / conversation id): unique per agent,
# so that a get-or-create (SessionManager.session_for) finds the one session of a key.
_SESSION_KEYS = """
ALTER TABLE sessions ADD COLUMN key TEXT;
CREATE UNIQUE INDEX sessions_by_key ON sessions (agent_id, key) WHERE key IS NOT NULL;
"""

# Events recorded with index=False: kept in the log, never embedded (no outbox row) and
# never given keyword text, neither at insert nor when a neighbour's deletion refreshes it.
_UNINDEXED_EVENTS = """
ALTER TABLE events ADD COLUMN indexed BOOLEAN NOT NULL DEFAULT TRUE;
CREATE OR REPLACE FUNCTION asm_events_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.indexed THEN
        NEW.search_text := asm_search_text(NEW.session_id, NEW.seq, NEW.created_us, NEW.content);
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION asm_events_deleted() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE events e
    SET search_text = asm_search_text(e.session_id, e.seq, e.created_us, e.content)
    WHERE e.indexed AND e.seq IN (
        SELECT n.seq FROM gone g CROSS JOIN LATERAL (
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq < g.seq
             ORDER BY p.seq DESC LIMIT 2)
            UNION ALL
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq > g.seq
             ORDER BY p.seq LIMIT 2)
        ) n
    );
    RETURN NULL;
END $$;
"""

# Commit order for the in-memory search caches (store/_pg_feed.py). A sequence hands out
# ``seq`` when a row is inserted, not when it commits, so "rows above the last seq seen" can
# miss a row forever (seq 10 committing after seq 11). Each row now records the transaction
# that wrote it (``txid``, the top-level xid8); a reader that first takes the snapshot's
# ``xmin`` (every transaction below it has ended) and then reads the rows with ``txid`` at or
# above the previous ``xmin`` sees every committed row exactly once. Rows written before this
# migration keep ``txid`` NULL: they were committed before it (ALTER TABLE waited for their
# writers) and are read by a cache's first full load. Deletes of events or vectors (any
# path: a cascade, prune, reindex, SQL by hand) leave one row per partition and statement in
# ``deletions``, written in the deleting transaction, so caches drop exactly those
# partitions once the delete is visible.
_COMMIT_ORDER = """
ALTER TABLE events ADD COLUMN txid xid8;
ALTER TABLE events ALTER COLUMN txid SET DEFAULT pg_current_xact_id();
CREATE INDEX events_by_partition_txid ON events (partition, txid) INCLUDE (seq);
ALTER TABLE vectors ADD COLUMN txid xid8;
ALTER TABLE vectors ALTER COLUMN txid SET DEFAULT pg_current_xact_id();
CREATE INDEX vectors_by_partition_txid ON vectors (partition, txid) INCLUDE (seq);
CREATE INDEX vectors_by_partition_seq ON vectors (partition, seq);
CREATE TABLE deletions (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    txid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
    partition  TEXT NOT NULL,
    deleted_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX deletions_by_txid ON deletions (txid);
CREATE FUNCTION asm_rows_deleted() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO deletions (partition) SELECT DISTINCT partition FROM gone;
    RETURN NULL;
END $$;
CREATE TRIGGER events_deletions AFTER DELETE ON events
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION asm_rows_deleted();
CREATE TRIGGER vectors_deletions AFTER DELETE ON vectors
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION asm_rows_deleted();
"""

# Large events and flattened JSON outputs cut at their content are digested by the worker, as
# in SQLite's migration of the same name: at insert their tsvector holds the content's first
# 32,768 characters only (a megabyte of text made the caller's insert slow, and past ~1 MB of
# lexemes failed it: "string is too long for tsvector"). A flattened output's tsvector holds
# its whole payload flattened, which only the worker can make: when a neighbour's deletion
# changes its context, it is queued again instead of re-indexed from its content.
_DEFERRED_DIGESTS = """
ALTER TABLE events ADD COLUMN deferred BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX events_deferred ON events (seq) WHERE deferred;
CREATE FUNCTION asm_whole_text(p_content TEXT, p_metadata TEXT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE AS $$
    SELECT length(p_content) >= 4000 AND (p_metadata::jsonb ->> 'derived_content') = 'true'
$$;
CREATE OR REPLACE FUNCTION asm_events_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.indexed THEN
        NEW.search_text := asm_search_text(NEW.session_id, NEW.seq, NEW.created_us,
            CASE WHEN NEW.deferred THEN left(NEW.content, 32768) ELSE NEW.content END);
    END IF;
    RETURN NEW;
END $$;
CREATE OR REPLACE FUNCTION asm_events_deleted() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE events e
    SET search_text = CASE WHEN e.deferred OR asm_whole_text(e.content, e.metadata)
                           THEN e.search_text
                           ELSE asm_search_text(e.session_id, e.seq, e.created_us, e.content) END,
        deferred = e.deferred OR asm_whole_text(e.content, e.metadata)
    WHERE e.indexed AND e.seq IN (
        SELECT n.seq FROM gone g CROSS JOIN LATERAL (
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq < g.seq
             ORDER BY p.seq DESC LIMIT 2)
            UNION ALL
            (SELECT p.seq FROM events p WHERE p.session_id = g.session_id AND p.seq > g.seq
             ORDER BY p.seq LIMIT 2)
        ) n
    );
    RETURN NULL;
END $$;
UPDATE events SET deferred = TRUE WHERE indexed AND asm_whole_text(content, metadata);
"""

# Short-term memory, as in SQLite's migration of the same name: the moment an event stops being
# visible (NULL: never), and a partial index of the expiring rows only.
_EXPIRY = """
ALTER TABLE events ADD COLUMN expires_us BIGINT;
CREATE INDEX events_expiring ON events (expires_us, partition) WHERE expires_us IS NOT NULL;
"""

# asm_whole_text() answered NULL, not FALSE, for an event of 4,000 characters or more without
# ``derived_content`` in its metadata (a long message): ``length >= 4000 AND NULL``. Every
# caller reads it as a boolean, and ``deferred = e.deferred OR NULL`` is NULL, so refreshing
# such an event's keyword context (the worker's batch after its successor, the delete trigger
# of a neighbour, an expiry sweep) violated the NOT NULL of ``deferred`` and failed, and
# ``reindex`` (``NOT asm_whole_text(...)``) skipped it. It now answers FALSE there.
_WHOLE_TEXT_NEVER_NULL = """
CREATE OR REPLACE FUNCTION asm_whole_text(p_content TEXT, p_metadata TEXT) RETURNS BOOLEAN
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(length(p_content) >= 4000
                    AND (p_metadata::jsonb ->> 'derived_content') = 'true', FALSE)
$$;
"""

# Row-level security (store/_pg_row_security.py) as it stands: the UPDATE policies check
# what INSERT checks, rows never move between sessions, partitions, pools or agents (a role
# updates only the columns the library updates), a vector or queued event is its own event's,
# the caches' deletions are not forgotten early, and asm_agent_of / asm_pools_of answer for the
# caller's own role only. On a store with agent roles, the policies and grants are applied
# again by ``PostgresStore._migrate`` after every open that applied migrations (``REGRANT``,
# once the schema is this version's): this migration is what makes existing stores run it.
_ROW_SECURITY_UPDATES = """
SELECT 'row security: applied by _pg_row_security.REGRANT after the migrations';
"""

# The Redis working buffer's epoch, as in SQLite's 0011_buffer_epoch.
_BUFFER_EPOCH = """
INSERT INTO meta (key, value) VALUES ('buffer_epoch', '0') ON CONFLICT (key) DO NOTHING;
"""

# A long event's passages, one vector each, as in SQLite's 0013_passages: ``part`` numbers
# them (the key is now the event and the part), ``start``/``stop`` is the passage's span of
# the content (``stop`` 0: the event embedded whole).
_PASSAGES = """
ALTER TABLE vectors ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vectors ADD COLUMN start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vectors ADD COLUMN stop INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vectors DROP CONSTRAINT vectors_pkey;
ALTER TABLE vectors ADD PRIMARY KEY (seq, part);
"""

# Sessions by last activity across agents (StoreAdmin.sessions, `memlane sessions`, the
# inspector's list): a page is read from the index's end instead of sorting every session
# (100k sessions: a scan and a sort of ~80 ms for the first 50 before; bench/ui_pages.py).
_SESSIONS_BY_ACTIVITY = """
CREATE INDEX sessions_by_activity ON sessions (updated_us, id);
"""

# Vectors in half precision, as SQLite keeps them (its codec, ranking/vectors/codec.py): half
# the bytes on disk and in a small partition's cache, and the same cosines on both backends.
# The library's embedders return unit vectors, which halfvec always holds. pgvector before
# 0.7 has no halfvec: the column stays ``vector`` there, and the store reads either.
_HALF_VECTORS = """
DO $$
BEGIN
    IF to_regtype('halfvec') IS NOT NULL THEN
        ALTER TABLE vectors ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec;
    END IF;
END
$$;
"""

# SQLite's 0018_important_events, in log order as PostgreSQL's other session index is
_IMPORTANT_EVENTS = """
CREATE INDEX events_important ON events (session_id, created_us, seq) WHERE importance >= 0.7;
"""

# asm_search_text() in PL/pgSQL, not SQL: a SQL function with a SET clause (our
# ``search_path``) is never inlined and ran its body at half the speed — 65 rows' keyword
# text took 59 ms as SQL and 29 as PL/pgSQL (whose plans a session keeps), the same
# tsvector. Every insert's trigger computes it, and the worker's batch again for the two
# events before each of its rows (their context now holds it): ~80% of a batch's
# database time with a fast embedder (docs/decisions/2026-11-29-keyword-text-in-plpgsql.md).
_SEARCH_TEXT_PLPGSQL = """
CREATE OR REPLACE FUNCTION asm_search_text(p_session TEXT, p_seq BIGINT, p_created BIGINT,
                                           p_content TEXT)
RETURNS TSVECTOR LANGUAGE plpgsql STABLE SET search_path FROM CURRENT AS $$
BEGIN
    RETURN setweight(to_tsvector('english', p_content), 'A')
        || setweight(to_tsvector('english', asm_context(p_session, p_seq, p_created)), 'B');
END $$;
"""

# record() indexes an event's content only; its context (the events around it and its date)
# is added by the worker's batch that embeds it, with the context of the two events before
# each of its rows (PgOutbox._write_keyword_text), as SQLite's worker writes the FTS5 row
# (0015_keyword_rows_by_worker). The insert trigger's asm_search_text (four reads of the
# neighbours and a tsvector of ~4x the content) was ~1.3 of record()'s ~4.5 ms; the worker
# computed it again anyway once the event's successors arrived. Until its batch, an event is
# found by keyword search in SQL by its own words, not yet by its neighbours'.
_CONTEXT_BY_WORKER = """
CREATE OR REPLACE FUNCTION asm_events_insert() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.indexed THEN
        NEW.search_text := setweight(to_tsvector('english',
            CASE WHEN NEW.deferred THEN left(NEW.content, 32768) ELSE NEW.content END), 'A');
    END IF;
    RETURN NEW;
END $$;
"""


MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_initial", _INITIAL),
    ("0002_restore_reads", _RESTORE_READS),
    ("0003_outbox_lease", _OUTBOX_LEASE),
    ("0004_session_keys", _SESSION_KEYS),
    ("0005_unindexed_events", _UNINDEXED_EVENTS),
    ("0006_commit_order", _COMMIT_ORDER),
    ("0007_deferred_digests", _DEFERRED_DIGESTS),
    ("0008_expiry", _EXPIRY),
    # the same table and backfill as SQLite's 0010_pool_grants (the SQL is portable)
    ("0009_pool_grants", POOL_GRANTS),
    ("0010_whole_text_never_null", _WHOLE_TEXT_NEVER_NULL),
    ("0011_row_security_updates", _ROW_SECURITY_UPDATES),
    ("0012_buffer_epoch", _BUFFER_EPOCH),
    # the same partial index as SQLite's 0012_stale_facts (the SQL is portable)
    ("0013_stale_facts", STALE_FACTS),
    ("0014_passages", _PASSAGES),
    ("0015_sessions_by_activity", _SESSIONS_BY_ACTIVITY),
    ("0016_half_vectors", _HALF_VECTORS),
    ("0017_important_events", _IMPORTANT_EVENTS),
    ("0018_search_text_plpgsql", _SEARCH_TEXT_PLPGSQL),
    ("0019_context_by_worker", _CONTEXT_BY_WORKER),
)
