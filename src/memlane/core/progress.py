"""How long work reports that it advances: ``progress(done, total)``."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress"]

#: ``progress(done, total)``: called as work advances; ``total`` is None when unknown.
Progress = Callable[[int, int | None], None]
