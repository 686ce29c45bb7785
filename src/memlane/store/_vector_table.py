"""What the log's own vector indexes share: the ``vectors`` table in the log's database.

SQLite's (``_sqlite_vectors.py``) and PostgreSQL's (``_pg_vectors.py``) indexes differ in how
they write and rank vectors; they count them, list them for an audit and size them the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["VectorTable"]


class _Reads(Protocol):
    def read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...


class VectorTable:
    """The ``vectors`` table's reads, for an index that lives inside the log (``_store``)."""

    _store: _Reads

    def count(self, partition: str | None = None) -> int:
        if partition is None:
            rows = self._store.read("SELECT count(*) FROM vectors")
        else:
            rows = self._store.read(
                "SELECT count(*) FROM vectors WHERE partition = ?", (partition,)
            )
        return int(rows[0][0])

    def seqs(self, partition: str) -> set[int]:
        rows = self._store.read("SELECT seq FROM vectors WHERE partition = ?", (partition,))
        return {int(row[0]) for row in rows}

    def passage_spans(self, seqs: Sequence[int]) -> dict[int, list[tuple[int, int]]]:
        """The passages each of ``seqs`` was indexed by (``(start, stop)`` in order), for
        the events the index cut into passages; an event embedded whole, or not yet, is not
        in the answer."""
        spans: dict[int, list[tuple[int, int]]] = {}
        unique = sorted(set(seqs))
        for at in range(0, len(unique), 500):  # (bound the statement's parameters)
            chunk = unique[at : at + 500]
            rows = self._store.read(
                "SELECT seq, start, stop FROM vectors WHERE seq IN "
                f"({', '.join('?' * len(chunk))}) AND stop > 0 ORDER BY seq, part",
                chunk,
            )
            for seq, start, stop in rows:
                spans.setdefault(int(seq), []).append((int(start), int(stop)))
        return spans

    def size_bytes(self) -> int:
        """Nothing beside the log: the vectors are in its own database (and its size)."""
        return 0
