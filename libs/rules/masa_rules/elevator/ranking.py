"""E-11: places at the end of a hand."""

from __future__ import annotations

from collections.abc import Sequence

from masa_rules.cards import PhysicalCard
from masa_rules.elevator.moves import POINTS

__all__ = ["rank_seats", "rank_sum"]


def rank_sum(hand: Sequence[PhysicalCard]) -> int:
    """E-11 (decision): the sum of ranks left, 2..14 for naturals and 15 for a joker."""
    return sum(POINTS[card.face_index] for card in hand)


def rank_seats(
    hands: Sequence[Sequence[PhysicalCard]], by_sum: bool
) -> tuple[tuple[int, ...], ...]:
    """Seats best first: fewest cards, then (``by_sum``) the lowest rank sum; ties share a place.

    >>> from masa_rules.cards import PhysicalCard as P, parse_card as c
    >>> rank_seats([[P.of(c("5H"))], [], [P.of(c("3S"))]], by_sum=True)
    ((1,), (2,), (0,))
    >>> rank_seats([[P.of(c("5H"))], [], [P.of(c("3S"))]], by_sum=False)
    ((1,), (0, 2))
    """
    keys = [(len(hand), rank_sum(hand) if by_sum else 0) for hand in hands]
    places: list[list[int]] = []
    previous: tuple[int, int] | None = None
    for seat in sorted(range(len(hands)), key=keys.__getitem__):
        if keys[seat] != previous:
            places.append([])
            previous = keys[seat]
        places[-1].append(seat)
    return tuple(tuple(place) for place in places)
