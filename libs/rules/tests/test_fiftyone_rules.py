"""51 rule by rule (rules.md F-1..F-97): one or more scenario tests per rule id, on fixed deals."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from fiftyone_support import build, codes, count_cards, pc, position
from masa_rules.cards import PhysicalCard, fiftyone_pack, parse_card
from masa_rules.errors import IllegalAction
from masa_rules.fiftyone import (
    Answer,
    ClaimBottom,
    DeclaredPairs,
    DeclarePairs,
    Discard,
    Draw,
    Event,
    GameEnded,
    HandEnded,
    HandEndReason,
    LaidDown,
    LayDown,
    LayOff,
    Phase,
    RetrieveJoker,
    Revealed,
    ShowPairs,
    State,
    TakeBottom,
    TakeDiscard,
    TookDiscard,
    action_from_json,
    apply,
    event_json,
    is_legal,
    legal_actions,
    new_game,
    start,
    state_from_json,
    timeout_action,
)
from masa_rules.fiftyone.deal import deal_cards
from masa_rules.fiftyone.policies import greedy_policy, random_policy
from masa_rules.melds import check_meld
from masa_rules.ruleset import RuleSet, RuleSetError
from masa_rules.shuffle import DrawStream, commitment, hand_seed


def meld(text: str) -> tuple[tuple[PhysicalCard, Any], ...]:
    """A meld spec from codes such as ``"8H 9H XR=10H"``."""
    out = []
    for code in text.split():
        face, _, note = code.partition("=")
        out.append((pc(face), parse_card(note) if note else None))
    return tuple(out)


def pairs(text: str) -> tuple[tuple[PhysicalCard, PhysicalCard], ...]:
    cards = [pc(c) for c in text.split()]
    return tuple(zip(cards[::2], cards[1::2], strict=True))


def rejects(state: State, action: Any, rule: str) -> None:
    with pytest.raises(IllegalAction) as info:
        apply(state, action)
    assert info.value.rule == rule, info.value
    assert not is_legal(state, action)


def hand_end(events: list[Event]) -> dict[str, Any]:
    return event_json(next(e for e in events if isinstance(e, HandEnded)))


def kinds(events: list[Event]) -> list[str]:
    """The JSON type of each event, in order."""
    return [str(event_json(e)["type"]) for e in events]


def play(state: State, *actions: Any) -> tuple[State, list[Event]]:
    events: list[Event] = []
    for action in actions:
        state, more = apply(state, action)
        events += more
    return state, events


# --------------------------------------------------------------------------- 2.1 pack, deal


def test_F1_the_pack_is_two_decks_and_two_jokers() -> None:
    pack = fiftyone_pack()
    assert len(pack) == 106 and len(set(pack)) == 106
    assert sum(1 for c in pack if c.card.is_joker) == 2
    assert count_cards(new_game(RuleSet.classic(), 4, "f1")) == 106


def test_F2_player_counts_play_order_and_partners() -> None:
    with pytest.raises(IllegalAction) as info:
        new_game(RuleSet.salon(), 3, "f2")
    assert info.value.rule == "F-2"
    assert "salon is played by 4 players, not 3" in str(info.value)
    with pytest.raises(IllegalAction, match=r"classic is played by 2, 3 or 4 players, not 5"):
        new_game(RuleSet.classic(), 5, "f2")
    with pytest.raises(IllegalAction):
        new_game(RuleSet.remi(), 4, "f2", teams=True)
    state = build("classic", hands={0: "2C 9D"}, seat=0)
    state, _ = apply(state, Discard(0, pc("2C")))
    assert state.turn.seat == 1 and state.phase is Phase.DRAW
    from masa_rules.fiftyone.state import partner

    team = build("classic", teams=True)
    assert [partner(team, s) for s in range(4)] == [2, 3, 0, 1]


def test_F3_starter_gets_fifteen_and_the_dealer_rotates() -> None:
    state = new_game(RuleSet.salon(), 4, "f3", hands=3)
    assert state.dealer == 3 and state.turn.seat == 0
    assert [len(s.hand) for s in state.seats] == [15, 14, 14, 14]
    assert len(state.stock) == 106 - 57
    # Finish hand 1 by force: seat 0 holds one card and discards it.
    one = build("classic", hands={0: "2C", 1: "3C"}, seat=0, dealer=3)
    after, events = apply(one, Discard(0, pc("2C")))
    assert hand_end(events)["finisher"] == 0
    assert after.dealer == 0 and after.turn.seat == 1 and len(after.seats[1].hand) == 15


def test_F4_the_cut_places_the_bottom_card_face_up_at_the_bottom() -> None:
    state, events = start(RuleSet.classic(), 4, "f4")
    deal = event_json(events[0])
    assert deal["cutter"] == 2  # the seat before the dealer (3)
    assert state.bottom_card is not None and state.stock[-1] == state.bottom_card
    assert deal["bottom_card"] == state.bottom_card.code
    salon = new_game(RuleSet.salon(), 4, "f4")
    assert salon.bottom_card is None


def test_F4_a_joker_at_the_cut_goes_to_the_cutter_who_is_dealt_one_fewer() -> None:
    deal = deal_cards(RuleSet.classic(), [0, 1, 2, 3], hand_seed("cut", 5))
    assert len(deal.cutter_jokers) == 1 and deal.cutter == 2 and deal.bottom_card is None
    assert deal.cutter_jokers[0] in deal.hands[2] and len(deal.hands[2]) == 14


def test_F4_two_jokers_at_the_cut_both_go_to_the_cutter() -> None:
    deal = deal_cards(RuleSet.classic(), [0, 1, 2, 3], hand_seed("cut", 6855))
    assert len(deal.cutter_jokers) == 2 and deal.bottom_card is None
    assert set(deal.cutter_jokers) <= set(deal.hands[2]) and len(deal.hands[2]) == 14


def test_F4_the_bottom_card_is_drawn_last() -> None:
    state = build(
        "classic",
        hands={1: "2C"},
        stock="5D",
        bottom="9S",
        rest="discard",
        seat=1,
        phase=Phase.DRAW,
    )
    state, _ = apply(state, Draw(1))
    assert codes(state.stock) == ["9S"] and state.bottom_card == pc("9S")


def test_F5_the_commitment_is_published_and_the_seed_revealed() -> None:
    state, events = start(RuleSet.salon(), 4, "f5")
    seed = hand_seed("f5", 1)
    assert (
        event_json(events[0])["commitment"] == hashlib.sha256(seed).hexdigest() == commitment(seed)
    )
    # A third party recomputes the deal from the revealed seed alone.
    deck = DrawStream(seed).shuffle(fiftyone_pack())
    assert state.seats[0].hand == tuple(
        sorted(
            deck[0:2]
            + deck[8:10]
            + deck[16:18]
            + deck[24:26]
            + deck[32:34]
            + deck[40:42]
            + deck[48:50]
            + deck[56:57]
        )
    )
    one = build("salon", hands={0: "2C", 1: "3C"}, seat=0)
    _, ended = apply(one, Discard(0, pc("2C")))
    reveal = event_json(next(e for e in ended if isinstance(e, Revealed)))
    assert hashlib.sha256(bytes.fromhex(str(reveal["seed"]))).hexdigest() == reveal["commitment"]


def test_F6_every_deal_accounts_for_all_cards() -> None:
    for n in range(1, 30):
        deal = deal_cards(RuleSet.remi(), [1, 2, 0], hand_seed("f6", n))
        assert sum(len(h) for h in deal.hands.values()) + len(deal.stock) == 106


# --------------------------------------------------------------------------- 2.2 melds


def test_F10_a_meld_has_at_least_three_cards() -> None:
    state = build(hands={0: "10H JH QH KH AH AS AD 2C"})
    rejects(state, LayDown(0, (meld("AS AD"), meld("10H JH QH KH AH"))), "F-10")


def test_F11_ace_is_high_in_classic_and_may_be_low_in_remi() -> None:
    classic = build("classic", hands={0: "AH 2H 3H 10S JS QS KS AS 5C"})
    rejects(classic, LayDown(0, (meld("AH 2H 3H"), meld("10S JS QS KS AS"))), "F-11")
    remi = build("remi", 3, hands={0: "AH 2H 3H 10S JS QS KS AS 5C 7D"})
    state, _ = apply(remi, LayDown(0, (meld("AH 2H 3H"), meld("10S JS QS KS AS"))))
    assert state.seats[0].opened and state.seats[0].opening_total == 6 + 50


def test_F12_a_set_holds_each_suit_once() -> None:
    state = build(hands={0: "10H JH QH KH AH 9S 9S#1 9D 2C"})
    rejects(state, LayDown(0, (meld("9S 9S#1 9D"), meld("10H JH QH KH AH"))), "F-12")


def test_F13_remi_allows_one_joker_per_meld_at_opening() -> None:
    state = build("remi", 3, hands={0: "XR XB 9H 10S JS QS KS 2C"})
    rejects(state, LayDown(0, (meld("XR XB 9H"), meld("10S JS QS KS"))), "F-13")
    classic = build("classic", hands={0: "XR XB 9H 10S JS QS KS 2C"})
    assert is_legal(classic, LayDown(0, (meld("XR=JH XB=10H 9H"), meld("10S JS QS KS"))))


def test_F13_remi_opening_melds_keep_one_joker_to_the_end_of_the_opening_turn() -> None:
    """F-13: a joker retrieved while opening goes elsewhere, not as a second joker on a meld
    laid down this turn (issue 8, seed ref130: 9H 10H XR=JH QH got XB in the same turn)."""
    state = build(
        "remi",
        3,
        hands={1: "9H 10H XR QH 8C 8D 8S 4S 2D 6C"},
        table=[(0, "3S XB=4S 5S"), (2, "10D JD QD")],
        seat=1,
    )
    opening = (meld("9H 10H XR=JH QH"), meld("8C 8D 8S"))
    state, _ = apply(state, LayDown(1, opening))
    state, _ = apply(state, RetrieveJoker(1, 0, pc("4S")))
    onto_own = LayOff(1, 2, (pc("XB"),), parse_card("KH"))
    rejects(state, onto_own, "F-13")
    assert onto_own not in legal_actions(state, 1)
    assert not any(
        isinstance(a, LayOff) and a.meld == 2 and pc("XB") in a.cards
        for a in legal_actions(state, 1)
    )
    state, _ = apply(state, LayOff(1, 1, (pc("XB"),), parse_card("KD")))
    assert state.table[1].meld.jokers == 1


def test_F13_the_seed_ref130_position_refuses_the_second_joker() -> None:
    data = position("second_joker_on_an_opening_meld")
    state = state_from_json(data["state"])
    rejects(state, action_from_json(data["action"]), "F-13")
    assert action_from_json(data["action"]) not in legal_actions(state, data["seat"])


def test_F14_card_values_and_jokers_worth_their_card() -> None:
    # Q K A of spades is 10+10+11 = 31 in classic, 30 in remi; the joker counts as the ace.
    classic = build("classic", hands={0: "QS KS XR 10H JH 2C"})
    rejects(classic, LayDown(0, (meld("QS KS XR=AS"),)), "F-40")
    assert check_meld(["QS", "KS", "XR=AS"], RuleSet.classic()).value(RuleSet.classic()) == 31
    assert check_meld(["QS", "KS", "XR=AS"], RuleSet.remi()).value(RuleSet.remi()) == 30
    assert check_meld(["AS", "2S", "3S"], RuleSet.remi()).value(RuleSet.remi()) == 6


def test_F15_two_jokers_are_not_a_pair() -> None:
    state = build(hands={0: "XR XB 2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 9D"})
    rejects(state, LayDown(0, (), pairs("XR XB 2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1")), "F-15")
    ok = LayDown(0, (), pairs("XR 9D 2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1"))
    assert is_legal(state, ok)


def test_F16_the_same_meld_may_appear_twice() -> None:
    state = build(hands={0: "JS JH JD JS#1 JH#1 JD#1 2C"})
    state, _ = apply(state, LayDown(0, (meld("JS JH JD"), meld("JS#1 JH#1 JD#1"))))
    assert len(state.table) == 2 and state.seats[0].opening_total == 60


# --------------------------------------------------------------------------- 2.3 a turn


def test_F20_the_starter_discards_without_drawing() -> None:
    state = new_game(RuleSet.classic(), 4, "f20")
    assert state.phase is Phase.PLAY and state.turn.seat == 0
    rejects(state, Draw(0), "F-21")
    discard = next(a for a in legal_actions(state, 0) if isinstance(a, Discard))
    after, _ = apply(state, discard)
    assert after.turn.seat == 1 and after.phase is Phase.DRAW and len(after.seats[0].hand) == 14


def test_F21_take_one_card_then_discard_one() -> None:
    state = build(
        hands={1: "2C 5D"}, stock="9S", seat=1, phase=Phase.DRAW, discard="KD", last_discarder=0
    )
    rejects(state, Discard(1, pc("2C")), "F-21")
    state, _ = apply(state, Draw(1))
    assert sorted(codes(state.seats[1].hand)) == ["2C", "5D", "9S"]
    rejects(state, Draw(1), "F-21")
    state, _ = apply(state, Discard(1, pc("9S")))
    assert state.turn.seat == 2


@pytest.mark.parametrize("preset", ["classic", "salon", "remi"])
def test_F21_F52_a_hand_is_finished_only_by_discarding_its_last_card(preset: str) -> None:
    """F-52 in every preset: the last card is never laid off, it is the finishing discard."""
    state = build(preset, hands={0: "JH"}, table=[(0, "8H 9H 10H")], seats={0: {"opened": True}})
    rejects(state, LayOff(0, 0, (pc("JH"),)), "F-52")
    assert legal_actions(state, 0) == [Discard(0, pc("JH"))]
    ended, events = apply(state, Discard(0, pc("JH")))
    assert hand_end(events)["finisher"] == 0 and ended.hands_scored == 1


def test_F22_only_the_seat_whose_turn_it_is_acts() -> None:
    state = build(hands={0: "2C 3C", 1: "4C"})
    rejects(state, Discard(1, pc("4C")), "F-22")
    assert legal_actions(state, 1) == []


def test_F23_there_is_no_bottom_card_to_take_in_salon() -> None:
    state = build("salon", hands={1: "2C"}, seat=1, phase=Phase.DRAW)
    rejects(state, TakeBottom(1), "F-23")


# --------------------------------------------------------------------------- 2.4 discards

OPEN_WITH_KD = {0: "2C", 1: "10D JD QD AD 3S 7C"}  # K D completes 10-J-Q-K-A of diamonds: 51


def test_F30_an_unopened_seat_takes_the_discard_only_to_open_with_it() -> None:
    state = build(hands={1: "10D JD QD AD 3S 7C"}, discard="KD", seat=1, phase=Phase.DRAW)
    assert TakeDiscard(1) in legal_actions(state, 1)
    state, _ = apply(state, TakeDiscard(1))
    assert state.turn.took == pc("KD") and state.turn.took_rule == "F-30"
    rejects(state, Discard(1, pc("3S")), "F-30")
    state, _ = apply(state, LayDown(1, (meld("10D JD QD KD AD"),)))
    state, _ = apply(state, Discard(1, pc("3S")))
    assert state.seats[1].opened


def test_F30_a_discard_that_does_not_make_the_opening_cannot_be_taken() -> None:
    state = build(hands={1: "10D JD QD AD 3S 7C"}, discard="4H", seat=1, phase=Phase.DRAW)
    rejects(state, TakeDiscard(1), "F-30")
    assert TakeDiscard(1) not in legal_actions(state, 1)


def test_F30_a_seat_already_over_the_threshold_uses_the_card_in_another_meld() -> None:
    hand = "10D JD QD KD AD 5S 5H 3C 9C"
    state = build(hands={1: hand}, discard="5C", seat=1, phase=Phase.DRAW)
    state, _ = apply(state, TakeDiscard(1))
    # Opening without the taken card is allowed only if the card still goes into a meld.
    state2, _ = apply(state, LayDown(1, (meld("10D JD QD KD AD"),)))
    rejects(state2, Discard(1, pc("3C")), "F-30")
    state3, _ = apply(state2, LayDown(1, (meld("5S 5H 5C"),)))
    assert is_legal(state3, Discard(1, pc("3C")))
    useless = build(hands={1: hand}, discard="2D", seat=1, phase=Phase.DRAW)
    rejects(useless, TakeDiscard(1), "F-30")


def test_F31_a_pair_goer_takes_the_discard_without_opening() -> None:
    state = build(
        hands={1: "3S 7C 9H"},
        discard="4H",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"pair_status": True}},
    )
    state, _ = apply(state, TakeDiscard(1))
    assert state.turn.took_rule is None
    assert is_legal(state, Discard(1, pc("3S")))
    going = build(hands={1: "3S 7C 9H"}, discard="4H", seat=1, phase=Phase.DRAW)
    state, events = apply(going, TakeDiscard(1, pairs=True))
    assert state.seats[1].pair_status and isinstance(events[0], DeclaredPairs)


def test_F32_seat_after_pair_goer_cannot_take_discard() -> None:
    hands = {1: "10D JD QD AD 3S 7C"}
    state = build(
        hands=hands, discard="KD", seat=1, phase=Phase.DRAW, seats={0: {"pair_status": True}}
    )
    rejects(state, TakeDiscard(1), "F-32")
    state, _ = apply(state, TakeDiscard(1, pairs=True))
    assert state.seats[1].pair_status


def test_F33_an_opened_seat_must_use_the_taken_discard_in_classic() -> None:
    table = [(1, "4S 5S 6S")]
    state = build(
        hands={1: "9H 2C"},
        discard="7S",
        seat=1,
        phase=Phase.DRAW,
        table=table,
        seats={1: {"opened": True}},
    )
    state, _ = apply(state, TakeDiscard(1))
    rejects(state, Discard(1, pc("2C")), "F-33")
    state, _ = apply(state, LayOff(1, 0, (pc("7S"),)))
    assert is_legal(state, Discard(1, pc("2C")))
    useless = build(
        hands={1: "9H 2C"},
        discard="KD",
        seat=1,
        phase=Phase.DRAW,
        table=table,
        seats={1: {"opened": True}},
    )
    rejects(useless, TakeDiscard(1), "F-33")
    remi = build(
        "remi",
        3,
        hands={1: "9H 2C"},
        discard="KD",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"opened": True}},
    )
    state, _ = apply(remi, TakeDiscard(1))
    assert is_legal(state, Discard(1, pc("9H")))


def test_F33r_remi_first_turn_takes_freely_later_turns_must_open() -> None:
    first = build(
        "remi",
        3,
        hands={1: "3S 7C 9H"},
        discard="4H",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"turns": 1}},
    )
    state, _ = apply(first, TakeDiscard(1))
    assert is_legal(state, Discard(1, pc("3S")))
    later = build("remi", 3, hands={1: "3S 7C 9H"}, discard="4H", seat=1, phase=Phase.DRAW)
    rejects(later, TakeDiscard(1), "F-33r")
    # Later turns: the take is allowed when the seat opens, even without the card.
    opener = build(
        "remi", 3, hands={1: "JD QD KD AD 9S 9H 9C 3S"}, discard="4H", seat=1, phase=Phase.DRAW
    )
    state, _ = apply(opener, TakeDiscard(1))
    rejects(state, Discard(1, pc("3S")), "F-33r")
    state, _ = apply(state, LayDown(1, (meld("JD QD KD AD"), meld("9S 9H 9C"))))
    assert is_legal(state, Discard(1, pc("3S")))


def test_F34_a_pair_goer_claims_the_bottom_card_and_takes_it_on_any_later_turn() -> None:
    """F-34 (reading in the book): once claimed, the bottom card may be taken on any later
    turn of the claimant's, instead of drawing."""
    state = build(
        "classic", hands={1: "9S 2C 3D"}, bottom="9S", seat=1, seats={1: {"pair_status": True}}
    )
    assert ClaimBottom(1, pc("9S")) in legal_actions(state, 1)
    rejects(state, ClaimBottom(1, pc("2C")), "F-34")
    claimed, _ = apply(state, ClaimBottom(1, pc("9S")))
    assert claimed.seats[1].bottom_claim == 10
    # Not in the same turn; on the next turn, instead of drawing.
    rejects(claimed, TakeBottom(1), "F-23")
    later = build(
        "classic",
        hands={1: "9S 2C 3D"},
        bottom="9S",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"pair_status": True, "bottom_claim": 6}},
    )
    assert TakeBottom(1) in legal_actions(later, 1)
    after, _ = apply(later, TakeBottom(1))
    assert pc("9S#1") in after.seats[1].hand and after.bottom_card is None
    unpaired = build("classic", hands={1: "9S 2C"}, bottom="9S", seat=1)
    rejects(unpaired, ClaimBottom(1, pc("9S")), "F-34")


