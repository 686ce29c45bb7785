"""LoCoMo turn-level retrieval: the library's search() against BM25 and dense baselines.

    python bench/locomo.py ../shared/bench/locomo/locomo_dev.json
    python bench/locomo.py PATH --k 1 5 10 20 --out bench/results/locomo-dev.json
    python bench/locomo.py PATH --conversation conv-26 --no-baselines   # one conversation

The data is never part of this repository (LoCoMo is CC BY-NC 4.0): the path is an argument.

Protocol (the shared LoCoMo README's, through the library's public API only):
- one agent per conversation, one session per LoCoMo session (``start_session``), each turn
  one ``message`` event: content ``"Speaker: text"``, the session's date as ``created_at``,
  the speaker in metadata;
- categories 1-4 (adversarial questions are skipped); evidence ids are normalised with
  ``D:?(\\d+):0*(\\d+)``, ids naming no turn are dropped, questions left with none skipped;
- each question is asked as ``mgr.search(question, k=max(k))`` by that conversation's agent
  (no filters); a hit that is not a turn (the session's goal event) simply counts as a miss;
- recall_any@k: 1 if any gold turn is in the top k; recall_all@k: 1 if all are; MRR over the
  top max(k) (0 when no gold turn is there); averaged per category and over all questions;
- search latency: wall time of each ``search()`` call (query embedding included), after one
  untimed warm-up query per agent; p50 / p95 over all questions.

Baselines, on identical input in the same run:
- BM25: rank_bm25 ``BM25Okapi`` over ``"speaker: text"``, lowercase alphanumeric tokens;
- dense: all-MiniLM-L6-v2 (the library's own ONNX embedder), cosine over ``"Speaker: text"``;
- rrf: reciprocal rank fusion (constant 60) of the two, as in the shared README.

``--embed-cache DIR`` (e.g. ``bench/.cache``) keeps every MiniLM vector on disk keyed by its
text, so repeated runs skip the model; query vectors then come from the cache too, so the
latency it reports is NOT representative (it says so). Use it only to iterate on ideas.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from memlane import MiniLMEmbedder, SessionManager

KS = (1, 5, 10, 20)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
_EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_TOKEN = re.compile(r"[a-z0-9]+")

Ranking = list[str | None]  # dia_ids best first; None for a hit that is not a turn


# -- data ------------------------------------------------------------------------------------


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str

    @property
    def content(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class LocomoSession:
    number: int
    date: datetime
    turns: list[Turn]


@dataclass
class Question:
    text: str
    category: int
    gold: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[LocomoSession]
    questions: list[Question] = field(default_factory=list)

    @property
    def turns(self) -> list[Turn]:
        return [turn for session in self.sessions for turn in session.turns]


def parse_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` → an aware UTC datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def normalise_evidence(evidence: Sequence[str], known: set[str]) -> frozenset[str]:
    """The README's clean-up: split, unpad and repair ids; drop ids naming no turn."""
    ids = set()
    for item in evidence:
        for session, turn in _EVIDENCE.findall(str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id in known:
                ids.add(dia_id)
    return frozenset(ids)


def load(path: Path) -> tuple[list[Conversation], dict[str, int]]:
    """Conversations with their category 1-4 questions, and counts of what was skipped."""
    raw = json.loads(path.read_text())
    skipped = {"adversarial": 0, "no_evidence": 0}
    conversations = []
    for item in raw:
        conv = item["conversation"]
        sessions = []
        for key in conv:
            match = _SESSION_KEY.match(key)
            if not match or not conv[key]:
                continue
            number = int(match.group(1))
            turns = [
                Turn(
                    f"D{int(_EVIDENCE.match(t['dia_id']).group(1))}:"  # type: ignore[union-attr]
                    f"{int(_EVIDENCE.match(t['dia_id']).group(2))}",  # type: ignore[union-attr]
                    t["speaker"],
                    t["text"],
                )
                for t in conv[key]
            ]
            sessions.append(LocomoSession(number, parse_date(conv[f"{key}_date_time"]), turns))
        sessions.sort(key=lambda s: s.number)
        c = Conversation(item["sample_id"], (conv["speaker_a"], conv["speaker_b"]), sessions)
        known = {turn.dia_id for turn in c.turns}
        for qa in item["qa"]:
            category = int(qa["category"])
            if category not in CATEGORIES:
                skipped["adversarial"] += 1
                continue
            gold = normalise_evidence(qa.get("evidence") or [], known)
            if not gold:
                skipped["no_evidence"] += 1
                continue
            c.questions.append(Question(str(qa["question"]), category, gold))
        conversations.append(c)
    return conversations, skipped


# -- embeddings ------------------------------------------------------------------------------


class CachedEmbedder:
    """MiniLM with an on-disk cache keyed by text (for iterating on non-embedding ideas).

    It presents MiniLM's name, dimension and fingerprint, since its vectors are MiniLM's.
    """

    def __init__(self, base: MiniLMEmbedder, directory: Path) -> None:
        self.base = base
        self.name = base.name
        self.dim = base.dim
        self.fingerprint = base.fingerprint
        self.path = directory / "minilm-vectors.npz"
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}
        self.dirty = False
        if self.path.exists():
            with np.load(self.path) as data:
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def __call__(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        keys = [self.key(text) for text in texts]
        missing = [i for i, key in enumerate(keys) if key not in self.vectors]
        if missing:
            fresh = self.base([texts[i] for i in missing])
            for i, vector in zip(missing, fresh, strict=True):
                self.vectors[keys[i]] = vector
            self.dirty = True
        return np.stack([self.vectors[key] for key in keys])

    def save(self) -> None:
        if self.dirty:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self.vectors))
            np.savez(self.path, keys=keys, vectors=np.stack(list(self.vectors.values())))
            self.dirty = False


