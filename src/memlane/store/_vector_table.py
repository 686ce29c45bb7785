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

    def size_bytes(self) -> int:
        """Nothing beside the log: the vectors are in its own database (and its size)."""
        return 0
