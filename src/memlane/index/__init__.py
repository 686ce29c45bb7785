"""Vectors beside the log: external vector indexes (ChromaDB), chosen by URL.

The URL scheme (docs/backends.md describes it):

==============================  ==========================================================
``index`` (the vectors)         meaning
==============================  ==========================================================
``None``                        the log's own store (SQLite BLOBs + numpy, or pgvector)
``chroma:///relative/dir``      ChromaDB embedded (``PersistentClient``), one process only
``chroma:////abs/dir``          the same, absolute path
``chroma``                      embedded, in ``<sqlite file>.chroma/`` beside the log
``chroma+http://host:port``     a Chroma server (``chroma run``); ``chroma+https://`` too
==============================  ==========================================================
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..core.seams import VectorIndex
from ..errors import InvalidInput

__all__ = ["open_index"]

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")


def open_index(index: str, *, beside: str | None, store_id: str) -> VectorIndex:
    """Open the external vector index ``index`` names. ``beside``: the log's SQLite file,
    if it is one (``index="chroma"`` keeps Chroma's files next to it); ``store_id`` names
    this store's collections."""
    from .chroma import ChromaIndex

    if index == "chroma":
        if beside is None or beside == ":memory:":
            raise InvalidInput(
                "index='chroma' keeps Chroma's files beside a SQLite file; with this log, "
                "give a location: index='chroma:///path/to/dir' or 'chroma+http://host:port'."
            )
        return ChromaIndex(store_id=store_id, path=beside + ".chroma")
    match = _SCHEME.match(index)
    scheme = match.group(1).lower() if match else ""
    if scheme == "chroma":
        rest = index[len("chroma://") :]
        if not rest.startswith("/") or len(rest) < 2:
            raise InvalidInput(
                f"The Chroma URL {index!r} names no folder. Use chroma:///relative/dir or "
                "chroma:////absolute/dir."
            )
        return ChromaIndex(store_id=store_id, path=rest[1:])
    if scheme in ("chroma+http", "chroma+https"):
        parts = urlsplit(index)
        if not parts.hostname:
            raise InvalidInput(
                f"The Chroma URL {index!r} names no host; e.g. chroma+http://localhost:8000."
            )
        return ChromaIndex(
            store_id=store_id,
            host=parts.hostname,
            port=parts.port or (443 if scheme.endswith("s") else 8000),
            ssl=scheme.endswith("s"),
        )
    raise InvalidInput(
        f"Unknown index {index!r}. Use None (vectors in the log's store), 'chroma', "
        "'chroma:///path/to/dir' or 'chroma+http://host:port'; see docs/backends.md."
    )
