"""search() latency while another process writes, before and after a change (by hand).

    python bench/search_under_writes.py [--before SRC_DIR] [--searches 300]

Each side (``PYTHONPATH`` at its ``src``; ``--before``: another checkout's, e.g. ``git
worktree add /tmp/before <commit>``) gets a fresh SQLite store of 5,000 events, then one
process records events (unindexed: no embedding backlog) without pause while another runs
``--searches`` default (hybrid) searches, the default embedder (MiniLM) warmed up first.
Reported: the searches' p50 / p95 / p99 ms and the writer's records per second meanwhile.
A search that writes (recall counts) waits for SQLite's write lock behind the writer; one
that only reads does not.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUP = """
import sys
from memlane import SessionManager
with SessionManager("bench", url="sqlite:///" + sys.argv[1]) as mgr:
    s = mgr.start_session("setup")
    facts = [f"host {i} runs service {i % 40} in zone {i % 7}" for i in range(5000)]
    mgr.record_many(s.id, [{"kind": "fact", "content": text} for text in facts])
    mgr.flush()
"""
WRITER = """
import sys, time
import os
from memlane import SessionManager
stop, n = sys.argv[2], 0
with SessionManager("bench", url="sqlite:///" + sys.argv[1], background=False) as mgr:
    s = mgr.start_session("writer")
    start = time.time()
    while not os.path.exists(stop):  # (index=False: no embedding backlog for the searcher)
        mgr.record(s.id, "fact", f"writer note {n} about service {n % 40}", index=False)
        n += 1
    print(n / (time.time() - start))
"""
SEARCHER = """
import json, sys, time
import numpy as np
from memlane import SessionManager
count, stop = int(sys.argv[2]), sys.argv[3]
with SessionManager("bench", url="sqlite:///" + sys.argv[1], background=False) as mgr:
    for i in range(20):
        mgr.search(f"warm up {i}", k=5)
    lat = []
    for i in range(count):
        t = time.perf_counter()
        mgr.search(f"which hosts run service {i % 40} in zone {i % 7}?", k=5)
        lat.append((time.perf_counter() - t) * 1000)
    open(stop, "w").close()
print(json.dumps({q: round(float(np.percentile(lat, q)), 2) for q in (50, 95, 99)}))
"""


def side(src: Path, searches: int) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryDirectory() as tmp:
        db, stop = f"{tmp}/s.db", f"{tmp}/stop"
        subprocess.run([sys.executable, "-c", SETUP, db], env=env, check=True)
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, db, stop], env=env, stdout=subprocess.PIPE, text=True
        )
        search = subprocess.run(
            [sys.executable, "-c", SEARCHER, db, str(searches), stop],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        rate, _ = writer.communicate(timeout=120)
    return {"search_ms": json.loads(search.stdout), "writer_records_per_s": round(float(rate))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args()
    sides = [("after", HERE.parent / "src")]
    if args.before:
        sides.insert(0, ("before", args.before))
    for name, src in sides:
        print(name, json.dumps(side(src, args.searches)), flush=True)


if __name__ == "__main__":
    main()
