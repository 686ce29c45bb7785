"""The export format and the import machinery behind :class:`~memlane.admin.StoreAdmin`.

See admin.py's module docstring for the format. Importing validates every record with the
rules of ``record()`` (``records/validate.py``), keeps ids, times and counts, skips records whose
id is already stored (a second import changes nothing) and queues new events in the outbox;
rows are written in batches of :data:`IMPORT_BATCH`, each its own transaction, so a long
import never holds the write lock for long.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..core import canonical_json
from ..core.clock import format_time, now_us, to_us
from ..core.progress import Progress
from ..errors import InvalidInput, SessionManagerError
from ..events import POOL_ACCESS, SESSION_STATUSES, Event, PoolGrant, Session, SessionRecord
from ..records.validate import EVENT_STATUSES, identifier, prepare_event, text
from ..store.base import Log, SessionFilter, Store
from ..text.tokens import tokenizer_for

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "BadRecord",
    "ImportResult",
    "event_to_dict",
    "json_line",
    "run_import",
    "session_to_dict",
]

EXPORT_FORMAT = "memlane/export"
#: The header files written before the rename carry; still read
#: (docs/decisions/2026-11-26-the-name-memlane.md).
LEGACY_EXPORT_FORMATS = frozenset({"agent-session-manager/export"})
EXPORT_VERSION = 1
IMPORT_BATCH = 500

_SESSION_FIELDS = frozenset(
    {
        "type",
        "id",
        "agent_id",
        "user_id",
        "goal",
        "status",
        "shared_pool",
        "metadata",
        "created_at",
        "updated_at",
        "key",
    }
)
_GRANT_FIELDS = frozenset({"type", "pool", "agent_id", "access", "granted_at", "granted_by"})
_EVENT_FIELDS = frozenset(
    {
        "type",
        "id",
        "session_id",
        "agent_id",
        "kind",
        "content",
        "payload",
        "importance",
        "tags",
        "metadata",
        "status",
        "created_at",
        "token_count",
        "recall_count",
        "indexed",
        "expires_at",
    }
)


def json_line(record: Mapping[str, Any]) -> str:
    """One record as a line of JSON (no newline): compact, UTF-8, keys in record order.

    >>> json_line({"type": "header", "version": 1})
    '{"type":"header","version":1}'
    """
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event as a JSON-able dict with stable field names (no ``seq``: it is local).

    >>> from memlane.core.clock import from_us
    >>> e = Event("01J", "s1", "a", "fact", "x", from_us(0), importance=0.6)
    >>> event_to_dict(e)["created_at"]
    '1970-01-01T00:00:00.000000Z'
    """
    return {
        "id": event.id,
        "session_id": event.session_id,
        "agent_id": event.agent_id,
        "kind": event.kind,
        "content": event.content,
        "payload": event.payload,
        "importance": event.importance,
        "tags": list(event.tags),
        "metadata": event.metadata,
        "status": event.status,
        "created_at": format_time(event.created_at),
        "token_count": event.token_count,
        "recall_count": event.recall_count,
        **({} if event.indexed else {"indexed": False}),
        **({} if event.expires_at is None else {"expires_at": format_time(event.expires_at)}),
    }


def grant_to_dict(grant: PoolGrant) -> dict[str, Any]:
    """A pool grant as an export record's fields (without ``type``)."""
    return {
        "pool": grant.pool,
        "agent_id": grant.agent_id,
        "access": grant.access,
        "granted_at": format_time(grant.granted_at),
        "granted_by": grant.granted_by,
    }


def session_to_dict(session: Session) -> dict[str, Any]:
    return {
        "id": session.id,
        "agent_id": session.agent_id,
        "user_id": session.user_id,
        "goal": session.goal,
        "status": session.status,
        "shared_pool": session.shared_pool,
        "metadata": session.metadata,
        "created_at": format_time(session.created_at),
        "updated_at": format_time(session.updated_at),
        **({"key": session.key} if session.key is not None else {}),
    }