# -- retrievers ------------------------------------------------------------------------------


@dataclass
class Run:
    rankings: list[Ranking]
    latencies_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0


def run_library(
    conversations: Sequence[Conversation],
    depth: int,
    embedder: Any,
    workdir: Path,
    search: Callable[[SessionManager, str, int], list[Any]] | None = None,
    store: dict[str, Any] | None = None,
) -> Run:
    """Record every conversation through the public API, then ask every question.

    ``store`` names another backend (``{"url": ..., "index": ...}``; default a SQLite file).
    """
    target = store or {"db_path": workdir / "locomo.db"}
    search = search or (lambda mgr, query, k: mgr.search(query, k=k))
    rankings: list[Ranking] = []
    latencies: list[float] = []
    started = time.perf_counter()
    for conv in conversations:
        with SessionManager(
            agent_id=f"locomo-{conv.sample_id}", embedder=embedder, background=False, **target
        ) as mgr:
            by_event: dict[str, str] = {}
            for session in conv.sessions:
                opened = mgr.start_session(
                    goal=f"Conversation {conv.sample_id}, part {session.number}",
                    metadata={"speakers": list(conv.speakers)},
                )
                for turn in session.turns:
                    event = mgr.record(
                        opened.id,
                        "message",
                        turn.content,
                        metadata={"speaker": turn.speaker},
                        created_at=session.date,
                    )
                    by_event[event.id] = turn.dia_id
            mgr.flush()
            search(mgr, "warm-up query", depth)
            for question in conv.questions:
                t0 = time.perf_counter()
                hits = search(mgr, question.text, depth)
                latencies.append((time.perf_counter() - t0) * 1000)
                rankings.append([by_event.get(hit.event.id) for hit in hits])
    return Run(rankings, latencies, time.perf_counter() - started)


def bm25_tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def run_bm25(conversations: Sequence[Conversation]) -> Run:
    """Every turn ranked (scoring truncates; RRF fuses the full rankings)."""
    from rank_bm25 import BM25Okapi

    rankings: list[Ranking] = []
    latencies: list[float] = []
    for conv in conversations:
        turns = conv.turns
        index = BM25Okapi([bm25_tokens(turn.content) for turn in turns])
        for question in conv.questions:
            t0 = time.perf_counter()
            scores = index.get_scores(bm25_tokens(question.text))
            order = np.argsort(-scores, kind="stable")
            latencies.append((time.perf_counter() - t0) * 1000)
            rankings.append([turns[i].dia_id for i in order])  # all turns: fusion needs them
    return Run(rankings, latencies)


