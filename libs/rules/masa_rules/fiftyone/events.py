"""What happened: the events :func:`~masa_rules.fiftyone.engine.apply` reports, one class each.

Events carry engine values (physical cards, table melds with their kinds), never JSON; the
codec (:func:`~masa_rules.fiftyone.codec.event_json`) writes them for a seat, a spectator or
the log. Two events hold facts only one seat may see (P-20): each hand of :class:`Deal` and
the card of :class:`Drew` belong to their seat; everything else is played face up.

Meld positions (``first``, ``meld``, ``at``) are indices into the table after the action, the
numbers :class:`~masa_rules.fiftyone.actions.LayOff` and
:class:`~masa_rules.fiftyone.actions.RetrieveJoker` name melds by.

>>> from masa_rules.fiftyone.codec import event_json
>>> event_json(TookDiscard(seat=1, card=PhysicalCard.parse("7S")))
{'type': 'take_discard', 'seat': 1, 'card': '7S'}
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from masa_rules.cards import PhysicalCard

from .state import TableMeld

__all__ = [
    "Answered",
    "ClaimedBottom",
    "Deal",
    "DeclaredPairs",
    "Discarded",
    "Drew",
    "Event",
    "Finish",
    "GameEnded",
    "HandEndReason",
    "HandEnded",
    "LaidDown",
    "LaidOff",
    "QueryEnded",
    "QueryStarted",
    "Reshuffled",
    "RetrievedJoker",
    "Revealed",
    "ShowedPairs",
    "TookBottom",
    "TookDiscard",
]


@dataclass(frozen=True, slots=True)
class Finish:
    """F-60: the kinds of a finish, which combine."""

    by_hand: bool = False
    joker: bool = False
    pairs: bool = False
    bottom_card: bool = False


class HandEndReason(enum.Enum):
    """Why a hand ended: a finishing discard (F-60), or no finisher (F-63, F-64)."""

    OUT = "out"
    STOCK_EXHAUSTED = "stock_exhausted"
    STALLED = "stalled"


@dataclass(frozen=True, slots=True)
class Deal:
    """F-3..F-5: a hand is dealt; the commitment to its seed is public before play.

    ``hands`` are the cards dealt, in seat order; each seat may see its own only.
    """

    hand: int
    dealer: int
    starter: int
    # F-4: the seat that cut and the jokers it kept; None where the preset does not cut.
    cutter: int | None
    cutter_jokers: tuple[PhysicalCard, ...]
    bottom_card: PhysicalCard | None
    stock: int
    commitment: str
    hands: tuple[tuple[PhysicalCard, ...], ...]


@dataclass(frozen=True, slots=True)
class Drew:
    """F-21: ``seat`` drew from the stock (``stock`` cards left); only it sees ``card``."""

    seat: int
    stock: int
    card: PhysicalCard


@dataclass(frozen=True, slots=True)
class TookDiscard:
    """F-30..F-33r: ``seat`` took the previous player's discard."""

    seat: int
    card: PhysicalCard


@dataclass(frozen=True, slots=True)
class QueryStarted:
    """F-80: ``taker`` wants ``card`` to open; ``asked`` must give it or refuse."""

    taker: int
    card: PhysicalCard
    asked: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Answered:
    """F-80: ``seat`` gave the queried card (``give``) or refused it."""

    seat: int
    give: bool


@dataclass(frozen=True, slots=True)
class QueryEnded:
    """F-80: every answer is in; ``refused`` went into pair status (F-70)."""

    taker: int
    refused: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TookBottom:
    """F-34, F-35: ``seat`` took the face-up bottom card."""

    seat: int
    card: PhysicalCard


@dataclass(frozen=True, slots=True)
class ClaimedBottom:
    """F-34: ``seat`` showed ``shown``, identical to the bottom card, and claimed it."""

    seat: int
    shown: PhysicalCard


