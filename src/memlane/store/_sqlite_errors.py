"""What SQLite's failures mean, as the library's errors (errors.py), with messages that name
the file and the fix. :meth:`SqliteStore._mapped_errors <memlane.store.sqlite.
SqliteStore._mapped_errors>` is the one place that applies it, around every use of a
connection.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..errors import (
    InvalidInput,
    SessionManagerError,
    StoreBusy,
    StoreCorrupt,
    StoreError,
    StoreFull,
    StoreReadOnly,
    StoreUnavailable,
)

__all__ = ["RETRY_SECONDS", "is_busy", "store_error"]

# How long a writer keeps trying to get the lock before StoreBusy: long enough to outlast any
# burst of other writers, short enough that a wedged database is reported, not hung on.
RETRY_SECONDS = 60.0


# What a failure means, from SQLite's primary result code (the low byte of an extended code:
# SQLITE_READONLY_DIRECTORY is 1544, READONLY 8) or, for errors raised without a code (by the
# sqlite3 module itself), from the message.
_FAILURE_BY_CODE = {
    3: "read-only",  # SQLITE_PERM
    5: "busy",  # SQLITE_BUSY
    6: "busy",  # SQLITE_LOCKED
    8: "read-only",  # SQLITE_READONLY
    10: "io",  # SQLITE_IOERR
    11: "corrupt",  # SQLITE_CORRUPT
    13: "full",  # SQLITE_FULL
    14: "cannot-open",  # SQLITE_CANTOPEN
    23: "read-only",  # SQLITE_AUTH
    26: "not-a-database",  # SQLITE_NOTADB
}
_FAILURE_BY_TEXT = (
    ("readonly database", "read-only"),
    ("locked", "busy"),
    ("disk i/o error", "io"),
    ("malformed", "corrupt"),
    ("disk is full", "full"),
    ("unable to open database file", "cannot-open"),
    ("file is not a database", "not-a-database"),
    ("closed database", "closed"),
)


def _failure(exc: sqlite3.Error) -> str:
    """What ``exc`` means, in a word (see _FAILURE_BY_CODE); ``other`` if nothing fits."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _FAILURE_BY_CODE:
        return _FAILURE_BY_CODE[code & 0xFF]
    text = str(exc).lower()
    return next((failure for part, failure in _FAILURE_BY_TEXT if part in text), "other")


# What each failure raises: the message says what happened and what to do about it.
_MESSAGES: dict[str, tuple[type[SessionManagerError], str]] = {
    "read-only": (
        StoreReadOnly,
        "The database {where} cannot be written ({detail}). This is a permissions problem "
        "(or a read-only disk): make the file, the -wal and -shm files beside it and its "
        "folder {folder} writable for the user running this process (chown or chmod), or "
        "work on a copy in a folder that user can write. To only read it where it is, open "
        "it with read_only=True.",
    ),
    "cannot-open": (
        StoreReadOnly,
        "SQLite cannot open {where} ({detail}). This is a permissions problem (or a "
        "read-only disk): the user running this process may not create or open the file, or "
        "the -wal and -shm files beside it, in the folder {folder}. Make the folder and the "
        "file writable for this user (chown or chmod), or point db_path at a file in a "
        "folder it can write. To only read it where it is, open it with read_only=True.",
    ),
    "cannot-read": (
        StoreReadOnly,
        "SQLite cannot open {where} to read it ({detail}). The user running this process "
        "needs read access to the file and its folder {folder}, and to the -wal and -shm "
        "files beside it if there are any (chown or chmod).",
    ),
    "cannot-open-allowed": (
        StoreUnavailable,
        "SQLite cannot open {where} ({detail}) although this user has the access it needs to "
        "it and its folder {folder}: this process may have too many files open (see `ulimit -n`), "
        "or the path names something other than a regular file. Close unused managers or "
        "raise the limit, then retry.",
    ),
    "full": (
        StoreFull,
        "The database {where} is full ({detail}): the disk, or a quota on it, has no room "
        "left. The failed write left nothing behind. Free some space, then retry.",
    ),
    "corrupt": (
        StoreCorrupt,
        "The database {where} is damaged ({detail}). Stop writing to it; restore it from a "
        "backup or an earlier `memlane export`, or salvage what is still readable with "
        "`sqlite3 {path} .recover`.",
    ),
    "io": (
        StoreUnavailable,
        "Reading or writing {where} failed with a disk I/O error ({detail}): the disk or "
        "network share holding it failed or went away, or the file was moved or deleted "
        "while open. Check the disk (the system log, free space) and that the file is still "
        "there, then retry.",
    ),
    "busy": (
        StoreBusy,
        "The database {where} stayed locked by another connection ({detail}), for up to "
        "{seconds} s. Another process holds a long write transaction; find it (e.g. "
        "`fuser {path}`) or retry later.",
    ),
    "closed": (InvalidInput, "This SessionManager is closed; open a new one."),
    "folder": (
        InvalidInput,
        "{where} is a folder, not a database file. Point db_path at a file in it, e.g. "
        "sessions.db.",
    ),
    "not-usable": (
        InvalidInput,
        "{where} is not a usable session database ({detail}). Point db_path at a new file "
        "or a database made by memlane.",
    ),
    "other": (
        StoreError,
        "SQLite failed on {where}: {detail}. The operation did not complete (anything it "
        "had begun to write was rolled back). If this keeps happening, report it as a bug "
        "of memlane, with this message.",
    ),
}


def is_busy(exc: sqlite3.OperationalError) -> bool:
    return _failure(exc) == "busy"


def _may_open(path: Path) -> bool:
    """Whether this user may do what SQLite needs: read and write the file (or create it) and
    create the -wal and -shm files beside it."""
    folder = os.access(path.parent, os.W_OK | os.X_OK)
    return folder and (not path.exists() or os.access(path, os.R_OK | os.W_OK))


def _may_read(path: Path) -> bool:
    """Whether this user may read the file and list its folder (what a read-only open needs)."""
    return os.access(path.parent, os.R_OK | os.X_OK) and os.access(path, os.R_OK)


def _has_sqlite_header(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def store_error(
    exc: sqlite3.Error, path: Path, *, opening: bool, read_only: bool = False
) -> SessionManagerError:
    """The library's error that ``exc`` (raised on the database at ``path``) means.

    ``opening``: the store is being opened, so a file SQLite cannot read may simply be the
    wrong file rather than a damaged database. ``read_only``: a store opened with
    ``read_only=True``, which needs to read, never to write.
    """
    failure = _failure(exc)
    if failure == "not-a-database":
        # While opening, a file without SQLite's header is the wrong file; otherwise a
        # file SQLite cannot read as a database was one, and is damaged.
        failure = "not-usable" if opening and not _has_sqlite_header(path) else "corrupt"
    elif failure == "cannot-open" and path.is_dir():
        failure = "folder"
    elif failure == "cannot-open" and read_only:
        failure = "cannot-open-allowed" if _may_read(path) else "cannot-read"
    elif failure == "cannot-open" and _may_open(path):
        failure = "cannot-open-allowed"
    elif failure == "other" and opening:
        failure = "not-usable"
    error_type, message = _MESSAGES[failure]
    return error_type(
        message.format(
            where=repr(str(path)),
            path=path,
            folder=repr(str(path.parent)),
            detail=exc,
            seconds=f"{RETRY_SECONDS:.0f}",
        )
    )