def test_F35_remi_bottom_card_only_with_a_hand_finish() -> None:
    hand = "2H 3H 4H 5H 10S JS QS KS 7D 7C 7H 9C 9D 9S"
    state = build(
        "remi",
        3,
        hands={1: hand},
        bottom="AS",
        seat=1,
        phase=Phase.DRAW,
        seats={0: {"opened": True}},
    )
    finish = TakeBottom(
        1,
        (meld("2H 3H 4H 5H"), meld("10S JS QS KS AS"), meld("7D 7C 7H"), meld("9C 9D 9S")),
        None,
    )
    rejects(state, finish, "F-35")
    action = next(a for a in legal_actions(state, 1) if isinstance(a, TakeBottom))
    _after, events = apply(state, action)
    end = hand_end(events)
    assert end["finish"] == {"by_hand": True, "joker": False, "pairs": False, "bottom_card": True}
    assert end["scores"][1] == -120
    opened = build(
        "remi",
        3,
        hands={1: hand},
        bottom="AS",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"opened": True}},
    )
    assert not any(isinstance(a, TakeBottom) for a in legal_actions(opened, 1))


@pytest.mark.parametrize("preset", ["classic", "salon", "remi"])
def test_F36_a_taken_discard_is_not_discarded_again_in_the_same_turn(preset: str) -> None:
    players = 4 if preset == "salon" else 3
    table = [(0, "4S 5S 6S")]
    state = build(
        preset,
        players,
        hands={1: "9H 2C 3D"},
        discard="7S",
        seat=1,
        phase=Phase.DRAW,
        table=table,
        seats={1: {"opened": True}},
    )
    state, _ = apply(state, TakeDiscard(1))
    rejects(state, Discard(1, pc("7S")), "F-36")
    assert not any(isinstance(a, Discard) and a.card == pc("7S") for a in legal_actions(state, 1))
    if preset == "remi":
        # Remi's free take: the card need not be used, but another card is discarded.
        assert is_legal(state, Discard(1, pc("9H")))


