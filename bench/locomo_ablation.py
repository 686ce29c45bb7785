"""The ablation behind the search defaults: each idea alone against the previous default, then
the kept combination, all on the LoCoMo protocol of bench/locomo.py.

    python bench/locomo_ablation.py PATH/TO/locomo_dev.json --embed-cache bench/.cache

Unlike bench/locomo.py this script reaches into private settings (module constants of
``memlane.search.searcher`` and ``memlane.ranking.keyword.terms``, and the text of the
``0002_keyword_context`` migration) to switch single ideas on and off; the scoring itself
still goes through ``SessionManager.search``. Each variant builds a fresh database.
Latency is left out (use bench/locomo.py for that): with ``--embed-cache`` the query vectors
come from the cache.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import locomo

from memlane import SessionManager
from memlane.ranking.keyword import terms as keyword_module
from memlane.search import searcher as search_module
from memlane.store import _migrations, sqlite

_NAME, _CONTEXT_SQL = _migrations.MIGRATIONS[1]
_EXPRESSION_START = _CONTEXT_SQL.index("SELECT e.seq, e.content,") + len("SELECT e.seq, e.content,")
_EXPRESSION_END = _CONTEXT_SQL.index("FROM events e;")
# The view's context expression, in order: 2nd previous, previous, date, next, 2nd next.
_PARTS = dict(
    zip(
        ("previous2", "previous", "date", "next", "next2"),
        (
            part.strip()
            for part in _CONTEXT_SQL[_EXPRESSION_START:_EXPRESSION_END].split("|| char(10)")
        ),
        strict=True,
    )
)
_PARTS = {name: part.removeprefix("||").strip() for name, part in _PARTS.items()}
ALL = tuple(_PARTS)


def _context_sql(parts: tuple[str, ...]) -> str:
    """The migration with only some parts of the keyword context."""
    expression = " || char(10) || ".join(_PARTS[name] for name in parts) if parts else "''"
    return (
        _CONTEXT_SQL[:_EXPRESSION_START]
        + "\n            "
        + expression
        + "\n        "
        + _CONTEXT_SQL[_EXPRESSION_END:]
    )


# The default before this work: no keyword context, RRF constant 60, equal weights, depth 50,
# no time boost, the stop-word list of ranking/keyword/terms.py.
BASE: dict[str, Any] = {
    "context": (),
    "constant": 60,
    "keyword_weight": 1.0,
    "depth": 50,
    "time_weight": 0.0,
    "stop_words": True,
    "expand": 0.0,
}
KEPT: dict[str, Any] = {
    "context": ALL,
    "constant": 10,
    "keyword_weight": 1.5,
    "depth": 50,
    "time_weight": 1.0,
    "stop_words": True,
    "expand": 0.0,
}
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("previous default (hybrid, RRF k=60)", {}),
    (
        "+ keyword context: 2 events either side",
        {"context": ("previous2", "previous", "next", "next2")},
    ),
    ("+ keyword context: 1 event either side", {"context": ("previous", "next")}),
    ("+ keyword context: previous event only", {"context": ("previous",)}),
    ("+ keyword context: event date only", {"context": ("date",)}),
    ("+ RRF constant 10", {"constant": 10}),
    ("+ keyword weight 1.5", {"keyword_weight": 1.5}),
    ("+ RRF constant 10, keyword weight 1.5", {"constant": 10, "keyword_weight": 1.5}),
    ("+ fusion depth 100", {"depth": 100}),
    ("+ time windows from the query", {"time_weight": 1.0}),
    ("- stop words (every query word kept)", {"stop_words": False}),
    ("+ neighbour expansion of hits (0.2)", {"expand": 0.2}),
    ("kept combination (new default)", KEPT),
    ("kept combination - keyword context", {**KEPT, "context": ()}),
    (
        "kept combination - date in context",
        {**KEPT, "context": ("previous2", "previous", "next", "next2")},
    ),
    ("kept combination, 1 event either side", {**KEPT, "context": ("previous", "date", "next")}),
    ("kept combination - fusion changes", {**KEPT, "constant": 60, "keyword_weight": 1.0}),
    ("kept combination - time windows", {**KEPT, "time_weight": 0.0}),
    ("kept combination - stop words", {**KEPT, "stop_words": False}),
    ("kept combination + neighbour expansion", {**KEPT, "expand": 0.2}),
]


@contextlib.contextmanager
def configured(settings: dict[str, Any]) -> Iterator[None]:
    saved = (
        _migrations.MIGRATIONS,
        search_module._FUSION_CONSTANT,
        search_module._KEYWORD_WEIGHT,
        search_module._FUSION_DEPTH,
        search_module._TIME_WEIGHT,
        keyword_module.STOP_WORDS,
    )
    migrations = (_migrations.MIGRATIONS[0], (_NAME, _context_sql(settings["context"])))
    try:
        sqlite.MIGRATIONS = migrations
        search_module._FUSION_CONSTANT = settings["constant"]
        search_module._KEYWORD_WEIGHT = settings["keyword_weight"]
        search_module._FUSION_DEPTH = settings["depth"]
        search_module._TIME_WEIGHT = settings["time_weight"]
        keyword_module.STOP_WORDS = (
            saved[5] if settings["stop_words"] else frozenset()  # type: ignore[assignment]
        )
        yield
    finally:
        sqlite.MIGRATIONS = saved[0]
        (
            search_module._FUSION_CONSTANT,
            search_module._KEYWORD_WEIGHT,
            search_module._FUSION_DEPTH,
            search_module._TIME_WEIGHT,
        ) = saved[1:5]
        keyword_module.STOP_WORDS = saved[5]


def expanding(weight: float) -> Callable[[SessionManager, str, int], list[Any]]:
    """Neighbour expansion through the public API: each neighbour (same session, adjacent
    in the log) of a hit scores ``weight`` times the hit's fused score, added to its own."""
    timelines: dict[str, list[Any]] = {}

    def search(mgr: SessionManager, query: str, k: int) -> list[Any]:
        hits = mgr.search(query, k=k)
        scores = {hit.event.id: hit.score for hit in hits}
        events = {hit.event.id: hit.event for hit in hits}
        for hit in hits:
            session = hit.event.session_id
            if session not in timelines:
                timelines[session] = mgr.events(session)
            timeline = timelines[session]
            where = next(i for i, e in enumerate(timeline) if e.id == hit.event.id)
            for near in (where - 1, where + 1):
                if 0 <= near < len(timeline):
                    event = timeline[near]
                    events[event.id] = event
                    scores[event.id] = scores.get(event.id, 0.0) + weight * hit.score
        ranked = sorted(scores, key=lambda eid: -scores[eid])[:k]
        return [type(hits[0])(events[eid], scores[eid]) for eid in ranked]

    return search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--embed-cache", type=Path)
    parser.add_argument("--out", type=Path, help="JSON file for the table")
    parser.add_argument("--only", nargs="*", help="run only variants whose name contains this")
    args = parser.parse_args()
    rows = []
    print("| variant | any@1 | any@5 | any@10 | any@20 | all@10 | MRR |")
    print("|---|---|---|---|---|---|---|")
    for name, change in VARIANTS:
        if args.only and not any(part in name for part in args.only):
            continue
        settings = {**BASE, **change}
        with configured(settings):
            search = expanding(settings["expand"]) if settings["expand"] else None
            result = locomo.evaluate(
                args.path, embed_cache=args.embed_cache, baselines=False, search=search
            )
        row = result["retrievers"]["library"]["scores"]["overall"]
        rows.append({"variant": name, "settings": settings, "overall": row})
        print(
            f"| {name} | {row['any@1']:.3f} | {row['any@5']:.3f} | {row['any@10']:.3f} | "
            f"{row['any@20']:.3f} | {row['all@10']:.3f} | {row['mrr']:.3f} |",
            flush=True,
        )
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2, default=list) + "\n")


if __name__ == "__main__":
    main()
