"""Every docstring example in the package runs (examples that need a live store or network
say ``# doctest: +SKIP``). A module added later is picked up without editing this file."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import memlane

MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(memlane.__path__, "memlane.")
    if not info.name.endswith("__main__")
)


@pytest.mark.parametrize("name", ["memlane", *MODULES])
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"


def test_the_examples_are_many() -> None:
    """Guards the walk itself: a broken discovery would make every test above vacuous."""
    attempted = sum(
        doctest.testmod(importlib.import_module(name), report=False).attempted for name in MODULES
    )
    assert len(MODULES) > 40 and attempted > 80, (len(MODULES), attempted)
