"""Lobby options become a rule set in one place, with every value checked (P-2, §2.9), and
tables with a stake seat players only (P-13)."""

from __future__ import annotations

import pytest
from masa_rules.errors import RuleViolation
from masa_rules.lobby import MAX_HANDS_PER_GAME, LobbyOptions, check_chip_seating, lobby_rules
from masa_rules.ruleset import RuleSet


def test_P2_a_lobby_keeps_the_preset_defaults_it_does_not_change() -> None:
    assert lobby_rules(LobbyOptions()) == (RuleSet.salon(), None)
    assert lobby_rules(LobbyOptions("remi")) == (RuleSet.remi(), None)


def test_F40_F41_F95_options_change_the_rule_set() -> None:
    options = LobbyOptions(
        "classic", open_threshold=101, escalating_threshold=True, hands_per_game=13
    )
    rules, hands = lobby_rules(options)
    assert (rules.open_threshold, rules.escalating_threshold, rules.hands_per_game) == (
        101,
        True,
        13,
    )
    assert hands == 13


def test_F96_salon_hands_cap_the_elimination_and_need_not_be_odd() -> None:
    rules, hands = lobby_rules(LobbyOptions("salon", open_threshold=81, hands_per_game=4))
    assert rules == RuleSet.salon(open_threshold=81) and hands == 4


@pytest.mark.parametrize(
    ("options", "rule"),
    [
        (LobbyOptions("poker"), "F-2"),
        (LobbyOptions("salon", open_threshold=71), "F-40"),
        (LobbyOptions("classic", open_threshold=0), "F-40"),
        (LobbyOptions("remi", open_threshold=81), "F-40"),
        (LobbyOptions("remi", escalating_threshold=True), "F-41"),
        (LobbyOptions("classic", hands_per_game=10), "F-95"),
        (LobbyOptions("remi", hands_per_game=0), "F-95"),
        (LobbyOptions("classic", hands_per_game=MAX_HANDS_PER_GAME + 2), "F-95"),
        (LobbyOptions("salon", hands_per_game=-1), "F-96"),
        (LobbyOptions("salon", hands_per_game=MAX_HANDS_PER_GAME + 1), "F-96"),
    ],
)
def test_an_option_out_of_range_is_refused_with_its_rule(options: LobbyOptions, rule: str) -> None:
    with pytest.raises(RuleViolation) as refused:
        lobby_rules(options)
    assert refused.value.rule == rule


def test_P13_bots_never_sit_at_a_table_with_a_stake() -> None:
    with pytest.raises(RuleViolation) as refused:
        check_chip_seating(1, bots=True)
    assert refused.value.rule == "P-13"
    # Players alone at a chip table, and bots at a table without a stake, are fine.
    check_chip_seating(1, bots=False)
    check_chip_seating(0, bots=True)
