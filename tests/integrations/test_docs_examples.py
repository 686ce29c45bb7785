"""Every ```python block of docs/integrations/*.md runs as written, offline, in a fresh folder:
the integration docs cannot drift from the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
PAGES = sorted(DOCS.glob("*.md"))


def test_every_page_has_an_example() -> None:
    assert PAGES, f"no pages in {DOCS}"
    for page in PAGES:
        assert _BLOCK.search(page.read_text()), f"{page.name} has no runnable python example"


@pytest.mark.parametrize("page", PAGES, ids=[page.stem for page in PAGES])
def test_example_runs(page: Path, tmp_path: Path) -> None:
    code = "\n".join(_BLOCK.findall(page.read_text()))
    script = tmp_path / f"{page.stem}_example.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:memlane"}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
