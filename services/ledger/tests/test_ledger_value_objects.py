"""The ledger's value objects are built by keyword: none can be built from positional arguments.

A settlement has twelve fields, several of them ints side by side (pot, rake, forfeited), and a
transfer names two accounts in a row; built by position, a swap type-checks and moves chips to
the wrong place. Every frozen dataclass of the domain and of the use cases takes keywords only
(``kw_only=True``), so such a call fails at once, and mypy names it.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import masa_ledger.app
import masa_ledger.domain
import pytest
from masa_ledger.domain.model import SeatPayout, Settlement
from masa_rules.table_config import PayoutRule

# The payout rule is the terms a lobby publishes, shared with the lobby and the engine; its
# shape is theirs as much as the ledger's.
_NOT_LEDGER_OWNED = {PayoutRule}


def _value_objects() -> list[type]:
    found: list[type] = []
    for package in (masa_ledger.domain, masa_ledger.app):
        for module_info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            found.extend(
                value
                for value in vars(module).values()
                if isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
                and value not in _NOT_LEDGER_OWNED
            )
    return found


def test_every_value_object_is_built_by_keyword() -> None:
    objects = _value_objects()
    assert Settlement in objects
    positional = [
        f"{cls.__module__}.{cls.__qualname__}.{field.name}"
        for cls in objects
        for field in dataclasses.fields(cls)
        if not field.kw_only
    ]
    assert positional == []


def test_a_value_object_from_positional_arguments_is_refused() -> None:
    with pytest.raises(TypeError):
        SeatPayout(0, "ayse", 1, 100)  # type: ignore[call-arg]
