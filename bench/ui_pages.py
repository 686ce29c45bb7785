"""Server time of memlane ui's pages on a large store (issue 32: a page of any view in
≤ 150 ms on a 100k-event store; a 100k-event session opens in well under a second).

    python bench/ui_pages.py                      # 100k events in one session + 2,000 sessions
    python bench/ui_pages.py --events 20000       # a quick look
    python bench/ui_pages.py --store ui-100k.db   # build once (kept), measure again later
    python bench/ui_pages.py --store ui-100k.db --pages restore   # only those pages

The store is built through the real write path (``record_many``, 1,000 events a
transaction) with the hash embedder (what the pages cost is what is measured, not MiniLM:
the query embedding of a hybrid search is the only model call a page makes), then embedded.
Each page is requested through Starlette's test client, in process, on a read-only store, as
``memlane ui`` serves it: the time is the server's (routing, the library's reads, rendering),
without a network. First the cold start: the first restore page of this fresh process, then
what is left of ``memlane ui``'s warm-up (``Source.warm_up``: the keyword index, built in
the background) until it is done. Then, per page, the median and p95 of ``--repeat``
requests after one more, and the median CPU time of the process per request (steadier than
wall time on a shared machine; it includes the threads of onnxruntime, which scores
quantised vectors).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from memlane import SessionManager
from memlane.admin import StoreAdmin
from memlane.testing import HashEmbedder
from memlane.ui import Source, create_app
from memlane.ui.security import cookie_name

#: A vocabulary of 3,000 made-up words, drawn with a Zipf-like skew (a few common, most
#: rare), so that a query's words match a few percent of the events, as in real memory.
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
WORDS = sorted({"".join(random.Random(i).choices(_SYLLABLES, k=3)) for i in range(3_200)})[:3_000]
KINDS = ("step", "tool_output", "message", "decision", "fact", "error")


def _word(rng: random.Random) -> str:
    return WORDS[int(len(WORDS) * rng.random() ** 2.5)]


def build(path: Path, events: int, sessions: int) -> None:
    started = time.perf_counter()
    rng = random.Random(32)
    with SessionManager("bench", db_path=path, embedder=HashEmbedder(), background=False) as mgr:
        big = mgr.start_session("The long run: a week of an ops agent", key="big", user_id="u-1")
        batch = []
        for i in range(events):
            kind = KINDS[i % len(KINDS)]
            text = " ".join(_word(rng) for _ in range(12 + i % 20))
            item = {"kind": kind, "content": f"event {i}: {text}"}
            if kind == "message":
                item["role"] = "user" if i % 2 else "assistant"
            if kind == "tool_output":
                item["payload"] = {"rows": [{"n": n, "word": _word(rng)} for n in range(20)]}

            batch.append(item)
            if len(batch) == 1_000:
                mgr.record_many(big.id, batch)
                batch = []
        if batch:
            mgr.record_many(big.id, batch)
        for s in range(sessions):
            small = mgr.start_session(
                f"task {s}: {WORDS[s % len(WORDS)]} {WORDS[(s * 5) % len(WORDS)]}"
            )
            mgr.record_step(
                small.id, step=f"looked at {WORDS[s % len(WORDS)]}", result={"ok": True}
            )
        mgr.remember("u-1", "Runs the night shift", key="shift")
    print(
        f"built {events:,} + {sessions:,} sessions in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    started = time.perf_counter()
    with StoreAdmin(path, embedder=HashEmbedder()) as admin:
        admin.embed_pending()
    print(f"embedded in {time.perf_counter() - started:.0f} s", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--store", type=Path, help="build here if missing, else reuse")
    parser.add_argument(
        "--pages", help="measure only the pages whose name contains this (e.g. 'restore')"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ui-bench-"))
    path = args.store or folder / "ui.db"
    if not path.exists():
        build(path, args.events, args.sessions)
    source = Source(StoreAdmin(path, embedder=HashEmbedder(), read_only=True))
    big = source.session("big")
    query = "+".join((WORDS[40], WORDS[700], WORDS[1500]))  # a common, a rarer, a rare word
    pages = {
        "sessions": "/sessions",
        "sessions, text filter": f"/sessions?q={WORDS[12]}",
        # a text no session holds: the worst case, every session the filter may look at read
        "sessions, text found nowhere": "/sessions?q=no-such-goal",
        "sessions, text found nowhere, all sessions": "/sessions?q=no-such-goal&scan=all",
        "sessions, page 20": "/sessions?page=20",
        "timeline, first page": "/sessions/big",
        "timeline, middle page": f"/sessions/big?page={max(1, big.events // 200)}",
        "timeline, last page": "/sessions/big?page=last",
        "timeline, one kind": "/sessions/big?kind=decision&page=last",
        "search, keyword": f"/search?q={query}&mode=keyword&k=10",
        "search, hybrid": f"/search?q={query}&k=10",
        "search, hybrid, one session": f"/search?q={query}&k=10&session={big.session.id}",
        "restore, 2,000 tokens": "/restore?session=big&budget=2000",
        # a comparison is two requests, one restore each: the page with the first column...
        "restore, 2,000 and 8,000: the page": "/restore?session=big&budget=2000&budget2=8000",
        # ...and the second column, which htmx asks for when the page has loaded
        "restore, 2,000 and 8,000: the second column": (
            "/restore?session=big&budget=2000&budget2=8000&only=2"
        ),
        "user facts": "/users?agent=bench&user=u-1",
        "health": "/health",
    }
    if args.pages:
        pages = {name: url for name, url in pages.items() if args.pages in name}
    token = "bench"
    app = create_app(source, token=token, hosts=["testserver"])
    print(f"{big.events:,} events in the long session; {args.repeat} requests a page\n")
    with TestClient(app) as client:
        client.cookies.set(cookie_name(token), token)
        started = time.perf_counter()
        response = client.get("/restore?session=big&budget=2000")
        assert response.status_code == 200, response.text[-500:]
        first = time.perf_counter() - started
        started = time.perf_counter()
        source.warm_up(wait=600)
        print(
            f"cold start: the first restore page {first * 1000:,.0f} ms; the rest of the "
            f"warm-up (keyword index) {(time.perf_counter() - started) * 1000:,.0f} ms\n"
        )
        print("| page | median ms | p95 ms | CPU median ms |")
        print("|---|---:|---:|---:|")
        for name, url in pages.items():
            # what htmx sends for a fragment (a column, hits); a whole page otherwise
            headers = {"HX-Request": "true"} if "only=" in url else {}
            response = client.get(url, headers=headers)
            assert response.status_code == 200, (url, response.status_code, response.text[-500:])
            times, cpu = [], []
            for _ in range(args.repeat):
                started, started_cpu = time.perf_counter(), time.process_time()
                client.get(url, headers=headers)
                times.append((time.perf_counter() - started) * 1000)
                cpu.append((time.process_time() - started_cpu) * 1000)
            times.sort()
            p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
            print(
                f"| {name} | {statistics.median(times):.1f} | {p95:.1f} "
                f"| {statistics.median(cpu):.1f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
