"""The ``memlane`` command line: inspect, search, restore, export/import and maintain a store.

A thin layer: each command calls one library method (:class:`~memlane.admin.StoreAdmin`
for store-wide work, :class:`~memlane.SessionManager` for restore) and renders the
result with rich, or as JSON with ``--json``. ``docs/cli.md`` is generated from the commands'
help by ``scripts/gen_cli_docs.py``.
"""

from __future__ import annotations

# The command modules register their commands on `cli` when imported.
from . import (  # noqa: F401
    _delete,
    _demo,
    _mcp,
    _memory,
    _pools,
    _read,
    _restore,
    _stats,
    _ui,
    _write,
)
from ._app import cli, main

__all__ = ["cli", "main"]