def test_F36_a_seat_keeps_a_card_to_discard_besides_the_taken_one() -> None:
    state = build(
        "remi",
        3,
        hands={1: "8C 9C 10C"},
        discard="KD",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"opened": True}},
    )
    state, _ = apply(state, TakeDiscard(1))
    rejects(state, LayDown(1, (meld("8C 9C 10C"),)), "F-36")
    assert legal_actions(state, 1) == [
        Discard(1, pc("8C")),
        Discard(1, pc("9C")),
        Discard(1, pc("10C")),
    ]


def test_F31_F55_a_pair_goer_may_retrieve_a_joker_with_the_taken_discard() -> None:
    """Seed ref34 (classic, 3 players, hand 12): the taken 8S went into a joker retrieval, and
    listing the seat's lay-downs raised StopIteration."""
    data = position("pair_goer_retrieves_with_the_taken_discard")
    state = state_from_json(data["state"])
    seat = data["seat"]
    assert state.turn.took is not None and state.turn.took not in state.seats[seat].hand
    actions = legal_actions(state, seat)
    assert actions and all(is_legal(state, a) for a in actions)
    for policy in (random_policy, greedy_policy):
        assert is_legal(state, policy(state, seat, DrawStream(b"ref34")))


def test_F33r_F52_a_seat_that_must_open_is_offered_an_opening_keeping_a_card() -> None:
    """Seed ref125 (remi, 2 players, hand 2): after an F-33r take the only opening that keeps
    a card to discard is worth exactly 51, and it was not offered (IndexError in greedy)."""
    data = position("must_open_keeping_a_card_to_discard")
    state = state_from_json(data["state"])
    seat = data["seat"]
    (opening,) = legal_actions(state, seat)
    assert isinstance(opening, LayDown)
    after, events = apply(state, opening)
    laid = next(e for e in events if isinstance(e, LaidDown))
    assert laid.opening and laid.value == 51 == laid.threshold
    assert after.seats[seat].hand and state.turn.took not in after.seats[seat].hand
    assert isinstance(greedy_policy(state, seat, DrawStream(b"ref125")), LayDown)


