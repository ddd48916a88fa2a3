"""The deal of 51: shuffle, cut, bottom card and hands (rules.md F-1..F-6).

How a third party verifies a deal, with nothing but the revealed hand seed:

1. Check ``SHA-256(hand_seed)`` (hex) against the ``commitment`` of the ``deal`` event, which
   every seat received before any card was dealt; the seed itself comes in the ``reveal`` event
   when the hand ends (F-5). Hand ``n`` uses ``hand_seed(game_seed, n)`` from
   :mod:`masa_rules.shuffle`; the hand seed alone suffices to check a deal.
2. Build ``DrawStream(hand_seed)`` and shuffle ``fiftyone_pack()`` with it (Fisher–Yates, see
   :mod:`masa_rules.shuffle`); position 0 is the top.
3. With a cut (classic, remi; F-4) draw ``k = 2 + stream.below(len(deck) - 3)`` from the same
   stream, so both parts keep at least 2 cards, and restack: ``deck = deck[k:] + deck[:k]``.
   The *cut card* is the new ``deck[0]``. If it is a joker the cutter (the seat before the
   dealer) keeps it, and if ``deck[1]`` is a joker too, that one as well; otherwise the cut card
   leaves the deck and becomes the face-up bottom card, ``stock[-1]``.
4. Deal from the top in rounds starting with the starter (the seat after the dealer): each seat
   takes two cards per round until it holds 14 (starter 15) minus the jokers it kept at the cut;
   a seat needing only one more card takes one.
5. The rest, followed by the bottom card, is the stock (``stock[0]`` on top).

F-63 remi: the discard pile (without its top card) becomes a new stock in the order
``DrawStream(HMAC-SHA256(key=hand_seed, msg=b"masa/reshuffle/" + str(n))).shuffle(pile)``,
``n`` counting reshuffles from 1, ``pile`` listed bottom first.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from masa_rules.cards import PhysicalCard, fiftyone_pack
from masa_rules.errors import RuleViolation
from masa_rules.ruleset import RuleSet
from masa_rules.shuffle import DrawStream

__all__ = ["Deal", "deal_cards", "reshuffled"]

HAND_SIZE = 14
MIN_CUT_PART = 2


@dataclass(frozen=True, slots=True)
class Deal:
    """The outcome of F-3/F-4 for one hand."""

    hands: dict[int, tuple[PhysicalCard, ...]]
    stock: tuple[PhysicalCard, ...]
    bottom_card: PhysicalCard | None
    cutter: int | None
    cutter_jokers: tuple[PhysicalCard, ...]


def deal_cards(rules: RuleSet, order: Sequence[int], seed: bytes) -> Deal:
    """Deal to the seats in ``order`` (starter first, dealer last) from the hand seed.

    >>> from masa_rules.shuffle import hand_seed
    >>> d = deal_cards(RuleSet.salon(), [1, 2, 3, 0], hand_seed("doc", 1))
    >>> [len(d.hands[s]) for s in (0, 1, 2, 3)], len(d.stock)
    ([14, 15, 14, 14], 49)
    """
    stream = DrawStream(seed)
    deck = stream.shuffle(fiftyone_pack())
    bottom: PhysicalCard | None = None
    cutter: int | None = None
    kept: list[PhysicalCard] = []
    if rules.cut:
        cutter = order[-2] if len(order) > 1 else order[0]
        deck, kept, bottom = _cut(deck, stream)
    need = dict.fromkeys(order, HAND_SIZE)
    need[order[0]] += 1
    if cutter is not None:
        need[cutter] -= len(kept)
    hands: dict[int, list[PhysicalCard]] = {seat: [] for seat in order}
    if cutter is not None:
        hands[cutter].extend(kept)
    top = 0
    while any(need.values()):
        for seat in order:
            give = min(2, need[seat])
            hands[seat].extend(deck[top : top + give])
            need[seat] -= give
            top += give
    stock = tuple(deck[top:]) + ((bottom,) if bottom is not None else ())
    out = {seat: tuple(sorted(cards)) for seat, cards in hands.items()}
    _check_counts(out, stock, order[0])
    return Deal(out, stock, bottom, cutter, tuple(kept))


def _cut(
    deck: list[PhysicalCard], stream: DrawStream
) -> tuple[list[PhysicalCard], list[PhysicalCard], PhysicalCard | None]:
    """The cut deck, the jokers the cutter keeps from its top, and the bottom card shown when
    the cut showed no joker."""
    k = MIN_CUT_PART + stream.below(len(deck) - 2 * MIN_CUT_PART + 1)
    deck = deck[k:] + deck[:k]
    kept: list[PhysicalCard] = []
    while deck and deck[0].card.is_joker and len(kept) < 2:
        kept.append(deck.pop(0))
    bottom = None if kept else deck.pop(0)
    return deck, kept, bottom


def _check_counts(
    hands: dict[int, tuple[PhysicalCard, ...]], stock: tuple[PhysicalCard, ...], starter: int
) -> None:
    """F-6: a misdeal cannot happen in software; the counts are asserted all the same."""
    for seat, cards in hands.items():
        expected = HAND_SIZE + (seat == starter)
        if len(cards) != expected:
            raise RuleViolation("F-6", f"seat {seat} was dealt {len(cards)} cards")
    if sum(len(c) for c in hands.values()) + len(stock) != len(fiftyone_pack()):
        raise RuleViolation("F-6", "the deal lost or duplicated a card")


def reshuffled(seed: bytes, number: int, pile: Sequence[PhysicalCard]) -> tuple[PhysicalCard, ...]:
    """F-63 remi: the new stock made of ``pile`` for reshuffle ``number`` (1-based)."""
    key = hmac.new(seed, b"masa/reshuffle/" + str(number).encode(), hashlib.sha256).digest()
    return tuple(DrawStream(key).shuffle(pile))
