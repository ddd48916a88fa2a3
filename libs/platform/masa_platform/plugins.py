"""Games added by plugins: each module ``MASA_GAME_PLUGINS`` names is imported at start and its
``register()`` called, which registers the game with each layer's registry present in this
process (docs/architecture.md, "Adding a game").

A process loads a module once, however many of its services start in it (tests run the
engine and the bot in one process).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterable

__all__ = ["load_game_plugins"]

_log = logging.getLogger(__name__)
_loaded: set[str] = set()


def load_game_plugins(modules: Iterable[str]) -> None:
    """Import each module and call its ``register()``; a module that cannot be imported or
    has no ``register`` stops the start with an error naming it."""
    for name in modules:
        if name in _loaded:
            continue
        module = importlib.import_module(name)
        register = getattr(module, "register", None)
        if not callable(register):
            raise RuntimeError(f"the game plugin {name} has no register()")
        register()
        _loaded.add(name)
        _log.info("game plugin loaded", extra={"plugin": name})
