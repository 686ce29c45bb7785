"""Memory of several managers in one process against one (issue 34 item 3), side by side.

    python bench/managers_rss.py LOCOMO [--before SRC_DIR] [--rounds 2] [--priority normal]

LoCoMo's development conversations (``LOCOMO``: locomo_dev.json, CC BY-NC 4.0, never in the
repository) recorded in one process on one new SQLite file with MiniLM and the background
worker on: **one** manager records every conversation, or **five** managers (one agent per
conversation) record theirs; then every manager's ``flush()``, then 50 searches a
conversation. Reported per run: peak RSS (``VmHWM``) and RSS at the end (``VmRSS``), after
recording and after flushing, in MB; the model is loaded before the first figure (its ~230 MB
are in every row). Each run is a fresh process with ``PYTHONPATH`` at that side's ``src``;
sides and modes alternate ``--rounds`` times.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sides import run_child, sides

HERE = Path(__file__).resolve().parent
CHILD = """
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from locomo import load
from sides import memory_mb as status
from memlane import MiniLMEmbedder, SessionManager
mode, path, priority = sys.argv[1], Path(sys.argv[2]), sys.argv[4]
conversations, _ = load(path)


embedder = MiniLMEmbedder()
embedder(["load the model before the first figure"])
figures = {"loaded": status()}
with tempfile.TemporaryDirectory() as tmp:
    db = Path(tmp) / "rss.db"
    options = dict(embedder=embedder, worker_priority=priority)
    if mode == "one":
        shared = SessionManager("everyone", db, **options)
        managers = {c.sample_id: shared for c in conversations}
    else:
        managers = {c.sample_id: SessionManager(f"a-{c.sample_id}", db, **options)
                    for c in conversations}
    for conv in conversations:
        mgr = managers[conv.sample_id]
        for part in conv.sessions:
            sid = mgr.start_session(f"{conv.sample_id} part {part.number}").id
            for turn in part.turns:
                mgr.record(sid, "message", turn.content, created_at=part.date)
    figures["recorded"] = status()
    distinct = list({id(m): m for m in managers.values()}.values())
    for mgr in distinct:
        mgr.flush()
    figures["flushed"] = status()
    for conv in conversations:
        for question in conv.questions[:50]:
            managers[conv.sample_id].search(question.text, k=10)
    figures["searched"] = status()
    for mgr in distinct:
        mgr.close()
print(json.dumps(figures))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="locomo_dev.json")
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--priority",
        choices=("idle", "normal"),
        default="idle",
        help="the worker's (normal on a machine kept busy by other work)",
    )
    args = parser.parse_args()
    print("| side | managers | peak MB | MB after recording | after flush | at the end |")
    print("|---|---|---|---|---|---|")
    for _ in range(args.rounds):
        for name, src in sides(args.before):
            for mode in ("one", "five"):
                got = run_child(src, CHILD, mode, args.path, HERE, args.priority)
                print(
                    f"| {name} | {mode} | {got['searched']['VmHWM']} | "
                    f"{got['recorded']['VmRSS']} | {got['flushed']['VmRSS']} | "
                    f"{got['searched']['VmRSS']} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
