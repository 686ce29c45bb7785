"""Screenshots of every page of ``memlane ui`` for docs/ui.md and the README, taken in a real
browser (Debian's headless Chromium, driven by playwright) against a demo store this script
builds: a support agent and a research agent, users with facts that changed, a document in
three versions, a shared pool, an embedding backlog.

    python scripts/ui_screenshots.py                  # -> docs/images/ui-*.png
    python scripts/ui_screenshots.py --out /tmp/shots

The store is ``demo.db`` in a fresh temporary folder, opened by that relative name, so the
header of every page names ``demo.db`` (no path of this machine). Needs the ``[ui]`` extra,
playwright (the dev extra; no browser download: ``executable_path`` is Debian's
``chromium-headless-shell``, or ``MEMLANE_CHROMIUM``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder
from memlane.ui import Inspector, Source

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("MEMLANE_CHROMIUM", "/usr/lib/chromium/chromium-headless-shell")
DAY = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(days=2)
RUNBOOK = """# Refunds

Refunds up to 50 EUR are approved by the agent; above that, a human approves within a day.

# Escalation

Escalate to the on-call engineer after three failed payment retries.

# Data retention

Chat transcripts are kept for 30 days, then deleted.
"""


def build(path: str) -> dict[str, str]:
    """The demo store; returns the ids the pages are opened on."""
    ids: dict[str, str] = {}
    embedder = HashEmbedder()
    with SessionManager("support-bot", db_path=path, embedder=embedder) as bot:
        chat = bot.start_session(
            "Help Dana with a refund for a double charge", user_id="dana", key="ticket-4821"
        )
        ids["chat"] = chat.id
        at = DAY
        turns = [
            ("user", "Hi, I was charged twice for my March subscription."),
            ("assistant", "Sorry about that. Let me look at your payments."),
        ]
        for role, text in turns:
            at += timedelta(minutes=1)
            bot.add_message(chat.id, role, text, created_at=at)
        at += timedelta(minutes=1)
        bot.record_tool_output(
            chat.id,
            {
                "payments": [
                    {"id": "pay_81", "amount_eur": 12.0, "date": "2026-03-01", "status": "ok"},
                    {"id": "pay_82", "amount_eur": 12.0, "date": "2026-03-01", "status": "ok"},
                ],
                "customer": {"id": "cus_dana", "plan": "monthly", "since": "2024-05-11"},
            },
            tool="billing.list_payments",
            created_at=at,
        )
        at += timedelta(minutes=1)
        bot.record_decision(
            chat.id,
            "Refund pay_82: a duplicate of pay_81, under the 50 EUR the agent may approve.",
            created_at=at,
        )
        at += timedelta(minutes=1)
        bot.record_error(
            chat.id, "billing.refund timed out after 30 s", created_at=at, importance=0.8
        )
        pending = bot.add_pending(chat.id, "Retry the refund of pay_82")
        bot.complete_pending(pending.id, result={"refund": "re_553", "status": "succeeded"})
        for role, text in [
            ("assistant", "Done: 12 EUR is on its way back to your card (3-5 days)."),
            ("user", "Great, thanks! Please always write to me in English."),
        ]:
            bot.add_message(chat.id, role, text)
        bot.remember("dana", "Lives in Lyon", key="city", valid_from="2023-09-01")
        bot.remember("dana", "Lives in Berlin", key="city", valid_from="2025-10-01")
        bot.remember("dana", "Monthly plan", key="plan")
        plan = bot.remember("dana", "Yearly plan", key="plan-old")
        bot.retract_fact(plan.fact.id, "she never had a yearly plan")
        bot.remember("dana", "Wants answers in English", kind="preference")
        bot.ingest(text=RUNBOOK, name="support-runbook.md")
        bot.ingest(text=RUNBOOK.replace("three", "five"), name="support-runbook.md")
        ids["runbook"] = bot.ingest(
            text=RUNBOOK.replace("three", "five").replace("30 days", "90 days"),
            name="support-runbook.md",
        ).document_id
        bot.create_pool("support-kb")
        bot.grant("support-kb", "research-agent", "read")
        bot.grant("support-kb", "qa-agent", "write")
        shared = bot.start_session(
            "Known issues with the payment provider", shared_pool="support-kb"
        )
        bot.record_fact(shared.id, "Refund calls time out during the provider's 02:00 UTC batch.")
        for n, (goal, user) in enumerate(
            [
                ("Reset the password of a locked account", "li"),
                ("Explain the invoice of February", "sam"),
                ("Cancel a subscription at the end of the term", "ana"),
                ("Move an account to the yearly plan", "li"),
            ]
        ):
            other = bot.start_session(goal, user_id=user)
            bot.add_message(other.id, "user", f"{goal}, please.")
            if n % 2:
                bot.end_session(other.id)
        bot.search("refund", k=3)  # embeds what waits
    with SessionManager("research-agent", db_path=path, embedder=embedder) as research:
        study = research.start_session("Compare vector indexes for 10M embeddings")
        research.record_step(
            study.id, "benchmarked HNSW", result={"recall@10": 0.97, "p95_ms": 4.1}
        )
        research.record_fact(study.id, "IVF-PQ uses a tenth of HNSW's memory at 0.91 recall.")
        research.search("HNSW memory", k=3)
        backlog = research.start_session("Read the papers on product quantisation")
        research.record_step(backlog.id, "queued: Jégou et al., 2011")  # left waiting
    return ids


def shoot(page: Page, url: str, name: str, out: Path) -> None:
    page.goto(url)
    page.wait_for_load_state("networkidle")
    page.wait_for_function("!document.querySelector('time[data-local]')")  # local times
    # (a restore comparison's second column is its own request, made once the page loaded)
    page.wait_for_function("!document.querySelector('section.restore-column.later')")
    page.screenshot(path=str(out / name), full_page=False)
    print(f"{out / name}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = parser.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(tempfile.mkdtemp(prefix="memlane-ui-shots-"))
    ids = build("demo.db")
    source = Source(StoreAdmin("demo.db", embedder=HashEmbedder(), read_only=True))
    inspector = Inspector(source, port=0)
    inspector.start()
    try:
        at = inspector.url.split("/?", 1)[0]
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM)
            context = browser.new_context(viewport={"width": 1280, "height": 860})
            page = context.new_page()
            page.goto(inspector.url)  # the token becomes the page's cookie
            doc = {"agent": "support-bot", "document": ids["runbook"]}
            pages = {
                "ui-sessions.png": "/sessions",
                "ui-timeline.png": f"/sessions/{ids['chat']}",
                "ui-search.png": "/search?q=refund+timed+out&k=8",
                "ui-restore.png": (
                    f"/restore?session={ids['chat']}&budget=400&budget2=120&model=gpt-4o"
                ),
                "ui-users.png": "/users?agent=support-bot&user=dana",
                "ui-knowledge.png": "/knowledge?"
                + "&".join(f"{key}={value}" for key, value in doc.items()),
                "ui-pools.png": "/pools?pool=support-kb",
                "ui-health.png": "/health",
            }
            for name, path in pages.items():
                shoot(page, at + path, name, out)
            browser.close()
    finally:
        inspector.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
