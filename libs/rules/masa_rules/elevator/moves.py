"""Which cards may go on the pile (E-4..E-7), precomputed per face for speed.

A *play* is a tuple of physical cards in the order they go down. Its first card must follow
the top of the pile; every further card has the same rank as the first and the opposite colour
to the card before it (E-5). A joker is always a play of its own (E-7).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Final

from masa_rules.cards import NATURALS, Colour, PhysicalCard, Rank
from masa_rules.elevator.state import Direction

__all__ = [
    "POINTS",
    "RANK",
    "RED",
    "can_play",
    "can_start",
    "direction_after",
    "is_joker",
    "legal_plays",
    "play_fault",
]

# Per face index (0..51 naturals, 52 XR, 53 XB). Tuples indexed by ``face_index`` are the
# cheapest lookup Python offers, and legality runs on every turn of every simulated game.
RANK: Final[tuple[int, ...]] = (*(int(card.natural_rank()) for card in NATURALS), 0, 0)
RED: Final[tuple[bool, ...]] = (
    *(card.colour is Colour.RED for card in NATURALS),
    True,
    False,
)
# E-11 (decision): rank points left in hand, 2..14 for naturals and 15 for a joker.
POINTS: Final[tuple[int, ...]] = (*RANK[:52], 15, 15)
_FIRST_JOKER: Final = 52


def is_joker(card: PhysicalCard) -> bool:
    return card.face_index >= _FIRST_JOKER


def can_start(
    card: PhysicalCard, top: PhysicalCard, direction: Direction, joker_on_joker_any: bool
) -> bool:
    """Whether ``card`` may be the first card of a play on ``top``."""
    face, below = card.face_index, top.face_index
    if face >= _FIRST_JOKER:
        # E-7: a joker goes on any card of the other colour; the ElevatorRules option decides
        # whether the colour still matters when that card is itself a joker.
        return RED[face] != RED[below] or (joker_on_joker_any and below >= _FIRST_JOKER)
    if below >= _FIRST_JOKER:
        return True  # E-7: after a joker any card may follow.
    if RED[face] == RED[below]:
        return False  # E-4: opposite colour only.
    if direction is Direction.ASCENDING:
        return RANK[face] > RANK[below]
    return RANK[face] < RANK[below]


def can_play(
    hand: Sequence[PhysicalCard], top: PhysicalCard, direction: Direction, joker_any: bool
) -> bool:
    """Whether any card of ``hand`` may go on ``top`` (E-8: a player able to play).

    >>> top, up = PhysicalCard.parse("8S"), Direction.ASCENDING
    >>> can_play([PhysicalCard.parse("9H")], top, up, False)  # E-4: red, and higher
    True
    >>> can_play([PhysicalCard.parse("9C"), PhysicalCard.parse("7D")], top, up, False)
    False
    """
    return any(can_start(card, top, direction, joker_any) for card in hand)


def legal_plays(
    hand: Sequence[PhysicalCard], top: PhysicalCard, direction: Direction, joker_any: bool
) -> list[tuple[PhysicalCard, ...]]:
    """Every play ``hand`` allows on ``top``, each ordering of an E-5 run listed once."""
    plays: list[tuple[PhysicalCard, ...]] = []
    for i, card in enumerate(hand):
        if not can_start(card, top, direction, joker_any):
            continue
        if card.face_index >= _FIRST_JOKER:
            plays.append((card,))
            continue
        rank = RANK[card.face_index]
        # Positions, not equality: comparing dataclasses field by field is the slow part here.
        mates = tuple(
            other for j, other in enumerate(hand) if j != i and RANK[other.face_index] == rank
        )
        _extend((card,), mates, plays)
    return plays


def _extend(
    run: tuple[PhysicalCard, ...],
    mates: tuple[PhysicalCard, ...],
    plays: list[tuple[PhysicalCard, ...]],
) -> None:
    """E-5: add ``run`` and every longer run made by alternating colour with ``mates``."""
    plays.append(run)
    last_red = RED[run[-1].face_index]
    for i, mate in enumerate(mates):
        if RED[mate.face_index] != last_red:
            _extend((*run, mate), mates[:i] + mates[i + 1 :], plays)


def play_fault(
    cards: Sequence[PhysicalCard],
    hand: Sequence[PhysicalCard],
    top: PhysicalCard,
    direction: Direction,
    joker_any: bool,
) -> tuple[str, str] | None:
    """The rule id and reason that forbid playing ``cards`` from ``hand``, or None if legal."""
    if not cards:
        return ("E-4", "a play needs at least one card")
    if len(set(cards)) != len(cards):
        return ("E-5", "a card cannot be played twice")
    missing = [card.code for card in cards if card not in hand]
    if missing:
        # Each physical card is in one place (C-4): one not in the hand is not the player's
        # to play, whatever the pile (as 51 refuses it).
        return ("C-4", f"not in your hand: {', '.join(missing)}")
    return _shape_fault(cards, top, direction, joker_any)


def _shape_fault(
    cards: Sequence[PhysicalCard], top: PhysicalCard, direction: Direction, joker_any: bool
) -> tuple[str, str] | None:
    """E-4, E-5, E-7: what is wrong with ``cards`` as a play on ``top``, or None."""
    first = cards[0]
    if first.face_index >= _FIRST_JOKER:
        return _joker_fault(cards, top, direction, joker_any)
    if not can_start(first, top, direction, joker_any):
        way = "higher" if direction is Direction.ASCENDING else "lower"
        return ("E-4", f"{first.code} must be the other colour and {way} than {top.code}")
    rank = RANK[first.face_index]
    for below, card in itertools.pairwise(cards):
        if card.face_index >= _FIRST_JOKER or RANK[card.face_index] != rank:
            return ("E-5", f"{card.code} is not the same rank as {first.code}")
        if RED[card.face_index] == RED[below.face_index]:
            return ("E-5", f"{card.code} must be the other colour to {below.code}")
    return None


def _joker_fault(
    cards: Sequence[PhysicalCard], top: PhysicalCard, direction: Direction, joker_any: bool
) -> tuple[str, str] | None:
    """E-7: a joker is played alone, on a card of the other colour."""
    joker = cards[0]
    if len(cards) > 1:
        return ("E-7", "a joker is a play of its own")
    if not can_start(joker, top, direction, joker_any):
        return ("E-7", f"{joker.code} goes only on a card of the other colour, not {top.code}")
    return None


def direction_after(cards: Sequence[PhysicalCard], direction: Direction) -> Direction:
    """E-6: an ace turns the direction to descending, a 2 to ascending; jokers keep it (E-7)."""
    rank = RANK[cards[0].face_index]
    if rank == Rank.ACE:
        return Direction.DESCENDING
    if rank == Rank.TWO:
        return Direction.ASCENDING
    return direction
