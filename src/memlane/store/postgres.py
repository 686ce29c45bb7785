"""The PostgreSQL backend: log, pgvector vectors and a tsvector keyword index in one database.

Install the extra: ``pip install 'memlane[postgres]'`` (psycopg 3, its pool and
pgvector's adapter). Open it with ``SessionManager(agent_id=..., url="postgresql://...")``.

* **One transactional store** shared by any number of processes on any number of hosts. Each
  store lives in its own schema (``?schema=``, default ``memlane``); named migrations
  (``_pg_migrations.py``) run on open under an advisory lock.
* **Writes** run in ``READ COMMITTED`` transactions from a connection pool; the write check
  locks the session row (``SELECT ... FOR UPDATE``), so an event never lands in a session that
  another process is closing, and ``record()`` calls into one session queue briefly.
* **The outbox** is claimed with a lease (``_pg_outbox.py``): one short statement stamps the
  rows with the batch's token and an expiry (``OUTBOX_LEASE_SECONDS``, renewed while the
  model runs), the model runs with no connection or lock held, and a second short
  transaction stores the
  vectors of the rows still claimed by the batch. Any number of workers in any processes
  share the outbox and no event is embedded twice; a killed worker's rows are free again
  within a lease. A search catching up its own scope, and ``flush``, wait for rows other
  workers hold rather than skipping or redoing them (read-your-writes).
* **Failures** of the driver are mapped in one place (``_mapped_errors``): a server that
  cannot be reached, or no pooled connection within ``pool_timeout`` (default 10 s), is
  ``StoreUnavailable``; a refused login or unknown database is ``StoreMisconfigured``.
  Connecting gives up after ``connect_timeout`` (default 5 s). The pool checks each
  connection before handing it out, so a server restart costs no caller an error. Any
  other refusal is a ``StoreError``: no psycopg exception crosses the public API.
* **Vector search** is exact by default (``vector_index=exact``): the scope's rows are
  filtered by the same SQL as every read, then ranked by ``<=>`` (cosine distance), so a
  filtered query returns k results whenever k exist. ``vector_index=hnsw`` adds an HNSW index
  and searches it with ``hnsw.iterative_scan = relaxed_order`` and a raised ``ef_search``;
  docs/backends.md has the measurement behind the default.
* **Search in memory** (``?search_cache=memory``, the default): keyword and exact vector
  searches rank in this process with SQLite's caches, fed in commit order
  (``_pg_caches.py``, ``_pg_feed.py``): FTS5's BM25 over the event and its context, and exact
  cosine, so both backends return the same rankings. ``?search_cache=off`` (or
  ``vector_index=hnsw`` for vectors) keeps the SQL paths below, which also answer what the
  caches cannot (a query word FTS5 reads as a phrase, a search without a scope).
* **Keyword search in SQL** is full text (``english`` configuration) over the event's content
  (weight A) and its keyword context (weight B; see ``_pg_migrations.py``), ranked by
  ``ts_rank`` (no inverse document frequency, so not quite BM25).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..core.seams import Cursor, Tx
from ..errors import (
    InvalidInput,
    StoreError,
    StoreMisconfigured,
)
from ..ranking.keyword.scoring import PassageTerms
from ..ranking.keyword.terms import tsquery
from ..ranking.partition_rows import RowQuery
from ._pg_caches import PgKeywordCache
from ._pg_errors import refused_statement, store_error
from ._pg_errors import sentence as _sentence
from ._pg_feed import prune_deletions
from ._pg_migrations import MIGRATIONS
from ._pg_outbox import PgOutbox
from ._pg_row_security import REGRANT, create_agent_role
from ._pg_settings import parse_url
from ._pg_vectors import PgVectors
from ._sql import SqlStore
from ._sql_rows import EVENTS_JOIN, SqlTx
from .base import Capabilities, EventFilter, refuse_unknown_migrations

__all__ = ["PostgresStore"]

log = logging.getLogger("memlane.store.postgres")

# pg_advisory_lock key for migrations (the embedder registration's: _pg_outbox.py)
_MIGRATE_LOCK = 0x61736D00
#: The characters of an event's text its tsvector holds: PostgreSQL refuses a tsvector over
#: 1 MB ("string is too long for tsvector"), which 500,000 characters of distinct words
#: nearly reach (measured: 985 KB); keyword search in PostgreSQL reads no further.
TSVECTOR_CHARS = 300_000
#: ts_rank weights {D, C, B, A}: the context (B) counts half the content (A), as in SQLite
_RANK_WEIGHTS = [0.0, 0.0, 0.5, 1.0]
# ts_rank without length normalisation: on LoCoMo (docs/backends.md) flag 1 (1 + log length)
# scored any@10 0.817 and flag 2 (length) 0.649, against 0.822 without.
# how often a worker prunes the search caches' deletions table (store/_pg_feed.py)
_PRUNE_EVERY_SECONDS = 600.0


@functools.lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """``?`` placeholders (shared with SQLite) → psycopg's ``%s``."""
    return sql.replace("%", "%%").replace("?", "%s")


