"""What every game's decider shares: the levels, the decision and the "nothing to do" error."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Decision", "Level", "NothingToDecide"]

ActionT = TypeVar("ActionT")


class Level(enum.Enum):
    """How well a bot plays (the proto's BotLevel; unspecified means normal)."""

    # A random legal move, weighted towards moves that keep the game going.
    EASY = "easy"
    # Greedy: the engine's greedy policy, driven by the meld solver in 51.
    NORMAL = "normal"


@dataclass(frozen=True, slots=True)
class Decision(Generic[ActionT]):
    """The chosen action and a short reason a human can read (logs, the training UI)."""

    action: ActionT
    explanation: str


class NothingToDecide(Exception):
    """The seat has no legal action now: it is not its turn, or the hand is over."""
