"""Cards, their codes and the packs (rules.md C-1..C-4, F-1, E-1).

Glossary:

- *card* (:class:`Card`): a face such as ``8H`` or the red joker ``XR``. Two decks hold two
  copies of every natural face; they are equal for every rule (C-4).
- *physical card* (:class:`PhysicalCard`): one of those copies, so that a hand, the stock,
  the discard pile and the table can account for every card without duplicates.
- *index*: a small integer for a face, ``suit * 13 + (rank - 2)`` for naturals, 52 for ``XR``
  and 53 for ``XB``. The solver works on bitmasks over these indices.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from .errors import RuleViolation

__all__ = [
    "JOKER_BLACK",
    "JOKER_RED",
    "NATURALS",
    "Card",
    "CardError",
    "Colour",
    "PhysicalCard",
    "Rank",
    "Suit",
    "elevator_pack",
    "fiftyone_pack",
    "format_cards",
    "parse_card",
    "parse_cards",
    "sorted_cards",
]


class CardError(RuleViolation):
    """A card code that C-1 does not accept, or a pack that does not exist."""

    def __init__(self, message: str, rule: str = "C-1") -> None:
        super().__init__(rule, message)


class Colour(enum.Enum):
    """C-3: hearts and diamonds are red, spades and clubs black; ``XR`` red, ``XB`` black."""

    RED = "red"
    BLACK = "black"


class Suit(enum.IntEnum):
    """The four suits, in the order used for sorting and for card indices."""

    SPADES = 0
    HEARTS = 1
    DIAMONDS = 2
    CLUBS = 3

    @property
    def letter(self) -> str:
        return "SHDC"[self]

    @property
    def colour(self) -> Colour:
        return Colour.RED if self in (Suit.HEARTS, Suit.DIAMONDS) else Colour.BLACK


class Rank(enum.IntEnum):
    """Ranks 2..A; the ace is high by default (F-11, E-1)."""

    TWO = 2
    THREE = 3
    FOUR = 4
    FIVE = 5
    SIX = 6
    SEVEN = 7
    EIGHT = 8
    NINE = 9
    TEN = 10
    JACK = 11
    QUEEN = 12
    KING = 13
    ACE = 14

    @property
    def code(self) -> str:
        return _RANK_CODES[self]


_RANK_CODES: Final = {
    **{Rank(r): str(r) for r in range(2, 11)},
    Rank.JACK: "J",
    Rank.QUEEN: "Q",
    Rank.KING: "K",
    Rank.ACE: "A",
}
_RANK_BY_CODE: Final = {code: rank for rank, code in _RANK_CODES.items()} | {"T": Rank.TEN}
_SUIT_BY_CODE: Final = {
    "S": Suit.SPADES,
    "H": Suit.HEARTS,
    "D": Suit.DIAMONDS,
    "C": Suit.CLUBS,
    "♠": Suit.SPADES,
    "♥": Suit.HEARTS,
    "♦": Suit.DIAMONDS,
    "♣": Suit.CLUBS,
    "♤": Suit.SPADES,
    "♡": Suit.HEARTS,
    "♢": Suit.DIAMONDS,
    "♧": Suit.CLUBS,
}


@dataclass(frozen=True, slots=True, order=False)
class Card:
    """A card face: a natural (``rank`` and ``suit`` set) or a joker (both ``None``).

    >>> parse_card("10h")
    Card('10H')
    >>> parse_card("XR").is_joker, parse_card("XR").colour
    (True, <Colour.RED: 'red'>)
    """

    rank: Rank | None
    suit: Suit | None
    colour: Colour
    # Derived from the three above once, as plain attributes: the rules read them more than
    # anything else. ``index`` is the face index: ``suit * 13 + rank - 2`` for naturals, 52
    # ``XR``, 53 ``XB``.
    is_joker: bool = field(init=False, compare=False, repr=False)
    index: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.rank is None or self.suit is None:
            object.__setattr__(self, "is_joker", True)
            object.__setattr__(self, "index", 52 if self.colour is Colour.RED else 53)
        else:
            object.__setattr__(self, "is_joker", False)
            object.__setattr__(self, "index", int(self.suit) * 13 + int(self.rank) - 2)

    @property
    def code(self) -> str:
        if self.rank is None or self.suit is None:
            return "XR" if self.colour is Colour.RED else "XB"
        return self.rank.code + self.suit.letter

    def natural_rank(self) -> Rank:
        """The rank of a natural card; a joker has none."""
        if self.rank is None:
            raise CardError(f"{self.code} is a joker and has no rank", "C-1")
        return self.rank

    def natural_suit(self) -> Suit:
        """The suit of a natural card; a joker has none."""
        if self.suit is None:
            raise CardError(f"{self.code} is a joker and has no suit", "C-1")
        return self.suit

    def sort_key(self) -> tuple[int, int]:
        """Jokers last; naturals by suit, then rank."""
        if self.rank is None or self.suit is None:
            return (4, self.index)
        return (int(self.suit), int(self.rank))

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"Card({self.code!r})"

    @staticmethod
    def from_index(index: int) -> Card:
        """The interned card for a face index (0..53)."""
        try:
            return _BY_INDEX[index]
        except IndexError:
            raise CardError(f"no card has index {index}") from None


def _make_all() -> tuple[Card, ...]:
    naturals = [Card(rank, suit, suit.colour) for suit in Suit for rank in Rank]
    return (*naturals, Card(None, None, Colour.RED), Card(None, None, Colour.BLACK))


_BY_INDEX: Final = _make_all()
NATURALS: Final[tuple[Card, ...]] = _BY_INDEX[:52]
JOKER_RED: Final = _BY_INDEX[52]
JOKER_BLACK: Final = _BY_INDEX[53]
_BY_CODE: Final = {card.code: card for card in _BY_INDEX}


def parse_card(text: str) -> Card:
    """Parse a card code (C-1): ranks ``2..10 J Q K A`` or ``T``, suits ``S H D C`` or symbols.

    >>> parse_card("T♠"), parse_card("qd"), parse_card("xb")
    (Card('10S'), Card('QD'), Card('XB'))
    """
    code = text.strip().upper()
    found = _BY_CODE.get(code)
    if found is not None:
        return found
    if len(code) >= 2:
        rank = _RANK_BY_CODE.get(code[:-1])
        suit = _SUIT_BY_CODE.get(code[-1])
        if rank is not None and suit is not None:
            return _BY_INDEX[int(suit) * 13 + int(rank) - 2]
    raise CardError(f"not a card code: {text!r} (rank 2-10/J/Q/K/A/T and suit S/H/D/C, or XR/XB)")


def parse_cards(texts: Iterable[str]) -> list[Card]:
    """Parse several codes; the first bad one raises :class:`CardError`."""
    return [parse_card(text) for text in texts]


def format_cards(cards: Iterable[Card]) -> list[str]:
    """Canonical codes, in the given order."""
    return [card.code for card in cards]


@dataclass(frozen=True, slots=True, order=True)
class PhysicalCard:
    """One physical copy of a face (C-4). ``copy`` tells the decks apart; it never affects a rule.

    The code is the face code, with ``#1`` appended for the second copy: ``8H``, ``8H#1``.
    """

    face_index: int
    copy: int = 0
    # The face, looked up once: the rules read it more than anything else.
    card: Card = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "card", _BY_INDEX[self.face_index])

    @property
    def code(self) -> str:
        face = _BY_INDEX[self.face_index].code
        return face if self.copy == 0 else f"{face}#{self.copy}"

    @property
    def id(self) -> int:
        """A dense id, unique within any pack of this library (at most 2 copies of 54 faces)."""
        return self.copy * 54 + self.face_index

    def __str__(self) -> str:
        return self.code

    @staticmethod
    def of(card: Card, copy: int = 0) -> PhysicalCard:
        return PhysicalCard(card.index, copy)

    @staticmethod
    def parse(text: str) -> PhysicalCard:
        """Parse ``8H`` or ``8H#1``."""
        face, _, copy = text.partition("#")
        if copy and not copy.isdigit():
            raise CardError(f"not a physical card code: {text!r}")
        return PhysicalCard(parse_card(face).index, int(copy) if copy else 0)


def fiftyone_pack() -> tuple[PhysicalCard, ...]:
    """F-1: two 52-card decks plus one red and one black joker, 106 cards, in a fixed order."""
    naturals = tuple(PhysicalCard(i, copy) for copy in (0, 1) for i in range(52))
    return (*naturals, PhysicalCard(52), PhysicalCard(53))


def elevator_pack(decks: int = 1) -> tuple[PhysicalCard, ...]:
    """E-1: one or two packs of 52 cards plus ``XR`` and ``XB``: 54 or 108 cards."""
    if decks not in (1, 2):
        raise CardError(f"Elevator uses one or two packs, not {decks}", "E-1")
    return tuple(PhysicalCard(i, copy) for copy in range(decks) for i in range(54))


def sorted_cards(cards: Sequence[Card]) -> list[Card]:
    """Cards sorted by suit then rank, jokers last (the hand order clients show)."""
    return sorted(cards, key=Card.sort_key)
