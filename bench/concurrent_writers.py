"""Several processes recording into one agent, searching as they go, before and after a change
(by hand).

    python bench/concurrent_writers.py [--before SRC_DIR] [--procs 8] [--records 1000]

Issue 12's load: ``--procs`` processes each record ``--records`` short events into its own
session of one agent in one SQLite file, with a hybrid search every 20 records, each with the
default embedder (MiniLM) and its background worker. Each side runs on a fresh store with
``PYTHONPATH`` at its ``src`` (``--before``: another checkout's, e.g. ``git worktree add
/tmp/before <commit>``); the sides run one after the other. Reported over all processes:
``record()`` and ``search()`` p50 / p99 ms, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WRITER = """
import json, random, sys, time
from memlane import SessionManager
path, name, records = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(name)
words = ("deploy pipeline staging database login error rate limit search api vector index "
         "gpu memory payment webhook docker image cache latency rollout canary").split()
record, search = [], []
with SessionManager("bench", url="sqlite:///" + path) as mgr:
    mgr.search("warm up", k=5)  # load the model before timing
    session = mgr.start_session(f"writer {name}")
    for i in range(records):
        text = " ".join(rng.choice(words) for _ in range(12))
        t = time.perf_counter()
        mgr.record_fact(session.id, f"{name} {i}: {text}")
        record.append((time.perf_counter() - t) * 1000)
        if i % 20 == 19:
            t = time.perf_counter()
            mgr.search(f"what happened with the {rng.choice(words)} {rng.choice(words)}", k=5)
            search.append((time.perf_counter() - t) * 1000)
print(json.dumps({"record": record, "search": search}))
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 2)


def run(src: Path, procs: int, records: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "load.db")
        # the store and its schema first, so the writers do not race to create it
        subprocess.run(
            [sys.executable, "-c", "from memlane import SessionManager as S; "
             f"S('bench', url='sqlite:///{path}', background=False).close()"],
            env=env, check=True,
        )  # fmt: skip
        start = time.perf_counter()
        children = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, path, f"w{n}", str(records)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(procs)
        ]
        outputs = [
            json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children
        ]
        wall = time.perf_counter() - start
    record = [x for out in outputs for x in out["record"]]
    search = [x for out in outputs for x in out["search"]]
    return {
        "record_p50_p99_ms": [pct(record, 0.5), pct(record, 0.99)],
        "search_p50_p99_ms": [pct(search, 0.5), pct(search, 0.99)],
        "wall_s": round(wall, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args()
    sides = {"after": HERE.parent / "src"}
    if args.before:
        sides = {"before": args.before, **sides}
    results = {name: run(src, args.procs, args.records) for name, src in sides.items()}
    for name, result in results.items():
        print(name, json.dumps(result))


if __name__ == "__main__":
    main()
