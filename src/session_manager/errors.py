"""Every error this library raises.

All of them derive from :class:`SessionManagerError`, so ``except SessionManagerError``
catches anything of ours. Where a builtin describes the same failure, the error inherits
it too, so code written against builtins keeps working::

    SessionManagerError
    ├── InvalidInput (ValueError)           bad argument: empty content, unknown kind, ...
    │   ├── InvalidPayload                  not JSON-serialisable, NaN/Infinity, lone surrogate
    │   ├── InvalidFilter                   `where` filter with an unsupported operator or shape
    │   └── BudgetTooSmall                  max_tokens cannot hold even a summarised goal
    ├── SessionNotFound (KeyError)          unknown id, or a session this agent may not see
    ├── EventNotFound (KeyError)            unknown event id, or one this agent may not see
    ├── SessionClosed                       recording into a session that has ended
    ├── PermissionDenied (PermissionError)  writing into a session another agent owns
    ├── EmbedderMismatch                    the store's vectors came from another embedder
    ├── ModelNotAvailable                   the embedding model's weights cannot be found
    ├── StoreBusy                           the database stayed locked past the retry budget
    └── SchemaTooNew                        the database was written by a newer version

Messages are sentences that name the bad value and say how to fix it.
"""

from __future__ import annotations

__all__ = [
    "BudgetTooSmall",
    "EmbedderMismatch",
    "EventNotFound",
    "InvalidFilter",
    "InvalidInput",
    "InvalidPayload",
    "ModelNotAvailable",
    "PermissionDenied",
    "SchemaTooNew",
    "SessionClosed",
    "SessionManagerError",
    "SessionNotFound",
    "StoreBusy",
]


class SessionManagerError(Exception):
    """Base class of every error raised by session_manager."""


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


class SessionClosed(SessionManagerError):
    """The session has ended (completed, failed or abandoned); it takes no new events."""


class PermissionDenied(SessionManagerError, PermissionError):
    """The session belongs to another agent; agents may read shared pools, never write them."""


class EmbedderMismatch(SessionManagerError):
    """The store's vectors were made by a different embedder than the one configured."""


class ModelNotAvailable(SessionManagerError):
    """The embedding model's files could not be found on this machine."""


class StoreBusy(SessionManagerError):
    """The database stayed locked by other writers for longer than the retry budget."""


class SchemaTooNew(SessionManagerError):
    """The database was created by a newer version of agent-session-manager."""
