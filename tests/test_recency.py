"""Recency as one more ranked list in the search fusion (search/recency.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memlane import InvalidInput, Recency, SessionManager


def two_alike(mgr: SessionManager, kind: str = "message", **extra: object) -> tuple[str, str]:
    """The same text recorded twice, 60 days apart (the older one first), each between the
    same unrelated notes (so their keyword contexts are alike too): ids old, new."""
    session = mgr.start_session("recency")
    now = datetime.now(UTC)
    ids = []
    for when in (now - timedelta(days=60), now - timedelta(hours=1)):
        for _ in range(2):
            mgr.record_fact(session.id, "unrelated note about lunch", created_at=when)
        event = mgr.record(
            session.id,
            kind,
            "the invoice export job failed on the staging host",
            created_at=when,
            **extra,  # type: ignore[arg-type]
        )
        ids.append(event.id)
        for _ in range(2):
            mgr.record_fact(session.id, "unrelated note about lunch", created_at=when)
    return ids[0], ids[1]


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
def test_fresh_memories_rank_first_only_when_asked(mgr: SessionManager, mode: str) -> None:
    old, new = two_alike(mgr)
    plain = [h.event.id for h in mgr.search("invoice export failed", k=2, mode=mode)]
    assert plain == [old, new]  # equal scores: storage order
    again = [h.event.id for h in mgr.search("invoice export failed", k=2, mode=mode, recency=None)]
    assert again == plain
    fresh = mgr.search("invoice export failed", k=2, mode=mode, recency="default")
    assert [h.event.id for h in fresh] == [new, old]
    # recency reorders what the query found; it brings in nothing else
    assert {
        h.event.id for h in mgr.search("invoice export", k=10, mode=mode, recency="default")
    } == {h.event.id for h in mgr.search("invoice export", k=10, mode=mode)}


def test_what_matters_does_not_fade(mgr: SessionManager) -> None:
    old, new = two_alike(mgr, kind="decision", importance=0.9)
    fresh = mgr.search("invoice export failed", k=2, recency="default")
    assert [h.event.id for h in fresh] == [old, new]  # both lasting: as without recency
    mgr.remember("u1", "the invoice export goes to the finance share", key="export")
    (keyed,) = mgr.facts("u1")
    session = mgr.start_session("more")
    mgr.add_message(session.id, "user", "the invoice export goes to the finance share?")
    hits = mgr.search("invoice export finance share", k=2, recency=Recency(weight=0.01))
    assert keyed.id in {h.event.id for h in hits}


def test_half_lives_per_kind_and_bad_values() -> None:
    default = Recency()
    assert default.half_life_of("message") < default.half_life_of("decision")
    assert default.half_life_of("custom:plan") == timedelta(days=14)
    one = Recency(half_life=timedelta(hours=1))
    assert one.half_life_of("fact") == one.half_life_of("custom:x") == timedelta(hours=1)
    for bad in (
        {"weight": 0},
        {"weight": float("nan")},
        {"weight": True},
        {"half_life": timedelta(0)},
        {"half_life": {"message": -timedelta(days=1)}},
        {"half_life": 3},
    ):
        with pytest.raises(InvalidInput):
            Recency(**bad)  # type: ignore[arg-type]


def test_search_refuses_an_unknown_recency(mgr: SessionManager) -> None:
    with pytest.raises(InvalidInput, match="recency"):
        mgr.search("x", recency="fresh")


def test_what_never_fades() -> None:
    from memlane.core.clock import from_us
    from memlane.events import Event
    from memlane.search.recency import lasting

    def event(kind: str, importance: float = 0.5, **extra: object) -> Event:
        return Event("id", "s", "a", kind, "x", from_us(0), importance=importance, **extra)  # type: ignore[arg-type]

    assert lasting(event("goal"))
    assert lasting(event("pending", status="open")) and not lasting(event("pending", status="done"))
    assert lasting(event("message", importance=0.8)) and not lasting(event("message"))
    assert lasting(event("fact", metadata={"fact_user": "u", "fact_key": "city"}))
    assert not lasting(event("fact", metadata={"fact_user": "u"}))
    old = event("message")
    assert Recency().freshness(old, 3 * 86_400_000_000) == pytest.approx(0.5)  # 3 days: half
