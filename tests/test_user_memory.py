"""User memory beyond the conformance suite: restore's "About the user" section, export and
import, the real model's idea of "similar"."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder


def test_restore_shows_what_the_agent_knows_about_the_user(mgr: SessionManager) -> None:
    mgr.remember("u1", "Lives in Zurich", key="city", valid_from="2025-01-01")
    mgr.remember("u1", "Is vegetarian", kind="preference", key="diet", valid_from="2024-02-03")
    mgr.remember("u1", "Has two cats named Miso and Tofu")
    mgr.remember("u2", "Lives in Lisbon", key="city")  # another user: never shown for u1
    session = mgr.start_session("Plan a weekend trip", user_id="u1")
    mgr.add_message(session.id, "user", "Can you suggest restaurants near home?")
    ctx = mgr.restore(session.id, 2000, query="cats at home")
    section = ctx.text.split("## About the user\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert (
        section
        == [
            "- fact (city, since 2025-01-01): Lives in Zurich",  # keyed first, by key
            "- preference (diet, since 2024-02-03): Is vegetarian",
            f"- fact (since {section[2].split('since ')[1][:10]}): Has two cats named Miso and "
            "Tofu",
        ]
    )
    assert "Lisbon" not in ctx.text
    (share,) = [s for s in ctx.report.shares if s.section == "user"]
    assert 0 < share.used <= share.offered
    assert len(ctx.report.included_ids("user")) == 3
    # a superseded value is history, not what the agent knows now
    mgr.remember("u1", "Lives in Basel", key="city")
    text = mgr.restore(session.id, 2000).text
    assert "Lives in Basel" in text and "Zurich" not in text
    # no user, no section; and the user's memory session itself has none either
    other = mgr.start_session("no user here")
    assert "## About the user" not in mgr.restore(other.id, 2000).text
    memory = [s for s in mgr.list_sessions(internal=True) if s.metadata.get("asm") == "user-memory"]
    assert memory and all("## About" not in mgr.restore(s.id, 2000).text for s in memory)


def test_the_section_keeps_within_its_share_and_the_budget(mgr: SessionManager) -> None:
    for i in range(60):
        mgr.remember("u1", f"Fact number {i} about the user's hobby {i % 7} and work", key=f"k{i}")
    session = mgr.start_session("Help the user", user_id="u1")
    for i in range(30):
        mgr.add_message(session.id, "user", f"turn {i}: what about hobby {i % 7}?")
    for budget in (120, 300, 800, 2000, 8000):
        ctx = mgr.restore(session.id, budget, other_sessions=True)
        assert ctx.token_count <= budget
        (share,) = [s for s in ctx.report.shares if s.section == "user"]
        assert share.used <= share.offered
        included = ctx.report.included_ids()
        assert len(included) == len(set(included))  # each fact once, in one section
        if budget >= 800:
            assert ctx.report.included_ids("user")


def test_facts_survive_export_and_import(mgr: SessionManager, tmp_path: Path) -> None:
    mgr.remember("u1", "Lives in Berlin", key="city", valid_from="2023-01-01")
    mgr.remember("u1", "Lives in Zurich", key="city", valid_from="2025-01-01")
    retracted = mgr.remember("u1", "Owns a boat", source="chat-42")
    assert retracted.fact is not None
    mgr.retract_fact(retracted.fact.id, "misheard")
    with StoreAdmin(mgr.db_path, embedder=HashEmbedder()) as admin:
        records = list(admin.export())
    with StoreAdmin(tmp_path / "copy.db", embedder=HashEmbedder()) as copy:
        copy.import_records(records)
    with SessionManager("researcher", tmp_path / "copy.db", embedder=HashEmbedder()) as again:
        assert again.fact_history("u1") == mgr.fact_history("u1")
        assert [f.text for f in again.facts("u1", as_of="2024-01-01")] == ["Lives in Berlin"]


@pytest.mark.real_model
def test_the_real_model_finds_restatements_similar(tmp_path: Path) -> None:
    with SessionManager("a", tmp_path / "m.db", background=False) as mgr:
        mgr.remember("u1", "The user is allergic to peanuts")
        mgr.remember("u1", "The user works as a nurse")
        result = mgr.remember("u1", "Peanuts give the user an allergic reaction")
        assert [f.text for f in result.similar] == ["The user is allergic to peanuts"]
        unrelated = mgr.remember("u1", "The user's favourite colour is green")
        assert unrelated.similar == []
