"""What a seat may do in 51: the actions :func:`~masa_rules.fiftyone.engine.apply` accepts.

Every action names the seat that takes it and the physical cards it uses (C-4), so that a log
of actions replays a game exactly. A meld is a tuple of (physical card, annotation) where the
annotation is the card a joker stands for (C-2), or ``None`` to let the engine pick.

>>> from masa_rules.cards import parse_card
>>> run = ((PhysicalCard.parse("7H"), None), (PhysicalCard.parse("XR"), parse_card("8H")))
>>> LayDown(0, melds=(run,)).melds[0][1][1].code  # the joker stands for 8H
'8H'
"""

from __future__ import annotations

from dataclasses import dataclass

from masa_rules.cards import Card, PhysicalCard

__all__ = [
    "Action",
    "Answer",
    "ClaimBottom",
    "DeclarePairs",
    "Discard",
    "Draw",
    "LayDown",
    "LayOff",
    "MeldSpec",
    "RetrieveJoker",
    "ShowPairs",
    "TakeBottom",
    "TakeDiscard",
]

MeldSpec = tuple[tuple[PhysicalCard, Card | None], ...]


@dataclass(frozen=True, slots=True)
class Draw:
    """F-21 step 1: take the top card of the stock. On an empty stock this triggers F-63."""

    seat: int


@dataclass(frozen=True, slots=True)
class TakeDiscard:
    """F-30..F-33r: take the previous player's discard.

    ``pairs`` declares pair status with the take (F-31, F-70): the card need not be used.
    Without it an unopened player must open with the card this turn (F-30, F-33r), and in
    salon the other unopened players are queried first (F-80).
    """

    seat: int
    pairs: bool = False


@dataclass(frozen=True, slots=True)
class TakeBottom:
    """F-34 (classic): the claimant takes the claimed bottom card instead of drawing.

    F-35 (remi): take the bottom card and finish by hand at once; ``melds`` lay down every
    other card and ``discard`` is the finishing discard (one action, so a hand finish can
    never be left half done).
    """

    seat: int
    melds: tuple[MeldSpec, ...] = ()
    discard: PhysicalCard | None = None


@dataclass(frozen=True, slots=True)
class LayDown:
    """F-40..F-47: lay down melds and pairs from the hand.

    A player's first lay-down is the opening and must reach the threshold (or the pair count);
    an opened player lays down further melds of any value (pair openers: pairs only).
    """

    seat: int
    melds: tuple[MeldSpec, ...] = ()
    pairs: tuple[tuple[PhysicalCard, PhysicalCard], ...] = ()


@dataclass(frozen=True, slots=True)
class LayOff:
    """F-50: add ``cards`` to table meld number ``meld``.

    One card on a run or set; two identical cards (or a natural and a joker) on a pair, which
    adds a new pair to that pair opener's area. ``stands_for`` / ``at_end`` choose where a
    joker goes when it fits more than one place.
    """

    seat: int
    meld: int
    cards: tuple[PhysicalCard, ...]
    stands_for: Card | None = None
    at_end: bool | None = None


@dataclass(frozen=True, slots=True)
class RetrieveJoker:
    """F-55: put ``card`` in the place of a joker in table meld ``meld`` and take the joker."""

    seat: int
    meld: int
    card: PhysicalCard


@dataclass(frozen=True, slots=True)
class Discard:
    """F-21 step 3, F-60, F-61: discard ``card``; the last card finishes the hand.

    ``twin`` is the identical card shown to discard an işlek card under the classic exception.
    """

    seat: int
    card: PhysicalCard
    twin: PhysicalCard | None = None


@dataclass(frozen=True, slots=True)
class DeclarePairs:
    """F-70: declare going pairs."""

    seat: int


@dataclass(frozen=True, slots=True)
class ShowPairs:
    """F-71 (salon gösterge): show four pairs from the hand to enter pair status."""

    seat: int
    pairs: tuple[tuple[PhysicalCard, PhysicalCard], ...]


@dataclass(frozen=True, slots=True)
class ClaimBottom:
    """F-34 (classic): a pair-goer shows ``shown``, identical to the bottom card, and claims it."""

    seat: int
    shown: PhysicalCard


@dataclass(frozen=True, slots=True)
class Answer:
    """F-80 (salon sorgu): give the queried discard (``give``) or refuse and go pairs."""

    seat: int
    give: bool


Action = (
    Draw
    | TakeDiscard
    | TakeBottom
    | LayDown
    | LayOff
    | RetrieveJoker
    | Discard
    | DeclarePairs
    | ShowPairs
    | ClaimBottom
    | Answer
)
