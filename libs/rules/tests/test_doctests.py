"""The examples in the docstrings of ``masa_rules`` run and hold; every module has some."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import masa_rules
import pytest

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(masa_rules.__path__, "masa_rules.")
    if not name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no example"
    assert result.failed == 0
