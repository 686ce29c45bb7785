"""Write docs/cli.md from the `memlane` commands' own help; `--check` only compares.

Run with `make docs` (or `.venv/bin/python scripts/gen_cli_docs.py`). tests/test_cli_docs.py
fails when the file is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memlane.cli._docs import render

TARGET = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET} is out of date: run `make docs`.", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