class PgTx(SqlTx):
    """A transaction on one pooled psycopg connection."""

    __slots__ = ()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        cursor: Cursor = self.conn.execute(_pg(sql), params)
        return cursor

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self.conn.cursor() as cursor:
            cursor.executemany(_pg(sql), rows)


def _require_driver() -> None:
    """Fail early, with the install command, when the ``[postgres]`` extra is missing."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
        from pgvector.psycopg import register_vector  # noqa: F401
    except ImportError as exc:
        raise InvalidInput(
            f"The PostgreSQL backend needs its extra ({exc.name} is missing): "
            "pip install 'memlane[postgres]'."
        ) from None


class PostgresStore(PgOutbox, SqlStore):
    """Sessions, events, the outbox, pgvector vectors and tsvector keyword index in PostgreSQL."""

    dialect = "postgres"
    metadata_column = "e.metadata_j"
    session_metadata = "(s.metadata::jsonb)"
    lock_suffix = " FOR UPDATE"
    expiring_events = "events e"  # (its planner has statistics: no hint, none to give)

    def __init__(self, url: str) -> None:
        _require_driver()
        from psycopg_pool import ConnectionPool

        from . import redact

        self.location = redact(url)
        settings = parse_url(url)
        self.settings = settings
        self.schema = settings.schema
        self.conninfo = settings.conninfo
        self.capabilities = Capabilities(
            name="postgres",
            multi_process=True,
            multi_host=True,
            keyword_context=True,
            exact_vectors=settings.vector_index == "exact",
            transactional_vectors=True,
        )
        cached = settings.search_cache
        self._vector_index = PgVectors(
            self, settings.vector_index, cache_from=self._connection if cached else None
        )
        self._keywords = PgKeywordCache(self._connection) if cached else None
        self._prune_at = 0.0  # the first maintenance prunes
        with self._mapped_errors():
            extension_schema = self._migrate()
        search_path = f"{self.schema},{extension_schema}"

        def configure(conn: Any) -> None:
            from pgvector.psycopg import register_vector

            register_vector(conn)

        self._pool = ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=settings.pool_size,
            kwargs={"autocommit": True, "options": f"-c search_path={search_path}"},
            configure=configure,
            check=self._check_connection,
            timeout=settings.pool_timeout,
            # The pool retries a lost connection with a backoff that doubles without a cap
            # until reconnect_timeout (default 300 s), so after a long outage it could sit a
            # minute or more before noticing that the server is back. Giving up after one
            # caller's wait lets the next caller start a fresh attempt at once.
            reconnect_timeout=settings.pool_timeout,
            open=True,
            name=f"asm-{self.schema}",
        )
        try:
            with self._mapped_errors():
                self._pool.wait(timeout=settings.pool_timeout)
            self.confined_agent = self._confinement()
        except BaseException:
            self._pool.close()
            raise

    def _check_connection(self, conn: Any) -> None:
        """The pool's check of a connection it is about to hand out.

        A connection the server dropped (restart, failover, idle timeout) is found out and
        replaced here rather than handed to a caller to fail. One dead connection usually
        means the server restarted and every idle one is dead too; psycopg_pool would find
        them one checkout at a time, sleeping 1, 2, 4 s in between (7 s for a pool of 4, as
        measured), so the rest are checked together at once.
        """
        from psycopg_pool import ConnectionPool

        try:
            ConnectionPool.check_connection(conn)
        except Exception:
            with contextlib.suppress(Exception):  # the pool must see the first failure
                self._pool.check()
            raise

    # -- driver errors -----------------------------------------------------------------------

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        """Turn psycopg's and its pool's failures into :class:`StoreError` subclasses: the one
        place where they are mapped (the driver's exception stays the ``__cause__``). No
        exception of the driver crosses the public API: what is neither the connection, the
        server's setup nor a conflict is a refused statement (:func:`refused_statement`)."""
        from psycopg import Error, InterfaceError, OperationalError, errors
        from psycopg_pool import PoolTimeout

        try:
            yield
        except (
            OperationalError,
            InterfaceError,
            PoolTimeout,
            # what the server's setup refuses, rather than a mistake in our SQL
            errors.InsufficientPrivilege,
            errors.ReadOnlySqlTransaction,
        ) as exc:
            raise self._store_error(exc) from exc
        except Error as exc:
            raise refused_statement(exc, self.location) from exc

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection; the driver's failures while it is in use become StoreErrors."""
        with self._mapped_errors(), self._pool.connection() as conn:
            yield conn

    def _store_error(self, exc: Exception) -> StoreError:
        """The :class:`StoreError` that ``exc`` means, its message naming the fix."""
        return store_error(
            exc,
            self.location,
            pool_timeout=self.settings.pool_timeout,
            pool_size=self.settings.pool_size,
            connect_timeout=self.settings.connect_timeout,
        )

    # -- schema ----------------------------------------------------------------------------

    def _migrate(self) -> str:
        """Apply the migrations under an advisory lock; return the schema holding pgvector."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATE_LOCK,))
            try:
                found = conn.execute(
                    "SELECT n.nspname FROM pg_extension x "
                    "JOIN pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'vector'"
                ).fetchone()
                if found is None:
                    try:
                        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
                    except psycopg.Error as exc:
                        raise StoreMisconfigured(
                            f"PostgreSQL at {self.location!r} lacks the pgvector extension and "
                            f"this user cannot create it: {_sentence(exc)} Install pgvector "
                            "and run `CREATE EXTENSION vector;` as a superuser once."
                        ) from exc
                    extension_schema = "public"
                else:
                    extension_schema = found[0]
                schema = sql.Identifier(self.schema)
                if self._up_to_date(conn):  # (nothing to create: a role without CREATE opens)
                    return str(extension_schema)
                conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
                conn.execute(
                    sql.SQL("SET search_path TO {}, {}").format(
                        schema, sql.Identifier(extension_schema)
                    )
                )
                with conn.transaction():
                    conn.execute(
                        "CREATE TABLE IF NOT EXISTS migrations "
                        "(name TEXT PRIMARY KEY, applied_us BIGINT)"
                    )
                    applied = {row[0] for row in conn.execute("SELECT name FROM migrations")}
                    known = {name for name, _ in MIGRATIONS}
                    where = f"{self.location!r} (schema {self.schema!r})"
                    refuse_unknown_migrations(applied, known, where)
                    for name, script in MIGRATIONS:
                        if name not in applied:
                            conn.execute(script)
                            conn.execute(
                                "INSERT INTO migrations (name, applied_us) VALUES (%s, %s)",
                                (name, int(time.time() * 1e6)),
                            )
                    # the agent roles' policies and grants, as this version makes them
                    conn.execute(REGRANT)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATE_LOCK,))
        return str(extension_schema)

    def _up_to_date(self, conn: Any) -> bool:
        """Whether every migration is applied already (read without creating anything)."""
        found = conn.execute(
            "SELECT to_regclass(format('%%I.migrations', %s::text)) IS NOT NULL", (self.schema,)
        ).fetchone()
        if not found or not found[0]:
            return False
        from psycopg import sql

        table = sql.SQL("SELECT name FROM {}.migrations").format(sql.Identifier(self.schema))
        applied = {row[0] for row in conn.execute(table)}
        known = {name for name, _ in MIGRATIONS}
        refuse_unknown_migrations(applied, known, f"{self.location!r} (schema {self.schema!r})")
        return known <= applied

    def _confinement(self) -> str | None:
        """The agent this connection's role is confined to by row-level security, if the
        operator enabled it (``StoreAdmin.create_agent_role``) and mapped this role."""
        rows = self._read(
            "SELECT EXISTS (SELECT 1 FROM pg_proc p JOIN pg_namespace n "
            "ON n.oid = p.pronamespace WHERE p.proname = 'asm_agent_of' AND n.nspname = ?)",
            (self.schema,),
        )
        if not rows[0][0]:
            return None
        found = self._read("SELECT asm_agent_of(current_user::text)")
        return None if found[0][0] is None else str(found[0][0])

    def create_agent_role(self, agent_id: str, role: str, password: str | None) -> str:
        """See :meth:`StoreAdmin.create_agent_role` (store/_pg_row_security.py)."""
        with self._mapped_errors():
            return create_agent_role(self, agent_id, role, password)

    # -- connections and transactions -------------------------------------------------------

    @contextmanager
    def atomic(self) -> Iterator[PgTx]:
        with self._connection() as conn:
            tx = PgTx(conn)
            with conn.transaction():
                yield tx
        tx.committed()

    @contextmanager
    def snapshot(self) -> Iterator[PgTx]:
        with self._connection() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PgTx(conn)

    def _read(self, sql: str, params: Sequence[Any] = (), tx: Tx | None = None) -> list[Any]:
        if tx is not None:
            return list(tx.execute(sql, params).fetchall())
        with self._connection() as conn:
            return list(conn.execute(_pg(sql), params).fetchall())

    def _run_alone(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """One statement as its own transaction (the pool's connections are in autocommit);
        the rows it returns, if any."""
        with self._connection() as conn:
            cursor = conn.execute(_pg(sql), params)
            return list(cursor.fetchall()) if cursor.description else []

    @contextmanager
    def secure_deletes(self) -> Iterator[None]:
        """PostgreSQL has no such switch: a deleted row stays in its page until VACUUM
        reclaims the space (:meth:`scrub`)."""
        yield

    def scrub(self, partitions: Sequence[str]) -> list[str]:
        """After deletes that must leave no trace: VACUUM the tables they touched, so the
        dead rows' space is reclaimed (the search caches drop the partitions through the
        deletions feed). Returns what it cannot reach."""
        for table in ("events", "sessions", "vectors", "outbox", "deletions"):
            self._run_alone(f"VACUUM (ANALYZE) {table}")
        return [
            "PostgreSQL's write-ahead log, its archives and replicas keep the deleted rows "
            "until they are recycled; a reclaimed page keeps their bytes until it is reused "
            "(VACUUM FULL rewrites the tables, under an exclusive lock)"
        ]

    def bump_recall(self, seqs: Sequence[int] | Mapping[int, int]) -> None:
        """One statement with the seqs and their counts as two array parameters, however
        many there are (the protocol allows 65,535 parameters; the shared version sends
        batches of 500, a round trip each). Sorted, so that concurrent bumps lock shared rows
        in the same order."""
        counts = seqs if isinstance(seqs, Mapping) else dict.fromkeys(seqs, 1)
        if not counts:
            return
        ordered = sorted(counts.items())
        self._run_alone(
            "UPDATE events AS e SET recall_count = e.recall_count + c.n "
            "FROM unnest(?::bigint[], ?::bigint[]) AS c(seq, n) WHERE e.seq = c.seq",
            ([seq for seq, _ in ordered], [n for _, n in ordered]),
        )

    def settle(self) -> None:
        """Nothing to do: the server keeps its own write-ahead log."""

    def maintenance(self) -> None:
        """PostgreSQL checkpoints and vacuums by itself; the search caches' ``deletions``
        table is pruned now and then (``_pg_feed.prune_deletions``)."""
        if time.monotonic() >= self._prune_at:
            self._prune_at = time.monotonic() + _PRUNE_EVERY_SECONDS
            prune_deletions(self._connection)

    def close(self) -> None:
        if self._keywords is not None:
            self._keywords.invalidate()  # (the memory goes now, not with the last reference)
        self._vector_index.close()
        self._pool.close()

    # -- search ----------------------------------------------------------------------------

    def keyword_search(
        self,
        text: str,
        flt: EventFilter,
        limit: int,
        *,
        content_only: bool,
        partitions: Sequence[tuple[str, bool]] | None = None,
    ) -> list[tuple[int, float]]:
        """BM25 over the event's content and its context, ranked in memory as SQLite ranks it
        (``_pg_caches.py``) over ``partitions``; or ``ts_rank`` in SQL when the cache is off
        or cannot rank the query as FTS5 would (see
        :meth:`~memlane.ranking.keyword.terms.Words.query_stems`), or no partitions are
        given. Higher is better either way."""
        cache = self._keywords
        stems = None if cache is None or partitions is None else cache.query_stems(text)
        if cache is None or stems is None or partitions is None or flt.scope is None:
            return self._ts_rank_search(text, flt, limit, content_only=content_only)
        filters = RowQuery.of(flt, lambda: self.select_seqs(flt))
        return cache.search(
            stems, partitions, flt.scope.agent_id, limit, filters, content_only=content_only
        )

    def keyword_passage_scores(
        self,
        text: str,
        partitions: Sequence[tuple[str, bool]],
        candidates: Sequence[int],
        passages_of: Callable[[list[int]], Mapping[int, PassageTerms]],
    ) -> dict[int, tuple[float, int]]:
        """See :meth:`~memlane.store.base.KeywordSearch.keyword_passage_scores`: by the
        keyword cache, as SQLite scores them (none without it: ``ts_rank`` scores events
        whole)."""
        cache = self._keywords
        stems = None if cache is None else cache.query_stems(text)
        if cache is None or stems is None:
            return {}
        return cache.passage_scores(stems, partitions, candidates, passages_of, content_only=False)

    def keyword_index_ready(self, partitions: Sequence[str], wait: float = 0.0) -> bool:
        """Whether the keyword cache of ``partitions`` is built (always, without the cache:
        PostgreSQL ranks in SQL)."""
        return True if self._keywords is None else self._keywords.wait_ready(partitions, wait)

    def _ts_rank_search(
        self, text: str, flt: EventFilter, limit: int, *, content_only: bool
    ) -> list[tuple[int, float]]:
        """``ts_rank`` over the event's ``search_text``, filtered in SQL."""
        query = tsquery(text, content_only=content_only)
        if not query:
            return []
        where, params = self.event_where(flt)
        rows = self._read(
            "SELECT e.seq, ts_rank(?::real[], e.search_text, q) AS rank "
            "FROM to_tsquery('english', ?) q, events e JOIN sessions s ON s.id = e.session_id "
            f"WHERE e.search_text @@ q AND {where} ORDER BY rank DESC, e.seq LIMIT ?",
            (_RANK_WEIGHTS, query, *params, limit),
        )
        return [(int(row[0]), float(row[1])) for row in rows]

    # -- the outbox and the vector index ----------------------------------------------------

    def vector_index(self) -> PgVectors:
        """The pgvector index in this schema (``_pg_vectors.py``), one per store."""
        return self._vector_index

    def finish_deferred(
        self, tx: Tx, seq: int, token_count: int, preview: str | None, text: str | None
    ) -> bool:
        """See :meth:`Store.finish_deferred <memlane.store.base.Store.finish_deferred>`;
        the tsvector holds the first :data:`TSVECTOR_CHARS` of ``text``."""
        cursor = tx.execute(
            "UPDATE events SET token_count = ?, payload_preview = ?, deferred = FALSE, "
            "search_text = CASE WHEN ?::text IS NULL THEN search_text "
            "ELSE asm_search_text(session_id, seq, created_us, ?) END "
            "WHERE seq = ? AND deferred",
            (token_count, preview, text, None if text is None else text[:TSVECTOR_CHARS], seq),
        )
        return bool(cursor.rowcount)

    def delete_session_rows(self, tx: Tx, session_id: str) -> int:
        self._lock_outbox(tx, "SELECT seq FROM events WHERE session_id = ?", [session_id])
        return super().delete_session_rows(tx, session_id)

    def delete_event_rows(self, tx: Tx, flt: EventFilter) -> int:
        where, params = self.event_where(flt, live=False)
        self._lock_outbox(tx, f"SELECT e.seq {EVENTS_JOIN} WHERE {where}", params)
        return super().delete_event_rows(tx, flt)

    @staticmethod
    def _lock_outbox(tx: Tx, doomed: str, params: Sequence[Any]) -> None:
        """Lock the outbox rows of the events about to be deleted, in seq order, before the
        delete cascades to them. The embedding worker's finish takes its rows the same way,
        so the two queue instead of deadlocking: the cascade's order and the worker's were
        opposite often enough that 31 of 300 clear_session calls were aborted as deadlock
        victims while the worker embedded."""
        tx.execute(
            f"SELECT o.seq FROM outbox o WHERE o.seq IN ({doomed}) ORDER BY o.seq FOR UPDATE",
            params,
        )

    def requeue_all(self, tx: Tx) -> int:
        """Drop the embedder identity, queue every event for embedding and rebuild the
        keyword text, in ``tx`` (the vectors are the vector index's to clear)."""
        tx.execute("DELETE FROM meta WHERE key LIKE 'embedder_%'")
        tx.execute(
            "INSERT INTO outbox (seq, partition) SELECT seq, partition FROM events "
            "WHERE indexed ON CONFLICT DO NOTHING"
        )
        # A batch embedded before the requeue (perhaps by the old embedder) must not store
        # its vectors now: it stores only rows still claimed by it.
        tx.execute(
            "UPDATE outbox SET claimed_until = '-infinity', claimed_by = NULL "
            "WHERE claimed_by IS NOT NULL"
        )
        tx.execute(
            "UPDATE events e SET search_text = "
            "asm_search_text(e.session_id, e.seq, e.created_us, e.content) "
            "WHERE e.indexed AND NOT e.deferred AND NOT asm_whole_text(e.content, e.metadata)"
        )  # (a deferred event keeps the head its insert indexed)
        tx.execute(  # (the worker indexes these: see finish_deferred)
            "UPDATE events SET deferred = TRUE "
            "WHERE indexed AND asm_whole_text(content, metadata) AND NOT deferred"
        )
        return int(tx.execute("SELECT count(*) FROM outbox").fetchone()[0])

    # -- operators -------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        stats = self.base_stats()
        stats["size_bytes"] = self.footprint()[0]
        return stats

    def footprint(self) -> tuple[int, int | None, str | None]:
        """The store's tables and indexes in bytes, no WAL of its own (the server's is
        shared), and the schema version."""
        rows = self._read(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = ? AND c.relkind IN ('r', 'm')",
            (self.schema,),
        )
        return int(rows[0][0]), None, self.schema_version()

    def drop_schema(self) -> None:
        """Delete this store's schema with everything in it (tests and ``memlane``'s tools)."""
        with self.atomic() as tx:
            tx.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
