"""Cards over the wire (C-1..C-4): every physical card survives a round trip; junk is refused."""

from __future__ import annotations

import pytest
from masa.common.v1 import card_pb2
from masa_rules.cards import PhysicalCard, elevator_pack, fiftyone_pack
from masa_wire import WireError
from masa_wire.cards import card_from_proto, card_to_proto, face_from_proto


def test_every_physical_card_of_both_packs_round_trips() -> None:
    for card in {*fiftyone_pack(), *elevator_pack(2)}:
        assert card_from_proto(card_to_proto(card)) == card


def test_suits_and_ranks_use_the_proto_numbers() -> None:
    message = card_to_proto(PhysicalCard.parse("10H#1"))
    assert (message.rank, message.suit, message.copy) == (
        card_pb2.RANK_TEN,
        card_pb2.SUIT_HEARTS,
        1,
    )
    joker = card_to_proto(PhysicalCard.parse("XB"))
    assert joker.joker_colour == card_pb2.COLOUR_BLACK
    assert (joker.rank, joker.suit) == (0, 0)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (card_pb2.Card(), "C-1"),
        (card_pb2.Card(rank=card_pb2.RANK_ACE), "C-1"),
        (card_pb2.Card(suit=card_pb2.SUIT_CLUBS), "C-1"),
        (card_pb2.Card(rank=card_pb2.Rank.ValueType(1), suit=card_pb2.SUIT_CLUBS), "C-1"),
        (card_pb2.Card(rank=card_pb2.RANK_ACE, suit=card_pb2.Suit.ValueType(9)), "C-1"),
        (card_pb2.Card(rank=card_pb2.RANK_ACE, joker_colour=card_pb2.COLOUR_RED), "C-1"),
        (card_pb2.Card(joker_colour=card_pb2.Colour.ValueType(7)), "C-1"),
        (card_pb2.Card(rank=card_pb2.RANK_ACE, suit=card_pb2.SUIT_CLUBS, copy=2), "C-4"),
    ],
)
def test_a_message_that_is_no_card_is_a_wire_error(message: card_pb2.Card, reason: str) -> None:
    with pytest.raises(WireError) as raised:
        card_from_proto(message)
    assert raised.value.reason == reason


def test_a_face_ignores_the_copy() -> None:
    assert face_from_proto(card_to_proto(PhysicalCard.parse("QS#1"))).code == "QS"