# --------------------------------------------------------------------------- 2.5 opening


def test_F40_the_opening_reaches_the_threshold() -> None:
    state = build(hands={0: "10H JH QH KH 9S 9D 9C 2C"})
    rejects(state, LayDown(0, (meld("10H JH QH KH"),)), "F-40")
    state2, _ = apply(state, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))))
    assert state2.seats[0].opening_total == 67
    high = build(RuleSet.classic(open_threshold=81), hands={0: "10H JH QH KH 9S 9D 9C 2C"})
    rejects(high, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))), "F-40")


def test_F41_escalating_tables_need_one_more_than_the_highest_opening() -> None:
    rules = RuleSet.classic(escalating_threshold=True)
    hand = "10H JH QH KH 9S 9D 9C 2C"
    state = build(rules, hands={0: hand}, high_open=67)
    rejects(state, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))), "F-41")
    state = build(rules, hands={0: hand}, high_open=66)
    assert is_legal(state, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))))
    five = "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6C 6C#1 9D"
    state = build(rules, hands={0: five}, high_pairs=5)
    rejects(state, LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6C 6C#1")), "F-41")


def test_F42_salon_threshold_is_101_after_a_pair_opening() -> None:
    hand = "10H JH QH KH 9S 9D 9C 2C"
    state = build("salon", hands={0: hand}, pair_opened=True)
    rejects(state, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))), "F-42")
    classic = build("classic", hands={0: hand}, pair_opened=True)
    assert is_legal(classic, LayDown(0, (meld("10H JH QH KH"), meld("9S 9D 9C"))))


