"""Search latency of one big partition with the 8-bit pass over every row, or the 1-bit pass
before it with C·k candidates (docs/decisions/2026-11-27-one-bit-pass-from-65k-rows.md).

    python bench/snapshot_cold.py 100000 /tmp/snap100k.db     # the store (built once)
    python bench/first_pass.py /tmp/snap100k.db --rounds 2

One process, the constants switched between arms (the partition stays loaded), 300 four-word
queries a mode; prints p50 / p95 ms of semantic and hybrid searches per arm and round. Recall of
each arm is ``bench/quantized_recall.py``'s (real MiniLM vectors); this store's hash vectors only
time it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

from memlane import SessionManager
from memlane.ranking.vectors import cache
from memlane.testing import HashEmbedder

ARMS = {
    "8-bit pass over every row": (10**9, 100),
    "1-bit pass, 100·k": (0, 100),
    "1-bit pass, 200·k": (0, 200),
    "1-bit pass, 400·k": (0, 400),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="a store made by bench/snapshot_cold.py")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    mgr = SessionManager(
        "agent", args.store, embedder=HashEmbedder(), background=False, count_recalls=False
    )
    mgr.search("w1", k=10, mode="semantic")
    mgr.search("w1", k=10)
    rng = random.Random(3)
    queries = [" ".join(f"w{rng.randrange(3000)}" for _ in range(4)) for _ in range(300)]
    for round_ in range(1, args.rounds + 1):
        for name, (bits_from, multiple) in ARMS.items():
            cache.BITS_FROM, cache._BIT_CANDIDATES_IN_MEMORY = bits_from, multiple
            cells = []
            for mode in ("semantic", "hybrid"):
                times = []
                for query in queries:
                    started = time.perf_counter()
                    mgr.search(query, k=10, mode=mode)
                    times.append((time.perf_counter() - started) * 1000)
                times.sort()
                p95 = times[int(len(times) * 0.95)]
                cells.append(f"{mode} {statistics.median(times):.2f} / {p95:.2f}")
            print(f"round {round_}, {name}: " + ", ".join(cells) + " ms (p50 / p95)", flush=True)
    mgr.close()


if __name__ == "__main__":
    main()
