"""A fresh process's first semantic search with and without the vector snapshot beside the
store (docs/decisions/2026-11-27-snapshots-only-where-they-pay.md).

    python bench/snapshot_cold.py 20000 /tmp/snap20k.db     # builds the store once, then measures
    python bench/snapshot_cold.py 100000 /tmp/snap100k.db --rounds 5

The store: N short messages in one agent (one partition), hash-embedded, with its snapshot
written by a first search. Each round, in alternation, a new process opens the store and makes
one semantic search — once with the snapshot folder in place, once with it moved away — with
snapshot writes disabled in the child, so that only reading is timed. Prints the snapshot's
size and, per arm, the median of the first search and of process start to answer.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import sys, time
t0 = time.perf_counter()
from memlane import SessionManager
from memlane.ranking.vectors import snapshots
from memlane.testing import HashEmbedder
snapshots.VectorSnapshots.save = lambda *a, **k: None  # time reading, never writing
mgr = SessionManager("agent", sys.argv[1], embedder=HashEmbedder(), background=False)
t1 = time.perf_counter()
mgr.search("w5 w7 w9", k=10, mode="semantic")
t2 = time.perf_counter()
mgr.close()
print((t2 - t1) * 1000, (t2 - t0) * 1000)
"""


def build(db: Path, events: int) -> None:
    from memlane import SessionManager
    from memlane.testing import HashEmbedder

    rng = random.Random(1)
    words = [f"w{i}" for i in range(3000)]
    with SessionManager("agent", db, embedder=HashEmbedder()) as mgr:
        for s in range(max(1, events // 1000)):
            sid = mgr.start_session(f"s{s}").id
            mgr.record_many(
                sid,
                [
                    {
                        "kind": "message",
                        "role": "user",
                        "content": " ".join(rng.choices(words, k=20)),
                    }
                    for _ in range(1000)
                ],
            )
        mgr.flush()
        # (the snapshot is written by the first search, if the partition is large enough)
        from memlane.ranking.vectors import cache

        saved = cache.SNAPSHOT_FROM
        cache.SNAPSHOT_FROM = 0
        try:
            mgr.search("w1 w2", k=10, mode="semantic")
        finally:
            cache.SNAPSHOT_FROM = saved


def first_search(db: Path) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(db)], capture_output=True, text=True, check=True
    )
    search_ms, total_ms = (float(x) for x in out.stdout.split())
    return search_ms, total_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("events", type=int)
    parser.add_argument("store", type=Path, help="built here if missing, else reused")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not args.store.exists():
        build(args.store, args.events)
    folder = Path(str(args.store) + ".memlane-cache")
    files = sorted(folder.glob("vectors-*.asmvec"))
    if not files:
        sys.exit(f"{folder} holds no vector snapshot; remove {args.store} and build it again")
    print(f"snapshot: {sum(f.stat().st_size for f in files) / 1e6:.1f} MB")
    away = Path(str(folder) + ".away")
    times: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    for _ in range(args.rounds):
        times["with"].append(first_search(args.store))
        shutil.move(folder, away)
        try:
            times["without"].append(first_search(args.store))
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.move(away, folder)
    for arm, runs in times.items():
        print(
            f"{arm} the snapshot: first search {statistics.median(r[0] for r in runs):.1f} ms, "
            f"process start to answer {statistics.median(r[1] for r in runs):.1f} ms "
            f"(median of {len(runs)})"
        )


if __name__ == "__main__":
    main()
