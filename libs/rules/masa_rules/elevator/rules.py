"""Every option of the Elevator rule book (rules.md §3) in one frozen :class:`ElevatorRules`.

The engine reads no rule constant from anywhere else. Options marked *(decision)* are points
the sources leave open; the default is the book's choice, the other values are there so that
a table can play a house rule without a code change.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.errors import RuleViolation

__all__ = ["MAX_PLAYERS", "MIN_PLAYERS", "ElevatorRules", "JokerStart"]

# E-1: 3-6 players.
MIN_PLAYERS = 3
MAX_PLAYERS = 6
# E-1: two packs are the default from this many players up.
_TWO_PACKS_FROM = 6


class JokerStart(enum.Enum):
    """E-2 (decision): what a joker turned up as the starting card means."""

    # The first player may play anything, exactly as after a joker played in E-7.
    FREE = "free"
    # The joker goes to the bottom of the stock and the next card is turned up instead.
    BURY = "bury"


@dataclass(frozen=True, slots=True)
class ElevatorRules:
    """The options of one Elevator table.

    >>> ElevatorRules().pack_count(6), ElevatorRules().pack_count(4)
    (2, 1)
    >>> ElevatorRules(decks=2).pack_count(3)
    2
    """

    # E-1: 1 or 2 packs of 54; None means the E-1 default (2 for 6 players, else 1).
    decks: int | None = None
    # E-2: cards dealt to each player.
    hand_size: int = 7
    # E-2 (decision): a joker as the starting card.
    joker_start: JokerStart = JokerStart.FREE
    # E-7 (decision): after a joker "any card" may follow, but a joker is always a card of its
    # own colour (C-3), so by default only the joker of the other colour may go on a joker.
    # True lets either joker follow a joker.
    joker_on_joker_any_colour: bool = False
    # E-9 (decision): "then that same player must play if able, and so must each following
    # player" is read as one full round without voluntary passes, starting with the player
    # who drew. False keeps only the E-8 obligation (play if able after a pass).
    kopile_forces_round: bool = True
    # E-11 (decision): ties on cards left are broken by the sum of ranks left; False lets
    # every seat with the same number of cards share the place.
    rank_by_sum: bool = True

    def __post_init__(self) -> None:
        if self.decks not in (None, 1, 2):
            raise RuleViolation("E-1", f"Elevator uses one or two packs, not {self.decks}")
        if self.hand_size < 1:
            raise RuleViolation("E-2", f"hand_size must be positive, not {self.hand_size}")

    def pack_count(self, players: int) -> int:
        """E-1: how many 54-card packs a table of ``players`` uses."""
        if self.decks is not None:
            return self.decks
        return 2 if players >= _TWO_PACKS_FROM else 1

    def check_players(self, players: int) -> None:
        """E-1: 3-6 players, and enough cards to deal every hand plus the starting card."""
        if not MIN_PLAYERS <= players <= MAX_PLAYERS:
            raise RuleViolation(
                "E-1", f"Elevator is for {MIN_PLAYERS}-{MAX_PLAYERS} players, not {players}"
            )
        if players * self.hand_size + 1 > 54 * self.pack_count(players):
            raise RuleViolation(
                "E-2", f"{self.pack_count(players)} pack(s) cannot deal {players} hands"
            )
