"""What PostgreSQL's in-memory search caches read: every committed row once, in commit order.

SQLite's caches (``_keyword_cache.py``, ``_vector_cache.py``) refresh with "the rows whose
``seq`` is above the last one seen", which is right there because SQLite has one writer at a
time. In PostgreSQL ``seq`` comes from a sequence when a row is *inserted*, and transactions
commit in any order: a transaction holding seq 10 may commit after the one holding seq 11, and
a reader that saw 11 would skip 10 for ever. So each row records the transaction that wrote it
(``txid``, migration ``0006_commit_order``), and a partition is read like this:

1. Take ``xmin`` of the current snapshot (``pg_snapshot_xmin(pg_current_snapshot())``): every
   transaction with an id below it has ended, committed or rolled back.
2. Read the rows whose ``txid`` is at or above the ``xmin`` of the previous read (the first
   read takes every row), skipping those already held.
3. Remember this ``xmin``, and the rows read whose ``txid`` is at or above it (they may be
   listed again next time).

Why nothing is missed: a row of a transaction below the new ``xmin`` had committed before step
2 began, so step 2 saw it, unless its ``txid`` was below the previous ``xmin`` too, and then
the previous read saw it (by the same argument, back to the first full read). Rows of
transactions still running are simply read by a later refresh. The cost is the rows of
transactions that were running at the previous read: usually none. A transaction left open
for long anywhere on the server holds ``xmin`` back, and each refresh then lists (seq and
txid only, from an index) the rows written since it began.

Deletes leave a row per partition in ``deletions`` (a trigger, in the deleting transaction);
the same watermark finds the new ones, and the caches drop those partitions. The table is kept
short by :func:`prune_deletions` (the embedding worker's maintenance): rows older than
:data:`DELETIONS_KEPT_SECONDS` go, and ``meta.deletions_pruned_to`` records the newest txid
removed, so a cache whose watermark is not above it (idle for that long) drops everything
rather than miss a deletion.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ranking.vectors.codec import HALF_TAG

__all__ = ["DELETIONS_KEPT_SECONDS", "CommitFeed", "Watermark", "prune_deletions"]

Connect = Callable[[], AbstractContextManager[Any]]

#: rows fetched per round trip while a partition loads (bounds the transient Python objects)
CHUNK = 8192
#: how long a row of ``deletions`` is kept: caches idle for longer reload every partition
DELETIONS_KEPT_SECONDS = 3600

_PRUNE = """
WITH gone AS (
    DELETE FROM deletions WHERE deleted_at < now() - make_interval(secs => %s) RETURNING txid
)
INSERT INTO meta (key, value)
SELECT 'deletions_pruned_to', max(txid)::text FROM gone HAVING count(*) > 0
ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value::xid8, excluded.value::xid8)::text
"""


def prune_deletions(connect: Connect) -> None:
    """Forget deletions older than :data:`DELETIONS_KEPT_SECONDS` (see the module docstring)."""
    with connect() as conn:
        conn.execute(_PRUNE, (DELETIONS_KEPT_SECONDS,))


@dataclass
class Watermark:
    """How far one cached partition has read, in commit order."""

    #: every transaction below this had ended when the rows were last read
    xmin: int
    #: ``seq -> txid`` of the rows held whose ``txid`` is at or above :attr:`xmin`
    recent: dict[int, int] = field(default_factory=dict)

    def unseen(self, listed: Sequence[tuple[int, int]]) -> list[int]:
        """The seqs of ``listed`` ``(seq, txid)`` rows not held yet."""
        return [seq for seq, _ in listed if seq not in self.recent]

    def advance(self, xmin: int, listed: Sequence[tuple[int, int]]) -> None:
        """After reading up to ``xmin``: keep only rows that a later read may list again."""
        recent = {**self.recent, **dict(listed)}
        self.xmin = xmin
        self.recent = {seq: txid for seq, txid in recent.items() if txid >= xmin}


@dataclass
class _Deletions:
    """Which ``deletions`` rows one cache has acted on."""

    xmin: int | None = None
    seen: dict[int, int] = field(default_factory=dict)  # id -> txid, for ids >= xmin


def _xid(value: Any) -> int:
    return -1 if value is None else int(value)


def _cursor(conn: Any, binary: bool, name: str = "") -> Any:
    """A cursor (server-side when ``name`` is given); ``binary`` reads vectors as bytes."""
    cursor = conn.cursor(name, binary=binary)
    if binary:
        types = conn.adapters.types
        cursor.adapters.register_loader(types["vector"].oid, raw_vector_loader())
        half = types.get("halfvec")
        if half is not None:
            cursor.adapters.register_loader(half.oid, raw_vector_loader(half=True))
    return cursor


def raw_vector_loader(*, half: bool = False) -> type:
    """A psycopg binary loader turning a pgvector value into the bytes SQLite stores
    (``ranking/vectors/codec.py``) without building a Python list or a ``Vector`` object per
    row: a ``vector`` as little-endian float32, a ``halfvec`` (``half``) as little-endian
    float16 and the half-precision tag."""
    from psycopg.adapt import Loader
    from psycopg.pq import Format

    # pgvector's binary formats: int16 dimension, int16 unused, then big-endian float4s
    # (vector) or float2s (halfvec)
    size, tag = (2, HALF_TAG) if half else (4, b"")

    class RawVector(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> bytes:
            values = np.frombuffer(data, f">f{size}", offset=4)
            return values.astype(f"<f{size}").tobytes() + tag

    return RawVector


class CommitFeed:
    """Reads one table's rows for a cache in commit order (see the module docstring).

    ``table`` is ``events`` (the keyword cache) or ``vectors``; ``columns`` and ``source``
    give the rows the cache appends, ``source`` aliasing that table as ``t``; the column at
    ``seq_at`` is the row's event (a long event has several vector rows, committed together).
    """

    def __init__(
        self, connect: Connect, table: str, columns: str, source: str, *, seq_at: int = 0
    ) -> None:
        self._connect = connect
        self._seq_at = seq_at
        self._table = table
        self._rows_sql = f"SELECT {columns}, t.txid::text FROM {source}"
        self._deletions = _Deletions()
        self.marks: dict[str, Watermark] = {}

    def reading(self) -> AbstractContextManager[Any]:
        """A pooled connection for one refresh: the methods below take it (the pool checks
        a connection at each checkout, a round trip that one refresh pays once)."""
        return self._connect()

    def dropped(self, conn: Any) -> tuple[int, set[str] | None]:
        """The current ``xmin`` and the partitions whose rows were deleted since the last
        call (None: every partition, on the first call)."""
        state = self._deletions
        if state.xmin is None:
            row = conn.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
            state.xmin = int(row.fetchone()[0])
            return state.xmin, None
        # One statement, one snapshot: a deletion below its xmin is visible in it, and so is
        # a prune that removed rows this cache has not seen.
        rows = conn.execute(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text, "
            "(SELECT value FROM meta WHERE key = 'deletions_pruned_to'), "
            "d.id, d.txid::text, d.partition "
            "FROM (SELECT 1) one LEFT JOIN deletions d ON d.txid >= %s::xid8",
            (str(state.xmin),),
        ).fetchall()
        xmin = int(rows[0][0])
        pruned_to = rows[0][1]
        if pruned_to is not None and int(pruned_to) >= state.xmin:
            self.forget()
            self._deletions = _Deletions(xmin)
            return xmin, None
        found = [(int(key), int(txid), part) for _, _, key, txid, part in rows if key is not None]
        dropped = {part for key, _, part in found if key not in state.seen}
        state.seen.update((key, txid) for key, txid, _ in found)
        state.seen = {key: txid for key, txid in state.seen.items() if txid >= xmin}
        state.xmin = xmin
        for name in dropped:
            self.marks.pop(name, None)
        return xmin, dropped

    def forget(self, partition: str | None = None) -> None:
        """Drop the marks of ``partition`` (None: of all, and the deletion watermark)."""
        if partition is None:
            self.marks.clear()
            self._deletions = _Deletions()
        else:
            self.marks.pop(partition, None)

    def count(self, conn: Any, partition: str) -> int:
        """The rows of ``partition`` now (to size a load's arrays once)."""
        row = conn.execute(
            f"SELECT count(*) FROM {self._table} t WHERE t.partition = %s{self._indexed}",
            (partition,),
        ).fetchone()
        return int(row[0])

    def load(
        self, conn: Any, partition: str, xmin: int, *, binary: bool = False
    ) -> Iterator[list[Any]]:
        """Every row of ``partition`` in seq order, in chunks, ``xmin`` (read before) becoming
        its watermark. A server-side cursor: one snapshot, memory bounded by the chunk."""
        mark = Watermark(xmin)
        with conn.transaction(), _cursor(conn, binary, "asm_cache_load") as cursor:
            cursor.execute(
                f"{self._rows_sql} WHERE t.partition = %s{self._indexed} ORDER BY t.seq",
                (partition,),
            )
            while rows := cursor.fetchmany(CHUNK):
                at = self._seq_at
                mark.recent.update(
                    (int(row[at]), _xid(row[-1])) for row in rows if _xid(row[-1]) >= xmin
                )
                yield [row[:-1] for row in rows]
        self.marks[partition] = mark

    def new_rows(self, conn: Any, partition: str, xmin: int, *, binary: bool = False) -> list[Any]:
        """The rows of ``partition`` committed since its last read, in seq order."""
        mark = self.marks[partition]
        # An index-only scan of (partition, txid) INCLUDE (seq): any other column (indexed)
        # would visit the table, and without statistics on a new column the planner then
        # chose a sequential scan (86 ms at 100k events).
        listed = [
            (int(seq), int(txid))
            for seq, txid in conn.execute(
                f"SELECT t.seq, t.txid::text FROM {self._table} t "
                "WHERE t.partition = %s AND t.txid >= %s::xid8",
                (partition, str(mark.xmin)),
            ).fetchall()
        ]
        unseen = mark.unseen(listed)
        rows: list[Any] = []
        if unseen:
            with _cursor(conn, binary) as cursor:
                cursor.execute(
                    f"{self._rows_sql} WHERE t.seq = ANY(%s){self._indexed} ORDER BY t.seq",
                    (unseen,),
                )
                rows = [row[:-1] for row in cursor.fetchall()]
        mark.advance(xmin, listed)  # (unindexed events too: listed, never fetched again)
        return rows

    @property
    def _indexed(self) -> str:
        # events recorded with index=False are no keyword rows (their vectors never exist)
        return " AND t.indexed" if self._table == "events" else ""
