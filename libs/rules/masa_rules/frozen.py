"""``evolve``: ``dataclasses.replace`` for frozen dataclasses, without its per-call checks.

The engines copy a state several times per action and the table engine its table a few more;
a copy function generated per class, one line per field, is about twice as fast. It is for
classes whose fields need nothing on a copy: one with a ``__post_init__`` or a field outside
``__init__`` is refused. A change that names no field is refused as ``replace`` refuses it,
and type checkers read ``evolve`` as ``replace``, so they check every change's name and type.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["evolve"]

_T = TypeVar("_T")
# Per class: its copy function and the names of its fields.
_COPIERS: dict[type, tuple[Callable[[Any, dict[str, Any]], Any], frozenset[str]]] = {}


def _copier(cls: type) -> tuple[Callable[[Any, dict[str, Any]], Any], frozenset[str]]:
    """A copy function with one line per field, generated the way dataclasses generate
    ``__init__``: reading each slot by name is much faster than a loop over ``getattr``."""
    if hasattr(cls, "__post_init__") or not all(f.init for f in fields(cls)):
        raise TypeError(f"{cls.__name__} checks or derives fields: use dataclasses.replace")
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
    return copy, frozenset(f.name for f in fields(cls))


def _evolve(obj: _T, /, **changes: Any) -> _T:
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
    >>> evolve(first, numbr=2)
    Traceback (most recent call last):
    ...
    TypeError: Turn has no field numbr
    """
    cls = type(obj)
    known = _COPIERS.get(cls)
    if known is None:
        known = _COPIERS[cls] = _copier(cls)
    copy, names = known
    if not changes.keys() <= names:
        raise TypeError(f"{cls.__name__} has no field {', '.join(sorted(changes.keys() - names))}")
    new: _T = copy(obj, changes)
    return new


if TYPE_CHECKING:
    from dataclasses import replace as evolve
else:
    evolve = _evolve
