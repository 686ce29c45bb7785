"""bench/pg_worker.py against the test server: one run of this checkout, its figures whole
and consistent (the worker's keyword text is part of the flush it is timed in)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.postgres


def test_one_run_reports_records_flush_and_the_keyword_text(postgres_url: str) -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "pg_worker.py"),
            "--events",
            "150",
            "--rounds",
            "1",
            "--postgres-url",
            postgres_url,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        timeout=300,
    )
    name, _, figures = run.stdout.strip().partition(" ")
    got = json.loads(figures)
    assert name == "after"
    assert 0 < got["record_p50_ms"] <= got["record_p99_ms"]
    assert got["flush_s"] > 0 and got["flush_events_per_s"] > 0
    assert 0 < got["keyword_text_s"] <= got["flush_s"]
