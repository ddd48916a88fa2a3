"""Cards (C-1..C-4) between ``masa_rules.cards`` and ``masa.common.v1.Card``.

The proto suit numbers are the library's plus one, because proto3 reserves 0 for
``SUIT_UNSPECIFIED`` (the suit of a joker). Ranks share their numbers (2..14).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from masa.common.v1 import card_pb2
from masa_rules.cards import JOKER_BLACK, JOKER_RED, Card, PhysicalCard, Rank, Suit

from masa_wire.errors import WireError

__all__ = [
    "card_from_proto",
    "card_to_proto",
    "cards_from_proto",
    "cards_to_proto",
    "face_from_proto",
    "face_to_proto",
]

# Two decks at most anywhere in masa (F-1, E-1).
_MAX_COPY = 1


def face_to_proto(card: Card, copy: int = 0) -> card_pb2.Card:
    """A face (no physical identity) as a proto card with the given copy."""
    if card.rank is None or card.suit is None:
        colour = card_pb2.COLOUR_RED if card == JOKER_RED else card_pb2.COLOUR_BLACK
        return card_pb2.Card(joker_colour=colour, copy=copy)
    return card_pb2.Card(
        rank=card_pb2.Rank.ValueType(int(card.rank)),
        suit=card_pb2.Suit.ValueType(int(card.suit) + 1),
        copy=copy,
    )


# Every physical card's message, built once: views and events carry dozens of cards each, and
# building a message costs more than copying one. Shared, so never to be changed: a message
# given to a constructor, CopyFrom, append or extend is copied, which every caller does.
_MESSAGES: Final = tuple(
    face_to_proto(Card.from_index(index), copy)
    for copy in range(_MAX_COPY + 1)
    for index in range(54)
)


def card_to_proto(card: PhysicalCard) -> card_pb2.Card:
    """The card's message (shared: copy it in, never change it)."""
    return _MESSAGES[card.copy * 54 + card.face_index]


def cards_to_proto(cards: Iterable[PhysicalCard]) -> list[card_pb2.Card]:
    """The cards' messages (shared: copy them in, never change them)."""
    messages = _MESSAGES
    return [messages[card.copy * 54 + card.face_index] for card in cards]


def face_from_proto(message: card_pb2.Card) -> Card:
    """The face a proto card names; a card that is neither a natural nor a joker is refused."""
    rank, suit, colour = int(message.rank), int(message.suit), int(message.joker_colour)
    if colour:
        if rank or suit:
            raise WireError("a joker has neither rank nor suit", "C-1")
        if colour == card_pb2.COLOUR_RED:
            return JOKER_RED
        if colour == card_pb2.COLOUR_BLACK:
            return JOKER_BLACK
        raise WireError(f"unknown joker colour {colour}", "C-1")
    if not rank and not suit:
        raise WireError("a card needs a rank and a suit, or a joker colour", "C-1")
    try:
        natural_rank, natural_suit = Rank(rank), Suit(suit - 1)
    except ValueError:
        raise WireError(f"no card has rank {rank} and suit {suit}", "C-1") from None
    return Card.from_index(int(natural_suit) * 13 + int(natural_rank) - 2)


def card_from_proto(message: card_pb2.Card) -> PhysicalCard:
    if message.copy > _MAX_COPY:
        raise WireError(f"copy {message.copy} does not exist; there are two decks at most", "C-4")
    return PhysicalCard.of(face_from_proto(message), message.copy)


def cards_from_proto(messages: Sequence[card_pb2.Card]) -> tuple[PhysicalCard, ...]:
    return tuple(card_from_proto(message) for message in messages)
