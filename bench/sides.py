"""Before / after in one run: the same child script run against two checkouts' ``src``.

bench/read_cpu.py, bench/record_latency.py and bench/managers_rss.py time or size the library
in fresh processes whose ``PYTHONPATH`` is one side's ``src`` folder, alternating the sides so
that a machine's drift shows in both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["SRC", "memory_mb", "run_child", "sides"]

#: this checkout's library
SRC = Path(__file__).resolve().parent.parent / "src"


def sides(before: Path | None) -> list[tuple[str, Path]]:
    """``("before", before)`` when given, then ``("after", this checkout's src)``."""
    return ([("before", before)] if before else []) + [("after", SRC)]


def run_child(src: Path, child: str, *args: object) -> Any:
    """Run the script ``child`` (``python -c``) with ``src`` first on the path and ``args``
    as its arguments; the JSON it printed."""
    run = subprocess.run(
        [sys.executable, "-c", child, *map(str, args)],
        env=dict(os.environ, PYTHONPATH=str(src)),
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout)


def memory_mb() -> dict[str, int]:
    """This process's peak (``VmHWM``) and current (``VmRSS``) resident memory in MB (a
    child script imports it: bench/ is on its path)."""
    found = {}
    with open("/proc/self/status") as lines:
        for line in lines:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                found[key] = int(value.split()[0]) // 1024
    return found
