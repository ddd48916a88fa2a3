"""Meld validation, readings, lay-off and joker retrieval (C-2, F-10..F-16, F-50..F-56)."""

from __future__ import annotations

import pytest
from masa_rules.cards import JOKER_BLACK, JOKER_RED, parse_card, parse_cards
from masa_rules.melds import (
    Meld,
    MeldError,
    MeldKind,
    check_meld,
    is_pair,
    lay_off,
    pair_meld,
    readings,
    retrieve_joker,
)
from masa_rules.ruleset import RuleSet

SALON, CLASSIC, REMI = RuleSet.salon(), RuleSet.classic(), RuleSet.remi()


def codes(meld: Meld) -> list[str]:
    return meld.codes


def rule_of(cards: list[str], rules: RuleSet, *, opening: bool = False) -> str:
    with pytest.raises(MeldError) as info:
        check_meld(cards, rules, opening=opening)
    return info.value.rule


def test_F10_a_meld_has_at_least_three_cards() -> None:
    assert rule_of(["8H", "9H"], SALON) == "F-10"
    assert rule_of(["8H", "9S", "JD"], SALON) == "F-10"


def test_F11_runs_are_one_suit_and_consecutive_with_the_ace_high() -> None:
    meld = check_meld(["QS", "KS", "AS"], SALON)
    assert (meld.kind, meld.value(SALON)) == (MeldKind.RUN, 31)
    assert codes(check_meld(["10H", "8H", "9H", "JH"], SALON)) == ["8H", "9H", "10H", "JH"]
    assert rule_of(["8H", "9H", "JH"], SALON) == "F-11"
    assert rule_of(["KH", "AH", "2H"], REMI) == "F-11"
    assert rule_of(["AH", "2H", "3H"], CLASSIC) == "F-11"
    assert rule_of(["AH", "2H", "3H"], SALON) == "F-11"


def test_F11_remi_ace_low_and_the_fourteen_card_run() -> None:
    low = check_meld(["AH", "2H", "3H"], REMI)
    assert (low.start, low.value(REMI)) == (1, 6)
    full = check_meld(
        [
            "AH",
            *[f"{r}H" for r in ["2", "3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K"]],
            "AH",
        ],
        REMI,
    )
    assert len(full.cards) == 14 and full.value(REMI) == 1 + 54 + 30 + 10


def test_F12_sets_are_one_rank_with_distinct_suits_and_at_most_four() -> None:
    meld = check_meld(["10D", "10C", "10H"], SALON)
    assert (meld.kind, codes(meld)) == (MeldKind.SET, ["10H", "10D", "10C"])
    assert rule_of(["10D", "10D", "10H"], SALON) == "F-12"
    assert rule_of(["10S", "10D", "10C", "10H", "XR"], SALON) == "F-12"


def test_F13_jokers_fill_runs_and_sets_but_a_meld_needs_a_natural() -> None:
    assert codes(check_meld(["7H", "XR", "9H"], SALON)) == ["7H", "XR=8H", "9H"]
    assert rule_of(["XR", "XB", "XR"], SALON) in {"F-13", "C-4"}
    assert rule_of(["XR", "XB"], SALON) == "F-10"


def test_F13_remi_allows_one_joker_per_meld_at_opening_only() -> None:
    assert rule_of(["7H", "XR", "XB"], REMI, opening=True) == "F-13"
    assert len(check_meld(["7H", "XR", "XB"], REMI).cards) == 3
    assert len(check_meld(["7H", "XR", "XB"], SALON, opening=True).cards) == 3


def test_F14_values_count_jokers_as_the_card_they_stand_for() -> None:
    assert check_meld(["QS", "KS", "XR"], SALON).value(SALON) == 31
    assert check_meld(["QS", "KS", "XR"], REMI).value(REMI) == 30
    assert check_meld(["AS", "AH", "AD"], CLASSIC).value(CLASSIC) == 33


def test_C2_every_reading_and_the_default_one() -> None:
    found = readings(parse_cards(["8H", "XB", "XR"]), SALON)
    assert [m.codes for m in found][:2] == [["8H", "XR=9H", "XB=10H"], ["8H", "XB=9H", "XR=10H"]]
    kinds = {m.kind for m in found}
    assert kinds == {MeldKind.RUN, MeldKind.SET}
    assert found[0].value(SALON) == max(m.value(SALON) for m in found)


