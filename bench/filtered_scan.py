"""The vector scan of a filter that keeps most of a partition (a session that is most of
its agent's memory: restore's semantic half on a 100k-event session), timed alone.

    python bench/filtered_scan.py [--rows 100000] [--share 0.98] [--k 330] [--repeat 30]

A partition of random unit vectors (384 dimensions) is built in memory, as the vector cache
holds it; the scan of the chosen rows (``_Partition.scores``) is timed ``--repeat`` times
and its median printed. Run it from two checkouts (``PYTHONPATH=OTHER/src``) to compare.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from memlane.ranking.vectors.cache import _Partition
from memlane.ranking.vectors.quantized import binarize, quantize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.98)
    parser.add_argument("--k", type=int, default=330, help="restore's semantic depth")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(args.rows, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    part = _Partition(384)
    part.reserve(args.rows, exact=True)
    codes, scales = quantize(vectors)
    part.matrix[: args.rows], part.codes[: args.rows], part.scales[: args.rows] = (
        vectors,
        codes,
        scales,
    )
    part.signs[:, : args.rows] = binarize(codes).T
    part.vids[: args.rows] = part.seqs[: args.rows] = np.arange(1, args.rows + 1)
    part.size = args.rows
    rows = np.flatnonzero(rng.random(args.rows) < args.share)
    query = vectors[5] + 0.1 * rng.normal(size=384).astype(np.float32)
    query /= np.linalg.norm(query)
    times = []
    for _ in range(args.repeat + 1):
        started = time.perf_counter()
        part.scores(rows, query, args.k, lambda vids, dim: vectors[vids - 1])
        times.append(time.perf_counter() - started)
    print(
        f"{args.rows:,} rows, {len(rows):,} chosen, k {args.k}: "
        f"p50 {statistics.median(times[1:]) * 1000:.1f} ms over {args.repeat}"
    )


if __name__ == "__main__":
    main()
