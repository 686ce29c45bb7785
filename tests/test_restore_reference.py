"""Restore's Reference section shows only the knowledge chunks both rankings vouch for, and
`memlane restore --explain` shows the dropped chunks of one document as one row (issue 29,
item 8: six unrelated chunks, scores 0.11-0.15, filled the section for an unrelated query, and
`--explain` listed every dropped chunk, 19 rows)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memlane import RestoredContext, SessionManager
from memlane.testing import HashEmbedder

from .test_cli import asm, ok

HANDBOOK = """# Operations handbook

The payments platform runs in two regions behind a global load balancer. This handbook says
how the platform team keeps it healthy.

## Keys and secrets

We rotate the API keys every 90 days. The rotation job re-encrypts the vault, publishes the new
keys to every service and revokes the old ones a day later.

## Backups

The ledger database is backed up every night to object storage in the other region. A restore
drill runs on the first Monday of each month; the last one took 41 minutes.

## Deploys

Every deploy goes to the canary hosts first. Watch the error rate and the p99 latency for ten
minutes before promoting it to the whole fleet; roll back with one command if either rises.

## On-call

Two engineers are on call each week, a primary and a secondary. Pages go to the primary first
and escalate to the secondary after fifteen minutes without an acknowledgement.

## Incidents

Declare an incident when customers are affected. The incident commander opens a channel,
writes a timeline as it happens, and a blameless review follows within five working days.

## Capacity

Each region must carry the whole traffic alone. We add hosts when the busiest hour of the
week reaches 60% of a region's capacity.

## Access

Production access is granted for a day at a time, through the access portal, with a ticket
that says why. Every command run on a production host is logged.

## Monitoring

Dashboards show request rate, errors and latency per service. Alerts fire on symptoms that
customers notice, not on causes; every alert links to its runbook.

## Dependencies

Third-party libraries are pinned and updated every two weeks by a bot that opens pull
requests; a security advisory is patched within two days.
"""


def reference(context: RestoredContext) -> str:
    """The text of the Reference section ("" when there is none)."""
    if "## Reference" not in context.text:
        return ""
    return context.text.split("## Reference", 1)[1].split("\n## ", 1)[0]


def references(context: RestoredContext) -> list[str]:
    return [item.reason for item in context.report.items if item.section == "reference"]


def test_a_query_sharing_nothing_with_the_documents_gets_no_reference(
    mgr: SessionManager,
) -> None:
    mgr.ingest(text=HANDBOOK, name="handbook.md")
    session = mgr.start_session("Organise the summer party")
    unrelated = mgr.restore(session.id, 2000, query="recommend a vegetarian lasagna recipe")
    assert reference(unrelated) == "" and references(unrelated) == []
    related = mgr.restore(session.id, 2000, query="how often do we rotate the API keys?")
    assert "Operations handbook > Keys and secrets" in reference(related)
    # no query and knowledge=True: the goal and pending steps are the query, vouched for alike
    assert reference(mgr.restore(session.id, 2000, knowledge=True)) == ""
    mgr.add_pending(session.id, "check when the next restore drill of the backups is")
    assert "> Backups" in reference(mgr.restore(session.id, 2000, knowledge=True))


@pytest.mark.real_model
def test_with_the_real_model_unrelated_queries_get_no_reference(tmp_path: Path) -> None:
    """Each unrelated query shares a word with the handbook ("two", "team", the "s" of
    "region's") or none; before the floor each got the section full (scores up to 0.21)."""
    with SessionManager("ops", db_path=tmp_path / "s.db", background=False) as mgr:
        mgr.ingest(text=HANDBOOK, name="handbook.md")
        session = mgr.start_session("Answer the platform team's questions")
        for query in (
            "book a table for two at an Italian restaurant",
            "plan the team offsite in Lisbon",
            "the user's favourite colour",
            "recommend a vegetarian lasagna recipe",
        ):
            context = mgr.restore(session.id, 2000, query=query)
            assert references(context) == [], (query, context.text)
        for query, heading in (
            ("how often do we rotate the API keys?", "Keys and secrets"),
            ("when is the restore drill?", "Backups"),
            ("who gets paged first?", "On-call"),
            ("how long does production access last?", "Access"),
        ):
            context = mgr.restore(session.id, 2000, query=query)
            assert f"Operations handbook > {heading}" in reference(context), (query, context.text)


def test_explain_shows_the_dropped_chunks_of_a_document_as_one_row(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SessionManager("a", db, embedder=HashEmbedder(), background=False) as mgr:
        sid = mgr.start_session("answer questions about the handbook").id
        # parts of different lengths: each dropped for a reason of its own ("over budget: 31
        # tokens > 18 left"), which grouping by reason alone kept as separate rows
        parts = [
            f"## Part {i}\n\nRotate key {i} every {i} days." + " Log it." * i for i in range(30)
        ]
        mgr.ingest(text="# Handbook\n\n" + "\n\n".join(parts), name="/srv/docs/handbook.md")
    query = ["--query", "rotate key every days log"]
    report = json.loads(ok(asm(db, "restore", sid, "--max-tokens", "150", *query, "--json")).output)
    items = [i for i in report["report"]["items"] if i["section"] == "reference"]
    dropped = [i for i in items if i["action"] == "dropped"]
    assert len(dropped) >= 3 and len({i["reason"] for i in dropped}) >= 2, items
    out = ok(asm(db, "restore", sid, "--max-tokens", "150", *query, "--explain")).output
    rows = [line for line in out.splitlines() if re.match(r"reference +(included|dropped) ", line)]
    assert len(rows) == len(items) - len(dropped) + 1, out
    (grouped,) = [row for row in rows if " dropped " in row]
    assert f"{len(dropped)} chunks of handbook.md" in grouped, out
    assert "other reason" in out  # (the reason column may wrap)
    included = [row for row in rows if " included " in row]
    assert included and all(re.search(r"handbook\.md#\d+", row) for row in included), out
