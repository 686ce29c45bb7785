"""The short-term-memory part of the conformance suite (``record(ttl=...)``): on every backend
an expired event is invisible to every read at once — search in each mode, ``get_event``,
``events``, restore, export — and the sweep then deletes it with its vectors.

:class:`~memlane.testing.BackendConformance` inherits these tests; they use its
``make`` and ``backend`` fixtures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ..errors import EventNotFound, InvalidInput
from ..manager import SessionManager

__all__ = ["ShortTermMemoryConformance"]

ManagerFactory = Callable[..., SessionManager]

#: long enough for the reads that must still see the event, on a loaded CI machine: they
#: took 0.02-0.15 s on every backend of the suite beside two busy loops on 2 cores
_TTL = timedelta(seconds=3)


def _wait_past(moment: datetime) -> None:
    """Until the clock has passed ``moment`` (polled, with a generous deadline)."""
    deadline = time.monotonic() + 60 + max(0.0, (moment - _now()).total_seconds())
    while _now() <= moment:
        assert time.monotonic() < deadline, f"the clock never passed {moment}"
        time.sleep(0.02)


def _now() -> datetime:
    return datetime.now(timezone.utc)


class ShortTermMemoryConformance:
    """Events with a time to live on one backend (a mixin of ``BackendConformance``)."""

    def test_an_expired_event_is_invisible_at_once_then_swept(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        mgr = make()
        session = mgr.start_session("Plan the offsite")
        brief = mgr.add_message(session.id, "user", "the quokka budget is 4000", ttl=_TTL)
        kept = mgr.record_fact(session.id, "quokka venue booked for May")
        mgr.flush()  # embedded: the vector index holds both
        assert brief.expires_at is not None
        assert mgr.get_event(brief.id).expires_at == brief.expires_at
        assert brief.id in {hit.event.id for hit in mgr.search("quokka budget", k=5)}
        assert _now() < brief.expires_at, "the reads above ran past the expiry: raise _TTL"

        _wait_past(brief.expires_at)
        for mode in ("hybrid", "keyword", "semantic"):
            found = [hit.event.id for hit in mgr.search("quokka budget", k=5, mode=mode)]
            assert brief.id not in found, mode
            assert kept.id in found, mode
        # the expired event would rank first: k is still filled from what lives
        assert [hit.event.id for hit in mgr.search("budget quokka", k=1, mode="keyword")] == [
            kept.id
        ]
        with pytest.raises(EventNotFound):
            mgr.get_event(brief.id)
        assert [e.id for e in mgr.events(session.id) if e.kind != "goal"] == [kept.id]
        context = mgr.restore(session.id, max_tokens=2000, query="quokka budget")
        assert "4000" not in context.text and "venue booked" in context.text
        admin = backend.admin()
        try:
            exported = [r.get("id") for r in admin.export(session=session.id)]
            assert brief.id not in exported and kept.id in exported
            before = admin.stats()
            assert before.events == 3  # stored until the sweep: goal, fact, the expired one
            assert admin.prune_expired(dry_run=True).events_by_kind == {"message": 1}
            done = admin.prune_expired()
            assert done.events == 1 and done.sessions_touched == 1
            after = admin.stats()
            assert after.events == 2 and after.vectors == before.vectors - 1
            assert admin.prune_expired().events == 0
        finally:
            admin.close()
        found = [hit.event.id for hit in mgr.search("quokka budget", k=5)]
        assert kept.id in found and brief.id not in found

    def test_ttl_counts_from_now_and_travels_with_export(
        self, make: ManagerFactory, backend: Any
    ) -> None:
        mgr = make()
        session = mgr.start_session("Import history")
        old = datetime(2020, 1, 1, tzinfo=timezone.utc)
        event = mgr.record_fact(session.id, "cache warm", created_at=old, ttl=3600)
        assert event.expires_at is not None
        left = (event.expires_at - datetime.now(timezone.utc)).total_seconds()
        assert 3590 < left <= 3600  # from now, not from created_at (which is long past)
        many = mgr.record_many(
            session.id,
            [
                {"kind": "message", "role": "user", "content": "hi", "ttl": 60},
                {"kind": "fact", "content": "lasting"},
            ],
        )
        assert many[0].expires_at is not None and many[1].expires_at is None
        admin = backend.admin()
        try:
            records = list(admin.export(session=session.id))
            by_id = {r.get("id"): r for r in records}
            assert by_id[event.id]["expires_at"].startswith(str(event.expires_at.year))
            assert "expires_at" not in by_id[many[1].id]
            admin.delete_session(session.id)
            result = admin.import_records(records)
            events = [r for r in records if r.get("type") == "event"]
            assert result.events_inserted == len(events) == 4 and not result.bad
            assert mgr.get_event(event.id).expires_at == event.expires_at
            gone = {**by_id[many[0].id], "expires_at": "2021-01-01T00:00:00Z"}
            admin.delete_session(session.id)
            again = admin.import_records(
                [r if r.get("id") != gone["id"] else gone for r in records]
            )
            assert again.events_expired == 1 and not again.bad
        finally:
            admin.close()
        with pytest.raises(EventNotFound):
            mgr.get_event(many[0].id)

    @pytest.mark.parametrize(
        ("options", "says"),
        [
            ({"ttl": 0}, "more than zero"),
            ({"ttl": -5}, "more than zero"),
            ({"ttl": math.nan}, "timedelta or a number"),
            ({"ttl": math.inf}, "timedelta or a number"),
            ({"ttl": True}, "timedelta or a number"),
            ({"ttl": "1h"}, "timedelta or a number"),
            ({"ttl": timedelta(days=5000)}, "at most"),
            ({"ttl": 60, "expires_at": "2999-01-01T00:00:00Z"}, "not both"),
            ({"expires_at": "2001-01-01T00:00:00Z"}, "already passed"),
            ({"expires_at": "2999-01-01T00:00:00Z"}, "days away"),
            ({"expires_at": "next week"}, "ISO-8601"),
        ],
    )
    def test_bad_expiry_is_refused_and_writes_nothing(
        self, make: ManagerFactory, options: dict[str, Any], says: str
    ) -> None:
        mgr = make()
        session = mgr.start_session("Validate")
        before = len(mgr.events(session.id))
        with pytest.raises(InvalidInput, match=says):
            mgr.add_message(session.id, "user", "hello", **options)
        with pytest.raises(InvalidInput, match=says):
            mgr.record_many(session.id, [{"kind": "fact", "content": "x", **options}])
        assert len(mgr.events(session.id)) == before

    def test_goals_and_pending_steps_never_expire(self, make: ManagerFactory) -> None:
        mgr = make()
        session = mgr.start_session("Keep the to-dos")
        for kind in ("goal", "pending"):
            with pytest.raises(InvalidInput, match="cannot expire"):
                mgr.record(session.id, kind, "rotate the key", ttl=60)
        with pytest.raises(InvalidInput, match="cannot expire"):
            mgr.add_pending(session.id, "rotate the key", ttl=timedelta(hours=1))
        assert [e.kind for e in mgr.events(session.id)] == ["goal"]
