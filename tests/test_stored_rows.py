"""How a store's rows become events: the fast paths of a read (``from_us``, ``stored_event``)
give exactly what the plain ones did."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from memlane import SessionManager
from memlane.core.clock import from_us, to_us
from memlane.errors import SessionManagerError
from memlane.events import Event, stored_event


@pytest.mark.parametrize(
    "micros",
    [
        0,
        1,
        -1,
        999_999,
        1_000_000,
        -1_000_001,
        1_764_000_000_123_456,
        to_us("0001-01-01T00:00:00Z"),
        to_us("9999-12-31T23:59:59.999999Z"),
    ],
)
def test_from_us_is_the_utc_time_of_its_microseconds(micros: int) -> None:
    moment = from_us(micros)
    assert moment.tzinfo is timezone.utc
    assert moment == datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=micros)
    assert to_us(moment) == micros


def test_an_event_read_back_equals_the_one_recorded(tmp_path: object) -> None:
    with SessionManager("a", f"sqlite:///{tmp_path}/s.db") as mgr:  # type: ignore[str-bytes-safe]
        session = mgr.start_session("rows")
        recorded = mgr.record_step(
            session.id, "ran the query", result={"rows": 3}, tool="sql", tags=["x"], ttl=86_400
        )
        (read,) = [e for e in mgr.events(session.id) if e.id == recorded.id]
        fields = {f.name: getattr(read, f.name) for f in dataclasses.fields(Event)}
        assert read == Event(**fields)  # (built without Event's __init__: the same object)
        assert read == dataclasses.replace(recorded, payload_chars=read.payload_chars)
        assert read.expires_at is not None and read.expires_at.tzinfo is timezone.utc
        with pytest.raises(dataclasses.FrozenInstanceError):
            read.content = "changed"  # type: ignore[misc]


def test_a_stored_event_needs_every_field() -> None:
    fields = {f.name: None for f in dataclasses.fields(Event)}
    assert isinstance(stored_event(dict(fields)), Event)
    del fields["preview"]
    with pytest.raises(SessionManagerError, match="exactly Event's fields"):
        stored_event(fields)
