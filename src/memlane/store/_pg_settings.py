"""What a ``postgresql://`` URL asks of the PostgreSQL store: its own options (``schema``,
``pool_size``, ``pool_timeout``, ``vector_index``, ``search_cache``) taken out, the rest left
for libpq, and a bounded connect time (docs/backends.md). Not part of the public API.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import InvalidInput

__all__ = ["DEFAULT_CONNECT_TIMEOUT", "DEFAULT_POOL_TIMEOUT", "PgSettings", "parse_url"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: libpq's ``connect_timeout`` (seconds) when neither the URL nor ``PGCONNECT_TIMEOUT`` sets
#: one: psycopg's own fallback is 130 s, so a host that accepts TCP but never answers (a
#: firewall dropping replies, a wedged server) would hang the open for over two minutes
DEFAULT_CONNECT_TIMEOUT = 5
#: how long a call waits for a pooled connection (``?pool_timeout=``) before StoreUnavailable:
#: long enough to ride out a burst that keeps every connection busy, short enough that an
#: outage is reported rather than hung on (psycopg_pool's default is 30 s)
DEFAULT_POOL_TIMEOUT = 10.0


@dataclass(frozen=True)
class PgSettings:
    """What a ``postgresql://`` URL asks of this store; the options left go to libpq."""

    #: the URL for libpq: our own options removed, ``connect_timeout`` added when unset
    conninfo: str
    schema: str
    pool_size: int
    #: seconds a call waits for a pooled connection
    pool_timeout: float
    vector_index: str
    #: whether searches rank in memory (``_pg_caches.py``) or in SQL
    search_cache: bool
    #: the connect timeout in force (seconds), for messages
    connect_timeout: str


def parse_url(url: str) -> PgSettings:
    """Take this store's options out of ``url``'s query and bound the connect time.

    >>> parse_url("postgresql://me@db/agents?schema=team&sslmode=require").conninfo
    'postgresql://me@db/agents?sslmode=require&connect_timeout=5'
    """
    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query))
    schema = options.pop("schema", "asm")
    if not _SCHEMA_NAME.match(schema):
        raise InvalidInput(
            f"schema={schema!r} is not a plain PostgreSQL name; use lower-case "
            "letters, digits and '_' (e.g. ?schema=agents)."
        )
    pool_size = int(_number_option(options, "pool_size", 4, int))
    pool_timeout = _number_option(options, "pool_timeout", DEFAULT_POOL_TIMEOUT, float)
    vector_index = options.pop("vector_index", "exact")
    if vector_index not in ("exact", "hnsw"):
        raise InvalidInput(f"vector_index={vector_index!r}: use 'exact' (default) or 'hnsw'.")
    search_cache = options.pop("search_cache", "memory")
    if search_cache not in ("memory", "off"):
        raise InvalidInput(f"search_cache={search_cache!r}: use 'memory' (default) or 'off'.")
    connect_timeout = options.get("connect_timeout") or os.environ.get("PGCONNECT_TIMEOUT")
    if connect_timeout is None:
        connect_timeout = options["connect_timeout"] = str(DEFAULT_CONNECT_TIMEOUT)
    return PgSettings(
        conninfo=urlunsplit(parts._replace(query=urlencode(options))),
        schema=schema,
        pool_size=pool_size,
        pool_timeout=pool_timeout,
        vector_index=vector_index,
        search_cache=search_cache == "memory",
        connect_timeout=connect_timeout,
    )


def _number_option(
    options: dict[str, str], name: str, default: float, kind: Callable[[str], float]
) -> float:
    """Pop the positive number ``?name=`` (``kind`` int or float) from ``options``."""
    text = options.pop(name, None)
    if text is None:
        return default
    try:
        value = kind(text)
    except ValueError:
        value = 0
    if not value > 0:
        what = "a whole number of at least 1" if kind is int else "a number of seconds above 0"
        raise InvalidInput(f"{name}={text!r} in the URL must be {what} (e.g. ?{name}={default}).")
    return value