@dataclass(frozen=True)
class BadRecord:
    """A record :meth:`StoreAdmin.import_records` rejected: its line (1-based) and why."""

    line: int
    message: str


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do)."""

    sessions_inserted: int = 0
    sessions_skipped: int = 0
    events_inserted: int = 0
    events_skipped: int = 0
    #: events whose ``expires_at`` had passed: invisible at once, so never written
    events_expired: int = 0
    #: pool grants (``{"type": "grant"}`` records); skipped: the store already had that
    #: agent's grant on the pool, or another owner
    grants_inserted: int = 0
    grants_skipped: int = 0
    bad: list[BadRecord] = field(default_factory=list)
    dry_run: bool = False

    @property
    def inserted(self) -> int:
        return self.sessions_inserted + self.events_inserted

    @property
    def skipped(self) -> int:
        """Records already in the store (same id): left as they are."""
        return self.sessions_skipped + self.events_skipped

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "sessions": {"inserted": self.sessions_inserted, "skipped": self.sessions_skipped},
            "events": {
                "inserted": self.events_inserted,
                "skipped": self.events_skipped,
                "expired": self.events_expired,
            },
            "grants": {"inserted": self.grants_inserted, "skipped": self.grants_skipped},
            "bad": [{"line": bad.line, "message": bad.message} for bad in self.bad],
        }


class Reject(Exception):
    """One import record is bad; the message says why (without the line number)."""


def check_status(status: Any) -> str:
    if status not in SESSION_STATUSES:
        raise InvalidInput(
            f"Unknown session status {status!r}; use one of {', '.join(SESSION_STATUSES)}."
        )
    return str(status)


def run_import(
    store: Store,
    records: Iterable[str | Mapping[str, Any]],
    dry_run: bool,
    skip_bad: bool,
    progress: Progress | None,
) -> ImportResult:
    """The loop behind :meth:`StoreAdmin.import_records` (see there)."""
    run = _Import(store, dry_run)
    header_seen = False
    done = 0
    for line, raw in enumerate(records, start=1):
        done += 1
        if isinstance(raw, str) and not raw.strip():
            continue
        try:
            record = decode(raw)
            if not header_seen:
                check_header(record)
                header_seen = True
                continue
            run.add(record)
        except Reject as exc:
            if not header_seen:
                raise InvalidInput(
                    f"Line {line} is not a memlane export header ({exc}). "
                    "Import a file written by `memlane export` (StoreAdmin.export)."
                ) from None
            if not skip_bad:
                run.flush()
                raise InvalidInput(
                    f"Line {line}: {exc} Records before it were "
                    f"{'checked' if dry_run else 'imported (importing again skips them)'}"
                    "; fix the line, or skip bad lines with --skip-bad (skip_bad=True)."
                ) from None
            run.result.bad.append(BadRecord(line, str(exc)))
        if run.full():
            run.flush()
            if progress is not None:
                progress(done, None)
    if not header_seen:
        raise InvalidInput(
            "The import holds no records, not even a header. Import a file written by "
            "`memlane export` (StoreAdmin.export)."
        )
    run.flush()
    if progress is not None:
        progress(done, None)
    return run.result


def decode(raw: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(raw, str):
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise Reject(f"not valid JSON ({exc.msg} at column {exc.colno}).") from None
    else:
        record = raw
    if not isinstance(record, Mapping):
        raise Reject(f"a record must be a JSON object, got {type(record).__name__}.")
    return record


def check_header(record: Mapping[str, Any]) -> None:
    known = record.get("format") == EXPORT_FORMAT or record.get("format") in LEGACY_EXPORT_FORMATS
    if record.get("type") != "header" or not known:
        raise Reject(f'expected {{"type": "header", "format": "{EXPORT_FORMAT}", ...}}')
    version = record.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise Reject(f"the header's version {version!r} is not a positive integer")
    if version > EXPORT_VERSION:
        raise InvalidInput(
            f"The export has format version {version}, newer than this version reads "
            f"({EXPORT_VERSION}). Upgrade: pip install -U memlane."
        )


def _known_fields(record: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise Reject(f"the {what} record has unknown fields {unknown}.")


def _field(record: Mapping[str, Any], name: str, what: str) -> Any:
    if name not in record:
        raise Reject(f"the {what} record has no {name!r}.")
    return record[name]


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Reject(f"{name} must be a non-negative integer, got {value!r}.")
    return value


@dataclass
class _Import:
    """One import run: validated rows wait in ``batch`` until :meth:`flush` writes them."""

    store: Store
    dry_run: bool
    result: ImportResult = field(default_factory=ImportResult)
    batch: list[tuple[str, Any]] = field(
        default_factory=list
    )  # ("session", row) or ("event", EventRecord)
    # session id -> (agent_id, shared_pool): from the store, or earlier in this import
    sessions: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    seen_events: set[str] = field(default_factory=set)  # dry run: ids earlier in the file

    def __post_init__(self) -> None:
        self.result.dry_run = self.dry_run

    def full(self) -> bool:
        return len(self.batch) >= IMPORT_BATCH

    def add(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        try:
            if kind == "session":
                self._session(record)
            elif kind == "event":
                self._event(record)
            elif kind == "grant":
                self._grant(record)
            else:
                raise Reject(
                    f'unknown record type {kind!r}; expected "session", "event" or "grant" '
                    "(only the first line is a header)."
                )
        except SessionManagerError as exc:  # validation of a field: same message as record()
            raise Reject(str(exc)) from None

    def _known(self, session_id: str) -> tuple[str, str | None] | None:
        found = self.sessions.get(session_id)
        if found is None:
            found = self.store.session_owner(session_id)
            if found is not None:
                self.sessions[session_id] = found
        return found

    def _grant(self, record: Mapping[str, Any]) -> None:
        _known_fields(record, _GRANT_FIELDS, "grant")
        pool = identifier(_field(record, "pool", "grant"), "pool")
        agent_id = identifier(_field(record, "agent_id", "grant"), "agent_id")
        access = _field(record, "access", "grant")
        if access not in POOL_ACCESS:
            raise Reject(f"the grant's access must be one of {list(POOL_ACCESS)}, not {access!r}.")
        granted_us = to_us(_field(record, "granted_at", "grant"), "granted_at")
        by = identifier(_field(record, "granted_by", "grant"), "granted_by")
        if self.dry_run:  # (as the import would: an agent's grant already there is kept)
            held = any(g.agent_id == agent_id for g in self.store.pool_grants(pool=pool))
            if held:
                self.result.grants_skipped += 1
            else:
                self.result.grants_inserted += 1
            return
        self.batch.append(("grant", (pool, agent_id, access, granted_us, by)))

    def _session(self, record: Mapping[str, Any]) -> None:
        _known_fields(record, _SESSION_FIELDS, "session")
        session_id = identifier(_field(record, "id", "session"), "session id")
        agent_id = identifier(_field(record, "agent_id", "session"), "agent_id")
        user_id = record.get("user_id")
        if user_id is not None:
            user_id = identifier(user_id, "user_id")
        goal = text(_field(record, "goal", "session"), "goal")
        status = check_status(record.get("status", "active"))
        pool = record.get("shared_pool")
        if pool is not None:
            pool = identifier(pool, "shared_pool")
        metadata = record.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise Reject(f"session metadata must be an object, got {type(metadata).__name__}.")
        key = record.get("key")
        if key is not None:
            key = identifier(key, "key")
            holder = self.store.sessions(SessionFilter(None, agent_id=agent_id, key=key), limit=1)
            if holder and holder[0].id != session_id:
                raise Reject(
                    f"agent {agent_id!r} already has session {holder[0].id!r} with key "
                    f"{key!r} in the target; a key names one session per agent."
                )
        created = to_us(_field(record, "created_at", "session"), "created_at")
        updated = to_us(record.get("updated_at", record["created_at"]), "updated_at")
        row = SessionRecord(
            id=session_id,
            agent_id=agent_id,
            user_id=user_id,
            goal=goal,
            status=status,
            shared_pool=pool,
            metadata_json=canonical_json.dumps(dict(metadata), "session metadata"),
            created_us=created,
            updated_us=updated,
            key=key,
        )
        if self._known(session_id) is None:
            self.sessions[session_id] = (agent_id, pool)
            if self.dry_run:
                self.result.sessions_inserted += 1
                return
        elif self.dry_run:
            self.result.sessions_skipped += 1
            return
        self.batch.append(("session", row))

    def _event(self, record: Mapping[str, Any]) -> None:
        _known_fields(record, _EVENT_FIELDS, "event")
        event_id = identifier(_field(record, "id", "event"), "event id")
        session_id = identifier(_field(record, "session_id", "event"), "session_id")
        owner = self._known(session_id)
        if owner is None:
            raise Reject(
                f"event {event_id!r} belongs to session {session_id!r}, which is neither "
                "earlier in the import nor in the store."
            )
        agent_id, pool = owner
        if record.get("agent_id", agent_id) != agent_id:
            raise Reject(
                f"event {event_id!r} says agent {record['agent_id']!r}, but its session "
                f"{session_id!r} belongs to agent {agent_id!r}."
            )
        tags = record.get("tags")
        if tags is not None and not isinstance(tags, list):
            raise Reject(f"tags must be a list of strings, got {type(tags).__name__}.")
        given_tokens = "token_count" in record
        prepared = prepare_event(
            _field(record, "kind", "event"),
            _field(record, "content", "event"),
            record.get("payload"),
            record.get("importance"),
            tags,
            record.get("metadata"),
            _field(record, "created_at", "event"),
            # counted like record() does, with the default model family's tokenizer
            None if given_tokens else tokenizer_for("gpt-4o").count,
        )
        kind = prepared.kind
        allowed = EVENT_STATUSES.get(kind, (None,))
        status = record.get("status", allowed[0])
        if status not in allowed:
            raise Reject(
                f"a {kind} event cannot have status {status!r}; use one of "
                f"{', '.join(map(repr, allowed))}."
            )
        if given_tokens:
            prepared = replace(prepared, token_count=_count(record["token_count"], "token_count"))
        recalls = _count(record.get("recall_count", 0), "recall_count")
        indexed = record.get("indexed", True)
        if not isinstance(indexed, bool):
            raise Reject(f"indexed must be true or false, got {indexed!r}.")
        expires = record.get("expires_at")
        if expires is not None:
            expires_us = to_us(expires, "expires_at")
            if expires_us <= now_us():  # it would be invisible at once: the sweep's anyway
                self.result.events_expired += 1
                return
            if kind in ("goal", "pending"):
                raise Reject(f"a {kind} event cannot expire; leave out expires_at.")
            prepared = replace(prepared, expires_us=expires_us)
        if self.dry_run:
            exists = event_id in self.seen_events or self.store.event_exists(event_id)
            self.seen_events.add(event_id)
            if exists:
                self.result.events_skipped += 1
            else:
                self.result.events_inserted += 1
            return
        row = prepared.record(
            event_id, session_id, agent_id, pool, status, recall_count=recalls, indexed=indexed
        )
        self.batch.append(("event", row))

    def flush(self) -> None:
        if not self.batch:
            return
        batch, self.batch = self.batch, []
        result = self.result
        with self.store.atomic() as tx:
            for what, row in batch:
                if what == "grant":
                    pool, agent_id, access, at_us, by = row
                    taken = {g.agent_id for g in self.store.pool_grants(pool=pool, tx=tx)}
                    if agent_id not in taken and self.store.set_pool_access(
                        tx, pool, agent_id, access, at_us, by
                    ):
                        result.grants_inserted += 1
                    else:
                        result.grants_skipped += 1
                elif what == "session":
                    if self.store.insert_session(tx, row):
                        result.sessions_inserted += 1
                        if row.shared_pool is not None:
                            _keep_access(self.store, tx, row)
                    else:
                        result.sessions_skipped += 1
                elif self.store.insert_event(tx, row, touch_us=None) is not None:
                    result.events_inserted += 1
                else:
                    result.events_skipped += 1


def _keep_access(store: Log, tx: Any, session: SessionRecord) -> None:
    """A pooled session imported without its pool's grants (an export made before grants
    existed, or of one agent): its agent keeps the access it had, as the migration gave it —
    the pool's owner when nobody owns it, else ``write``. Exports list the grants before the
    sessions, so a file's own grants are in place first."""
    pool, agent_id = session.shared_pool, session.agent_id
    assert pool is not None
    grants = store.pool_grants(pool=pool, tx=tx)
    if any(g.agent_id == agent_id for g in grants):
        return
    owned = any(g.access == "owner" for g in grants)
    store.set_pool_access(
        tx, pool, agent_id, "write" if owned else "owner", session.created_us, "import"
    )
