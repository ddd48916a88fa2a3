"""The state of a 51 game: frozen dataclasses of tuples, never mutated.

Glossary:

- *seat*: a place at the table, numbered in play order (F-2); the next seat plays next.
- *stock*: the face-down cards, ``stock[0]`` on top; under F-4 the face-up *bottom card* is
  ``stock[-1]`` and is drawn last.
- *table*: every meld laid down, each with its owner; a pair opener's pairs are melds of kind
  PAIR in the owner's *area* (F-43, F-50).
- *opened*: a seat that laid down its opening. In team mode a seat whose partner opened is
  *treated as opened* (F-46) for taking discards, laying off and scoring: see :func:`counts_opened`.
- *turn*: who is to act and what this turn has already done, so that the obligations of
  F-30..F-33r (use the taken discard) and F-55 (use the retrieved joker) can be enforced.

>>> from masa_rules.fiftyone.engine import new_game
>>> state = new_game(RuleSet.classic(), 4, "doc", teams=True)
>>> state.to_act, next_seat(state, 3), partner(state, 1)
((0,), 0, 3)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.cards import PhysicalCard
from masa_rules.melds import Meld
from masa_rules.ruleset import RuleSet

__all__ = [
    "Phase",
    "Query",
    "SeatState",
    "State",
    "TableMeld",
    "Turn",
    "counts_opened",
    "next_seat",
    "partner",
    "previous_seat",
]


class Phase(enum.Enum):
    """Where the game is: a seat must take a card, may play, seats answer a query, or over."""

    DRAW = "draw"
    PLAY = "play"
    QUERY = "query"
    OVER = "over"


@dataclass(frozen=True, slots=True)
class TableMeld:
    """A meld on the table: its owner, its reading and the physical cards, aligned with it."""

    owner: int
    meld: Meld
    cards: tuple[PhysicalCard, ...]


@dataclass(frozen=True, slots=True)
class SeatState:
    """One seat within the current hand."""

    hand: tuple[PhysicalCard, ...]
    opened: bool = False
    opened_with_pairs: bool = False
    # F-41: the value (or pair count) of this seat's opening.
    opening_total: int = 0
    pair_status: bool = False
    shown_pairs: bool = False
    # F-61 classic: twins shown to discard an işlek card; they may not be discarded later.
    locked: tuple[PhysicalCard, ...] = ()
    islek_penalty: int = 0
    free_islek_used: int = 0
    # F-34: the turn number on which this seat claimed the bottom card.
    bottom_claim: int | None = None
    # F-33r: how many turns this seat has started in this hand.
    turns: int = 0


@dataclass(frozen=True, slots=True)
class Turn:
    """The seat whose turn it is and what the turn has done so far."""

    seat: int
    number: int
    took: PhysicalCard | None = None
    # The rule that obliges the taker to use ``took`` (F-30, F-33) or to open (F-33r).
    took_rule: str | None = None
    took_used: bool = False
    must_open: bool = False
    # F-55: jokers retrieved this turn that must still be laid down or laid off.
    jokers: tuple[PhysicalCard, ...] = ()
    opened_now: bool = False
    laid_off_others: bool = False


@dataclass(frozen=True, slots=True)
class Query:
    """F-80: ``taker`` wants ``card``; ``pending`` seats still have to answer."""

    taker: int
    card: PhysicalCard
    pending: tuple[int, ...]
    refused: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class State:
    """A whole game: the table options, the scores so far and the hand in progress."""

    rules: RuleSet
    players: int
    teams: bool
    # Secret (P-20): the game seed and the hand seed never appear in a view.
    game_seed: bytes
    hands_limit: int | None
    hand_no: int
    hands_scored: int
    dealer: int
    active: tuple[bool, ...]
    totals: tuple[int, ...]
    # F-96: seats that left, one group per hand, in the order they left.
    eliminated: tuple[tuple[int, ...], ...]
    phase: Phase
    seats: tuple[SeatState, ...]
    stock: tuple[PhysicalCard, ...]
    bottom_card: PhysicalCard | None
    discard: tuple[PhysicalCard, ...]
    last_discarder: int | None
    table: tuple[TableMeld, ...]
    turn: Turn
    query: Query | None
    hand_seed: bytes
    commitment: str
    reshuffles: int
    # F-41: the highest opening value and pair count on the table; F-42: a pair opening exists.
    high_open: int
    high_pairs: int
    pair_opened: bool
    action_count: int
    ranking: tuple[tuple[int, ...], ...] = ()
    # F-64: turns in a row, this hand, that drew no card from the stock.
    turns_without_draw: int = 0

    @property
    def to_act(self) -> tuple[int, ...]:
        """The seats that must act now: the turn's seat, or the seats a query waits for."""
        if self.phase is Phase.OVER:
            return ()
        if self.phase is Phase.QUERY and self.query is not None:
            return self.query.pending
        return (self.turn.seat,)


def partner(state: State, seat: int) -> int | None:
    """F-2: seats 0+2 and 1+3 are partners in team mode."""
    return (seat + 2) % 4 if state.teams else None


def counts_opened(state: State, seat: int) -> bool:
    """F-46: a seat counts as opened when it or (team mode) its partner has opened."""
    if state.seats[seat].opened:
        return True
    mate = partner(state, seat)
    return mate is not None and state.seats[mate].opened


def next_seat(state: State, seat: int) -> int:
    """The next active seat in play order (F-2); eliminated seats (F-96) are skipped."""
    for step in range(1, state.players + 1):
        candidate = (seat + step) % state.players
        if state.active[candidate]:
            return candidate
    return seat


def previous_seat(state: State, seat: int) -> int:
    """The active seat before ``seat`` in play order."""
    for step in range(1, state.players + 1):
        candidate = (seat - step) % state.players
        if state.active[candidate]:
            return candidate
    return seat
