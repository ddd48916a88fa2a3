"""What every game's decider shares: the decision and the "nothing to do" error.

The levels a bot plays at are the table model's ``masa_rules.table_config.BotLevel``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Decision", "NothingToDecide"]

ActionT = TypeVar("ActionT")


@dataclass(frozen=True, slots=True)
class Decision(Generic[ActionT]):
    """The chosen action and a short reason a human can read (logs, the training UI)."""

    action: ActionT
    explanation: str


class NothingToDecide(Exception):
    """The seat has no legal action now: it is not its turn, or the hand is over."""
