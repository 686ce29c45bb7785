"""What shrinking onnxruntime's arena after each run costs and saves, side by side (by hand).

    python bench/embed_memory.py [--rounds 3]

Each side in a fresh process, alternating: all-MiniLM-L6-v2 loaded and warmed, 60 one-text
queries (p50 ms), then 3 batches of 64 long texts (~240 word pieces each: the background
worker's load; median seconds a batch), and the resident memory the process kept after them.
"shrink" is the embedder as built (``memory.enable_memory_arena_shrinkage`` after each
run); "keep" runs without it (onnxruntime's default: the arena keeps its largest size).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, statistics, sys, time
import onnxruntime
from memlane.embed import MiniLMEmbedder, minilm

if sys.argv[1] == "keep":
    minilm._shrink_arena = lambda: onnxruntime.RunOptions()

def rss_mb():
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return int(fields["VmRSS"].split()[0]) // 1024

embedder = MiniLMEmbedder()
embedder(["warm up"])
loaded = rss_mb()
queries = []
for i in range(60):
    t = time.perf_counter()
    embedder([f"what did we decide about the deploy, take {i}?"])
    queries.append((time.perf_counter() - t) * 1000)
batches = []
for round in range(3):
    t = time.perf_counter()
    embedder([("word%d " % j) * 120 + str(round) for j in range(64)])
    batches.append(time.perf_counter() - t)
print(json.dumps({"query_ms": statistics.median(queries), "batch_s": statistics.median(batches),
                  "loaded_mb": loaded, "kept_mb": rss_mb() - loaded}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"shrink": [], "keep": []}
    for _ in range(args.rounds):
        for side in results:
            out = subprocess.run(
                [sys.executable, "-c", CHILD, side], capture_output=True, text=True, check=True
            )
            results[side].append(json.loads(out.stdout))
    for side, runs in results.items():
        medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        print(
            f"{side:7s} query p50 {medians['query_ms']:.2f} ms, batch of 64 long texts "
            f"{medians['batch_s']:.2f} s, resident after load {medians['loaded_mb']:.0f} MB, "
            f"kept after the batches +{medians['kept_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
