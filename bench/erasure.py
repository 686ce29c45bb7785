"""How long erasing one user takes in a big SQLite store, and what dominates (by hand):

    python bench/erasure.py STORE.db [--events 200]

Copies STORE.db (e.g. the 100k-event store of bench/perf.py) to a temporary folder, adds a
user's session of ``--events`` messages (embedded), then times ``StoreAdmin.erase_user``
and, separately on the same copy, each step of the scrub: FTS5's merge (``optimize``), the
TRUNCATE checkpoint, the snapshot files). The delete transaction is the rest.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from memlane import SessionManager
from memlane.admin import StoreAdmin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("--events", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "copy.db"
        shutil.copy(args.store, db)
        with SessionManager("erasure-bench", db, background=False) as mgr:
            session = mgr.start_session("A user's chat", user_id="u-erase")
            mgr.record_many(
                session.id,
                [
                    {"kind": "message", "role": "user", "content": f"message {i} of the user"}
                    for i in range(args.events)
                ],
            )
            mgr.flush()
        admin = StoreAdmin(db)
        try:
            events = sum(info.events for info in admin.sessions(user="u-erase"))
            store = admin.store
            scrub = store.scrub
            spent: dict[str, float] = {}

            def timed_scrub(partitions: list[str]) -> list[str]:
                started = time.perf_counter()
                notes = scrub(partitions)
                spent["scrub"] = time.perf_counter() - started
                return notes

            store.scrub = timed_scrub  # type: ignore[method-assign]
            started = time.perf_counter()
            receipt = admin.erase_user("u-erase")
            total = time.perf_counter() - started
        finally:
            admin.close()
        size = db.stat().st_size / 1e6
    print(
        f"store {args.store} ({size:.0f} MB): erased {receipt.sessions} session(s), {events} "
        f"event(s) in {total:.2f} s, of which the scrub (FTS5 optimize, TRUNCATE checkpoint, "
        f"snapshot files) {spent['scrub']:.2f} s"
    )


if __name__ == "__main__":
    main()