def test_F43_five_pairs_or_four_pairs_and_a_meld_open_regardless_of_points() -> None:
    state = build(hands={0: "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1 9S"})
    after, _ = apply(state, LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1")))
    assert after.seats[0].opened_with_pairs and after.pair_opened
    rejects(state, LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1")), "F-43")
    mixed = build(hands={0: "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 7H 8H 9H KS"})
    assert is_legal(
        mixed, LayDown(0, (meld("7H 8H 9H"),), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1"))
    )
    remi = build("remi", 3, hands={0: "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1 9S"})
    rejects(remi, LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1")), "F-43")


def test_F43_pair_openers_lay_no_runs_and_meld_openers_no_pairs() -> None:
    paired = build(
        hands={0: "7H 8H 9H KS KS#1 2C"}, seats={0: {"opened": True, "opened_with_pairs": True}}
    )
    rejects(paired, LayDown(0, (meld("7H 8H 9H"),)), "F-43")
    assert is_legal(paired, LayDown(0, (), pairs("KS KS#1")))
    melded = build(hands={0: "7H 8H 9H KS KS#1 2C"}, seats={0: {"opened": True}})
    rejects(melded, LayDown(0, (), pairs("KS KS#1")), "F-43")
    assert is_legal(melded, LayDown(0, (meld("7H 8H 9H"),)))


def test_F44_cards_laid_off_while_opening_do_not_count() -> None:
    table = [(2, "4S 5S 6S")]
    state = build(hands={0: "10H JH QH KH 7S 8S 2C 9D"}, table=table)
    rejects(state, LayOff(0, 0, (pc("7S"),)), "F-50")
    rejects(state, LayDown(0, (meld("10H JH QH KH"),)), "F-40")
    opened = build(hands={0: "10H JH QH KH AH 7S 8S 2C"}, table=table)
    opened, _ = apply(opened, LayDown(0, (meld("10H JH QH KH AH"),)))
    opened, _ = apply(opened, LayOff(0, 0, (pc("7S"),)))
    assert opened.seats[0].opening_total == 51 and len(opened.table[0].cards) == 4


def test_F45_a_seat_may_hold_back_its_opening() -> None:
    state = build(hands={0: "10H JH QH KH AH 7S 8S 2C"})
    actions = legal_actions(state, 0)
    assert any(isinstance(a, LayDown) for a in actions)
    assert Discard(0, pc("2C")) in actions


def test_F46_a_partners_opening_counts_for_laying_off_and_scoring() -> None:
    table = [(0, "4S 5S 6S")]
    state = build(
        "classic",
        teams=True,
        hands={2: "7S 9D KH"},
        table=table,
        seat=2,
        seats={0: {"opened": True}},
    )
    state, _ = apply(state, LayOff(2, 0, (pc("7S"),)))
    assert state.seats[2].opened is False
    finisher = build(
        "classic",
        teams=True,
        hands={1: "3C", 0: "QS", 2: "9D KH", 3: "5H"},
        seat=1,
        seats={0: {"opened": True}},
    )
    end = hand_end(apply(finisher, Discard(1, pc("3C")))[1])
    assert end["scores"] == [10, 0, 19, 0]


def test_F47_an_opened_seat_lays_down_melds_of_any_value() -> None:
    state = build(hands={0: "2C 3C 4C 9D"}, seats={0: {"opened": True}})
    state, _ = apply(state, LayDown(0, (meld("2C 3C 4C"),)))
    assert len(state.table) == 1


# --------------------------------------------------------------------------- 2.6 laying off


def test_F50_lay_off_on_runs_sets_and_pairs() -> None:
    table = [(1, "4S 5S 6S"), (2, "9H 9D 9C")]
    state = build(hands={0: "3S 9S 2C"}, table=table, seats={0: {"opened": True}})
    state, _ = apply(state, LayOff(0, 0, (pc("3S"),)))
    state, _ = apply(state, LayOff(0, 1, (pc("9S"),)))
    assert codes(state.table[0].cards) == ["3S", "4S", "5S", "6S"]
    assert len(state.table[1].cards) == 4
    pair_state = build(hands={0: "QD QD#1 2C"}, pairs=[(3, "QH QH#1")], seats={0: {"opened": True}})
    rejects(pair_state, LayOff(0, 0, (pc("QD"), pc("QD#1"))), "F-50")
    pairing = build(hands={0: "QH 2C XR"}, pairs=[(3, "QH#1 XB")], seats={0: {"opened": True}})
    after, _ = apply(pairing, LayOff(0, 0, (pc("QH"), pc("XR"))))
    assert after.table[-1].owner == 3 and after.table[-1].meld.kind.value == "pair"
    unopened = build(hands={0: "3S 2C"}, table=table)
    rejects(unopened, LayOff(0, 0, (pc("3S"),)), "F-50")


def test_F51_a_set_of_four_is_closed() -> None:
    state = build(hands={0: "9S 2C 3D"}, table=[(1, "9H 9D 9C 9S")], seats={0: {"opened": True}})
    rejects(state, LayOff(0, 0, (pc("9S"),)), "F-51")


@pytest.mark.parametrize("preset", ["classic", "salon", "remi"])
def test_F52_the_last_card_is_never_laid_off_or_laid_down(preset: str) -> None:
    players = 4 if preset == "salon" else 3
    layoff = build(
        preset, players, hands={0: "7S"}, table=[(1, "4S 5S 6S")], seats={0: {"opened": True}}
    )
    rejects(layoff, LayOff(0, 0, (pc("7S"),)), "F-52")
    assert legal_actions(layoff, 0) == [Discard(0, pc("7S"))]
    whole = build(preset, players, hands={0: "8C 9C 10C"}, seats={0: {"opened": True}})
    rejects(whole, LayDown(0, (meld("8C 9C 10C"),)), "F-52")
    assert not any(isinstance(a, LayDown) for a in legal_actions(whole, 0))
    # Classic and salon used to let a seat empty its hand and sit at 0 cards for rounds.
    opening = build(preset, players, hands={0: "JS QS KS AS 10H JH QH KH AH"})
    rejects(opening, LayDown(0, (meld("JS QS KS AS"), meld("10H JH QH KH AH"))), "F-52")
    assert legal_actions(opening, 0)


def test_F55_retrieve_a_joker_from_a_run() -> None:
    state = build(hands={0: "8H 5C 5D"}, table=[(1, "7H XR=8H 9H")], seats={0: {"opened": True}})
    state, events = apply(state, RetrieveJoker(0, 0, pc("8H")))
    assert event_json(events[0])["joker"] == "XR" and pc("XR") in state.seats[0].hand
    rejects(state, Discard(0, pc("5C")), "F-55")
    state, _ = apply(state, LayOff(0, 0, (pc("XR"),), stands_for=pc("10H").card))
    assert state.turn.jokers == () and is_legal(state, Discard(0, pc("5C")))


def test_F55_retrieve_a_joker_from_a_set_with_any_missing_suit() -> None:
    table = [(1, "AS AH XR=AD")]
    state = build(hands={0: "AC 5C 6C 7C 2D"}, table=table, seats={0: {"opened": True}})
    # The joker stands for AD, but the ace of clubs, a suit the set lacks, releases it too.
    state, _ = apply(state, RetrieveJoker(0, 0, pc("AC")))
    assert sorted(p.stands_for.code for p in state.table[0].meld.cards) == ["AC", "AH", "AS"]
    rejects(
        build(hands={0: "AS 5C 6C 7C 2D"}, table=table, seats={0: {"opened": True}}),
        RetrieveJoker(0, 0, pc("AS")),
        "F-55",
    )


def test_F55_retrieve_a_joker_from_a_pair() -> None:
    state = build(hands={0: "QH 5C 6C 2D"}, pairs=[(1, "QH#1 XB")], seats={0: {"opened": True}})
    state, _ = apply(state, RetrieveJoker(0, 0, pc("QH")))
    assert pc("XB") in state.seats[0].hand
    state, _ = apply(state, LayDown(0, (meld("5C 6C XB"),)))
    assert state.turn.jokers == ()


def test_F55_an_unopened_seat_retrieves_only_while_opening() -> None:
    table = [(1, "7H XR=8H 9H")]
    cannot = build(hands={0: "8H 2C 5D"}, table=table)
    rejects(cannot, RetrieveJoker(0, 0, pc("8H")), "F-55")
    can = build(hands={0: "8H JS QS KS 10D 10C 2C"}, table=table)
    state, _ = apply(can, RetrieveJoker(0, 0, pc("8H")))
    rejects(state, Discard(0, pc("2C")), "F-55")
    assert state.turn.must_open
    state, _ = apply(state, LayDown(0, (meld("JS QS KS"), meld("10D 10C XR=10H"))))
    assert state.seats[0].opened


def test_F56_jokers_keep_the_card_they_stand_for() -> None:
    state = build(hands={0: "10H 2C 3D"}, table=[(1, "7H XR=8H 9H")], seats={0: {"opened": True}})
    state, _ = apply(state, LayOff(0, 0, (pc("10H"),)))
    assert [p.code for p in state.table[0].meld.cards] == ["7H", "XR=8H", "9H", "10H"]


# --------------------------------------------------------------------------- 2.7 finishing


def test_F60_finish_kinds_normal_by_hand_joker_and_pairs() -> None:
    normal = build(hands={0: "2C", 1: "3C"}, seats={0: {"opened": True}})
    assert hand_end(apply(normal, Discard(0, pc("2C")))[1])["finish"] == {
        "by_hand": False,
        "joker": False,
        "pairs": False,
        "bottom_card": False,
    }
    by_hand = build(hands={0: "10H JH QH KH AH 2C", 1: "3C"})
    _, events = play(by_hand, LayDown(0, (meld("10H JH QH KH AH"),)), Discard(0, pc("2C")))
    assert hand_end(events)["finish"]["by_hand"]
    joker = build(hands={0: "XR", 1: "3C"}, seats={0: {"opened": True}})
    assert hand_end(apply(joker, Discard(0, pc("XR")))[1])["finish"]["joker"]
    from_pairs = build(
        hands={0: "2C", 1: "3C"}, seats={0: {"opened": True, "opened_with_pairs": True}}
    )
    assert hand_end(apply(from_pairs, Discard(0, pc("2C")))[1])["finish"]["pairs"]


def test_F61_classic_islek_discard_is_illegal() -> None:
    state = build("classic", hands={0: "7S 2C 3D"}, table=[(1, "4S 5S 6S")])
    rejects(state, Discard(0, pc("7S")), "F-61")
    assert Discard(0, pc("7S")) not in legal_actions(state, 0)
    last = build("classic", hands={0: "7S"}, table=[(1, "4S 5S 6S")], seats={0: {"opened": True}})
    assert is_legal(last, Discard(0, pc("7S")))


def test_F61_a_hand_of_islek_cards_only_may_discard_one() -> None:
    """F-61 (reading in the book): when every card a seat may discard is işlek, discarding one
    is allowed (the rule cannot make a turn impossible); in salon it is still fined."""
    table = [(1, "4S 5S 6S"), (2, "9H 9D 9C")]
    state = build("classic", hands={0: "7S 3S 9S"}, table=table, seats={0: {"opened": True}})
    discards = [a for a in legal_actions(state, 0) if isinstance(a, Discard)]
    assert discards == [Discard(0, pc("3S")), Discard(0, pc("7S")), Discard(0, pc("9S"))]
    salon = build("salon", hands={0: "7S 3S 9S"}, table=table, seats={0: {"opened": True}})
    _after, events = apply(salon, Discard(0, pc("7S")))
    assert event_json(events[0])["penalty"] == 51


def test_F61_classic_twin_exception_locks_the_shown_twin() -> None:
    state = build("classic", hands={0: "7S 7S#1 2C 3D"}, table=[(1, "4S 5S 6S")])
    action = Discard(0, pc("7S"), pc("7S#1"))
    assert action in legal_actions(state, 0)
    state, _ = apply(state, action)
    assert state.seats[0].locked == (pc("7S#1"),)
    later = build(
        "classic",
        hands={0: "7S#1 2C 3D"},
        table=[(1, "4S 5S 6S")],
        seats={0: {"locked": (pc("7S#1"),)}},
    )
    rejects(later, Discard(0, pc("7S#1")), "F-61")
    opened = build(
        "classic", hands={0: "7S 7S#1 2C 3D"}, table=[(1, "4S 5S 6S")], seats={0: {"opened": True}}
    )
    rejects(opened, action, "F-61")


def test_F61_salon_islek_costs_51_with_one_free_in_pair_status() -> None:
    state = build("salon", hands={0: "7S 2C 3D"}, table=[(1, "4S 5S 6S")])
    after, events = apply(state, Discard(0, pc("7S")))
    assert event_json(events[0])["penalty"] == 51 and after.seats[0].islek_penalty == 51
    paired = build(
        "salon", hands={0: "7S 8S 2C 3D"}, table=[(1, "4S 5S 6S")], seats={0: {"pair_status": True}}
    )
    after, events = apply(paired, Discard(0, pc("7S")))
    assert event_json(events[0])["penalty"] == 0 and after.seats[0].free_islek_used == 1
    again = build(
        "salon",
        hands={0: "7S 2C"},
        table=[(1, "4S 5S 6S")],
        seats={0: {"pair_status": True, "free_islek_used": 1}},
    )
    assert event_json(apply(again, Discard(0, pc("7S")))[1][0])["penalty"] == 51


def test_F61_remi_islek_is_allowed_without_penalty() -> None:
    state = build("remi", 3, hands={0: "7S 2C 3D"}, table=[(1, "4S 5S 6S")])
    _after, events = apply(state, Discard(0, pc("7S")))
    assert event_json(events[0]) == {
        "type": "discard",
        "seat": 0,
        "card": "7S",
        "islek": True,
        "penalty": 0,
    }


def test_F62_remi_hand_finish_scores_minus_80_and_doubles_the_others() -> None:
    hand = "2H 3H 4H 5H 10S JS QS KS 7D 7C 7H 9C"
    state = build("remi", 3, hands={0: hand, 1: "5C 6D", 2: "XR"}, seats={2: {"opened": True}})
    _, events = play(
        state,
        LayDown(0, (meld("2H 3H 4H 5H"), meld("10S JS QS KS"), meld("7D 7C 7H"))),
        Discard(0, pc("9C")),
    )
    end = hand_end(events)
    assert end["finish"]["by_hand"] and end["scores"] == [-80, 200, 40]


def test_F62_laying_off_on_others_spoils_a_remi_hand_finish() -> None:
    hand = "2H 3H 4H 5H 10S JS QS KS 7S 9C"
    state = build("remi", 3, hands={0: hand, 1: "5C"}, table=[(2, "4S 5S 6S")])
    _, events = play(
        state,
        LayDown(0, (meld("2H 3H 4H 5H"), meld("10S JS QS KS"))),
        LayOff(0, 0, (pc("7S"),)),
        Discard(0, pc("9C")),
    )
    end = hand_end(events)
    assert not end["finish"]["by_hand"] and end["scores"][0] == -40


@pytest.mark.parametrize(
    ("preset", "players", "opened", "expect"),
    [
        ("classic", 4, False, "replay"),
        ("classic", 4, True, "score"),
        ("salon", 4, False, "score"),
        ("remi", 3, False, "reshuffle"),
    ],
)
def test_F63_deck_exhaustion_per_preset(
    preset: str, players: int, opened: bool, expect: str
) -> None:
    state = build(
        preset,
        players,
        hands={1: "2C 9D"},
        stock="",
        discard="",
        seat=1,
        phase=Phase.DRAW,
        rest="discard",
        seats={0: {"opened": opened}},
        hands_scored=0,
    )
    assert state.stock == ()
    after, events = apply(state, Draw(1))
    types = kinds(events)
    if expect == "reshuffle":
        assert types[0] == "reshuffle" and len(after.seats[1].hand) == 3 and len(after.discard) == 1
        empty = build(
            preset, players, hands={1: "2C"}, seat=1, phase=Phase.DRAW, rest="discard", reshuffles=1
        )
        assert hand_end(apply(empty, Draw(1))[1])["finisher"] is None
        return
    end = hand_end(events)
    assert end["finisher"] is None
    if expect == "replay":
        assert end["scores"] == [0, 0, 0, 0] and after.hands_scored == 0
    else:
        assert after.hands_scored == 1 and end["scores"][1] > 0


@pytest.mark.parametrize(("replayed_before", "replays"), [(0, True), (2, True), (3, False)])
def test_F63_classic_replays_at_most_max_replays_hands_of_a_game(
    replayed_before: int, replays: bool
) -> None:
    """Nobody ever opening would replay a classic hand without end: once a game has replayed
    ``max_replays`` hands, a hand nobody opened is scored without a finisher (F-63 reading)."""
    rules = RuleSet.classic(max_replays=3)
    state = build(
        rules,
        4,
        hands={1: "2C 9D"},
        stock="",
        seat=1,
        phase=Phase.DRAW,
        rest="discard",
        hand_no=1 + replayed_before + 4,
        hands_scored=4,
    )
    after, events = apply(state, Draw(1))
    end = next(e for e in events if isinstance(e, HandEnded))
    assert end.finisher is None and end.reason is HandEndReason.STOCK_EXHAUSTED
    assert end.replayed is replays
    if replays:
        assert end.scores == (0, 0, 0, 0) and after.hands_scored == 4
    else:
        # F-92: no finisher, no multipliers, never kafa: every unopened seat pays its 100.
        assert end.scores == (100, 100, 100, 100) and after.hands_scored == 5
    assert after.hand_no == state.hand_no + 1


def test_F63_max_replays_bounds_the_hands_of_a_classic_game() -> None:
    """With no replays allowed a one-hand game deals exactly one hand, whatever is played."""
    rules = RuleSet.classic(max_replays=0)
    for seed in range(6):
        state, _ = start(rules, 2, f"replays-{seed}", hands=1)
        rng = DrawStream(f"replays-{seed}".encode())
        while state.phase is not Phase.OVER:
            state, _ = apply(state, random_policy(state, state.to_act[0], rng))
        assert state.hand_no == 1 and state.hands_scored == 1


def test_F63_max_replays_is_a_non_negative_option() -> None:
    assert RuleSet.classic().max_replays == 11
    with pytest.raises(RuleSetError) as info:
        RuleSet.classic(max_replays=-1)
    assert info.value.rule == "F-63"


def hand_back_and_forth(state: State, turns: int) -> tuple[State, list[Event]]:
    """Each seat takes the discard and discards another card: no card from the stock."""
    events: list[Event] = []
    for _ in range(turns):
        seat = state.turn.seat
        state, more = apply(state, TakeDiscard(seat))
        events += more
        card = next(c for c in state.seats[seat].hand if c != state.turn.took)
        state, more = apply(state, Discard(seat, card))
        events += more
    return state, events


@pytest.mark.parametrize(
    ("preset", "players", "seats", "scored"),
    [
        ("remi", 2, {0: {"opened": True}, 1: {"opened": True}}, True),
        ("classic", 2, {0: {"pair_status": True}, 1: {"pair_status": True}}, False),
        ("salon", 4, {s: {"pair_status": True} for s in range(4)}, True),
    ],
)
def test_F64_stall_rounds_without_a_stock_draw_end_the_hand_as_F63(
    preset: str, players: int, seats: dict[int, dict[str, bool]], scored: bool
) -> None:
    """Two seats could hand discards back and forth for ever (seed ref31, remi greedy, hand 7):
    after ``stall_rounds`` full rounds without a card from the stock the hand ends as F-63
    ends it: no finisher, scored, and a classic hand nobody opened is replayed."""
    rules = RuleSet.preset_named(preset, stall_rounds=2)
    hands = {s: f"{rank}S {rank}H {rank}C" for s, rank in zip(range(players), "2345", strict=False)}
    state = build(rules, players, hands=hands, discard="KD", seat=0, phase=Phase.DRAW, seats=seats)
    almost, events = hand_back_and_forth(state, 2 * players - 1)
    assert almost.hand_no == state.hand_no and almost.turns_without_draw == 2 * players - 1
    assert not any(isinstance(e, HandEnded) for e in events)
    after, events = hand_back_and_forth(almost, 1)
    end = next(e for e in events if isinstance(e, HandEnded))
    assert end.reason is HandEndReason.STALLED and end.finisher is None
    assert end.replayed is not scored and after.hands_scored == (1 if scored else 0)
    assert after.hand_no == state.hand_no + 1 or after.phase is Phase.OVER


def test_F64_a_card_drawn_from_the_stock_restarts_the_count() -> None:
    rules = RuleSet.remi(stall_rounds=1)
    seats = {0: {"opened": True}, 1: {"opened": True}}
    state = build(
        rules,
        2,
        hands={0: "2S 2H 2C", 1: "3S 3H 3C"},
        discard="KD",
        seat=0,
        phase=Phase.DRAW,
        seats=seats,
    )
    state, _ = hand_back_and_forth(state, 1)
    state, _ = apply(state, Draw(1))
    state, _ = apply(state, Discard(1, state.seats[1].hand[0]))
    assert state.turns_without_draw == 0 and state.hand_no == 1
    state, _ = hand_back_and_forth(state, 1)
    assert state.turns_without_draw == 1
    _after, events = hand_back_and_forth(state, 1)
    assert next(e for e in events if isinstance(e, HandEnded)).reason is HandEndReason.STALLED


def test_F64_stall_rounds_is_a_positive_option() -> None:
    assert RuleSet.classic().stall_rounds == RuleSet.remi().stall_rounds == 10
    with pytest.raises(RuleSetError) as info:
        RuleSet.remi(stall_rounds=0)
    assert info.value.rule == "F-64"


# --------------------------------------------------------------------------- 2.8 pairs, sorgu


def test_F70_declaring_pairs_allows_only_a_pair_opening_and_doubles_a_loss() -> None:
    state = build(hands={0: "10H JH QH KH AH 2C 3D"})
    state, _ = apply(state, DeclarePairs(0))
    assert state.seats[0].pair_status
    rejects(state, LayDown(0, (meld("10H JH QH KH AH"),)), "F-70")
    rejects(state, DeclarePairs(0), "F-70")
    remi = build("remi", 3, hands={0: "2C 3D"})
    rejects(remi, DeclarePairs(0), "F-70")
    loser = build(hands={0: "2C", 1: "3C"}, seats={1: {"pair_status": True}})
    assert hand_end(apply(loser, Discard(0, pc("2C")))[1])["scores"][1] == 200


@pytest.mark.parametrize("preset", ["classic", "salon"])
def test_F70_opening_with_pairs_puts_the_seat_in_pair_status(preset: str) -> None:
    hands = {0: "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 9D 9D#1 KS"}
    state = build(preset, hands=hands)
    assert not state.seats[0].pair_status
    state, _ = apply(state, LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 9D 9D#1")))
    assert state.seats[0].opened_with_pairs and state.seats[0].pair_status
    # A losing pair opener pays double (F-91).
    loser = build(
        preset,
        hands={0: "2C", 1: "KS"},
        seats={0: {"opened": True}, 1: {"opened": True, "opened_with_pairs": True}},
    )
    paired = build(
        preset,
        hands={0: "2C", 1: "KS"},
        seats={
            0: {"opened": True},
            1: {"opened": True, "opened_with_pairs": True, "pair_status": True},
        },
    )
    single = hand_end(apply(loser, Discard(0, pc("2C")))[1])["scores"][1]
    assert hand_end(apply(paired, Discard(0, pc("2C")))[1])["scores"][1] == 2 * single == 20


def test_F71_salon_gosterge_shows_four_pairs() -> None:
    state = build("salon", hands={0: "2C 2C#1 3C 3C#1 4C 4C#1 5C XR 9D"})
    show = ShowPairs(0, pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C XR"))
    state, _events = apply(state, show)
    assert (
        state.seats[0].pair_status and state.seats[0].shown_pairs and len(state.seats[0].hand) == 9
    )
    classic = build("classic", hands={0: "2C 2C#1 3C 3C#1 4C 4C#1 5C XR 9D"})
    rejects(classic, show, "F-71")


def test_F80_sorgu_asks_the_unopened_and_refusal_puts_them_in_pair_status() -> None:
    state = build(
        "salon",
        hands={1: "10D JD QD AD 3S 7C", 2: "2C", 3: "4C", 0: "5C"},
        discard="KD",
        seat=1,
        phase=Phase.DRAW,
        seats={3: {"opened": True}},
    )
    state, events = apply(state, TakeDiscard(1))
    assert state.phase is Phase.QUERY and event_json(events[-1])["asked"] == [0, 2]
    assert state.to_act == (0, 2)
    assert legal_actions(state, 0) == [Answer(0, True), Answer(0, False)]
    rejects(state, Draw(1), "F-80")
    assert timeout_action(state, 2) == Answer(2, True)
    state, _ = apply(state, Answer(2, False))
    state, events = apply(state, timeout_action(state, 0) or Answer(0, True))
    assert state.phase is Phase.PLAY and pc("KD") in state.seats[1].hand
    assert state.seats[2].pair_status and not state.seats[0].pair_status
    assert isinstance(events[-1], TookDiscard)


def test_F80_sorgu_is_skipped_when_the_taker_holds_two_cards_or_less() -> None:
    table = [(3, "9D 10D JD")]
    state = build(
        "salon",
        hands={1: "QD AD 5S", 0: "5C"},
        table=table,
        discard="KD",
        seat=1,
        phase=Phase.DRAW,
        seats={1: {"opened": True}},
    )
    state, _ = apply(state, TakeDiscard(1))
    assert state.phase is Phase.PLAY
    # F-52: a two-card taker could only open with all three cards, so it cannot take to open;
    # the skip matters where a table raises query_skip_max_hand.
    low = RuleSet.salon(open_threshold=30, allowed_thresholds=())
    two = build(low, hands={1: "QD AD", 0: "5C"}, discard="KD", seat=1, phase=Phase.DRAW)
    rejects(two, TakeDiscard(1), "F-30")
    wide = low.with_options(query_skip_max_hand=3)
    small = build(wide, hands={1: "QD AD 5S", 0: "5C"}, discard="KD", seat=1, phase=Phase.DRAW)
    small, events = apply(small, TakeDiscard(1))
    assert small.phase is Phase.PLAY and kinds(events) == ["take_discard"]


# --------------------------------------------------------------------------- 2.10 scoring


def test_F90_classic_scores_cards_in_hand_and_100_unopened() -> None:
    state = build(
        "classic", hands={0: "2C", 1: "AS XR 5D", 2: "KD", 3: "9H"}, seats={1: {"opened": True}}
    )
    end = hand_end(apply(state, Discard(0, pc("2C")))[1])
    assert end["scores"] == [0, 11 + 25 + 5, 100, 100] and not end["kafa"]


def test_F90_salon_kafa_when_nobody_but_the_finisher_opened_or_is_in_pair_status() -> None:
    """F-90 (reading in the book): kafa scores 200 for the unopened when no seat but the
    finisher opened and no seat but the finisher is in pair status."""
    state = build("salon", hands={0: "2C", 1: "AS", 2: "KD", 3: "9H"}, seats={0: {"opened": True}})
    end = hand_end(apply(state, Discard(0, pc("2C")))[1])
    assert end["kafa"] and end["scores"] == [0, 200, 200, 200]
    declared = build(
        "salon",
        hands={0: "2C", 1: "AS", 2: "KD", 3: "9H"},
        seats={0: {"opened": True}, 2: {"pair_status": True}},
    )
    end = hand_end(apply(declared, Discard(0, pc("2C")))[1])
    assert not end["kafa"] and end["scores"] == [0, 100, 200, 100]


@pytest.mark.parametrize(
    ("finisher", "card", "factor"),
    [
        ({"opened": True}, "XR", 2),
        ({"opened": True, "opened_with_pairs": True}, "2C", 2),
        ({"opened": True, "opened_with_pairs": True}, "XR", 4),
    ],
)
def test_F91_finish_multipliers_and_their_products(
    finisher: dict[str, Any], card: str, factor: int
) -> None:
    state = build(
        "classic",
        hands={0: card, 1: "KD", 2: "9H 3C", 3: "5S"},
        seats={0: finisher, 1: {"opened": True}, 3: {"pair_status": True}},
    )
    end = hand_end(apply(state, Discard(0, pc(card)))[1])
    assert end["scores"] == [0, 10 * factor, 100 * factor, 100 * factor * 2]


def test_F91_classic_hand_finish_doubles_and_islek_is_added_after() -> None:
    state = build(
        "classic", hands={0: "10H JH QH KH AH XR", 1: "KD", 2: "9H"}, seats={1: {"opened": True}}
    )
    _, events = play(state, LayDown(0, (meld("10H JH QH KH AH"),)), Discard(0, pc("XR")))
    end = hand_end(events)
    assert end["finish"]["by_hand"] and end["finish"]["joker"]
    assert end["scores"] == [0, 40, 400, 400]
    salon = build(
        "salon",
        hands={0: "2C", 1: "KD"},
        seats={
            0: {"opened": True},
            1: {"opened": True, "islek_penalty": 51},
            2: {"opened": True},
            3: {"opened": True},
        },
    )
    end = hand_end(apply(salon, Discard(0, pc("2C")))[1])
    assert end["scores"][1] == 10 + 51


def test_F92_no_finisher_means_no_finish_multipliers() -> None:
    state = build(
        "salon",
        hands={1: "KD", 2: "5C"},
        seat=1,
        phase=Phase.DRAW,
        rest="discard",
        seats={1: {"opened": True}, 2: {"pair_status": True}},
    )
    end = hand_end(apply(state, Draw(1))[1])
    assert end["finisher"] is None and end["scores"] == [100, 10, 200, 100]


def test_F93_team_scoring_partner_of_the_finisher_scores_zero() -> None:
    state = build(
        "salon",
        teams=True,
        hands={0: "2C", 1: "KD", 2: "AS AH", 3: "5C"},
        seats={0: {"opened": True}, 1: {"opened": True}},
    )
    _after, events = apply(state, Discard(0, pc("2C")))
    end = hand_end(events)
    assert end["scores"] == [0, 10, 0, 5]
    assert end["totals"][1] + end["totals"][3] == 15


def test_F94_remi_scores() -> None:
    state = build(
        "remi",
        3,
        hands={0: "2C", 1: "KD XR", 2: "5C"},
        seats={0: {"opened": True}, 1: {"opened": True}},
    )
    end = hand_end(apply(state, Discard(0, pc("2C")))[1])
    assert end["scores"] == [-40, 10 + 20, 100]


# --------------------------------------------------------------------------- 2.11 a game


def test_F95_a_game_is_a_fixed_number_of_hands_and_ties_share_a_place() -> None:
    state = build(
        "classic",
        hands={0: "2C", 1: "KD", 2: "KS", 3: "5C"},
        seats={1: {"opened": True}, 2: {"opened": True}, 3: {"opened": True}},
        hands_scored=10,
    )
    after, events = apply(state, Discard(0, pc("2C")))
    assert after.phase is Phase.OVER
    game_end = event_json(events[-1])
    assert game_end["ranking"] == [[0], [3], [1, 2]]
    assert RuleSet.classic(hands_per_game=9).hands_per_game == 9


def test_F96_salon_elimination_over_a_rising_limit() -> None:
    totals = (0, 20, 40, 60)
    state = build(
        "salon", hands={0: "2C", 1: "KD", 2: "KS", 3: "5C"}, totals=totals, hands_scored=1
    )
    after, events = apply(state, Discard(0, pc("2C")))
    end = hand_end(events)
    # After hand 2 the limit is 121: 20+200 and 40+200 and 60+200 are all over it.
    assert end["scores"] == [0, 200, 200, 200] and end["eliminated"] == [1, 2, 3]
    assert after.phase is Phase.OVER and after.ranking == ((0,), (1,), (2,), (3,))
    keep = build(
        "salon",
        hands={0: "2C", 1: "KD", 2: "KS", 3: "5C"},
        totals=(0, 20, 40, 60),
        hands_scored=1,
        seats={s: {"opened": True} for s in range(4)},
    )
    after, events = apply(keep, Discard(0, pc("2C")))
    assert hand_end(events)["eliminated"] == [] and after.active == (True,) * 4


@pytest.mark.parametrize(("max_hands", "over"), [(2, True), (3, False)])
def test_F96_an_elimination_game_ends_after_elimination_max_hands(
    max_hands: int, over: bool
) -> None:
    """Players who keep their scores under the rising limit could play on for ever: after
    ``elimination_max_hands`` scored hands the game ends, the players still in ranked by
    total (F-96 reading)."""
    rules = RuleSet.salon(elimination_max_hands=max_hands)
    state = build(
        rules,
        hands={0: "2C", 1: "KD", 2: "KS", 3: "5C"},
        totals=(0, 20, 40, 60),
        hands_scored=1,
        seats={s: {"opened": True} for s in range(4)},
    )
    after, events = apply(state, Discard(0, pc("2C")))
    assert hand_end(events)["eliminated"] == [] and after.active == (True,) * 4
    assert (after.phase is Phase.OVER) is over
    if over:
        assert after.totals == (0, 30, 50, 65)
        assert after.ranking == ((0,), (1,), (2,), (3,))
        assert event_json(events[-1])["type"] == "game_end"


def test_F96_elimination_max_hands_is_a_positive_option() -> None:
    assert RuleSet.salon().elimination_max_hands == 100
    with pytest.raises(RuleSetError) as info:
        RuleSet.salon(elimination_max_hands=0)
    assert info.value.rule == "F-96"


def test_F96_team_is_out_over_twice_the_limit() -> None:
    state = build(
        "salon",
        teams=True,
        hands={0: "2C", 1: "KD", 3: "5C"},
        totals=(0, 100, 0, 100),
        hands_scored=0,
        seats={0: {"opened": True}, 2: {"opened": True}, 1: {"opened": True}, 3: {"opened": True}},
    )
    after, events = apply(state, Discard(0, pc("2C")))
    assert hand_end(events)["eliminated"] == []  # 215 <= 222
    state = build(
        "salon",
        teams=True,
        hands={0: "2C", 1: "KD", 3: "5C"},
        totals=(0, 110, 0, 100),
        hands_scored=0,
        seats={0: {"opened": True}, 2: {"opened": True}, 1: {"opened": True}, 3: {"opened": True}},
    )
    after, events = apply(state, Discard(0, pc("2C")))
    assert hand_end(events)["eliminated"] == [1, 3] and after.ranking == ((0, 2), (1, 3))


def test_F97_the_final_ranking_is_in_the_game_end_event() -> None:
    state = build(
        "remi",
        3,
        hands={0: "2C", 1: "KD", 2: "5C"},
        hands_scored=10,
        totals=(0, 100, 0),
        seats={1: {"opened": True}},
    )
    _after, events = apply(state, Discard(0, pc("2C")))
    assert isinstance(events[-1], GameEnded) and events[-1].ranking == ((0,), (2,), (1,))


def test_F91_pairs_joker_and_hand_finish_multiply_to_eight() -> None:
    hand = "2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1 XR"
    state = build("classic", hands={0: hand, 1: "KD", 2: "9H"}, seats={1: {"opened": True}})
    _, events = play(
        state,
        LayDown(0, (), pairs("2C 2C#1 3C 3C#1 4C 4C#1 5C 5C#1 6D 6D#1")),
        Discard(0, pc("XR")),
    )
    end = hand_end(events)
    assert end["finish"] == {"by_hand": True, "joker": True, "pairs": True, "bottom_card": False}
    assert end["scores"] == [0, 80, 800, 800]


def test_F96_the_limit_rises_by_ten_each_hand() -> None:
    seats = {s: {"opened": True} for s in range(4)}
    # After hand 3 the limit is 131: a total of 130 stays, 132 leaves.
    state = build(
        "salon",
        hands={0: "2C", 1: "2D", 2: "4D", 3: "5C"},
        totals=(0, 128, 128, 0),
        hands_scored=2,
        seats=seats,
    )
    after, events = apply(state, Discard(0, pc("2C")))
    assert hand_end(events)["totals"] == [0, 130, 132, 5]
    assert hand_end(events)["eliminated"] == [2] and after.active == (True, True, False, True)
    assert after.turn.seat != 2 and after.seats[2].hand == ()


def test_F21_an_emptied_hand_finishes_later_by_drawing_and_discarding() -> None:
    state = build(
        "classic",
        hands={0: "", 1: "KD"},
        stock="9S",
        seat=0,
        phase=Phase.DRAW,
        seats={0: {"opened": True}},
    )
    state, _ = apply(state, Draw(0))
    _after, events = apply(state, Discard(0, pc("9S")))
    assert hand_end(events)["finisher"] == 0


def test_F61_a_joker_is_never_islek_unless_the_table_says_so() -> None:
    """F-61 (reading in the book): a joker fits every meld, so it is never işlek by default."""
    table = [(1, "4S 5S 6S")]
    plain = build("classic", hands={0: "XR 2C 3D"}, table=table)
    assert is_legal(plain, Discard(0, pc("XR")))
    strict = build(RuleSet.classic(islek_joker=True), hands={0: "XR 2C 3D"}, table=table)
    rejects(strict, Discard(0, pc("XR")), "F-61")


def test_F61_F90_islek_fines_are_charged_to_the_finisher_too() -> None:
    """F-61, F-90 (reading in the book): a fine is for the act, so the finisher pays its own;
    ``islek_penalty_for_finisher`` lets a table choose otherwise."""
    seats: dict[int, dict[str, object]] = {
        0: {"opened": True, "islek_penalty": 51},
        1: {"opened": True},
    }
    hands = {0: "2C", 1: "KD", 2: "5C", 3: "6C"}
    paid = hand_end(apply(build("salon", hands=hands, seats=seats), Discard(0, pc("2C")))[1])
    assert paid["scores"][0] == 51
    rules = RuleSet.salon(islek_penalty_for_finisher=False)
    free = hand_end(apply(build(rules, hands=hands, seats=seats), Discard(0, pc("2C")))[1])
    assert free["scores"][0] == 0


def test_F5_a_third_party_recomputes_a_cut_deal_from_the_revealed_seed() -> None:
    """The procedure of :mod:`masa_rules.fiftyone.deal`, written out independently."""
    state, events = start(RuleSet.classic(), 4, "verify")
    seed = hand_seed("verify", 1)
    assert hashlib.sha256(seed).hexdigest() == event_json(events[0])["commitment"]
    stream = DrawStream(seed)
    deck = stream.shuffle(fiftyone_pack())
    k = 2 + stream.below(len(deck) - 3)
    deck = deck[k:] + deck[:k]
    kept: list[PhysicalCard] = []
    while deck[0].card.is_joker and len(kept) < 2:
        kept.append(deck.pop(0))
    bottom = None if kept else deck.pop(0)
    order = [0, 1, 2, 3]  # the starter first, the dealer (3) last; the cutter is seat 2
    need = {s: 14 + (s == 0) - (len(kept) if s == 2 else 0) for s in order}
    hands: dict[int, list[PhysicalCard]] = {s: list(kept) if s == 2 else [] for s in order}
    while any(need.values()):
        for s in order:
            give = min(2, need[s])
            hands[s] += deck[:give]
            deck = deck[give:]
            need[s] -= give
    for s in order:
        assert state.seats[s].hand == tuple(sorted(hands[s]))
    assert state.stock == tuple(deck) + ((bottom,) if bottom else ())