@dataclass(frozen=True, slots=True)
class LaidDown:
    """F-40..F-47: ``seat`` laid down ``melds`` (runs and sets first, then pairs).

    They are table melds ``first`` onwards. An opening (``opening``) is worth ``value`` (its
    pair count for a pair opening) and had to reach ``threshold`` (pairs needed for a pair
    opening); a later lay-down's ``value`` is the sum of its runs and sets, its threshold 0.
    """

    seat: int
    first: int
    melds: tuple[TableMeld, ...]
    opening: bool
    value: int
    threshold: int


@dataclass(frozen=True, slots=True)
class LaidOff:
    """F-50: ``seat`` laid ``cards`` off on table meld ``meld``.

    ``result`` is the meld the cards went into, now table meld ``at``: the extended run or
    set (``at == meld``), or a new pair in a pair opener's area (a new index).
    """

    seat: int
    meld: int
    cards: tuple[PhysicalCard, ...]
    at: int
    result: TableMeld


@dataclass(frozen=True, slots=True)
class RetrievedJoker:
    """F-55: ``seat`` put ``card`` into table meld ``meld`` and took ``joker``."""

    seat: int
    meld: int
    card: PhysicalCard
    joker: PhysicalCard
    result: TableMeld


@dataclass(frozen=True, slots=True)
class DeclaredPairs:
    """F-70: ``seat`` went pairs, by declaring it or (``with_take``) by taking the discard
    without opening (F-31)."""

    seat: int
    with_take: bool = False


@dataclass(frozen=True, slots=True)
class ShowedPairs:
    """F-71: ``seat`` showed ``pairs`` (gösterge) and so went pairs."""

    seat: int
    pairs: tuple[tuple[PhysicalCard, PhysicalCard], ...]


@dataclass(frozen=True, slots=True)
class Discarded:
    """F-21, F-60, F-61: ``seat`` discarded ``card``; ``finishing`` when it was the last.

    ``islek`` marks a card that could have been laid off (F-61), ``penalty`` what it cost,
    ``twin`` the identical card shown under the classic exception.
    """

    seat: int
    card: PhysicalCard
    islek: bool
    penalty: int
    twin: PhysicalCard | None
    finishing: bool


@dataclass(frozen=True, slots=True)
class Reshuffled:
    """F-63 remi: the discard pile but its top card became stock number ``number``."""

    number: int
    stock: int


@dataclass(frozen=True, slots=True)
class Revealed:
    """F-5: the seed of hand ``hand``, whose SHA-256 is ``commitment``."""

    hand: int
    seed: bytes
    commitment: str


@dataclass(frozen=True, slots=True)
class HandEnded:
    """F-5, F-60..F-64, F-90..F-96: the score of hand ``hand`` and its revealed seed.

    Per seat, in seat order: whether it opened (with pairs), its pair status, its işlek
    fines, the cards left in its hand (face up now), its score and its total. ``eliminated``
    left the table after this hand (F-96). A classic hand nobody opened before the stock ran
    out is ``replayed``: it scores nothing and does not count (F-63).
    """

    hand: int
    reason: HandEndReason
    finisher: int | None
    finish: Finish
    kafa: bool
    replayed: bool
    opened: tuple[bool, ...]
    opened_with_pairs: tuple[bool, ...]
    pair_status: tuple[bool, ...]
    islek_penalties: tuple[int, ...]
    hands_left: tuple[tuple[PhysicalCard, ...], ...]
    scores: tuple[int, ...]
    totals: tuple[int, ...]
    eliminated: tuple[int, ...]
    # F-5: the hand's seed, also revealed by the Revealed event just before.
    seed: bytes


@dataclass(frozen=True, slots=True)
class GameEnded:
    """F-95..F-97: the final totals and the ranking, groups of tied seats, best first."""

    totals: tuple[int, ...]
    ranking: tuple[tuple[int, ...], ...]


Event = (
    Deal
    | Drew
    | TookDiscard
    | QueryStarted
    | Answered
    | QueryEnded
    | TookBottom
    | ClaimedBottom
    | LaidDown
    | LaidOff
    | RetrievedJoker
    | DeclaredPairs
    | ShowedPairs
    | Discarded
    | Reshuffled
    | Revealed
    | HandEnded
    | GameEnded
)
