"""bench/disk.py on a tiny file in LoCoMo's format: the bytes it reports add up to the files
on disk, and the vectors are the half-precision rows (the real data is never here)."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memlane.testing import HashEmbedder
from tests.test_bench_locomo import sample

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def disk() -> ModuleType:
    sys.path.insert(0, str(REPO / "bench"))
    spec = importlib.util.spec_from_file_location("bench_disk", REPO / "bench" / "disk.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_adds_up_to_the_files_and_names_each_part(
    disk: ModuleType, tmp_path: Path
) -> None:
    result = disk.run(sample(tmp_path), 3, HashEmbedder(), tmp_path / "work")
    db = tmp_path / "work" / "disk.db"
    assert result["events"] == 3 * (5 + 2)  # five turns and two goal events, three times
    assert result["questions"] == 3
    assert result["any_at_10"] == 1.0
    assert sum(result["groups"].values()) == result["file"] == db.stat().st_size
    assert result["total"] == result["file"] + result["wal"] + sum(result["snapshots"].values())
    assert {"vectors", "keyword index", "log and the rest"} <= set(result["groups"])
    with sqlite3.connect(db) as conn:
        lengths = {row[0] for row in conn.execute("SELECT length(vector) FROM vectors")}
    assert lengths == {2 * HashEmbedder().dim + 1}
    text = disk.table(result)
    assert "database: vectors" in text and "bytes / event" in text and "any@10 1.000" in text
