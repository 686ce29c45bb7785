"""The speed targets the test suite used to assert with a clock, measured here (by hand).

    python bench/speed_targets.py            # every figure (the real MiniLM for three)
    python bench/speed_targets.py --no-model # without the model's weights

Issue 29: timed assertions failed on a loaded 2-core machine, so the tests now check the work
done (what the tokenizer is given, what is read, which thread runs the store) and keep a
clock only as a hang guard. The figures themselves are measured here, each the median of
``--runs`` after one untimed warm-up, against the bound the tests once asserted:

- ``summarize_text`` of a 6 MB text into 2,000 tokens (tests/test_summarize.py): < 100 ms;
- ``HashEmbedder`` on 20,000 short texts (tests/test_embed.py): >= 20,000 texts/s;
- the event loop's worst stall while ``AsyncSessionManager.restore`` runs (tests/test_async.py,
  tests/event_loop.py): < 100 ms;
- MiniLM on a 1 MB text (tests/test_embed.py): < 2 s; its fingerprint: < 0.5 s;
- ``memlane demo`` with the real model, a process of its own (tests/test_cli_processes.py):
  < 30 s (one run).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from memlane import AsyncSessionManager, SessionManager
from memlane.testing import HashEmbedder
from memlane.text.shrink import summarize_text
from memlane.text.tokens import tokenizer_for


def median_seconds(work: Callable[[], object], runs: int) -> float:
    work()  # warm-up: tokenizers, caches, the model
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def summarize_6mb(runs: int) -> float:
    text = "token " * 1_000_000
    count = tokenizer_for("gpt-4o").count
    return median_seconds(lambda: summarize_text(text, 2_000, count), runs)


def hash_embedder_rate(runs: int) -> float:
    rng = random.Random(3)
    words = ["agent", "tool", "call", "failed", "retry", "deploy", "user", "cache", "token"]
    texts = [" ".join(rng.choices(words, k=rng.randint(5, 15))) for _ in range(20_000)]
    embed = HashEmbedder()
    return len(texts) / median_seconds(lambda: embed(texts), runs)


def loop_stall_during_restores(runs: int) -> float:
    """The loop's worst stall during 5 restores (median of ``runs`` rounds)."""
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "s.db"
        with SessionManager("a", db, embedder=HashEmbedder(), background=False) as sync:
            session = sync.start_session("A long session")
            for i in range(1500):
                role = "user" if i % 2 else "assistant"
                sync.add_message(session.id, role, f"turn {i} about topic {i % 40}")

        async def rounds() -> list[float]:
            async with AsyncSessionManager(
                "a", db, embedder=HashEmbedder(), background=False
            ) as mgr:
                await mgr.restore(session.id, 500)  # warm-up

                async def restores() -> None:
                    for query in ("topic 3", "topic 17", "turn 1200", None, "topic 39"):
                        await mgr.restore(session.id, 32000, query=query)

                return [await worst_stall(restores) for _ in range(runs)]

        return statistics.median(asyncio.run(rounds()))


async def worst_stall(work: Callable[[], Awaitable[object]]) -> float:
    """The longest the running loop went without running a 5 ms ticker while ``work()`` ran."""
    marks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            marks.append(time.perf_counter())
            await asyncio.sleep(0.005)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    try:
        await work()
    finally:
        done.set()
        await tick
    return max((b - a for a, b in itertools.pairwise(marks)), default=0.0) - 0.005


def minilm_1mb(runs: int) -> float:
    from memlane import MiniLMEmbedder

    embedder = MiniLMEmbedder()
    huge = ("The build log repeats the same warning about deprecated flags. " * 20_000)[:1_000_000]
    return median_seconds(lambda: embedder([huge]), runs)


def minilm_fingerprint(runs: int) -> float:
    from memlane import MiniLMEmbedder

    folder = MiniLMEmbedder().model_dir
    return median_seconds(lambda: MiniLMEmbedder(folder).fingerprint, runs)


def demo_seconds() -> float:
    env = {key: value for key, value in os.environ.items() if key != "MEMLANE_EMBEDDER"}
    with tempfile.TemporaryDirectory() as folder:
        env["TMPDIR"] = folder
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "memlane", "demo"], env=env, check=True, capture_output=True
        )
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure")
    parser.add_argument("--no-model", action="store_true", help="skip the MiniLM figures")
    args = parser.parse_args()
    rows: list[tuple[str, float, str, bool]] = []
    ms = summarize_6mb(args.runs) * 1000
    rows.append(("summarize_text, 6 MB -> 2,000 tokens", ms, "ms (< 100)", ms < 100))
    rate = hash_embedder_rate(args.runs)
    rows.append(("HashEmbedder, 20k short texts", rate, "texts/s (>= 20,000)", rate >= 20_000))
    ms = loop_stall_during_restores(args.runs) * 1000
    rows.append(("event loop's worst stall, 5 restores", ms, "ms (< 100)", ms < 100))
    if not args.no_model:
        seconds = minilm_1mb(args.runs)
        rows.append(("MiniLM, one 1 MB text", seconds, "s (< 2)", seconds < 2))
        ms = minilm_fingerprint(args.runs) * 1000
        rows.append(("MiniLM fingerprint, fresh embedder", ms, "ms (< 500)", ms < 500))
        seconds = demo_seconds()
        rows.append(("memlane demo, real model (one run)", seconds, "s (< 30)", seconds < 30))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for name, value, unit, ok in rows:
        print(f"{name:42} {value:12,.1f} {unit:22} {'ok' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