def run_dense(conversations: Sequence[Conversation], embed: Any) -> Run:
    """Every turn ranked by cosine."""
    rankings: list[Ranking] = []
    latencies: list[float] = []
    for conv in conversations:
        turns = conv.turns
        matrix = np.asarray(embed([turn.content for turn in turns]), dtype=np.float32)
        for question in conv.questions:
            t0 = time.perf_counter()
            query = np.asarray(embed([question.text]), dtype=np.float32)[0]
            order = np.argsort(-(matrix @ query), kind="stable")
            latencies.append((time.perf_counter() - t0) * 1000)
            rankings.append([turns[i].dia_id for i in order])
    return Run(rankings, latencies)


def fuse(a: Run, b: Run, constant: int = 60) -> Run:
    """Reciprocal rank fusion of two full rankings."""
    rankings: list[Ranking] = []
    for first, second in zip(a.rankings, b.rankings, strict=True):
        scores: dict[str, float] = {}
        for ranking in (first, second):
            for rank, dia_id in enumerate(ranking, start=1):
                if dia_id is not None:
                    scores[dia_id] = scores.get(dia_id, 0.0) + 1.0 / (constant + rank)
        rankings.append([d for d, _ in sorted(scores.items(), key=lambda p: -p[1])])
    return Run(rankings)


# -- metrics ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values), q))


def score(rankings: Sequence[Ranking], questions: Sequence[Question], ks: Sequence[int]) -> dict:
    """Per category and overall: n, any@k, all@k, mrr."""
    groups: dict[str, list[tuple[Ranking, Question]]] = {"overall": []}
    depth = max(ks)
    for ranking, question in zip(rankings, questions, strict=True):
        ranking = ranking[:depth]
        groups.setdefault(CATEGORIES[question.category], []).append((ranking, question))
        groups["overall"].append((ranking, question))
    out: dict[str, dict[str, float]] = {}
    for name in [*CATEGORIES.values(), "overall"]:
        pairs = groups.get(name, [])
        if not pairs:
            continue
        row: dict[str, float] = {"n": len(pairs)}
        for k in ks:
            row[f"any@{k}"] = statistics.fmean(bool(set(r[:k]) & q.gold) for r, q in pairs)
            row[f"all@{k}"] = statistics.fmean(q.gold <= set(r[:k]) for r, q in pairs)
        row["mrr"] = statistics.fmean(
            next((1.0 / i for i, d in enumerate(r, start=1) if d in q.gold), 0.0) for r, q in pairs
        )
        out[name] = row
    return out


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def markdown(result: dict[str, Any]) -> str:
    ks = result["ks"]
    lines = [
        f"LoCoMo turn retrieval — {result['data']} — n = {result['questions']} questions "
        f"(categories 1-4) — commit {result['commit']}",
        f"machine: {result['machine']['cpu']}, {result['machine']['cores']} cores, "
        f"Python {result['machine']['python']}",
        "",
        "| retriever | category | n | "
        + " | ".join(f"any@{k}" for k in ks)
        + " | "
        + " | ".join(f"all@{k}" for k in ks)
        + " | MRR |",
        "|---|---|---|" + "---|" * (2 * len(ks) + 1),
    ]
    for name, scores in result["retrievers"].items():
        for category, row in scores["scores"].items():
            cells = [f"{row[f'any@{k}']:.3f}" for k in ks] + [f"{row[f'all@{k}']:.3f}" for k in ks]
            label = f"**{category}**" if category == "overall" else category
            lines.append(
                f"| {name} | {label} | {int(row['n'])} | "
                + " | ".join(cells)
                + f" | {row['mrr']:.3f} |"
            )
    lat = result["retrievers"]["library"]["latency_ms"]
    lines += [
        "",
        f"library search() latency: p50 {lat['p50']:.2f} ms, p95 {lat['p95']:.2f} ms "
        f"(wall time per call, query embedding included"
        + (", VECTORS FROM THE EMBED CACHE: not representative" if result["embed_cache"] else "")
        + ")",
    ]
    return "\n".join(lines)


