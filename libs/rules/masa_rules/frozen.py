"""``evolve``: ``dataclasses.replace`` for frozen dataclasses, without its per-call checks.

The engines copy a state several times per action and the table engine its table a few more;
a copy function generated per class, one line per field, is about twice as fast. It skips
``__post_init__``: use it only for classes that have none, whose fields need no check on copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

__all__ = ["evolve"]

_T = TypeVar("_T")
_COPIERS: dict[type, Callable[[Any, dict[str, Any]], Any]] = {}


def _copier(cls: type) -> Callable[[Any, dict[str, Any]], Any]:
    """A copy function with one line per field, generated the way dataclasses generate
    ``__init__``: reading each slot by name is much faster than a loop over ``getattr``."""
    lines = ["def copy(obj, changes):", "    new = new_object(cls)"]
    for f in fields(cls):
        name = f.name
        lines.append(
            f"    set_field(new, {name!r}, changes[{name!r}] if {name!r} in changes else obj.{name})"
        )
    lines.append("    return new")
    namespace: dict[str, Any] = {
        "new_object": object.__new__,
        "cls": cls,
        "set_field": object.__setattr__,
    }
    exec("\n".join(lines), namespace)
    copy: Callable[[Any, dict[str, Any]], Any] = namespace["copy"]
    return copy


def evolve(obj: _T, **changes: Any) -> _T:
    """A copy of ``obj`` (a frozen dataclass without ``__post_init__``) with ``changes``.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, slots=True)
    ... class Turn:
    ...     seat: int
    ...     number: int = 1
    >>> first = Turn(2)
    >>> evolve(first, number=2), first
    (Turn(seat=2, number=2), Turn(seat=2, number=1))
    >>> evolve(first) == first and evolve(first) is not first
    True
    """
    cls = type(obj)
    copy = _COPIERS.get(cls)
    if copy is None:
        copy = _COPIERS[cls] = _copier(cls)
    new: _T = copy(obj, changes)
    return new
