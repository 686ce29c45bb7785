"""Memory and speed of one big vector partition, in fresh processes, before / after
(docs/decisions/2026-11-27-big-partitions-keep-half-precision.md).

    python bench/snapshot_cold.py 100000 /tmp/snap100k.db      # the store (built once)
    python bench/partition_memory.py /tmp/snap100k.db --before ../main-old/src --rounds 2

Each round, for each side (``--before SRC``, then this checkout), a new process opens the store
(hash embedder) and reports: its RSS and peak after the first semantic search read the
partition from the log (the snapshot folder moved away meanwhile, and none written), then — in
another process, with the snapshot — the p50 / p95 of 300 semantic and hybrid searches and 60
``restore(4000)`` calls, and its RSS at the end.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from sides import run_child, sides

CHILD = """
import json, random, statistics, sys, time
from memlane import SessionManager
from memlane.ranking.vectors import snapshots
from memlane.testing import HashEmbedder

def rss():
    with open("/proc/self/status") as f:
        d = {l.split(":")[0]: int(l.split()[1]) // 1024 for l in f if l.startswith("Vm")}
    return d["VmRSS"], d["VmHWM"]

store, timed = sys.argv[1], sys.argv[2] == "timed"
if not timed:
    snapshots.VectorSnapshots.save = lambda *a, **k: None
mgr = SessionManager("agent", store, embedder=HashEmbedder(), background=False, count_recalls=False)
mgr.search("w5 w7 w9", k=10, mode="semantic")
out = {"rss_mb": rss()[0], "peak_mb": rss()[1]}
if timed:
    rng = random.Random(3)
    queries = [" ".join(f"w{rng.randrange(3000)}" for _ in range(4)) for _ in range(300)]
    sid = mgr.list_sessions(limit=1)[0].id
    for name, call, count in (
        ("semantic", lambda q: mgr.search(q, k=10, mode="semantic"), 300),
        ("hybrid", lambda q: mgr.search(q, k=10), 300),
        ("restore4000", lambda q: mgr.restore(sid, 4000, query=q), 60),
    ):
        times = []
        for q in queries[:count]:
            t0 = time.perf_counter(); call(q); times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out[name] = [round(statistics.median(times), 2), round(times[int(len(times) * 0.95)], 2)]
    out["rss_mb"], out["peak_mb"] = rss()
mgr.close()
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="a store made by bench/snapshot_cold.py")
    parser.add_argument("--before", type=Path, help="another checkout's src, measured first")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path(str(args.store) + ".memlane-cache")
    away = Path(str(folder) + ".away")
    for round_ in range(1, args.rounds + 1):
        for side, src in sides(args.before):
            if folder.exists():
                shutil.move(folder, away)
            try:
                cold = run_child(src, CHILD, args.store, "cold")
            finally:
                shutil.rmtree(folder, ignore_errors=True)
                if away.exists():
                    shutil.move(away, folder)
            timed = run_child(src, CHILD, args.store, "timed")
            print(
                f"round {round_} {side}: from the log RSS {cold['rss_mb']} MB, peak "
                f"{cold['peak_mb']} MB; with the snapshot semantic {timed['semantic']}, "
                f"hybrid {timed['hybrid']}, restore(4000) {timed['restore4000']} ms "
                f"(p50, p95), RSS {timed['rss_mb']} MB",
                flush=True,
            )


if __name__ == "__main__":
    main()
