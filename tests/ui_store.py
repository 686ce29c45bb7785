"""A small store for the inspector's tests (tests/test_ui_*.py): two agents, a long session,
a long event, a large payload, and hostile strings in every field the pages show."""

from __future__ import annotations

from pathlib import Path

from memlane import SessionManager
from memlane.testing import HashEmbedder

#: What an attacker would store in an agent's memory, hoping a page runs it.
HOSTILE = (
    "<script>alert(1)</script>",
    '" onerror=alert(1) x="',
    "javascript:alert(1)",
)
#: The hostile strings as an escaping page writes them (Jinja's autoescape).
ESCAPED = (
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#34; onerror=alert(1) x=&#34;",
    "javascript:alert(1)",
)
LONG_SESSION_EVENTS = 230
LONG_TEXT = "\n\n".join(
    f"Paragraph {i}: the deploy log says the disk on db-{i} was full at 03:{i:02d}."
    for i in range(40)
)


def build(db_path: Path | str) -> dict[str, str]:
    """Fill ``db_path`` (a SQLite file, or a PostgreSQL URL); returns the ids the tests look
    for."""
    ids: dict[str, str] = {}
    where = {"url": db_path} if isinstance(db_path, str) else {"db_path": db_path}
    with SessionManager("researcher", **where, embedder=HashEmbedder()) as mgr:
        s = mgr.start_session("Compare Postgres and SQLite for the job queue", user_id="u-42")
        ids["main"] = s.id
        mgr.record_fact(s.id, "The job queue runs on Postgres 16 in production.", tags=["infra"])
        mgr.record_decision(s.id, "Keep SQLite for the local cache.")
        mgr.add_message(s.id, "user", "What does the billing service use?")
        mgr.record_tool_output(
            s.id, {"rows": [{"table": f"t{i}"} for i in range(400)]}, tool="psql"
        )
        mgr.record(s.id, "tool_output", LONG_TEXT, importance=0.5)
        mgr.add_pending(s.id, "Benchmark the queue under load")
        done = mgr.add_pending(s.id, "Read the queue's runbook")
        mgr.complete_pending(done.id, result={"read": True})
        mgr.remember("u-42", "Lives in Berlin", key="city", valid_from="2024-01-01")
        mgr.remember("u-42", "Lives in Zurich", key="city", valid_from="2025-06-01")
        tea = mgr.remember("u-42", "Drinks green tea", key="drink")
        mgr.retract_fact(tea.fact.id, "it was coffee")
        mgr.remember("u-42", "Prefers short answers", kind="preference")
        runbook = "The queue is drained by three workers.\n\nPage the on-call after 5 failures."
        mgr.ingest(text=runbook, name="queue-runbook.md")
        ids["runbook"] = mgr.ingest(
            text=runbook.replace("three", "four"), name="queue-runbook.md"
        ).document_id
        mgr.create_pool("ops")
        mgr.grant("ops", "auditor", "read")
        long = mgr.start_session("A long run", key="long-run")
        ids["long"] = long.id
        mgr.record_many(
            long.id,
            [{"kind": "step", "content": f"step number {i}"} for i in range(LONG_SESSION_EVENTS)],
        )
        mgr.summarize(long.id, max_tokens=200)
    agent, user, tag, key = HOSTILE[0], HOSTILE[1], HOSTILE[2], HOSTILE[0]
    with SessionManager(agent, **where, embedder=HashEmbedder()) as mgr:
        bad = mgr.start_session(" ".join(HOSTILE), user_id=user, key=key)
        ids["hostile"] = bad.id
        for text in HOSTILE:
            mgr.record(
                bad.id,
                "fact",
                f"hostile {text} content",
                tags=[tag, text],
                metadata={"role": text, text: text, "link": text},
                payload={"html": text, text: [text]},
            )
        mgr.remember(user, HOSTILE[0], key=HOSTILE[2], source=HOSTILE[1])
        mgr.ingest(text=f"hostile document {HOSTILE[0]}", name=HOSTILE[1])
        mgr.create_pool(HOSTILE[2])
        mgr.grant(HOSTILE[2], HOSTILE[1], "write")
        mgr.search("hostile", k=3)  # embeds what waits
    with SessionManager("researcher", **where, embedder=HashEmbedder()) as mgr:
        mgr.search("Postgres", k=1)
    return ids
