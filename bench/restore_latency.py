"""restore() wall time where sessions get heavy: a 10k-event session and 20 x 1 MB outputs.

    python bench/restore_latency.py                 # the real MiniLM embedder
    python bench/restore_latency.py --hash          # the hash embedder (no model load)
    python bench/restore_latency.py --profile       # and a cProfile of the 10k case

Two sessions in one SQLite file, recorded through the public API:
- **10k**: 10,000 mixed events (messages, steps with JSON results, facts, decisions, tool
  outputs, errors; 2-40 words each), one event a minute;
- **1mb**: 20 ``record_tool_output`` calls of ~1 MB of JSON each, between short messages.

Each case runs ``restore(session, 4000)`` (the default query) and ``restore(session, 4000,
query=...)`` 50 times after one untimed warm-up; p50 / p95 of the wall time per call, and the
median CPU time of the process (steadier than wall time on a shared machine; it includes
onnxruntime's threads). Repeated restores reuse restore's cache of extractive summaries (an
agent restores every turn); "cold p50" is the median of restores with that cache emptied
first (outputs never summarised before); "new-process p50", with the passages' analyses and
JSON outputs' record views emptied too, as a new process has them (the restore that first
meets an output pays for its view).
Targets (issue 8): 10k ≤ 50 ms p95, 1mb ≤ 30 ms p95.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf import _vocabulary

from memlane import SessionManager
from memlane.testing import HashEmbedder

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def sentence(rng: random.Random, lo: int = 2, hi: int = 40) -> str:
    """Words drawn Zipf-like from an English vocabulary (as bench/perf.py does), so keyword
    search meets realistic word frequencies."""
    vocab = _vocabulary()
    return " ".join(vocab[int(len(vocab) ** rng.random()) - 1] for _ in range(rng.randint(lo, hi)))


def ten_thousand(mgr: SessionManager, rng: random.Random) -> str:
    session = mgr.start_session("Survey sparse attention kernels and benchmark them").id
    for n in range(10_000):
        when = T0 + timedelta(minutes=n)
        kind = n % 10
        if kind < 5:
            mgr.add_message(session, ("user", "assistant")[n % 2], sentence(rng), created_at=when)
        elif kind < 7:
            result = {"hits": rng.randint(0, 50), "top": [sentence(rng, 2, 6) for _ in range(3)]}
            mgr.record_step(session, sentence(rng, 3, 8), result=result, created_at=when)
        elif kind == 7:
            mgr.record_fact(session, sentence(rng), created_at=when)
        elif kind == 8:
            mgr.record_tool_output(
                session,
                {"rows": [sentence(rng, 2, 5) for _ in range(10)]},
                tool="db",
                created_at=when,
            )
        elif n % 50 == 9:
            mgr.record_decision(session, sentence(rng, 5, 15), created_at=when)
        else:
            mgr.record_error(session, sentence(rng, 3, 10), resolved=True, created_at=when)
    return session


def megabyte_outputs(mgr: SessionManager, rng: random.Random) -> str:
    session = mgr.start_session("Analyse the nightly test logs").id
    for n in range(20):
        rows = [
            {
                "test": f"suite/test_{i}",
                "status": "passed",
                "ms": rng.randint(1, 900),
                "log": sentence(rng, 10, 20),
            }
            for i in range(5_000)
        ]
        mgr.add_message(session, "user", f"Run {n}: what failed?")
        mgr.record_tool_output(session, {"run": n, "rows": rows}, tool="pytest")
    size = len(json.dumps({"run": 0, "rows": rows}))
    print(f"1mb case: each output {size / 1e6:.2f} MB", file=sys.stderr)
    return session


def forget_summaries() -> None:
    """Empty restore's cache of extractive summaries (a cold restore: a new process, or
    outputs never summarised before)."""
    try:
        from memlane.restore import packer
    except ImportError:
        return
    if hasattr(packer, "_SummaryCache"):  # (the library before core/lru.py)
        packer._SUMMARIES = packer._SummaryCache()
    else:
        packer._SUMMARIES.clear()


def forget_views() -> None:
    """Empty what restore keeps of long events besides summaries — their passages' analyses
    and JSON outputs' record views — as a new process starts without them."""
    try:
        from memlane.search.passage_terms import forget_analyses
    except ImportError:
        return
    forget_analyses()
    try:
        from memlane.search.records import forget_record_views
    except ImportError:
        return
    forget_record_views()


def timed(mgr: SessionManager, session: str, query: str | None, runs: int) -> dict[str, float]:
    mgr.restore(session, 4000, query=query)
    times, cpu, cold, new = [], [], [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        mgr.restore(session, 4000, query=query)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    for _ in range(max(5, runs // 5)):
        forget_summaries()
        t0 = time.perf_counter()
        mgr.restore(session, 4000, query=query)
        cold.append((time.perf_counter() - t0) * 1000)
    for _ in range(max(3, runs // 10)):
        forget_summaries()
        forget_views()
        t0 = time.perf_counter()
        mgr.restore(session, 4000, query=query)
        new.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "p50": statistics.median(times),
        "p95": times[int(0.95 * (len(times) - 1))],
        "cpu": statistics.median(cpu),
        "cold": statistics.median(cold),
        "new": statistics.median(new),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hash", action="store_true", help="the hash embedder, not MiniLM")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--profile", nargs="?", const="10k", choices=["10k", "1mb"])
    args = parser.parse_args(argv)
    rng = random.Random(7)
    embedder: Any = HashEmbedder() if args.hash else None
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "latency.db"
        with SessionManager("bench", db, embedder=embedder, background=False) as mgr:
            t0 = time.perf_counter()
            big = ten_thousand(mgr, rng)
            heavy = megabyte_outputs(mgr, rng)
            mgr.flush()
            print(f"recorded and embedded in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            rows = []
            for name, session in (("10k events", big), ("20 x 1 MB outputs", heavy)):
                for label, query in (
                    ("default query", None),
                    ("query", "which database migration failed"),
                    # (names a record ~900 KB into each output)
                    ("a record's name", "status of suite/test_4321"),
                ):
                    lat = timed(mgr, session, query, args.runs)
                    rows.append((name, label, lat))
            print(
                "| session | restore(4000) | p50 ms | p95 ms | CPU p50 ms | cold p50 ms "
                "| new-process p50 ms |"
            )
            print("|---|---|---|---|---|---|---|")
            for name, label, lat in rows:
                print(
                    f"| {name} | {label} | {lat['p50']:.1f} | {lat['p95']:.1f} "
                    f"| {lat['cpu']:.1f} | {lat['cold']:.1f} | {lat['new']:.1f} |"
                )
            if args.profile:
                profile = cProfile.Profile()
                profile.enable()
                target = heavy if args.profile == "1mb" else big
                for _ in range(10):
                    mgr.restore(target, 4000)
                profile.disable()
                pstats.Stats(profile).sort_stats("cumulative").print_stats(25)


if __name__ == "__main__":
    main()
