"""The simulator contract behind ``masa-rules simulate --game fiftyone`` (issue 3)."""

from __future__ import annotations

import json

import pytest
from masa_rules.errors import RuleViolation
from masa_rules.fiftyone.simulate import simulate

HAND_END_KEYS = [
    "type",
    "hand",
    "finisher",
    "finish",
    "kafa",
    "opened",
    "opened_with_pairs",
    "pair_status",
    "islek_penalties",
    "hands_left",
    "scores",
    "totals",
    "eliminated",
]


def lines(preset: str, players: int, seed: str, *, hands: int) -> list[str]:
    return [json.dumps(e) for e in simulate(preset, players, seed, hands=hands)]


@pytest.mark.parametrize(
    ("preset", "players", "teams", "policy"),
    [("classic", 4, False, "random"), ("salon", 4, True, "greedy"), ("remi", 3, False, "greedy")],
)
def test_simulate_prints_hand_end_objects_and_a_final_ranking(
    preset: str, players: int, teams: bool, policy: str
) -> None:
    events = list(simulate(preset, players, "contract", teams=teams, hands=2, policy=policy))
    ends = [e for e in events if e["type"] == "hand_end"]
    assert ends and all(list(e) == HAND_END_KEYS for e in ends)
    for end in ends:
        finish, hands_left = end["finish"], end["hands_left"]
        assert isinstance(finish, dict) and isinstance(hands_left, list)
        assert list(finish) == ["by_hand", "joker", "pairs", "bottom_card"]
        assert len(hands_left) == players
    last = events[-1]
    assert list(last) == ["type", "totals", "ranking"] and last["type"] == "game_end"
    ranking = last["ranking"]
    assert isinstance(ranking, list)
    seats = sorted(s for place in ranking for s in place)
    assert seats == list(range(players))
    assert last["totals"] == ends[-1]["totals"]


def test_simulate_is_deterministic_to_the_byte() -> None:
    assert lines("classic", 4, "bytes", hands=1) == lines("classic", 4, "bytes", hands=1)
    assert lines("classic", 4, "bytes", hands=1) != lines("classic", 4, "other", hands=1)


def test_simulate_hands_override_the_game_length() -> None:
    ends = [
        e
        for e in simulate("remi", 2, "length", hands=3, policy="greedy")
        if e["type"] == "hand_end"
    ]
    assert len(ends) == 3
    salon = [e for e in simulate("salon", 4, "cap", hands=1) if e["type"] == "hand_end"]
    assert len(salon) == 1


def test_simulate_rejects_an_unknown_policy() -> None:
    with pytest.raises(RuleViolation):
        list(simulate("classic", 4, "x", policy="clever"))
