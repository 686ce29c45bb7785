"""A short end-to-end run: an agent records its work, a fresh process gets it back.

Run it with `make demo`. Everything runs offline on the CPU with the real
all-MiniLM-L6-v2 model; the database lands in a temporary folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from session_manager import SessionManager

RESTORE_IN_A_FRESH_PROCESS = """
    import json, sys
    from session_manager import SessionManager

    with SessionManager(agent_id="researcher", db_path=sys.argv[1]) as mgr:
        context = mgr.restore(sys.argv[2], max_tokens=600)
        hits = mgr.semantic_search("did we turn off 2FA anywhere?", k=1)
        print(json.dumps({
            "text": context.text, "tokens": context.token_count,
            "sections": context.report.sections,
            "hit": hits[0].event.content, "score": hits[0].score,
        }))
"""


def main() -> None:
    db = Path(tempfile.mkdtemp(prefix="asm-demo-")) / "sessions.db"
    print(f"1. An agent works on a task and records what it does in {db}")
    with SessionManager(agent_id="researcher", db_path=db) as mgr:
        session = mgr.start_session(goal="Audit the staging environment before the release")
        mgr.record_step(
            session.id,
            step="listed staging accounts",
            tool="admin_api",
            result={"accounts": 14, "admins": 2},
        )
        mgr.record_tool_output(
            session.id,
            {
                "scan": "dependency audit",
                "packages": [
                    {"name": f"pkg-{i}", "version": f"1.{i}.0", "advisories": []}
                    for i in range(400)
                ],
            },
            tool="pip_audit",
        )
        mgr.record_tool_output(
            session.id,
            "Disabled two-factor authentication for the test account qa-bot so the e2e suite "
            "can log in.",
            tool="admin_api",
        )
        err = mgr.record_error(session.id, "login page returned HTTP 502 during the scan")
        mgr.resolve_error(err.id)
        mgr.record_decision(session.id, text="review service accounts before human ones")
        mgr.add_pending(session.id, "rotate the CI deploy key")
        started = time.perf_counter()
        mgr.flush()
        print(
            f"   recorded {len(mgr.events(session.id))} events "
            f"(embeddings done in {time.perf_counter() - started:.2f} s in the background)"
        )

    print("2. A fresh process restores the session within 600 tokens and asks a question")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(RESTORE_IN_A_FRESH_PROCESS), str(db), session.id],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    print(f"   restored context: {result['tokens']} tokens, per section {result['sections']}")
    print(textwrap.indent(result["text"], "   | "))
    print('3. semantic_search("did we turn off 2FA anywhere?") ranks first:')
    print(f"   {result['hit']!r} (cosine {result['score']:.2f})")


if __name__ == "__main__":
    main()
