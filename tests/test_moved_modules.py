"""Modules with public names moved into rooms (0.2.0) still import, as the very same modules,
with a warning that names the new place; ``session_manager.<old>`` reaches them too."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from memlane.core.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_name_gives_the_new_module_with_a_warning(old: str) -> None:
    # A fresh interpreter: in this one the old name may already sit in sys.modules.
    code = (
        "import importlib, warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        f"try:\n    importlib.import_module({old!r})\n"
        "except DeprecationWarning as warning:\n    print(warning)\n"
        "warnings.simplefilter('ignore')\n"
        f"old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "print(old is new)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    said, same = run.stdout.strip().splitlines()
    assert MOVED[old] in said and "change the import" in said
    assert same == "True"


def test_from_imports_of_moved_modules_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "memlane.tokens", raising=False)  # (another test's)
    with pytest.warns(DeprecationWarning):
        tokens = importlib.import_module("memlane.tokens")
    assert tokens.tokenizer_for("gpt-4o").count("hello") >= 1


def test_a_name_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("memlane.tokenz")
