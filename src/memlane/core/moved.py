"""Modules that had public names before the package was arranged in rooms (0.2.0), found
where they live now, with a :class:`DeprecationWarning`.

``import memlane.tokens`` gives the very module ``memlane.text.tokens`` (not a copy), so
monkeypatching and ``isinstance`` keep working; private modules (``memlane._x``) were never
promised and are not aliased.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "install"]

#: old dotted name -> where the module lives now
MOVED = {
    "memlane.tokens": "memlane.text.tokens",
    "memlane.summarize": "memlane.text.shrink",
    "memlane.chunking": "memlane.text.chunking",
    "memlane.recency": "memlane.search.recency",
    "memlane.index.fusion": "memlane.search.fusion",
    "memlane.index.when": "memlane.search.when",
}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new_name = MOVED[spec.name]
        warnings.warn(
            f"'{spec.name}' moved to '{new_name}': change the import (the old name will be "
            "removed).",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new_name)

    def exec_module(self, module: ModuleType) -> None:
        # The module is the new one, already executed; nothing to run again.
        return None


def install() -> None:
    """Put the finder on ``sys.meta_path`` once per process."""
    if not any(isinstance(finder, _Moved) for finder in sys.meta_path):
        sys.meta_path.append(_Moved())
