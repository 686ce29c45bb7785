"""The caller's wait for large records, before and after a change, side by side (by hand).

    python bench/big_records.py [--before SRC_DIR] [--repeat 5]

Each side runs in a fresh process with ``PYTHONPATH`` pointing at its ``src`` (``--before``
is another checkout's: ``git worktree add /tmp/before <commit>``), on a new SQLite store with
the deterministic embedder and the background worker on, as an application runs it. Measured:
``record()`` of 2,000 ordinary events (p50 / p99 ms), then each large record ``--repeat``
times (median ms): ``record_tool_output`` of JSON outputs of ~240 KB and ~1.1 MB, and
``add_message`` of 1 MB, 5 MB and 15 MB strings; then how long the worker takes to digest
them all (``flush``), and the WAL's peak size.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import json, os, random, statistics, string, sys, tempfile, threading, time
from memlane import SessionManager
from memlane.embed import HashEmbedder

repeat = int(sys.argv[1])
folder = tempfile.mkdtemp()
path = os.path.join(folder, "big.db")
mgr = SessionManager("bench", url="sqlite:///" + path, embedder=HashEmbedder())
session = mgr.start_session("large records")
rng = random.Random(0)
words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
         for _ in range(5000)]
wal_peak = 0
stop = threading.Event()
def watch():
    global wal_peak
    while not stop.is_set():
        try:
            wal_peak = max(wal_peak, os.path.getsize(path + "-wal"))
        except OSError:
            pass
        time.sleep(0.01)
threading.Thread(target=watch, daemon=True).start()

def rows(n):
    return {"rows": [
        {"id": i, "host": f"db-{i % 40}.internal", "status": rng.choice(["ok", "warn"]),
         "latency_ms": round(rng.random() * 100, 3), "msg": "query completed normally"}
        for i in range(n)
    ]}

def text(chars):
    out, size = [], 0
    while size < chars:
        w = rng.choice(words); out.append(w); size += len(w) + 1
    return " ".join(out)[:chars]

out = {}
small = []
for i in range(2000):
    t = time.perf_counter()
    mgr.add_message(session.id, "user", " ".join(rng.choice(words) for _ in range(12)))
    small.append((time.perf_counter() - t) * 1000)
small.sort()
out["record_small_p50_p99_ms"] = [
    round(statistics.median(small), 3), round(small[int(len(small) * 0.99)], 3)
]
cases = [
    ("tool_output_240KB", lambda: rows(1900), "json"),
    ("tool_output_1.1MB", lambda: rows(9000), "json"),
    ("message_1MB", lambda: text(1_000_000), "text"),
    ("message_5MB", lambda: text(5_000_000), "text"),
    ("message_15MB", lambda: text(15_000_000), "text"),
]
for label, make, how in cases:
    value = make()
    lat = []
    for _ in range(repeat):
        t = time.perf_counter()
        if how == "json":
            mgr.record_tool_output(session.id, value, tool="sql")
        else:
            mgr.add_message(session.id, "tool", value)
        lat.append((time.perf_counter() - t) * 1000)
    out[label + "_ms"] = round(statistics.median(lat), 1)
t = time.perf_counter()
mgr.flush()
out["flush_after_s"] = round(time.perf_counter() - t, 2)
t = time.perf_counter()
hits = mgr.search("query completed normally", k=5)
out["first_search_after_s"] = round(time.perf_counter() - t, 2)
stop.set()
out["wal_peak_mb"] = round(wal_peak / 2**20, 1)
out["db_mb"] = round(os.path.getsize(path) / 2**20, 1)
mgr.close()
print(json.dumps(out))
"""


def run(src: Path, repeat: int) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(repeat)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sides = {"after": HERE.parent / "src"}
    if args.before:
        sides = {"before": args.before, **sides}
    results = {name: run(src, args.repeat) for name, src in sides.items()}
    names = list(results)
    print(f"{'figure':<28}" + "".join(f"{name:>20}" for name in names))
    for key in results[names[-1]]:
        cells = "".join(f"{json.dumps(results[name].get(key)):>20}" for name in names)
        print(f"{key:<28}{cells}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
