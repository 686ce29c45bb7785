"""The layer rules hold (pyproject.toml [tool.importlinter]; docs/architecture.md, Layers):
front ends -> engine -> storage/index -> primitives, and no import cycles. CI runs the test
suite, so the shape is checked on every change, not only by `make lint`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run(
        [lint, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "3 kept, 0 broken" in result.stdout
