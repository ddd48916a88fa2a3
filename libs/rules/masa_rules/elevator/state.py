"""The state of one Elevator hand: an immutable value, replaced (never mutated) by each action.

Glossary:

- *pile*: the face-up cards played so far, the starting card first; the last one is the *top*.
- *stock*: the face-down rest of the pack; position 0 is drawn first.
- *direction*: ascending (play strictly higher) or descending (strictly lower), E-4/E-6.
- *free*: the top is a joker (E-7, or the starting joker of E-2), so any card may follow.
- *open play*: the seat that made the last play; whenever the turn comes back to it with every
  other seat passing since, Kopile (E-9) applies, again and again until someone plays.

>>> from masa_rules.elevator import ElevatorRules, new_game
>>> state = new_game(ElevatorRules(), 3, "doc")
>>> state.top == state.pile[-1], state.open_play, state.is_over
(True, None, False)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from masa_rules.cards import JOKER_RED, PhysicalCard
from masa_rules.elevator.rules import ElevatorRules
from masa_rules.shuffle import commitment

__all__ = ["MAX_TELLS", "Direction", "Phase", "State", "Tell"]

# The most tells a seat keeps (the latest): a seat's moves in one hand are bounded, and so is
# what a view carries of them.
MAX_TELLS: Final = 24


class Direction(enum.Enum):
    """E-4, E-6: which way ranks must move."""

    ASCENDING = "ascending"
    DESCENDING = "descending"


class Phase(enum.Enum):
    """Who acts next: the seat on turn plays or passes, a giver gives (E-9), or nobody."""

    PLAY = "play"
    GIVE = "give"
    OVER = "over"


@dataclass(frozen=True, slots=True)
class Tell:
    """One move of a seat as everyone saw it, kept while it may still say something of the
    seat's hand: the top and direction it moved on, ``may_pass``, the cards it played (none:
    it passed), and how many cards it held before the move.

    ``may_pass`` is, for a play, whether a voluntary pass was open to the seat (E-8, E-9); for
    a pass, whether the pass was voluntary (public: the pass event says so). A pass that was
    not says that none of the seat's cards could go on ``top`` going ``direction``.

    ``held`` is how many of the seat's cards now were in its hand after it played (or, for a
    pass, before it drew), at least: it counts down by every card the seat plays or gives
    since (those may have been any of its cards); the cards it draws or is given since are
    not among them. ``exact`` says the seat has neither taken nor given a card since, so that
    its hand at the move was its hand now plus the cards it played since (which only the seat
    knows; everyone knows which).
    """

    top: PhysicalCard
    direction: Direction
    may_pass: bool
    played: tuple[PhysicalCard, ...]
    hand: int
    held: int
    exact: bool = True


@dataclass(frozen=True, slots=True)
class State:
    """One hand of Elevator. Build it with :func:`~masa_rules.elevator.engine.new_game`."""

    rules: ElevatorRules
    players: int
    hand_no: int
    leader: int
    decks: int
    # F-5: the secret hand seed; only its commitment is public until the hand ends.
    seed: bytes
    hands: tuple[tuple[PhysicalCard, ...], ...]
    stock: tuple[PhysicalCard, ...]
    pile: tuple[PhysicalCard, ...]
    direction: Direction
    phase: Phase
    # The seat to play or pass (PLAY), the next giver (GIVE), or the last actor (OVER).
    turn: int
    # E-9: the seat that made the last play, None until the first play of the hand.
    open_play: int | None
    # E-8: the previous turn was a play, so a voluntary pass is allowed.
    after_play: bool
    # E-9 (decision): turns left in which nobody may pass voluntarily after a Kopile.
    forced_turns: int
    # E-9: the seat that drew for Kopile and the seats that still owe it a card, in order.
    receiver: int | None
    givers: tuple[int, ...]
    # E-11: set when the hand is over.
    winner: int | None
    ranking: tuple[tuple[int, ...], ...]
    end_reason: str | None
    # How many actions led here; a replay of the same log reaches the same count.
    action_count: int
    # Each seat's moves as everyone saw them, oldest first, while some of its cards then may
    # still be in its hand (public: a search samples the hidden cards consistently with them);
    # () before any seat has one.
    tells: tuple[tuple[Tell, ...], ...] = ()

    @property
    def top(self) -> PhysicalCard:
        """The card on top of the pile."""
        return self.pile[-1]

    @property
    def free(self) -> bool:
        """E-7: a joker is on top, so the next play may start with any card."""
        return self.pile[-1].face_index >= JOKER_RED.index

    @property
    def is_over(self) -> bool:
        return self.phase is Phase.OVER

    @property
    def commitment(self) -> str:
        """F-5: SHA-256 of the hand seed, public from the deal on."""
        return commitment(self.seed)
