"""The deal (E-2) from a hand seed, by the provably fair shuffle (F-5, ``masa_rules.shuffle``).

To recompute a deal from the revealed seed alone:

1. ``order = DrawStream(seed).shuffle(elevator_pack(decks))``; position 0 is the top.
2. Cards ``0 .. players * hand_size - 1`` are dealt one at a time, round-robin, starting with
   the leader: card ``i`` goes to seat ``(leader + i) % players``.
3. The next card is turned up as the starting card; the rest is the stock, top first.
4. Under ``JokerStart.BURY`` a joker turned up goes to the bottom of the stock and the next
   card of the stock is turned up, until the starting card is a natural.
"""

from __future__ import annotations

from dataclasses import dataclass

from masa_rules.cards import PhysicalCard, elevator_pack
from masa_rules.elevator.moves import is_joker
from masa_rules.elevator.rules import ElevatorRules, JokerStart
from masa_rules.shuffle import DrawStream

__all__ = ["Deal", "deal"]


@dataclass(frozen=True, slots=True)
class Deal:
    """The cards of a fresh hand: one hand per seat, the starting card and the stock."""

    hands: tuple[tuple[PhysicalCard, ...], ...]
    starter: PhysicalCard
    buried: tuple[PhysicalCard, ...]
    stock: tuple[PhysicalCard, ...]


def deal(rules: ElevatorRules, players: int, seed: bytes, leader: int) -> Deal:
    """Deal a hand of ``players`` seats from ``seed`` (steps 1-4 of the module docstring).

    >>> dealt = deal(ElevatorRules(), 3, b"doc", leader=0)
    >>> [len(hand) for hand in dealt.hands], len(dealt.stock)
    ([7, 7, 7], 32)
    """
    order = DrawStream(seed).shuffle(elevator_pack(rules.pack_count(players)))
    dealt = players * rules.hand_size
    hands = tuple(
        tuple(order[i] for i in range((seat - leader) % players, dealt, players))
        for seat in range(players)
    )
    starter, stock = order[dealt], tuple(order[dealt + 1 :])
    buried: list[PhysicalCard] = []
    if rules.joker_start is JokerStart.BURY:
        # Bounded by the stock size, so a stock of nothing but jokers cannot loop forever.
        for _ in range(len(stock)):
            if not is_joker(starter):
                break
            buried.append(starter)
            starter, stock = stock[0], (*stock[1:], starter)
    return Deal(hands, starter, tuple(buried), stock)
