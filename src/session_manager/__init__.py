"""The import name before the rename to ``memlane`` (0.2.0): a shim that warns.

``import session_manager`` and ``from session_manager.x import y`` keep working and give the
very objects ``memlane`` has (not copies: ``session_manager.SessionManager is
memlane.SessionManager``), with a :class:`DeprecationWarning`. The name is also the module of
an unrelated package on the index (``session-manager``), so this shim will be removed; change
imports to ``memlane``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

import memlane

warnings.warn(
    "The package 'session_manager' is now 'memlane': change `import session_manager` to "
    "`import memlane` (the old name will be removed).",
    DeprecationWarning,
    stacklevel=2,
)

_OLD = __name__ + "."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``session_manager.X`` as the already-importable ``memlane.X``."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD):
            return None
        new_name = "memlane." + fullname[len(_OLD) :]
        if importlib.util.find_spec(new_name) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module("memlane." + spec.name[len(_OLD) :])

    def exec_module(self, module: ModuleType) -> None:
        # The module is memlane's own, already executed; nothing to run again.
        return None


sys.meta_path.insert(0, _Alias())


def __getattr__(name: str) -> Any:
    return getattr(memlane, name)


def __dir__() -> list[str]:
    return dir(memlane)


__all__ = list(memlane.__all__)
