"""Recall of the vector cache's approximate first passes, on real MiniLM vectors (by hand).

    python bench/quantized_recall.py ../shared/bench/locomo/locomo_dev.json \
        --embed-cache bench/.cache [--sizes 5000 10000 20000 40000]

A big partition is not scanned in float32: its rows are ranked by cheap codes first and only
the best few are scored exactly (``ranking/vectors/quantized.py``). What that can lose is a
row of the exact top k that the codes did not rank among the candidates. This measures it, with the
library's own quantizers, on vectors of real text: the LoCoMo development turns (one, two and
three consecutive turns: the data has ~3k turns) and bench/perf.py's agent sentences, all
embedded with MiniLM; the queries are the LoCoMo development questions. For each corpus size
and k, recall = the share of the exact top k found, averaged over queries, for:

- ``8bit``: the 8-bit pass, ``4 k`` candidates (what partitions of 16k+ rows use);
- ``4bit``: the same with 4-bit codes (what partitions past ``IN_MEMORY_UNDER`` rows keep,
  for a filtered search of fewer than ``BITS_FROM`` rows);
- ``1bit xC``: the 1-bit pass (signs, Hamming distance), ``C · k`` candidates, then the 8-bit
  pass over those, ``4 k`` candidates;
- ``1bit xC 4bit``: the same with the 4-bit pass — the first passes of partitions past
  ``BITS_FROM`` rows.

The data is never part of this repository (LoCoMo is CC BY-NC 4.0): the path is an argument.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import CachedEmbedder, load
from perf import agent_texts

from memlane import MiniLMEmbedder
from memlane.ranking.vectors.quantized import (
    approximate_scores,
    approximate_scores4,
    binarize,
    hamming_candidates,
    quantize,
    quantize4,
)


def corpus(path: Path, size: int) -> tuple[list[str], list[str]]:
    conversations, _ = load(path)
    texts: list[str] = []
    for conv in conversations:
        lines = [turn.content for turn in conv.turns]
        for width in (1, 2, 3):
            texts += [" ".join(lines[i : i + width]) for i in range(len(lines) - width + 1)]
    texts = list(dict.fromkeys(texts))
    if len(texts) < size:
        texts += agent_texts(size - len(texts), seed=11)
    random.Random(5).shuffle(texts)
    questions = [q.text for conv in conversations for q in conv.questions]
    return texts[:size], questions


def recall(found: np.ndarray, exact: np.ndarray) -> float:
    return len(set(found.tolist()) & set(exact.tolist())) / len(exact)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("locomo", type=Path)
    parser.add_argument("--embed-cache", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 10_000, 20_000, 40_000])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 60, 166])
    parser.add_argument("--multiples", type=int, nargs="+", default=[10, 20, 40])
    args = parser.parse_args()
    embed = CachedEmbedder(MiniLMEmbedder(), args.embed_cache)
    texts, questions = corpus(args.locomo, max(args.sizes))
    vectors = np.asarray(embed(texts), np.float32)
    queries = np.asarray(embed(questions), np.float32)
    embed.save()
    for size in args.sizes:
        rows = vectors[:size]
        codes, scales = quantize(rows)
        codes4, scales4 = quantize4(rows)
        signs = np.ascontiguousarray(binarize(codes).T)
        for k in args.ks:
            if 40 * k > size:
                continue
            measured: dict[str, list[float]] = {}
            for query in queries:
                query_signs = binarize(quantize(query[None, :])[0])[0]
                exact = np.argsort(-(rows @ query), kind="stable")[:k]
                rough = approximate_scores(codes, scales, query)
                eight = np.argpartition(-rough, 4 * k)[: 4 * k]
                measured.setdefault("8bit", []).append(recall(eight, exact))
                rough4 = approximate_scores4(codes4, scales4, query)
                four = np.argpartition(-rough4, 4 * k)[: 4 * k]
                measured.setdefault("4bit", []).append(recall(four, exact))
                for multiple in args.multiples:
                    first = hamming_candidates(signs, query_signs, multiple * k)
                    second = approximate_scores(codes[first], scales[first], query)
                    picked = first[np.argpartition(-second, 4 * k)[: 4 * k]]
                    measured.setdefault(f"1bit x{multiple}", []).append(recall(picked, exact))
                    fourth = approximate_scores4(codes4[first], scales4[first], query)
                    picked = first[np.argpartition(-fourth, 4 * k)[: 4 * k]]
                    measured.setdefault(f"1bit x{multiple} 4bit", []).append(recall(picked, exact))
            means = {m: round(float(np.mean(v)), 4) for m, v in measured.items()}
            line = {"size": size, "k": k, **means}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
