"""What happened: the events :func:`~masa_rules.elevator.engine.apply` reports.

Events are the engine's complete record. Some carry private facts (the hands in
:class:`Dealt`, the card drawn in :class:`Passed`); a table service shows each seat only what
:func:`~masa_rules.elevator.view.view` would show it.

>>> Kopile(seat=0, drew=(), givers=(1, 2)).givers  # an empty stock: seats 1 and 2 give
(1, 2)
"""

from __future__ import annotations

from dataclasses import dataclass

from masa_rules.cards import PhysicalCard
from masa_rules.elevator.state import Direction

__all__ = ["Dealt", "Event", "Gave", "HandEnded", "Kopile", "Passed", "Played"]


@dataclass(frozen=True, slots=True)
class Dealt:
    """E-2, F-5: the deal, with the commitment to the hand seed published before play."""

    hand_no: int
    players: int
    decks: int
    leader: int
    commitment: str
    hands: tuple[tuple[PhysicalCard, ...], ...]
    # E-2 (decision): jokers moved to the bottom of the stock under JokerStart.BURY.
    buried: tuple[PhysicalCard, ...]
    starter: PhysicalCard
    direction: Direction
    stock_count: int


@dataclass(frozen=True, slots=True)
class Played:
    """E-4..E-7: ``seat`` played ``cards``; ``direction`` is the pile's direction after it."""

    seat: int
    cards: tuple[PhysicalCard, ...]
    direction: Direction


@dataclass(frozen=True, slots=True)
class Passed:
    """E-8: ``seat`` passed, ``voluntary`` when it could have played; ``drew`` is None when
    the stock was empty (E-10)."""

    seat: int
    voluntary: bool
    drew: PhysicalCard | None


@dataclass(frozen=True, slots=True)
class Kopile:
    """E-9: ``seat`` drew ``drew`` from the stock and is owed one card by each of ``givers``."""

    seat: int
    drew: tuple[PhysicalCard, ...]
    givers: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Gave:
    """E-9: ``seat`` gave ``card`` to ``to``."""

    seat: int
    to: int
    card: PhysicalCard


@dataclass(frozen=True, slots=True)
class HandEnded:
    """E-11: the result, and the revealed hand seed that proves the deal (F-5).

    ``reason`` is ``"out"`` when ``winner`` has no cards left, or ``"blocked"`` when nobody had
    played since the starting card, the stock was empty and nobody could play (E-9);
    ``winner`` is then the seat alone in first place, or None when that place is shared.
    """

    reason: str
    winner: int | None
    ranking: tuple[tuple[int, ...], ...]
    cards_left: tuple[int, ...]
    rank_sums: tuple[int, ...]
    seed: str


Event = Dealt | Played | Passed | Kopile | Gave | HandEnded
