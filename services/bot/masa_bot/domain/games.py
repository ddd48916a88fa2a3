"""The bot's one registry of games: who decides a seat's action in each game, by the game's
registered name (docs/architecture.md, "Adding a game").

A decider takes a state rebuilt from one seat's view (``masa_wire.games``), the seat, the level,
a seed and the seconds it may search for (a level that searches answers within them), and
returns a :class:`~masa_bot.domain.choice.Decision`, or raises
:class:`~masa_bot.domain.choice.NothingToDecide`. 51 and Elevator are registered here; a
plugin's game registers its own with :func:`register_decider`.
"""

from __future__ import annotations

from collections.abc import Callable

from masa_rules import elevator, fiftyone
from masa_rules.table_config import BotLevel, GameKind

from masa_bot.domain.choice import Decision
from masa_bot.domain.elevator import decide_elevator
from masa_bot.domain.fiftyone import decide_fiftyone

__all__ = ["Decider", "decider_for", "played", "register_decider"]

Decider = Callable[[object, int, BotLevel, bytes, float], Decision[object]]


def _elevator(
    state: object, seat: int, level: BotLevel, seed: bytes, budget_seconds: float
) -> Decision[object]:
    if not isinstance(state, elevator.State):
        raise TypeError(f"not an Elevator state: {type(state).__name__}")
    chosen = decide_elevator(state, seat, level, seed, budget_seconds)
    return Decision(chosen.action, chosen.explanation)


def _fiftyone(
    state: object, seat: int, level: BotLevel, seed: bytes, budget_seconds: float
) -> Decision[object]:
    if not isinstance(state, fiftyone.State):
        raise TypeError(f"not a 51 state: {type(state).__name__}")
    chosen = decide_fiftyone(state, seat, level, seed, budget_seconds)
    return Decision(chosen.action, chosen.explanation)


_DECIDERS: dict[str, Decider] = {GameKind.FIFTYONE: _fiftyone, GameKind.ELEVATOR: _elevator}


def register_decider(name: str, decider: Decider) -> None:
    """Decide the seats of the game ``name`` by ``decider``; once."""
    if name in _DECIDERS:
        raise ValueError(f"the bot plays {name} already")
    _DECIDERS[name] = decider


def decider_for(name: str) -> Decider | None:
    """The decider of the game ``name``, or None when the bot does not play it."""
    return _DECIDERS.get(name)


def played() -> tuple[str, ...]:
    """The names of the games the bot plays, the shipped ones first."""
    return tuple(_DECIDERS)
