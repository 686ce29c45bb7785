"""The adapters' tests drive each framework's real package.

Outside CI, a framework that is not installed skips its tests with the install line; in CI
(``CI`` set, as ``.ci/run`` does) a missing framework fails them: a skipped adapter test
there would be a test that cannot fail.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def framework(module: str, extra: str) -> ModuleType:
    """Import ``module`` or skip (fail in CI) naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not installed: pip install -e '.[{extra}]' ({exc})"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integrations/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
