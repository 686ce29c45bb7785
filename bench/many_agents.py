"""One process serving many agents of one store (issue 34 item 3): first search per agent,
steady search latency and memory, with the process's cache limit and without it.

    python bench/many_agents.py STORE --build [--agents 1000 --events 1000]
    python bench/many_agents.py STORE [--url postgresql://...] [--limits 1GB 64MB none]
        [--before SRC_DIR] [--steady 3000]

``--build`` writes ``agents`` agents of ``events`` events each (one session an agent, the
sentences of bench/perf.py with real MiniLM vectors replayed from a sample of 2,000: building
a million events through the model would take hours here, and search latency does not depend
on which real vectors the rows hold). ``--url`` builds and measures a PostgreSQL store instead
of the SQLite file ``STORE``.

Then, for each limit (``MEMLANE_CACHE_LIMIT``) and side (``--before``: another checkout's
``src``, whose managers each open their own engine), a fresh process opens one manager per
agent (``background=True``, as a server would), searches each agent once in a shuffled order
(its *first search*: its partitions are read then), and then searches random agents
``--steady`` times. Reported: manager opening time, first-search and steady p50 / p95 (ms,
hybrid, k = 10), peak and final RSS (MB), worker threads, and the caches' bytes against the
limit with the partitions dropped to keep it, and the keyword snapshot files the run left
beside the store (``--keep-snapshots``: the next run starts with them, as a second process
on the store would).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sides import run_child, sides  # noqa: E402

CHILD = r"""
import json, os, random, sys, threading, time
sys.path.insert(0, sys.argv[4])
import numpy as np
from perf import ReplayEmbedder, agent_texts
from sides import memory_mb as status
import memlane
from memlane import MiniLMEmbedder, SessionManager

target, agents, steady = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sample = np.load(sys.argv[5])
embedder = ReplayEmbedder(sample, MiniLMEmbedder().name)


def pct(values, q):
    return round(float(np.percentile(np.asarray(values), q)), 2)

queries = agent_texts(400, seed=9)
rng = random.Random(7)
start = time.perf_counter()
managers = [SessionManager(f"agent-{i:04d}", embedder=embedder, **target) for i in range(agents)]
opened = time.perf_counter() - start
order = list(range(agents))
rng.shuffle(order)
first = []
for i in order:
    t = time.perf_counter()
    managers[i].search(rng.choice(queries), k=10)
    first.append((time.perf_counter() - t) * 1000)
after_first = status()
lat = []
for _ in range(steady):
    mgr = managers[rng.randrange(agents)]
    t = time.perf_counter()
    mgr.search(rng.choice(queries), k=10)
    lat.append((time.perf_counter() - t) * 1000)
result = {
    "open_s": round(opened, 2),
    "first_p50": pct(first, 50), "first_p95": pct(first, 95),
    "steady_p50": pct(lat, 50), "steady_p95": pct(lat, 95),
    "rss_after_first": after_first["VmRSS"], "peak_rss": status()["VmHWM"],
    "rss_end": status()["VmRSS"],
    "workers": sum(t.name == "session-manager-indexer" for t in threading.enumerate()),
}
usage = getattr(memlane, "cache_usage", None)
if usage is not None:
    u = usage()
    result.update(cache_mb=round(u.used / 2**20, 1), partitions=u.partitions, dropped=u.dropped)
for mgr in managers:
    mgr.close()
print(json.dumps(result))
"""


def target_of(store: Path, url: str | None) -> dict[str, Any]:
    return {"url": url} if url else {"db_path": str(store)}


def build(target: dict[str, Any], agents: int, events: int, sample_path: Path) -> None:
    import numpy as np
    from perf import ReplayEmbedder, agent_texts

    from memlane import MiniLMEmbedder, SessionManager

    if not sample_path.exists():
        np.save(sample_path, MiniLMEmbedder()(agent_texts(2_000, seed=4)))
    embedder = ReplayEmbedder(np.load(sample_path), MiniLMEmbedder().name)
    texts = agent_texts(events * 10, seed=2)
    rng = random.Random(1)
    for a in range(agents):
        with SessionManager(f"agent-{a:04d}", embedder=embedder, background=False, **target) as mgr:
            session = mgr.start_session(f"agent {a}'s long task")
            picked = rng.sample(range(len(texts)), events)
            items = [
                {"kind": "fact" if i % 3 else "message", "content": texts[i], "role": "user"}
                if i % 3 == 0
                else {"kind": "fact", "content": texts[i]}
                for i in picked
            ]
            for start in range(0, events, 500):
                mgr.record_many(session.id, items[start : start + 500])
            mgr.flush()
        if a % 100 == 99:
            print(f"built {a + 1} agents", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path, help="the SQLite file (and the vector sample beside)")
    parser.add_argument("--url", help="a PostgreSQL store instead of the SQLite file")
    parser.add_argument(
        "--postgres", action="store_true", help="start a throw-away PostgreSQL (pgserver) in STORE"
    )
    parser.add_argument("--build", action="store_true")
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--limits", nargs="+", default=["1GB", "64MB", "none"])
    parser.add_argument("--steady", type=int, default=3000)
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument(
        "--keep-snapshots",
        action="store_true",
        help="start each run with the keyword snapshot files earlier runs left (default: "
        "removed, so that every run starts as the store's first process)",
    )
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.postgres:
            sys.path.insert(0, str(HERE.parent))
            from tests.servers import postgres_server

            args.url = stack.enter_context(postgres_server())
        measure(args)


def measure(args: argparse.Namespace) -> None:
    target = target_of(args.store, args.url)
    sample = args.store.with_suffix(".sample.npy")
    if args.build:
        build(target, args.agents, args.events, sample)
    # each limit on each side, the sides alternating (code from before the limit existed
    # ignores MEMLANE_CACHE_LIMIT: its rows then repeat one figure)
    runs = [(name, src, limit) for limit in args.limits for name, src in sides(args.before)]
    folder = args.store.parent / f"{args.store.name}.memlane-cache"
    for name, src, limit in runs:
        os.environ["MEMLANE_CACHE_LIMIT"] = limit
        if not args.keep_snapshots:  # (each run starts as the first process on the store)
            for path in [*folder.glob("keywords-*"), *folder.glob("vectors-*")]:
                path.unlink()
        try:
            found = run_child(
                src, CHILD, json.dumps(target), args.agents, args.steady, HERE, sample
            )
        except subprocess.CalledProcessError as failed:  # (say why, go on with the rest)
            found = {"failed": failed.stderr.strip().splitlines()[-1][:300]}
        saved = len([*folder.glob("keywords-*"), *folder.glob("vectors-*")])
        print(json.dumps({"side": name, "limit": limit, **found, "snapshots": saved}), flush=True)


if __name__ == "__main__":
    main()
