"""The Makefile's verbs call programs that exist: README sends a newcomer to ``make demo``."""

from __future__ import annotations

import re
import sys
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parents[1] / "Makefile"


def test_every_program_a_make_target_runs_is_installed_in_the_environment() -> None:
    # The tests run from the Makefile's own venv (or CI's), whose bin/ holds every console
    # script the package declares and every tool the dev extra installs.
    programs = set(re.findall(r"\$\(BIN\)/([A-Za-z0-9_.-]+)", MAKEFILE.read_text()))
    assert programs, "the Makefile calls no $(BIN)/ program: this test reads it wrong"
    bin_dir = Path(sys.executable).parent
    missing = sorted(p for p in programs if not (bin_dir / p).exists())
    assert not missing, f"make targets call programs that are not installed: {missing}"