def test_C2_ties_prefer_run_then_lowest_cards() -> None:
    found = readings(parse_cards(["8S", "8H", "XR"]), SALON)
    assert [m.codes for m in found] == [["8S", "8H", "XR=8D"], ["8S", "8H", "XR=8C"]]
    tie = readings(parse_cards(["QS", "XR", "XB"]), SALON)
    assert tie[0].kind is MeldKind.RUN


def test_C2_annotations_choose_the_reading_or_are_rejected() -> None:
    assert codes(check_meld(["8H", "9H", "XR=7H"], SALON)) == ["XR=7H", "8H", "9H"]
    assert rule_of(["8H", "9H", "XR=7S"], SALON) == "C-2"
    assert rule_of(["8H", "9H", "8H=7H"], SALON) == "C-2"
    assert rule_of(["8H", "9H", "XR=XB"], SALON) == "C-2"


def test_F15_pairs_are_identical_cards_or_a_card_and_a_joker() -> None:
    eight = parse_card("8H")
    assert is_pair(eight, eight, SALON)
    assert is_pair(eight, JOKER_RED, SALON)
    assert not is_pair(eight, parse_card("8D"), SALON)
    assert not is_pair(JOKER_RED, JOKER_BLACK, SALON)
    with pytest.raises(MeldError) as info:
        pair_meld(JOKER_RED, JOKER_BLACK, SALON)
    assert info.value.rule == "F-15"
    assert pair_meld(JOKER_RED, eight, SALON).codes == ["XR=8H", "8H"]


def test_F16_the_same_meld_may_exist_twice() -> None:
    first = check_meld(["JS", "JH", "JD"], SALON)
    second = check_meld(["JS", "JH", "JD"], SALON)
    assert first == second


def test_F50_lay_off_extends_runs_at_either_end_and_fills_sets() -> None:
    run = check_meld(["5H", "6H", "7H"], SALON)
    assert lay_off(run, parse_card("8H"), SALON).codes == ["5H", "6H", "7H", "8H"]
    assert lay_off(run, parse_card("4H"), SALON).codes == ["4H", "5H", "6H", "7H"]
    assert lay_off(run, JOKER_RED, SALON, at_end=False).codes == ["XR=4H", "5H", "6H", "7H"]
    with pytest.raises(MeldError) as info:
        lay_off(run, parse_card("9H"), SALON)
    assert info.value.rule == "F-50"
    triple = check_meld(["9S", "9H", "9D"], SALON)
    assert lay_off(triple, parse_card("9C"), SALON).codes == ["9S", "9H", "9D", "9C"]


def test_F51_a_set_of_four_is_closed() -> None:
    closed = check_meld(["9S", "9H", "9D", "9C"], SALON)
    with pytest.raises(MeldError) as info:
        lay_off(closed, JOKER_RED, SALON)
    assert info.value.rule == "F-51"


def test_F55_retrieve_a_joker_from_a_run_a_set_and_a_pair() -> None:
    run = check_meld(["5H", "XR=6H", "7H"], CLASSIC)
    new_run, joker = retrieve_joker(run, parse_card("6H"), CLASSIC)
    assert (new_run.codes, joker) == (["5H", "6H", "7H"], JOKER_RED)
    with pytest.raises(MeldError):
        retrieve_joker(run, parse_card("6D"), CLASSIC)
    aces = check_meld(["AS", "AH", "XB=AD"], CLASSIC)
    new_set, joker = retrieve_joker(aces, parse_card("AC"), CLASSIC)
    assert (new_set.codes, joker) == (["AS", "AH", "AC"], JOKER_BLACK)
    pair = pair_meld(parse_card("QD"), JOKER_RED, CLASSIC)
    new_pair, joker = retrieve_joker(pair, parse_card("QD"), CLASSIC)
    assert (new_pair.codes, joker) == (["QD", "QD"], JOKER_RED)


def test_F56_a_second_joker_keeps_the_card_it_stands_for() -> None:
    two_jokers = check_meld(["8S", "XR=8H", "XB=8D"], SALON)
    after, joker = retrieve_joker(two_jokers, parse_card("8D"), SALON)
    assert (after.codes, joker) == (["8S", "XR=8H", "8D"], JOKER_BLACK)
