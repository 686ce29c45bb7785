"""Undoing what extraction wrote (``SessionManager.forget_extracted``): each extracted fact
retracted through ``retract_fact`` (kept for audit, never current again), and the extracted
metadata of messages removed. Watermarks stay: those messages are not extracted again."""

from __future__ import annotations

from typing import Any

from ..core import canonical_json
from ..events import Event
from ..longterm.users import UserMemory
from ..memory import EXTRACTED_BY, MEMORY_SESSION
from ..store.base import EventFilter, SessionFilter
from ..write.path import Writer
from .reports import Forgotten
from .types import MARK

__all__ = ["forget_extracted"]


def forget_extracted(
    writer: Writer, users: UserMemory, since_us: int | None, extractor: str | None
) -> Forgotten:
    """Retract the facts extracted (by ``extractor``, since ``since_us``) for ``writer``'s
    agent and remove the extracted metadata of its messages."""
    return Forgotten(
        _retract_facts(writer, users, since_us, extractor),
        _remove_marks(writer, since_us, extractor),
    )


def _retract_facts(
    writer: Writer, users: UserMemory, since_us: int | None, extractor: str | None
) -> int:
    where: dict[str, Any] = {EXTRACTED_BY: extractor or {"$exists": True}}
    memory = writer.log.sessions(
        SessionFilter(
            writer.scope, include_shared=False, agent_id=writer.agent_id, marked=MEMORY_SESSION
        ),
        limit=None,
    )
    count = 0
    reason = f"forget_extracted(extractor={extractor!r})"
    for session in memory:
        flt = EventFilter(
            writer.scope,
            session_id=session.id,
            kinds=("fact",),
            where=where,
            since_us=since_us,
            exclude_statuses=("retracted",),
        )
        for event in writer.log.events(flt):
            users.retract_fact(event.id, reason)
            count += 1
    return count


def _remove_marks(writer: Writer, since_us: int | None, extractor: str | None) -> int:
    where: dict[str, Any] = {f"{MARK}.by": extractor} if extractor else {MARK: {"$exists": True}}
    if since_us is not None:
        where = {"$and": [where, {f"{MARK}.at": {"$gte": since_us}}]}
    flt = EventFilter(writer.scope, include_shared=False, kinds=("message",), where=where)
    found = [e for e in writer.log.events(flt) if e.agent_id == writer.agent_id]
    by_session: dict[str, list[Event]] = {}
    for event in found:
        by_session.setdefault(event.session_id, []).append(event)
    for session_id, events in by_session.items():
        with writer.write() as tx:
            writer.owned(tx, session_id, allow_closed=True, adds=False)
            for event in events:
                now = writer.log.events(EventFilter(None, event_id=event.id), tx=tx)
                if not now:
                    continue  # (deleted or expired meanwhile)
                metadata = {k: v for k, v in now[0].metadata.items() if k != MARK}
                writer.log.set_event_metadata(tx, event.id, canonical_json.dumps(metadata))
            writer.unbuffer(tx, session_id)  # (buffered copies still have the mark)
    return len(found)
