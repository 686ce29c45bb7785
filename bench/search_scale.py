"""Search latency at scale, before and after a change, side by side in one run (by hand).

    python bench/search_scale.py STORE.db [--before SRC_DIR] [--build N] [--in-place]

STORE.db is a store built by bench/perf.py (its ``store100k.db``: 100k events, one agent,
replayed real MiniLM vectors). Each side runs in a fresh process on its own copy of the file
(a newer schema would stop the older code), with ``PYTHONPATH`` pointing at that side's
``src``: ``--before`` is another checkout's (``git worktree add /tmp/before <commit>``).
Measured per mode over bench/perf.py's 56 queries (twice each, k = 10), plus 40 long queries
(whole agent texts, ~27 words), 25 questions naming two topics ("did kv cache eviction
affect login page errors after we fixed it?", hybrid) and 28 naming a topic as an identifier
("what happened with kv_cache_eviction after we fixed it?", hybrid): p50 / p95 ms, query embedding
included (every query text is new to the process); the first search (open + what it builds
itself), when the in-memory indexes are ready, restore(4000) of the big session (30 times),
and peak RSS. ``--build N`` first builds the store with bench/perf.py's ``build_store`` (N
events: the growth curve's 10k / 100k / 1M stores); ``--in-place`` measures the file itself,
no copy (each side in turn: their on-disk formats must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHILD = """
import json, resource, statistics, sys, time
sys.path.insert(0, sys.argv[2])
from perf import agent_texts, TOPICS, VERBS
from memlane import SessionManager
t0 = time.perf_counter()
mgr = SessionManager("bench", url="sqlite:///" + sys.argv[1])
mgr.search("warm up the index", k=10)
out = {"first_search_s": round(time.perf_counter() - t0, 2)}
# Since the keyword index builds in the background, wait for it: the timed searches below
# measure the steady state (the first ones would rank with FTS5 meanwhile).
# (the searcher: mgr._writer.searcher since the façade composes its parts; mgr._searcher
# before, so that --before can name an older checkout)
writer = getattr(mgr, "_writer", None)
searcher = writer.searcher if writer is not None else mgr._searcher
keywords = getattr(searcher.store, "_keywords", None)
builder = getattr(keywords, "_builder", None)
if builder is not None:
    builder.join()
out["index_ready_s"] = round(time.perf_counter() - t0, 2)
queries = [f"what happened with {t} after we {v} it?" for t in TOPICS for v in VERBS[:4]]
long = agent_texts(40, seed=9)
# two topics in one question: six or more words, each in a third of the events' contexts
two = [
    f"did {a} affect {b} after we {v} it?"
    for i, a in enumerate(TOPICS) for b, v in zip(TOPICS[i + 1 : i + 3], VERBS[:2])
]
# a topic written as an identifier (snake_case, as in config keys and function names)
named = [
    f"what happened with {t.replace(' ', '_').replace('-', '_')} after we {v} it?"
    for t in TOPICS for v in VERBS[:2]
]
for turn, (label, qs, mode) in enumerate((
    ("hybrid", queries, "hybrid"), ("keyword", queries, "keyword"),
    ("semantic", queries, "semantic"), ("hybrid_long", long, "hybrid"),
    ("keyword_long", long, "keyword"), ("hybrid_two_topics", two, "hybrid"),
    ("hybrid_identifiers", named, "hybrid"),
)):
    lat = []
    for rep in range(2):
        for q in qs:
            t = time.perf_counter()
            # A new text per mode and repetition, so the query embedding is always computed;
            # new by its trailing spaces only: a word added (once, "(hybrid)") changed what
            # the keyword ranking had to walk, and made every query cheaper than its own.
            mgr.search(q + " " * (1 + rep + 2 * turn), k=10, mode=mode)
            lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    out[label] = [round(statistics.median(lat), 2), round(lat[int(len(lat) * 0.95)], 2)]
# restore(4000) of the store's big session (bench/perf.py's build: its first session),
# whose relevant section searches the agent's whole history
big = [s for s in mgr.list_sessions(limit=100_000) if s.goal.startswith("Survey 2026")]
if big:
    rest = []
    for _ in range(30):
        t = time.perf_counter()
        mgr.restore(big[0].id, max_tokens=4000)
        rest.append((time.perf_counter() - t) * 1000)
    rest.sort()
    out["restore_4000"] = [round(statistics.median(rest), 2), round(rest[int(len(rest) * 0.95)], 2)]
out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
mgr.close()
print(json.dumps(out))
"""


def build(path: Path, events: int) -> None:
    """bench/perf.py's store of ``events`` events (a 10k-event session, the rest in side
    sessions, replayed real MiniLM vectors) at ``path``."""
    sys.path.insert(0, str(HERE))
    import perf

    from memlane.embed import MiniLMEmbedder

    sample = MiniLMEmbedder()(perf.agent_texts(2_000, seed=4))
    perf.build_store(perf.sqlite_target(path), events, sample, 10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--build", type=int, help="first build the store, of this many events")
    parser.add_argument(
        "--in-place", action="store_true", help="measure the store itself, not a copy (one side)"
    )
    args = parser.parse_args()
    if args.build:
        build(args.store, args.build)
    sides = [("after", HERE.parent / "src")]
    if args.before:
        sides.insert(0, ("before", args.before))
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in sides:
            copy = args.store if args.in_place else Path(tmp) / f"{name}.db"
            if not args.in_place:
                shutil.copy(args.store, copy)
            env = dict(os.environ, PYTHONPATH=str(src))
            run = subprocess.run(
                [sys.executable, "-c", CHILD, str(copy), str(HERE)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            print(name, json.dumps(json.loads(run.stdout)))
            if not args.in_place:
                copy.unlink()


if __name__ == "__main__":
    main()
