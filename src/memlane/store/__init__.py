"""Choosing a log backend from a URL (docs/backends.md describes the scheme).

==============================  ==========================================================
``url`` (the log)               meaning
==============================  ==========================================================
``sessions.db`` (a plain path)  a SQLite file (what ``db_path=`` gives)
``sqlite:///relative.db``       a SQLite file, path relative to the working directory
``sqlite:////abs/path.db``      a SQLite file, absolute path (SQLAlchemy's convention)
``postgresql://user@host/db``   PostgreSQL + pgvector (extra ``[postgres]``); ``postgres://``
                                too. Query options: ``schema`` (default ``memlane``),
                                ``pool_size`` (default 4), ``pool_timeout`` (seconds, default
                                10), ``vector_index`` (``exact``, the default, or ``hnsw``);
                                the rest goes to libpq (``connect_timeout`` defaults to 5).
==============================  ==========================================================

The vector index a log is composed with is chosen by ``index/__init__.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit, urlunsplit

from ..errors import InvalidInput
from .base import Capabilities, EventFilter, SessionFilter, Store

__all__ = [
    "Capabilities",
    "EventFilter",
    "SessionFilter",
    "Store",
    "describe_url",
    "open_store",
    "redact",
    "sqlite_path",
    "store_identity",
]

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.\-]*)://")


def redact(url: str) -> str:
    """``url`` without its password, for messages and ``repr``.

    >>> redact("postgresql://me:secret@db:5432/asm")
    'postgresql://me:***@db:5432/asm'
    """
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def sqlite_path(target: str | os.PathLike[str]) -> str | None:
    """The SQLite file ``target`` names (a plain path or ``sqlite:///...``), else None.

    >>> sqlite_path("sqlite:///data/s.db"), sqlite_path("sqlite:////tmp/s.db")
    ('data/s.db', '/tmp/s.db')
    >>> sqlite_path("postgresql://h/db") is None
    True
    """
    text = os.fspath(target)
    match = _SCHEME.match(text)
    if match is None:
        return text
    if match.group(1).lower() != "sqlite":
        return None
    rest = text[len("sqlite://") :]
    if not rest.startswith("/") or len(rest) < 2:
        raise InvalidInput(
            f"The SQLite URL {text!r} names no file. Use sqlite:///relative.db or "
            "sqlite:////absolute/path.db (or a plain path)."
        )
    return rest[1:]


def describe_url(target: str | os.PathLike[str]) -> str:
    text = os.fspath(target)
    return redact(text) if _SCHEME.match(text) else text


def store_identity(target: str | os.PathLike[str]) -> str | None:
    """What tells two spellings of one store apart from two stores: a SQLite file's
    resolved path, or a PostgreSQL URL's user, host, port, database and schema (password
    and other options left out). ``None`` for stores that are never the same
    (``:memory:``) or kinds this cannot tell.

    >>> store_identity("postgres://me:pw@DB/app?sslmode=require")
    'postgresql://me@db:5432/app?schema=asm'
    """
    path = sqlite_path(target)
    target = os.fspath(target)
    if path == ":memory:":
        return None
    if path is not None:
        return str(Path(path).expanduser().resolve())
    parts = urlsplit(target)
    if parts.scheme.lower() not in ("postgresql", "postgres"):
        return None
    query = parse_qs(parts.query)
    host = (parts.hostname or query.get("host", ["localhost"])[-1]).lower()
    try:
        port = parts.port or int(query.get("port", ["5432"])[-1])
    except ValueError:  # a malformed port: opening the store says so, better than this can
        return None
    user = f"{parts.username}@" if parts.username else ""
    schema = query.get("schema", ["asm"])[-1]
    return f"postgresql://{user}{host}:{port}{parts.path or '/'}?schema={schema}"


def open_store(
    target: str | os.PathLike[str],
    *,
    autocheckpoint: bool = True,
    read_only: bool = False,
) -> Store:
    """Open the log store ``target`` names (a path or URL); ``_storage.open_storage``
    composes it with a vector index.

    ``read_only`` opens a SQLite file with SQLite's read-only mode (writes refused by SQLite
    itself); other backends are opened as usual and the front end refuses writes."""
    path = sqlite_path(target)
    text = os.fspath(target)
    log: Store
    if path is not None:
        from .sqlite import SqliteStore

        log = SqliteStore(path, autocheckpoint=autocheckpoint, read_only=read_only)
    else:
        scheme = _SCHEME.match(text).group(1).lower()  # type: ignore[union-attr]
        if scheme in ("postgresql", "postgres"):
            from .postgres import PostgresStore

            log = PostgresStore(text)
        else:
            raise InvalidInput(
                f"Unknown store URL {redact(text)!r}. Use a SQLite path (sessions.db, "
                "sqlite:///sessions.db) or postgresql://user@host/database; see "
                "docs/backends.md."
            )
    return log
