"""A search after each upsert, before and after a change, side by side (by hand).

    python bench/upserts.py STORE.db [--before SRC_DIR] [--rounds 8]

STORE.db is a store built by bench/perf.py (or ``bench/search_scale.py --build N``). Each side
runs in a fresh process on its own copy, with ``PYTHONPATH`` at its ``src``: it searches once
(the caches load), then ``--rounds`` times records a fact with ``replace=`` (an upsert: the
previous one of that key is deleted, as LangGraph's ``put`` does) and runs a semantic
search. Reported: each search's ms and their median.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import json, statistics, sys, time
from memlane import SessionManager
mgr = SessionManager("bench", url="sqlite:///" + sys.argv[1], background=False)
mgr.search("warm up", k=10, mode="semantic")
big = [s for s in mgr.list_sessions(limit=100_000) if s.goal.startswith("Survey 2026")][0]
lat = []
for i in range(int(sys.argv[2])):
    mgr.record(big.id, "fact", f"the current setting is {i}", replace={"key": "setting"},
               metadata={"key": "setting"})
    mgr.flush()
    t = time.perf_counter()
    mgr.search(f"what is the current setting {i}", k=10, mode="semantic")
    lat.append(round((time.perf_counter() - t) * 1000, 1))
mgr.close()
print(json.dumps({"search_after_upsert_ms": lat, "median": statistics.median(lat)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    sides = [("after", HERE.parent / "src")]
    if args.before:
        sides.insert(0, ("before", args.before))
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in sides:
            copy = Path(tmp) / f"{name}.db"
            shutil.copy(args.store, copy)
            run = subprocess.run(
                [sys.executable, "-c", CHILD, str(copy), str(args.rounds)],
                env=dict(os.environ, PYTHONPATH=str(src)),
                capture_output=True,
                text=True,
                check=True,
            )
            print(name, json.dumps(json.loads(run.stdout)))


if __name__ == "__main__":
    main()
