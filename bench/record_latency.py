"""record() latency while the background worker embeds with MiniLM, side by side (by hand).

    python bench/record_latency.py [--before SRC_DIR] [--records 4000] [--rounds 2]
    python bench/record_latency.py --priorities     # worker_priority "idle" against "normal"

bench/perf.py's ingest loop alone: the model is warmed up in the main thread (as an
application that searched first would have it), then ``record_fact`` is called ``--records``
times as fast as possible on a new SQLite store while the worker embeds beside it, and the
store is flushed. Reported per run: ``record()`` p50 / p99 / max ms, the model's raw rate
(texts/s, batches of 64 in the main thread), the ingest rate (records / time to flushed) and
the worker's own rate while the records came in (what it embedded / the loop's time; the
flush after it embeds the rest at normal priority, in the main thread).
Each side runs in a fresh process with ``PYTHONPATH`` at that side's ``src``; the sides
alternate ``--rounds`` times, so a machine's drift shows in both.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sides import SRC, run_child, sides

HERE = Path(__file__).resolve().parent
CHILD = """
import json, os, sys, tempfile, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from perf import agent_texts
from memlane import MiniLMEmbedder, SessionManager
n = int(sys.argv[1])
texts = agent_texts(n, seed=1)
embedder = MiniLMEmbedder()
embedder(["warm up the model"])
started = time.perf_counter()
for start in range(0, 1000, 64):
    embedder(texts[start:start + 64])
raw = min(n, 1000) / (time.perf_counter() - started)
with tempfile.TemporaryDirectory() as tmp:
    options = {"worker_priority": sys.argv[3]} if sys.argv[3] != "-" else {}
    with SessionManager(
        "bench", embedder=embedder, db_path=os.path.join(tmp, "r.db"), **options
    ) as mgr:
        session = mgr.start_session("ingest")
        mgr.flush()
        latencies = []
        started = time.perf_counter()
        for text in texts:
            t = time.perf_counter()
            mgr.record_fact(session.id, text)
            latencies.append((time.perf_counter() - t) * 1000)
        loop = time.perf_counter() - started
        waiting = mgr.pending_embeddings()  # what the worker had not embedded by then
        mgr.flush()
        rate = n / (time.perf_counter() - started)
print(json.dumps({
    "record_p50_ms": round(float(np.percentile(latencies, 50)), 3),
    "record_p99_ms": round(float(np.percentile(latencies, 99)), 2),
    "record_max_ms": round(max(latencies), 1),
    "raw_rate": round(raw), "ingest_rate": round(rate),
    "worker_rate": round((n - waiting) / loop), "waiting_after": waiting,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--records", type=int, default=4_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--priorities",
        action="store_true",
        help="compare worker_priority='idle' and 'normal' (this checkout) instead",
    )
    args = parser.parse_args()
    runs = [(name, src, "-") for name, src in sides(args.before)]
    if args.priorities:
        runs = [(p, SRC, p) for p in ("idle", "normal")]
    for _ in range(args.rounds):
        for name, src, priority in runs:
            got = run_child(src, CHILD, args.records, HERE, priority)
            print(name, json.dumps(got), flush=True)


if __name__ == "__main__":
    main()
