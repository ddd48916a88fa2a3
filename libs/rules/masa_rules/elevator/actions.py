"""What a seat may submit: a play, a pass or (during a Kopile) a give.

Every action names the seat that submits it, so that the engine can reject a seat acting out
of turn (E-3) without trusting the caller.

>>> eights = (PhysicalCard.parse("8H"), PhysicalCard.parse("8S"))
>>> play = Play(2, eights)
>>> play.seat, play.cards[-1].code  # the last card ends on top
(2, '8S')
"""

from __future__ import annotations

from dataclasses import dataclass

from masa_rules.cards import PhysicalCard

__all__ = ["Action", "Give", "Pass", "Play"]


@dataclass(frozen=True, slots=True)
class Play:
    """E-4..E-7: put ``cards`` on the pile in this order (the last one ends on top)."""

    seat: int
    cards: tuple[PhysicalCard, ...]


@dataclass(frozen=True, slots=True)
class Pass:
    """E-8: play nothing and draw one card from the stock if it has any."""

    seat: int


@dataclass(frozen=True, slots=True)
class Give:
    """E-9: hand one card of the giver's choice to the player who drew for Kopile."""

    seat: int
    card: PhysicalCard


Action = Play | Pass | Give
