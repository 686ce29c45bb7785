"""The log store's interface is the sum of its roles, and each method belongs to one role:
a caller that names a role (a search: SearchedLog; the write path: Log; the worker: Outbox)
reaches exactly that part of the store."""

from __future__ import annotations

from memlane.store import base
from memlane.store.sqlite import SqliteStore

ROLES = (
    base.Transactions,
    base.LogReader,
    base.LogWriter,
    base.KeywordSearch,
    base.Outbox,
    base.Upkeep,
)


def _own(role: type) -> set[str]:
    """The members a protocol declares itself (not those of the roles it extends)."""
    return {name for name in vars(role) if not name.startswith("_")} | set(
        getattr(role, "__annotations__", {})
    )


def test_every_store_method_has_exactly_one_role() -> None:
    store = {
        name
        for klass in base.Store.__mro__
        if klass not in (object,) and getattr(klass, "_is_protocol", False)
        for name in _own(klass)
    }
    owned: dict[str, list[str]] = {}
    for role in ROLES:
        for name in _own(role):
            owned.setdefault(name, []).append(role.__name__)
    twice = {name: roles for name, roles in owned.items() if len(roles) > 1}
    assert not twice, f"methods declared by several roles: {twice}"
    unplaced = store - set(owned) - {"capabilities", "location"}
    assert not unplaced, (
        f"Store methods in no role (add each to the role its callers use): {unplaced}"
    )


def test_the_deletes_that_skip_an_external_index_are_not_called_delete_events() -> None:
    """Only engine.storage.Storage offers delete_session / delete_events (it reaches the
    vector index too); the log's own are named apart, so calling them by mistake is a type
    error, not a stale vector."""
    assert not hasattr(SqliteStore, "delete_events") and not hasattr(SqliteStore, "delete_session")
    assert {"delete_event_rows", "delete_session_rows"} <= _own(base.Upkeep)


def test_the_composite_roles_are_what_their_callers_name() -> None:
    assert set(base.Log.__mro__) >= {base.LogReader, base.LogWriter}
    assert set(base.SearchedLog.__mro__) >= {base.LogReader, base.KeywordSearch}
    assert base.Outbox not in base.Log.__mro__ and base.Upkeep not in base.Log.__mro__
