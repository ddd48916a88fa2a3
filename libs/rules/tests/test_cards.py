"""Cards, codes, packs and the fair shuffle (C-1..C-4, F-1, F-5, E-1)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from masa_rules.cards import (
    JOKER_BLACK,
    JOKER_RED,
    NATURALS,
    Card,
    CardError,
    Colour,
    PhysicalCard,
    Rank,
    Suit,
    elevator_pack,
    fiftyone_pack,
    parse_card,
    sorted_cards,
)
from masa_rules.shuffle import DrawStream, commitment, hand_seed, shuffled


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("10H", "10H"),
        ("TH", "10H"),
        ("th", "10H"),
        ("T♠", "10S"),
        ("a♥", "AH"),
        ("Q♦", "QD"),
        ("2♣", "2C"),
        ("xr", "XR"),
        ("XB", "XB"),
        (" kd ", "KD"),
    ],
)
def test_C1_codes_parse_in_every_accepted_form_and_print_canonically(text: str, code: str) -> None:
    assert parse_card(text).code == code


@pytest.mark.parametrize("text", ["", "1H", "11H", "HH", "10", "X", "XG", "10X", "AHH", "JOKER"])
def test_C1_bad_codes_are_rejected_with_the_rule_id(text: str) -> None:
    with pytest.raises(CardError) as info:
        parse_card(text)
    assert info.value.rule == "C-1"


@given(st.sampled_from([*NATURALS, JOKER_RED, JOKER_BLACK]))
def test_C1_every_card_round_trips_through_its_code_and_index(card: Card) -> None:
    assert parse_card(card.code) is card
    assert Card.from_index(card.index) is card


def test_C2_joker_annotation_is_written_joker_equals_card() -> None:
    from masa_rules.melds import Placed, parse_placed

    card, note = parse_placed("xr=8h")
    assert (card, note) == (JOKER_RED, parse_card("8H"))
    assert Placed(card, parse_card("8H")).code == "XR=8H"


def test_C3_colours_of_suits_and_jokers() -> None:
    assert {s for s in Suit if s.colour is Colour.RED} == {Suit.HEARTS, Suit.DIAMONDS}
    assert JOKER_RED.colour is Colour.RED
    assert JOKER_BLACK.colour is Colour.BLACK
    assert parse_card("QS").colour is Colour.BLACK


def test_C4_two_copies_are_equal_cards_with_distinct_identities() -> None:
    first, second = PhysicalCard.of(parse_card("8H"), 0), PhysicalCard.of(parse_card("8H"), 1)
    assert first.card == second.card
    assert first != second and first.id != second.id
    assert (first.code, second.code) == ("8H", "8H#1")
    assert PhysicalCard.parse("8H#1") == second


def test_F1_fiftyone_pack_has_106_distinct_physical_cards() -> None:
    pack = fiftyone_pack()
    assert len(pack) == 106 == len(set(pack))
    faces = Counter(p.card for p in pack)
    assert faces[JOKER_RED] == faces[JOKER_BLACK] == 1
    assert all(faces[card] == 2 for card in NATURALS)


@pytest.mark.parametrize(("decks", "size"), [(1, 54), (2, 108)])
def test_E1_elevator_packs(decks: int, size: int) -> None:
    pack = elevator_pack(decks)
    assert len(pack) == size == len(set(pack))
    with pytest.raises(CardError):
        elevator_pack(3)


def test_ranks_suits_and_hand_order() -> None:
    assert Rank.ACE > Rank.KING > Rank.TWO
    hand = sorted_cards([parse_card(c) for c in ["XR", "2H", "AS", "3S", "2S"]])
    assert [c.code for c in hand] == ["2S", "3S", "AS", "2H", "XR"]


def test_F5_shuffle_is_deterministic_and_verifiable_from_the_seed() -> None:
    seed = hand_seed("table-7", 3)
    assert seed == hand_seed(b"table-7", 3)
    assert seed != hand_seed("table-7", 4)
    assert len(commitment(seed)) == 64
    deck = fiftyone_pack()
    first = shuffled(deck, seed)
    assert first == shuffled(deck, seed)
    assert sorted(first) == sorted(deck)
    assert first != list(deck)


def test_F5_uniform_draws_stay_in_range_and_cover_it() -> None:
    stream = DrawStream(b"x")
    seen = Counter(stream.below(6) for _ in range(6000))
    assert set(seen) == set(range(6))
    assert min(seen.values()) > 850
    with pytest.raises(ValueError, match="positive"):
        stream.below(0)
