"""JSON for 51 actions, rule sets and states round-trips exactly (C-1, C-2, C-4)."""

from __future__ import annotations

import json

import pytest
from masa_rules.cards import PhysicalCard, parse_card
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone import (
    Action,
    Answer,
    ClaimBottom,
    DeclarePairs,
    Discard,
    Draw,
    LayDown,
    LayOff,
    RetrieveJoker,
    ShowPairs,
    TakeBottom,
    TakeDiscard,
    action_from_json,
    action_to_json,
    new_game,
    rules_from_json,
    rules_to_json,
    state_from_json,
    state_to_json,
)
from masa_rules.ruleset import DeckExhausted, RuleSet

P = PhysicalCard.parse
ACTIONS: list[Action] = [
    Draw(0),
    TakeDiscard(1, pairs=True),
    TakeBottom(2),
    TakeBottom(2, (((P("2H"), None), (P("3H"), None), (P("XR"), parse_card("4H"))),), P("9C#1")),
    LayDown(0, (((P("8H"), None), (P("9H#1"), None), (P("XB"), None)),), ((P("KS"), P("KS#1")),)),
    LayOff(3, 2, (P("XR"),), parse_card("7S"), True),
    RetrieveJoker(1, 0, P("8H")),
    Discard(0, P("7S"), P("7S#1")),
    DeclarePairs(2),
    ShowPairs(0, ((P("2C"), P("2C#1")), (P("3C"), P("XR")))),
    ClaimBottom(1, P("9S")),
    Answer(3, False),
]


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: type(a).__name__)
def test_actions_round_trip_through_json(action: Action) -> None:
    assert action_from_json(json.loads(json.dumps(action_to_json(action)))) == action


def test_C1_a_malformed_action_is_a_rule_violation() -> None:
    with pytest.raises(RuleViolation) as info:
        action_from_json({"type": "discard", "seat": 0, "card": "1Z"})
    assert info.value.rule == "C-1"
    with pytest.raises(RuleViolation):
        action_from_json({"type": "fly", "seat": 0})


def test_rule_sets_round_trip_with_their_options() -> None:
    rules = RuleSet.classic(open_threshold=81, escalating_threshold=True, hands_per_game=9)
    data = rules_to_json(rules)
    assert data == {
        "preset": "classic",
        "open_threshold": 81,
        "escalating_threshold": True,
        "hands_per_game": 9,
    }
    assert rules_from_json(json.loads(json.dumps(data))) == rules
    remi = RuleSet.remi(deck_exhausted=DeckExhausted.SCORE)
    assert rules_from_json(rules_to_json(remi)) == remi


def test_a_new_state_round_trips_through_json() -> None:
    state = new_game(RuleSet.classic(), 3, "codec")
    assert state_from_json(json.loads(json.dumps(state_to_json(state)))) == state
