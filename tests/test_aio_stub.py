"""aio.pyi, the types of AsyncSessionManager's derived methods, matches SessionManager."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gen_aio_stub.py"


def test_the_async_twins_stub_is_generated_from_the_manager_as_it_is() -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stderr + "\n(run: python scripts/gen_aio_stub.py)"
