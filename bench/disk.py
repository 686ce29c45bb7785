"""Where a SQLite store's bytes go, per event, with the recall they buy (run by hand).

    python bench/disk.py PATH/TO/locomo_dev.json --replicas 7 --embed-cache bench/.cache \
        [--workdir DIR] [--json OUT]

LoCoMo's conversations are recorded ``--replicas`` times into **one** agent's sessions (one
partition, as an agent that has talked a lot: 7 replicas of the development half are ~20k
events), through the public API with the background worker on, as a user would. Then every
question is searched (``k = 10``, the agent's whole memory), which also builds the search
caches and writes their snapshots as a long-lived process would; then the manager closes.

Reported: bytes per event of each table and index (SQLite's ``dbstat``), grouped as the log
(events, sessions and their indexes), vectors, the keyword index (FTS5) and the rest; the
WAL; the search caches' snapshot files beside the database (``<db>.memlane-cache/``); the
total. Next to it, any@10 (an answering turn of the question's conversation, any replica,
in the top 10), so a change that saves bytes shows what it costs in recall. Vectors come
from the MiniLM cache when ``--embed-cache`` is given (the same vectors as the model's).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from locomo import CachedEmbedder, Conversation, load

from memlane import MiniLMEmbedder, SessionManager

GROUPS = {
    "vectors": ("vectors", "sqlite_autoindex_vectors_1", "vectors_by_partition"),
    "keyword index": (
        "events_fts_data",
        "events_fts_idx",
        "events_fts_docsize",
        "events_fts_content",
        "events_fts_config",
        "keyword_text",  # (0016: the whole texts of flattened outputs, the only copy kept)
    ),
    "outbox": ("outbox", "outbox_by_partition", "deleted_vectors"),
}


def ingest(
    mgr: SessionManager, conversations: list[Conversation], replicas: int
) -> dict[str, tuple[str, str]]:
    """Record every conversation ``replicas`` times; event id → (sample id, dia id)."""
    turns: dict[str, tuple[str, str]] = {}
    for replica in range(replicas):
        for conv in conversations:
            for part in conv.sessions:
                opened = mgr.start_session(goal=f"{conv.sample_id} part {part.number} ({replica})")
                for turn in part.turns:
                    event = mgr.record(opened.id, "message", turn.content, created_at=part.date)
                    turns[event.id] = (conv.sample_id, turn.dia_id)
    return turns


def sizes(db: Path) -> dict[str, Any]:
    """Bytes by table and index, by group, of the WAL and of the snapshot folder."""
    conn = sqlite3.connect(db)
    try:
        events = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        tables = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    finally:
        conn.close()
    grouped: dict[str, int] = {}
    for name, size in tables.items():
        group = next((g for g, names in GROUPS.items() if name in names), "log and the rest")
        grouped[group] = grouped.get(group, 0) + size
    wal = Path(str(db) + "-wal")
    folder = Path(str(db) + ".memlane-cache")
    snapshots: dict[str, int] = {}
    if folder.is_dir():
        for entry in folder.iterdir():
            kind = entry.name.split("-")[0]
            snapshots[kind] = snapshots.get(kind, 0) + entry.stat().st_size
    total = (
        os.path.getsize(db) + (wal.stat().st_size if wal.exists() else 0) + sum(snapshots.values())
    )
    return {
        "events": events,
        "file": os.path.getsize(db),
        "wal": wal.stat().st_size if wal.exists() else 0,
        "tables": tables,
        "groups": grouped,
        "snapshots": snapshots,
        "total": total,
    }


def run(path: Path, replicas: int, embedder: Any, workdir: Path) -> dict[str, Any]:
    conversations, _ = load(path)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "disk.db"
    for stale in workdir.glob("disk.db*"):
        if stale.is_dir():
            for f in stale.iterdir():
                f.unlink()
            stale.rmdir()
        else:
            stale.unlink()
    started = time.perf_counter()
    with SessionManager(agent_id="disk", db_path=db, embedder=embedder) as mgr:
        turns = ingest(mgr, conversations, replicas)
        mgr.flush()
        ingest_s = time.perf_counter() - started
        found = []
        for conv in conversations:
            for question in conv.questions:
                hits = mgr.search(question.text, k=10)
                found.append(
                    any(
                        turns.get(hit.event.id, ("", ""))[0] == conv.sample_id
                        and turns[hit.event.id][1] in question.gold
                        for hit in hits
                    )
                )
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    result = sizes(db)
    result.update(
        replicas=replicas,
        questions=len(found),
        any_at_10=statistics.fmean(found),
        ingest_s=round(ingest_s, 1),
    )
    return result


def table(result: dict[str, Any]) -> str:
    n = result["events"]
    rows = [("what", "KiB", "bytes / event")]
    for group, size in sorted(result["groups"].items(), key=lambda kv: -kv[1]):
        rows.append((f"database: {group}", f"{size / 1024:,.0f}", f"{size / n:,.0f}"))
    rows.append(("database: WAL", f"{result['wal'] / 1024:,.0f}", f"{result['wal'] / n:,.0f}"))
    for kind, size in sorted(result["snapshots"].items()):
        rows.append((f"snapshots: {kind}", f"{size / 1024:,.0f}", f"{size / n:,.0f}"))
    rows.append(("total", f"{result['total'] / 1024:,.0f}", f"{result['total'] / n:,.0f}"))
    width = max(len(r[0]) for r in rows)
    lines = [f"{a:<{width}}  {b:>9}  {c:>13}" for a, b, c in rows]
    lines.append(
        f"{n:,} events ({result['replicas']} replicas), any@10 {result['any_at_10']:.3f} "
        f"over {result['questions']} questions, ingest {result['ingest_s']} s"
    )
    detail = sorted(result["tables"].items(), key=lambda kv: -kv[1])
    lines.append("largest: " + ", ".join(f"{name} {size / n:,.0f}" for name, size in detail[:8]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="locomo_dev.json")
    parser.add_argument("--replicas", type=int, default=7)
    parser.add_argument("--embed-cache", type=Path)
    parser.add_argument("--workdir", type=Path, default=Path("bench/.disk"))
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    base = MiniLMEmbedder()
    embedder = CachedEmbedder(base, args.embed_cache) if args.embed_cache else base
    result = run(args.path, args.replicas, embedder, args.workdir)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
