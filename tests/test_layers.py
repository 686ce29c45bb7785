"""The layer rules hold (pyproject.toml [tool.importlinter]; docs/architecture.md, Layers):
front ends -> engine -> storage/index -> primitives, and no import cycles; and the package
type-checks under mypy's strict settings (the async twin's generated stub among it). CI runs
the test suite, so the shape is checked on every change, not only by `make lint`."""

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


def test_the_package_type_checks() -> None:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert mypy, "mypy is a dev dependency: pip install -e '.[dev]'"
    result = subprocess.run([mypy], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_type_checkers_see_the_facades_delegated_and_derived_methods(tmp_path: Path) -> None:
    """SessionManager's methods carried by its parts (Delegated) and AsyncSessionManager's
    derived ones (aio.pyi) have their real parameters: a wrong argument is an error."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert mypy, "mypy is a dev dependency: pip install -e '.[dev]'"
    snippet = tmp_path / "uses_memlane.py"
    snippet.write_text(
        "from memlane import AsyncSessionManager, Event, SessionManager\n"
        "mgr = SessionManager('a', 'x.db')\n"
        "mgr.remember(123, 'x')\n"
        "async def main() -> Event:\n"
        "    twin = AsyncSessionManager('a', 'x.db', max_threads=2)\n"
        "    await twin.retract_fact(None, 'x')\n"
        "    return await twin.record_fact('s', 'fact')\n"
    )
    result = subprocess.run(
        [mypy, str(snippet)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, result.stdout
    assert ":3: error" in errors[0] and '"int"; expected "str"' in errors[0]
    assert ":6: error" in errors[1] and "retract_fact" in errors[1]