def evaluate(
    path: Path,
    ks: Sequence[int] = KS,
    embed_cache: Path | None = None,
    baselines: bool = True,
    search: Callable[[SessionManager, str, int], list[Any]] | None = None,
    conversations_only: Sequence[str] | None = None,
    store: dict[str, Any] | None = None,
) -> dict[str, Any]:
    conversations, skipped = load(path)
    if conversations_only:
        conversations = [c for c in conversations if c.sample_id in conversations_only]
    questions = [q for conv in conversations for q in conv.questions]
    depth = max(ks)
    base = MiniLMEmbedder()
    cached = CachedEmbedder(base, embed_cache) if embed_cache else None
    embedder: Any = cached or base
    runs: dict[str, Run] = {}
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        runs["library"] = run_library(conversations, depth, embedder, Path(tmp), search, store)
    if baselines:
        runs["bm25"] = run_bm25(conversations)
        runs["dense"] = run_dense(conversations, embedder)
        runs["rrf(bm25,dense)"] = fuse(runs["bm25"], runs["dense"])
    if cached:
        cached.save()
    result: dict[str, Any] = {
        "data": path.name,
        "commit": git_commit(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "ks": list(ks),
        "questions": len(questions),
        "skipped": skipped,
        "embed_cache": embed_cache is not None,
        "retrievers": {},
    }
    for name, run in runs.items():
        entry: dict[str, Any] = {"scores": score(run.rankings, questions, ks)}
        if run.latencies_ms:
            entry["latency_ms"] = {
                "p50": percentile(run.latencies_ms, 50),
                "p95": percentile(run.latencies_ms, 95),
            }
        if run.seconds:
            entry["seconds"] = run.seconds
        result["retrievers"][name] = entry
    return result


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="a LoCoMo JSON file (e.g. locomo_dev.json)")
    parser.add_argument("--k", type=int, nargs="+", default=list(KS), help="cut-offs")
    parser.add_argument("--out", type=Path, help="JSON result file (default: bench/results/)")
    parser.add_argument("--embed-cache", type=Path, help="cache MiniLM vectors here (iterating)")
    parser.add_argument("--no-baselines", action="store_true", help="score the library only")
    parser.add_argument(
        "--url", help="run the library on this store URL (e.g. postgresql://...?schema=locomo)"
    )
    parser.add_argument("--index", help="and keep its vectors here (e.g. chroma:///dir)")
    parser.add_argument(
        "--recency", action="store_true", help='search with recency="default" (episodic decay)'
    )
    parser.add_argument(
        "--conversation",
        action="append",
        metavar="SAMPLE_ID",
        help="only this conversation (e.g. conv-26; repeatable): tests/test_locomo_slice.py's",
    )
    args = parser.parse_args(argv)
    if not args.path.is_file():
        sys.exit(f"{args.path} is not a file; pass the path of a LoCoMo JSON file.")
    store = {"url": args.url, "index": args.index} if args.url else None
    result = evaluate(
        args.path,
        sorted(set(args.k)),
        args.embed_cache,
        baselines=not args.no_baselines,
        store=store,
        search=(lambda mgr, query, k: mgr.search(query, k=k, recency="default"))
        if args.recency
        else None,
        conversations_only=args.conversation,
    )
    report(result, args.out, "locomo", markdown)


def report(
    result: dict[str, Any], out: Path | None, name: str, render: Callable[[dict[str, Any]], str]
) -> None:
    """Write ``result`` as JSON (default: bench/results/<name>-<commit>.json) and print it."""
    out = out or Path(__file__).resolve().parent / "results" / f"{name}-{result['commit']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))
    print(f"\nwritten: {out}")


if __name__ == "__main__":
    main()
