"""bench/search_libraries.py measures what it says: on a small store, memlane's semantic
search and a numpy scan both find the exact top 10 (recall 1.0), and the libraries that are
not installed are said to be missing rather than scored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "search_libraries.py"


def test_the_library_bench_scores_exact_search_as_exact() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--events", "400", "--queries", "8", "--vectors", "random"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report = json.loads(run.stdout)
    vectors = report["vectors"]
    assert vectors["memlane"]["recall@10"] == 1.0  # an exact engine: the exact top 10
    assert vectors["numpy"]["recall@10"] == 1.0
    for name in ("faiss_flat", "usearch"):
        entry = vectors.get(name, vectors.get("faiss"))
        assert entry == "not installed" or 0.0 <= entry["recall@10"] <= 1.0
    assert report["keywords"]["memlane"]["p50_p95_ms"][0] > 0
