"""Every error this library raises.

All of them derive from :class:`SessionManagerError`, so ``except SessionManagerError``
catches anything of ours. Where a builtin describes the same failure, the error inherits
it too, so code written against builtins keeps working::

    SessionManagerError
    ├── InvalidInput (ValueError)           bad argument: empty content, unknown kind, ...
    │   ├── InvalidPayload                  not JSON-serialisable, NaN/Infinity, lone surrogate
    │   ├── InvalidFilter                   `where` filter with an unsupported operator or shape
    │   ├── BudgetTooSmall                  max_tokens cannot hold even a summarised goal
    │   └── SessionKeyTaken                 start_session(key=...) with a key already in use
    ├── SessionNotFound (KeyError)          unknown id, or a session this agent may not see
    ├── EventNotFound (KeyError)            unknown event id, or one this agent may not see
    │   └── FactNotFound                    unknown user fact id (retract_fact)
    ├── DocumentNotFound (KeyError)         unknown knowledge document id (delete_document)
    ├── SessionClosed                       recording into a session that has ended
    ├── PermissionDenied (PermissionError)  writing into a session another agent owns
    │   └── PoolAccessDenied                a pool this agent was not granted (or not its owner)
    ├── RedactionFailed                     the redactor raised or answered nonsense: nothing stored
    ├── ExtractionFailed                    an extractor failed or answered nonsense: none written
    ├── EmbedderMismatch                    the store's vectors came from another embedder
    ├── ModelNotAvailable                   the embedding model's weights cannot be found
    ├── StoreError                          the store failed; each subclass says how to fix it
    │   ├── StoreBusy                       the database stayed locked past the retry budget
    │   ├── StoreUnavailable (ConnectionError)  the server or index cannot be reached: retry later
    │   ├── StoreMisconfigured              bad password, unknown role or database: fix the URL
    │   ├── StoreReadOnly (PermissionError) the store is read-only (file mode, read_only=True)
    │   ├── StoreFull (OSError)             the disk is full: nothing was written
    │   └── StoreCorrupt                    the database file is damaged
    └── SchemaTooNew                        the database was written by a newer version

Messages are sentences that name the bad value and say how to fix it; :func:`shown` writes
a value the caller passed into one, whatever it is.
"""

from __future__ import annotations

import reprlib

__all__ = [
    "BudgetTooSmall",
    "DocumentNotFound",
    "EmbedderMismatch",
    "EventNotFound",
    "ExtractionFailed",
    "FactNotFound",
    "InvalidFilter",
    "InvalidInput",
    "InvalidPayload",
    "ModelNotAvailable",
    "PermissionDenied",
    "PoolAccessDenied",
    "RedactionFailed",
    "SchemaTooNew",
    "SessionClosed",
    "SessionKeyTaken",
    "SessionManagerError",
    "SessionNotFound",
    "StoreBusy",
    "StoreCorrupt",
    "StoreError",
    "StoreFull",
    "StoreMisconfigured",
    "StoreReadOnly",
    "StoreUnavailable",
]


class SessionManagerError(Exception):
    """Base class of every error raised by memlane."""


class InvalidInput(SessionManagerError, ValueError):
    """An argument is malformed; nothing was written."""


class InvalidPayload(InvalidInput):
    """A payload or metadata value cannot be stored as canonical JSON."""


class InvalidFilter(InvalidInput):
    """A ``where`` filter uses an unsupported operator or shape."""


class BudgetTooSmall(InvalidInput):
    """``max_tokens`` is too small to hold even the summarised goal."""


class SessionNotFound(SessionManagerError, KeyError):
    """The session does not exist, or this agent is not allowed to see it."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class EventNotFound(SessionManagerError, KeyError):
    """The event does not exist, or this agent is not allowed to see it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FactNotFound(EventNotFound):
    """No user fact has that id, or this agent is not allowed to see it."""


class DocumentNotFound(SessionManagerError, KeyError):
    """No knowledge document has that id, or this agent is not allowed to see it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class SessionKeyTaken(InvalidInput):
    """``start_session(key=...)`` with a key another session of the agent holds."""


class SessionClosed(SessionManagerError):
    """The session has ended (completed, failed or abandoned); it takes no new events."""


class PermissionDenied(SessionManagerError, PermissionError):
    """The session belongs to another agent; agents may read shared pools, never write them."""


class PoolAccessDenied(PermissionDenied):
    """The pool's owner has not granted this agent that access (subscribing needs ``read``,
    starting a session in the pool ``write``), or only the owner may do it (grant, revoke)."""


class RedactionFailed(SessionManagerError):
    """The manager's redactor raised or returned spans that do not fit the text: the write
    was refused, and nothing of it was stored (redaction fails closed)."""


class ExtractionFailed(SessionManagerError):
    """An extractor (``SessionManager(extractor=...)``) raised, could not reach its model, or
    answered something that cannot be written: nothing of the batch was written, and the
    extraction stage tries it again later (``health().extraction_error`` says why)."""


class EmbedderMismatch(SessionManagerError):
    """The store's vectors were made by a different embedder than the one configured."""


class ModelNotAvailable(SessionManagerError):
    """The embedding model's files could not be found on this machine."""


class StoreError(SessionManagerError):
    """The store (database or vector index) failed; the subclass says what to do about it.

    Driver errors (``sqlite3``, ``psycopg``, ``psycopg_pool``, ``chromadb``, ``httpx``) are
    mapped into these at the store boundary; the driver's exception is the ``__cause__``.
    """


class StoreBusy(StoreError):
    """The database stayed locked by other writers for longer than the retry budget."""


class StoreUnavailable(StoreError, ConnectionError):
    """The database server or vector index cannot be reached (down, restarting, timed out).

    Transient: retrying later may succeed. Nothing was written by the failed call.
    """


class StoreMisconfigured(StoreError):
    """The store refused the connection's settings: a bad password, an unknown role or
    database, a missing extension. Retrying will not help; fix the URL or the server."""


class StoreReadOnly(StoreError, PermissionError):
    """The store cannot be written: the file or folder is read-only for this user, or the
    manager was opened with ``read_only=True``. Reads still work."""


class StoreFull(StoreError, OSError):
    """The disk (or the database's quota) is full; the failed write left nothing behind."""


class StoreCorrupt(StoreError):
    """The database file is damaged; restore it from a backup or an ``memlane export``."""


class SchemaTooNew(SessionManagerError):
    """The database was created by a newer version of memlane."""


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = _SHOWN.maxother = 60
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = _SHOWN.maxfrozenset = 4


def shown(value: object) -> str:
    """``repr(value)`` for an error message: cut to about 60 characters, three levels of
    nesting deep; never raises (a 100,000-deep list, a ``__repr__`` that fails).

    >>> shown([[[[["deep"]]]]]), shown("x" * 100)[:12], shown(b"raw")
    ('[[[[...]]]]', "'xxxxxxxxxxx", "b'raw'")
    """
    try:
        return _SHOWN.repr(value)
    except Exception:  # (reprlib already catches a failing __repr__; this is a last resort)
        return f"<{type(value).__name__} object>"
