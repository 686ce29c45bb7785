"""What PostgreSQL's and its pool's failures mean, as the library's errors (errors.py), with
messages that name the server and the fix. :meth:`PostgresStore._mapped_errors
<memlane.store.postgres.PostgresStore._mapped_errors>` is the one place that applies
it (the SQLite twin is ``_sqlite_errors.py``).
"""

from __future__ import annotations

import re

from ..errors import (
    StoreBusy,
    StoreError,
    StoreFull,
    StoreMisconfigured,
    StoreReadOnly,
    StoreUnavailable,
)

__all__ = ["refused_statement", "sentence", "store_error"]

# How libpq and the server word a refusal that retrying cannot cure. A failed connect carries
# no SQLSTATE in psycopg (the server's FATAL arrives before a session exists), so the words are
# all there is; each pattern maps to what is wrong, for the message.
_MISCONFIGURATIONS = (
    (r'password authentication failed for user "([^"]*)"', "the password for role {!r} is wrong"),
    (r'role "([^"]*)" does not exist', "role {!r} does not exist on this server"),
    (r'database "([^"]*)" does not exist', "database {!r} does not exist on this server"),
    (r"no password supplied", "the server wants a password and the URL gives none"),
    (r"no pg_hba\.conf entry", "the server's pg_hba.conf admits no such host, role and database"),
    (r'permission denied for database "([^"]*)"', "this role may not connect to database {!r}"),
)


def _misconfiguration(detail: str) -> str | None:
    """What is wrong with the URL or the server's setup, if ``detail`` is such a refusal."""
    for pattern, meaning in _MISCONFIGURATIONS:
        found = re.search(pattern, detail)
        if found is not None:
            return meaning.format(*found.groups())
    return None


def sentence(exc: BaseException) -> str:
    """The driver's message as one sentence (libpq's span lines, indented with tabs)."""
    text = " ".join(str(exc).split())
    return text if text.endswith((".", "?", "!")) else text + "."


def store_error(
    exc: Exception,
    location: str,
    *,
    pool_timeout: float,
    pool_size: int,
    connect_timeout: str,
) -> StoreError:
    """The :class:`StoreError` that ``exc`` means, its message naming the fix."""
    from psycopg_pool import PoolTimeout

    detail = sentence(exc)
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable(
            f"Got no connection to PostgreSQL at {location!r} within pool_timeout="
            f"{pool_timeout:g} s: the server is down or restarting, or all "
            f"{pool_size} pooled connections stayed busy. Retry later; if "
            "the server is up and busy, raise ?pool_size= or ?pool_timeout= in the URL."
        )
    wrong_setting = _misconfiguration(detail)
    if wrong_setting is not None:
        return StoreMisconfigured(
            f"PostgreSQL at {location!r} refused the connection: {wrong_setting}. "
            "Retrying will not help: fix the URL (user, password, database name) or the "
            f"server's setup. The server said: {detail}"
        )
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if sqlstate == "42501":
        return StoreMisconfigured(
            f"The role in the URL {location!r} lacks a privilege this store needs: "
            f"{detail} Grant it (the store creates its schema and tables on first open), "
            "or connect as the role that owns the schema."
        )
    if sqlstate == "25006":
        return StoreReadOnly(
            f"PostgreSQL at {location!r} accepts no writes (a read-only standby, or "
            f"default_transaction_read_only): {detail} Point the URL at the primary; "
            "reads still work."
        )
    if sqlstate == "53100":
        return StoreFull(
            f"PostgreSQL at {location!r} is out of disk space: {detail} The failed "
            "write left nothing behind. Free space on the server, then retry."
        )
    if sqlstate.startswith("40") or sqlstate == "55P03":
        return StoreBusy(
            f"PostgreSQL at {location!r} gave up on a write that waited for other "
            f"writers: {detail} Nothing was written; retry it."
        )
    return StoreUnavailable(
        f"PostgreSQL at {location!r} cannot be reached or dropped the connection: "
        f"{detail} Check that the server is running and that this machine can reach its "
        "host and port, then retry (a connection attempt waits up to connect_timeout="
        f"{connect_timeout} s; set ?connect_timeout= in the URL to change it)."
    )


def refused_statement(exc: Exception, location: str) -> StoreError:
    """The :class:`StoreError` for a statement the server refused for a reason that is
    neither the connection, the setup nor a conflict with other writers (a constraint, a
    type, an internal error): a defect of this library or of the schema, not the caller's.
    The server's primary message only: its DETAIL may quote the row, which is someone's
    text and does not belong in logs."""
    primary = getattr(getattr(exc, "diag", None), "message_primary", None)
    detail = sentence(Exception(primary)) if primary else sentence(exc)
    return StoreError(
        f"PostgreSQL at {location!r} refused a statement of memlane: {detail} The "
        "operation did not complete (its transaction was rolled back). If this keeps "
        "happening, report it as a bug of memlane, with this message."
    )
