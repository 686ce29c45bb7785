"""A fresh process's first search after the operating system's page cache was emptied: a
machine that just booted, or a store whose files something else pushed out of memory
(issue 34: 5-14 s at 1M events, measured from outside; target ≤ 2 s).

    python bench/cold_start.py STORE.db [--rounds 3] [--before SRC_DIR]

STORE.db: a store built by ``bench/search_scale.py --build N`` (one agent, MiniLM vectors).
Each round, for each side in turn: ``sync``, ``echo 3 > /proc/sys/vm/drop_caches`` (root
only: everything — Python's modules, the model's weights, the store's pages — is read from
disk again), then a new process imports memlane, opens the store, and makes one hybrid
search, then a second one. Printed per side (medians): the import, the open, the first
search and the second, and start to first answer. The same file serves both sides, so their
on-disk formats must agree (``--before``: another checkout's ``src``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DROP = Path("/proc/sys/vm/drop_caches")
CHILD = """
import json, sys, time
t0 = time.perf_counter()
from memlane import SessionManager
t1 = time.perf_counter()
mgr = SessionManager("bench", url="sqlite:///" + sys.argv[1])
t2 = time.perf_counter()
mgr.search("did kv cache eviction affect login page errors after we fixed it?", k=10)
t3 = time.perf_counter()
mgr.search("what happened with the search API rate limits after we reverted them?", k=10)
t4 = time.perf_counter()
mgr.close()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_search_s": t3 - t2,
                  "second_search_ms": (t4 - t3) * 1000, "start_to_answer_s": t3 - t0}))
"""


def drop_caches() -> None:
    """Empty the page cache (and dentries and inodes): every file is read from disk again."""
    os.sync()
    try:
        DROP.write_text("3\n")
    except OSError as error:
        sys.exit(f"cannot empty the page cache ({error}): run as root on Linux")


def one(store: Path, src: Path) -> dict[str, float]:
    drop_caches()
    env = dict(os.environ, PYTHONPATH=str(src))
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(store)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(run.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    args = parser.parse_args()
    if not args.store.exists():
        sys.exit(f"{args.store} does not exist: build it with bench/search_scale.py --build N")
    sides = [("after", HERE.parent / "src")]
    if args.before:
        sides.insert(0, ("before", args.before))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, src in sides:
            runs[name].append(one(args.store, src))
            print(name, json.dumps({k: round(v, 3) for k, v in runs[name][-1].items()}))
    for name, rows in runs.items():
        medians = {key: round(statistics.median(r[key] for r in rows), 3) for key in rows[0]}
        print(f"{name} (median of {len(rows)}):", json.dumps(medians))


if __name__ == "__main__":
    main()
