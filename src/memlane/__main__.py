"""``python -m memlane`` works like the ``memlane`` command."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
