"""The simulator behind ``masa-rules simulate --game elevator`` and its two policies."""

from __future__ import annotations

import hashlib
import json

import pytest
from masa_rules.cards import PhysicalCard
from masa_rules.elevator import ElevatorRules, Pass, Play, position
from masa_rules.elevator.deal import deal
from masa_rules.elevator.policies import greedy_policy
from masa_rules.elevator.simulate import simulate
from masa_rules.shuffle import DrawStream


def lines(players: int, seed: str, policy: str) -> list[str]:
    return [json.dumps(event, sort_keys=True) for event in simulate(players, seed, policy)]


@pytest.mark.parametrize("policy", ["random", "greedy"])
def test_the_same_arguments_print_the_same_bytes(policy: str) -> None:
    assert lines(4, "same", policy) == lines(4, "same", policy)
    assert lines(4, "same", policy) != lines(4, "other", policy)


@pytest.mark.parametrize("players", [3, 4, 5, 6])
def test_the_last_line_summarises_the_game(players: int) -> None:
    events = list(simulate(players, f"summary-{players}", "greedy"))
    end, hand_end = events[-1], events[-2]
    assert end["type"] == "game_end"
    assert hand_end["type"] == "hand_end"
    assert end["winner"] == hand_end["winner"]
    assert end["cards_left"] == hand_end["cards_left"]
    ranking = end["ranking"]
    assert isinstance(ranking, list)
    assert sorted(seat for place in ranking for seat in place) == list(range(players))


def test_a_third_party_recomputes_the_deal_from_the_revealed_seed_alone() -> None:
    events = list(simulate(5, "audit"))
    opening, hand_end = events[0], events[-2]
    seed = bytes.fromhex(str(hand_end["seed"]))
    assert hashlib.sha256(seed).hexdigest() == opening["commitment"]
    again = deal(ElevatorRules(), 5, seed, leader=0)
    assert [[card.code for card in hand] for hand in again.hands] == opening["hands"]
    assert again.starter.code == opening["starter"]


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        list(simulate(4, "x", "clever"))


def test_random_games_use_voluntary_passes_and_kopile() -> None:
    kinds = [
        (event["type"], event.get("voluntary"))
        for n in range(20)
        for event in simulate(4, f"mix-{n}")
    ]
    assert ("pass", True) in kinds
    assert ("kopile", None) in kinds


def test_greedy_sheds_ordinary_cards_first_and_keeps_specials() -> None:
    rng = DrawStream(b"unused")
    state = position([["XR", "AH", "QD", "9H"], ["3C"], ["4C"]], pile=["8S"])
    choice = greedy_policy(state, 0, rng)
    assert isinstance(choice, Play)
    assert [card.code for card in choice.cards] == ["9H"]
    hoarding = position([["XR", "AH", "3D", "4D"], ["3C"], ["4C"]], pile=["8S"], after_play=True)
    assert greedy_policy(hoarding, 0, rng) == Pass(0)
    endgame = position([["XR", "AH"], ["3C"], ["4C"]], pile=["8S"], after_play=True)
    choice = greedy_policy(endgame, 0, rng)
    assert choice == Play(0, (PhysicalCard.parse("AH"),))
