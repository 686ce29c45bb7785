"""What a search and a restore cost in wall time and in CPU (every thread of the process),
side by side (by hand).

    python bench/read_cpu.py --store ui-100k.db [--before SRC_DIR] [--rounds 2] [--calls 30]

On the store ``bench/ui_pages.py`` builds (one session of 100k hash-embedded events and
2,000 small ones; read-only), after a warm-up: ``restore()`` of the 100k-event session at
2,000 and 8,000 tokens, and a hybrid ``search()`` of the agent's memory (k = 10, and k = 200
as restore asks). Reported per run: wall p50 / p95 ms and the process's CPU per call (median),
all threads counted: CPU above wall is work on a second core, which on a loaded machine is
taken from the application. Each side runs in a fresh process with ``PYTHONPATH`` at that
side's ``src``; the sides alternate ``--rounds`` times.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sides import run_child, sides

HERE = Path(__file__).resolve().parent
CHILD = """
import json, statistics, sys, time
from pathlib import Path
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder
from memlane.ui import Source
sys.path.insert(0, sys.argv[3])
from ui_pages import WORDS
calls = int(sys.argv[2])
source = Source(StoreAdmin(Path(sys.argv[1]), embedder=HashEmbedder(), read_only=True))
source.warm_up(wait=600)
session = source.session("big").session.id
manager = source.manager("bench")
queries = [
    " ".join((WORDS[i], WORDS[(7 * i) % 3000], WORDS[(13 * i) % 3000])) for i in range(calls)
]
cases = {
    "restore 2,000": lambda i: source.restore(session, 2000, query=None, model=None),
    "restore 8,000": lambda i: source.restore(session, 8000, query=None, model=None),
    "search k=10": lambda i: manager.search(queries[i], k=10),
    "search k=200": lambda i: manager.search(queries[i], k=200),
}
out = {}
for name, call in cases.items():
    for i in range(3):
        call(i)
    time.sleep(0.5)  # (a helper thread still spinning from the warm-up calls would count)
    wall, cpu = [], []
    for i in range(calls):
        started, started_cpu = time.perf_counter(), time.process_time()
        call(i)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - started_cpu) * 1000)
    wall.sort()
    out[name] = [
        round(statistics.median(wall), 1),
        round(wall[min(len(wall) - 1, int(0.95 * len(wall)))], 1),
        round(statistics.median(cpu), 1),
    ]
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", type=Path, required=True, help="built by bench/ui_pages.py")
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    print("| side | call | wall p50 ms | wall p95 ms | CPU p50 ms |")
    print("|---|---|---:|---:|---:|")
    for _ in range(args.rounds):
        for name, src in sides(args.before):
            got = run_child(src, CHILD, args.store, args.calls, HERE)
            for call, (p50, p95, cpu) in got.items():
                print(f"| {name} | {call} | {p50} | {p95} | {cpu} |", flush=True)


if __name__ == "__main__":
    main()
